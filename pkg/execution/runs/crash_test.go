package runs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// crashEnv names the database file the helper process writes to.
const crashEnv = "SLIPWAY_RUNS_CRASH_DB"

// TestKilledProcessKeepsWhatItReturned runs this test binary as a writer
// that creates manifests (and finalises every third one) as fast as it can,
// printing each run id once the call has returned, and kills it with
// SIGKILL mid-stream. Every manifest it reported must be in the reopened
// file, every finalisation it reported must be there too, and the file must
// pass SQLite's integrity check.
func TestKilledProcessKeepsWhatItReturned(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "runs.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	const killAfter = 150
	created, completed := map[string]bool{}, map[string]bool{}
	// Lines the helper wrote before it died may still sit in the pipe, so
	// reading goes on to EOF after the kill: everything written was
	// reported.
	sc := bufio.NewScanner(out)
	lines := 0
	for sc.Scan() {
		kind, id, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue // test framework output
		}
		switch kind {
		case "created":
			created[id] = true
		case "completed":
			completed[id] = true
		default:
			continue
		}
		if lines++; lines == killAfter {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v after %d lines, want SIGKILL", err, lines)
	}
	if len(created) == 0 || len(completed) == 0 {
		t.Fatalf("the helper reported %d creates and %d completions before the kill", len(created), len(completed))
	}

	s, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var check string
	if err := s.r.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q, %v", check, err)
	}
	for id := range created {
		m, err := s.Get(ctx, id)
		if err != nil {
			t.Errorf("%s was created before the kill: %v", id, err)
			continue
		}
		if completed[id] && m.Status != runmanifest.StatusCompleted {
			t.Errorf("%s was completed before the kill, the store has it %s", id, m.Status)
		}
	}
	ids, err := s.Query(ctx, runmanifest.Query{Template: "tpl-crash"})
	if err != nil {
		t.Fatal(err)
	}
	// the helper may have committed one more that it had no time to report
	if len(ids) < len(created) || len(ids) > len(created)+1 {
		t.Errorf("%d runs in the store, %d reported created", len(ids), len(created))
	}
	t.Logf("killed after %d creates and %d completions; %d runs in the reopened store", len(created), len(completed), len(ids))
}

// TestCrashHelper is the writer TestKilledProcessKeepsWhatItReturned kills.
func TestCrashHelper(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("helper process of TestKilledProcessKeepsWhatItReturned")
	}
	ctx := context.Background()
	s, err := OpenSQLite(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for i := 0; ; i++ {
		m := fullManifest(fmt.Sprintf("r-%06d", i))
		m.Status, m.ExitCode = runmanifest.StatusGranted, nil
		m.WorkspaceTemplateID = "tpl-crash"
		if err := s.Create(ctx, m); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("created %s\n", m.RunID) // os.Stdout is unbuffered
		if i%3 == 0 {
			err := s.Update(ctx, m.RunID, func(m *runmanifest.Manifest) error {
				m.Status = runmanifest.StatusCompleted
				m.Lifecycle.ResourcesReleased = time.Now()
				return nil
			})
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			fmt.Printf("completed %s\n", m.RunID)
		}
	}
}
