package control

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/control/deliver"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
)

// TestDeliveryWorkerProcess is the output worker as a process of its own
// for TestDeliveryKill9 (skipped otherwise): it delivers from the SQLite
// store and config repository the environment names until it is killed.
func TestDeliveryWorkerProcess(t *testing.T) {
	db, url := os.Getenv("SLIPWAY_TEST_DELIVERY_DB"), os.Getenv("SLIPWAY_TEST_DELIVERY_REPO")
	if db == "" {
		t.Skip("run by TestDeliveryKill9")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	s, err := OpenSQLite(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	repo, err := gitops.Open(ctx, url, gitops.WithDepth(0))
	if err != nil {
		t.Fatal(err)
	}
	c := testDelivery()
	c.Lease = time.Second
	cfg := Config{Store: s, Config: NewRepoConfig(repo, "main", time.Second), ID: fmt.Sprintf("worker-%d", os.Getpid()),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), Delivery: c}
	if err := newTelemetry(ctx, &cfg); err != nil { // as New does
		t.Fatal(err)
	}
	runDelivery(ctx, cfg, s.inner)
}

// TestDeliveryKill9: the worker process is killed with SIGKILL while the
// receiver holds a message it acted on unanswered; a new worker redelivers
// it with the same idempotency key once the dead one's lease runs out, and
// every event is acted on once, in order, with its receipt.
func TestDeliveryKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts worker processes")
	}
	repo := configRepo(t)
	ctx := context.Background()
	const events, holdSeq = 30, 12
	held := make(chan struct{})
	release := make(chan struct{})
	chat := newReceiver(t, "chat-secret", func(m controlapi.Message, n int) string {
		if m.Seq == holdSeq && n == 1 {
			return "hold"
		}
		return "ok"
	})
	chat.hold = func() { close(held); <-release }
	commit(t, repo, "destinations", func(tr *gitops.Tree) error {
		return tr.WriteFile("tenants/hooked.yaml", []byte(tenantWith("hooked",
			"  - {name: chat, url: '"+chat.srv.URL+"/in', kinds: [stdout, result], requiresResult: true, secretRef: {file: "+secretFile(t, "chat-secret")+"}, ratePerSecond: 1000}\n")))
	})
	dir := t.TempDir()
	db := filepath.Join(dir, "control.db")
	s, err := OpenSQLite(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := eventPlane(t, s, repo, EventConfig{})
	j := submitJob(t, p, "hooked")
	for i := range events {
		if _, err := s.inner.AppendEvents(ctx, j.ID, []store.NewEvent{outEvent(controlapi.KindStdout, fmt.Sprintf("line %d\n", i))}); err != nil {
			t.Fatal(err)
		}
	}
	finishJob(t, s, j.ID, "done\n")

	start := func(name string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDeliveryWorkerProcess$", "-test.v")
		cmd.Env = append(os.Environ(), "SLIPWAY_TEST_DELIVERY_DB="+db, "SLIPWAY_TEST_DELIVERY_REPO="+repo.URL())
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logf.Close() })
		return cmd
	}
	first := start("worker1")
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("the first worker never reached the held message")
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	close(release) // the dead worker's connection is gone; the receiver already acted
	start("worker2")
	waitFor(t, "the result published after the restart", 60*time.Second, func() bool {
		jj, err := p.Get(ctx, "", j.ID)
		return err == nil && jj.ResultPublished != nil
	})
	effects, order, dups := chat.snapshot()
	want := []int64{}
	for seq := int64(2); seq <= events+1; seq++ {
		want = append(want, seq)
	}
	want = append(want, events+3) // the result (after the succeeded state)
	if !slices.Equal(order[j.ID], want) {
		t.Errorf("acted on %v\nwant %v (once each, in order)", order[j.ID], want)
	}
	chat.mu.Lock()
	arrivals := chat.arrivals[deliver.Key(j.ID, holdSeq, "chat")]
	chat.mu.Unlock()
	if arrivals < 2 || dups < 1 {
		t.Errorf("the held message arrived %d times (%d duplicates deduplicated); want a redelivery with the same key", arrivals, dups)
	}
	if len(effects) != len(want) {
		t.Errorf("%d effects, want %d", len(effects), len(want))
	}
	for _, seq := range want {
		if r, err := s.inner.Receipt(ctx, j.ID, "chat", seq); err != nil || r == nil || r.Outcome != controlapi.ReceiptDelivered {
			t.Errorf("receipt of %d: %+v, %v", seq, r, err)
		}
	}
}
