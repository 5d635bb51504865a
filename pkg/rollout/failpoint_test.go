package rollout_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/pool"
	"github.com/slipway-dev/slipway/pkg/rollout"
	"github.com/slipway-dev/slipway/pkg/runtime/runtimetest"
)

// TestKilledDriverResumes kills the driver (the slipway CLI built with
// -tags failpoints) with SIGKILL at every transition, before and after its
// commit, then resumes with a plain driver: each rollout ends succeeded,
// with no claim ever routed to an unproven generation and nothing of the
// old generation dropped early.
func TestKilledDriverResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and runs many rollouts")
	}
	bin := filepath.Join(t.TempDir(), "slipway")
	build := exec.Command("go", "build", "-tags", "failpoints", "-o", bin, "./cmd/slipway")
	build.Dir = runtimetest.Root(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	e := newEnv(t, nil)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	slipway := func(failpoint string, args ...string) (*os.ProcessState, string) {
		cmd := exec.Command(bin, append(args, "--repo", e.repo, "--pool", "agents", "--server", e.server, "--token-file", tokenFile, "--unsigned-evidence")...)
		cmd.Env = append(os.Environ(), "SLIPWAY_ROLLOUT_FAILPOINT="+failpoint)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%v: %v", args, err)
		}
		return cmd.ProcessState, string(out)
	}
	prev := e.g1
	for _, step := range []string{"lease", "warm", "prove", "route", "drain", "remove", "retain"} {
		for _, when := range []string{"before-commit", "after-commit"} {
			fp := when + ":" + step
			next := e.next(prev)
			st, out := slipway(fp, "rollout", "start", "--to", next.ID, "--wait")
			if ws := st.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("%s: the driver was not killed (%v):\n%s", fp, st, out)
			}
			mid := e.state()
			if a, _ := mid.Active(); when == "before-commit" && step == "route" && a.ID == next.ID {
				t.Errorf("%s: %s active before its routing commit", fp, next.ID)
			}
			if stateOf(mid, prev.ID) == "" {
				t.Errorf("%s: the old generation %s left the state early", fp, prev.ID)
			}
			var watched func() []rollout.Status
			if fp == "after-commit:prove" {
				watched = watch(t, bin, e.repo)
			}
			st, out = slipway("", "rollout", "resume")
			if st.ExitCode() != 0 {
				t.Fatalf("%s: resume exit %d:\n%s", fp, st.ExitCode(), out)
			}
			if watched != nil {
				checkWatched(t, watched())
			}
			end := e.state()
			if a, _ := end.Active(); a.ID != next.ID || end.Rollout.Status != pool.RolloutSucceeded || stateOf(end, prev.ID) != pool.Retained {
				t.Fatalf("%s: after resume: %+v %+v", fp, end.Rollout, end.Generations)
			}
			prev = next
		}
	}
	e.checkRouting()

	// The CLI's contract: status JSON names phase, active, target, draining,
	// retained and evidence; an abort with nothing in progress exits 1;
	// bad usage exits 2.
	cli := func(args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		out, _ := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	code, out := cli("rollout", "status", "--repo", e.repo, "--pool", "agents", "--output", "json")
	var st map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("status: %d %s", code, out)
	}
	for _, k := range []string{"phase", "active", "target", "draining", "retained", "evidence"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status JSON lacks %q: %s", k, out)
		}
	}
	if st["active"] != prev.ID || st["phase"] != "retain" {
		t.Errorf("status: %s", out)
	}
	if code, out := cli("rollout", "abort", "--repo", e.repo, "--pool", "agents"); code != 1 || !strings.Contains(out, "no rollout") {
		t.Errorf("abort with nothing in progress: %d %s", code, out)
	}
	if code, out := cli("rollout", "start", "--repo", e.repo, "--pool", "agents"); code != 2 || !strings.Contains(out, "--to") {
		t.Errorf("start without --to: %d %s", code, out)
	}
}

// watch starts rollout status --watch --output json on the pool agents of
// repo; the func it returns waits (a minute at most) for it to exit by
// itself and decodes what it printed.
func watch(t *testing.T, bin, repo string) func() []rollout.Status {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "rollout", "status", "--watch", "--interval", "50ms", "--repo", repo, "--pool", "agents", "--output", "json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return func() []rollout.Status {
		t.Helper()
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("status --watch: %v\n%s", err, stderr.String())
			}
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-exited
			t.Fatalf("status --watch did not end with the rollout:\n%s", stdout.String())
		}
		var docs []rollout.Status
		dec := json.NewDecoder(&stdout)
		for {
			var st rollout.Status
			if err := dec.Decode(&st); errors.Is(err, io.EOF) {
				return docs
			} else if err != nil {
				t.Fatalf("status --watch printed what is not a stream of JSON documents: %v\n%s", err, stdout.String())
			}
			docs = append(docs, st)
		}
	}
}

// checkWatched: the watch saw the interrupted rollout running and followed
// it to its end, printing each revision once.
func checkWatched(t *testing.T, docs []rollout.Status) {
	t.Helper()
	if len(docs) < 2 {
		t.Fatalf("status --watch printed %d documents, want the running rollout and its end", len(docs))
	}
	if first := docs[0]; first.Status != pool.RolloutRunning || first.Phase != "prove" {
		t.Errorf("first document: %s in phase %s, want running in prove", first.Status, first.Phase)
	}
	if last := docs[len(docs)-1]; last.Status != pool.RolloutSucceeded {
		t.Errorf("last document: %s in phase %s, want succeeded", last.Status, last.Phase)
	}
	for i := 1; i < len(docs); i++ {
		if docs[i].Revision == docs[i-1].Revision {
			t.Errorf("revision %s printed twice in a row", docs[i].Revision)
		}
	}
}
