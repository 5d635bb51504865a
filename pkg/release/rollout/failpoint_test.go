package rollout_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

// killPoints are the failpoints a driver passes in rollout start --wait, in
// order: the start commit (step compatibility), the lease, then every
// step's commit.
var killPoints = func() []string {
	var fps []string
	for _, step := range []string{"compatibility", "lease", "warm", "prove", "route", "drain", "remove", "retain"} {
		fps = append(fps, "before-commit:"+step, "after-commit:"+step)
	}
	return fps
}()

// TestKilledDriverResumes kills the driver (the slipway CLI built with
// -tags failpoints) with SIGKILL at every failpoint of rollout start
// --wait, before and after each commit, starting with the start commit
// itself, then resumes with a plain driver: each rollout ends succeeded,
// with no claim ever routed to an unproven generation and nothing of the
// old generation dropped early. Killed before its start commit, nothing
// was started: resume says so with exit 3 and names the pool's last
// rollout (rolled back, to another generation) without taking its outcome
// for the current one; start then runs again.
func TestKilledDriverResumes(t *testing.T) {
	t.Parallel()
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
	var env []string
	slipway := func(failpoint string, args ...string) (*os.ProcessState, string) {
		cmd := exec.Command(bin, append(args, "--repo", e.repo, "--pool", "agents", "--runtime", e.server, "--token-file", tokenFile, "--unsigned-evidence", "--poll", "100ms")...)
		cmd.Env = append(append(os.Environ(), env...), "SLIPWAY_ROLLOUT_FAILPOINT="+failpoint)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%v: %v", args, err)
		}
		return cmd.ProcessState, string(out)
	}

	// A rollout that is not killed passes every failpoint of the table,
	// and no other.
	trace := filepath.Join(t.TempDir(), "trace")
	env = []string{"SLIPWAY_ROLLOUT_FAILPOINT_TRACE=" + trace}
	prev := e.next(e.g1)
	if st, out := slipway("", "rollout", "start", "--to", prev.ID, "--wait"); st.ExitCode() != 0 {
		t.Fatalf("start --wait: exit %d:\n%s", st.ExitCode(), out)
	}
	env = nil
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var passed []string
	for _, fp := range strings.Fields(string(b)) {
		if !slices.Contains(passed, fp) {
			passed = append(passed, fp)
		}
	}
	if !slices.Equal(passed, killPoints) {
		t.Fatalf("rollout start --wait passed the failpoints\n%v\nthe test kills it at\n%v", passed, killPoints)
	}

	// The pool's last rollout rolled back (aborted), to another generation
	// than the next one.
	other := e.next(prev)
	if st, out := slipway("", "rollout", "start", "--to", other.ID); st.ExitCode() != 0 {
		t.Fatalf("start: exit %d:\n%s", st.ExitCode(), out)
	}
	cmd := exec.Command(bin, "rollout", "abort", "--repo", e.repo, "--pool", "agents", "--reason", "by the test")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("abort: %v\n%s", err, out)
	}
	aborted := e.state().Rollout

	newest := other // the generation of the highest sequence
	for _, fp := range killPoints {
		next := e.next(newest)
		newest = next
		st, out := slipway(fp, "rollout", "start", "--to", next.ID, "--wait")
		if ws := st.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("%s: the driver was not killed (%v):\n%s", fp, st, out)
		}
		mid := e.state()
		routed := slices.Index(killPoints, fp) >= slices.Index(killPoints, "after-commit:route")
		if a, _ := mid.Active(); !routed && a.ID != prev.ID {
			t.Errorf("%s: %s active before the routing commit of %s", fp, a.ID, next.ID)
		}
		if stateOf(mid, prev.ID) == "" {
			t.Errorf("%s: the old generation %s left the state early", fp, prev.ID)
		}
		wantExit := 0
		if fp == "before-commit:compatibility" {
			// Nothing was started: resume says so, and how the last
			// rollout ended, with exit 3.
			if mid.Rollout.ID != aborted.ID || mid.Rollout.To == next.ID {
				t.Fatalf("%s: the start committed: %+v", fp, mid.Rollout)
			}
			last := mid.Rollout
			st, out = slipway("", "rollout", "resume")
			if st.ExitCode() != 3 {
				t.Errorf("%s: resume exit %d, want 3 (no rollout in progress):\n%s", fp, st.ExitCode(), out)
			}
			for _, want := range []string{"no rollout in progress on pool agents", "the last rollout, " + last.ID, last.To, "ended " + last.Status,
				"at " + last.Ended.Format(time.RFC3339), "no rollout start has been committed since"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s: resume does not say %q:\n%s", fp, want, out)
				}
			}
			if strings.Contains(out, "rollout: rolled back") || strings.Contains(out, last.ID+" "+last.Status) {
				t.Errorf("%s: resume reports the last rollout's outcome as its own:\n%s", fp, out)
			}
			if last.ID != aborted.ID || last.Status != pool.RolloutRolledBack {
				t.Errorf("%s: the last rollout is %s %s, want the aborted %s", fp, last.ID, last.Status, aborted.ID)
			}
			if now := e.state(); now.Rollout.ID != last.ID || now.Rollout.Status != last.Status {
				t.Errorf("%s: resume changed the last rollout: %+v", fp, now.Rollout)
			}
			st, out = slipway("", "rollout", "start", "--to", next.ID, "--wait")
		} else {
			if mid.Rollout.To != next.ID {
				t.Fatalf("%s: the start did not commit: %+v", fp, mid.Rollout)
			}
			var watched func() []rollout.Status
			if fp == "after-commit:prove" {
				watched = watch(t, bin, e.repo)
			}
			st, out = slipway("", "rollout", "resume")
			if watched != nil {
				checkWatched(t, watched())
			}
			if fp == "after-commit:retain" {
				// The rollout ended before the kill: resume finds nothing
				// in progress and says how that one ended.
				wantExit = 3
				if want := "the last rollout, " + mid.Rollout.ID; !strings.Contains(out, want) || !strings.Contains(out, "ended succeeded at ") {
					t.Errorf("%s: resume does not say %q ended succeeded:\n%s", fp, want, out)
				}
			}
		}
		if st.ExitCode() != wantExit {
			t.Fatalf("%s: resume exit %d, want %d:\n%s", fp, st.ExitCode(), wantExit, out)
		}
		end := e.state()
		if a, _ := end.Active(); a.ID != next.ID || end.Rollout.Status != pool.RolloutSucceeded || stateOf(end, prev.ID) != pool.Retained || end.Rollout.Ended.IsZero() {
			t.Fatalf("%s: after resume: %+v %+v", fp, end.Rollout, end.Generations)
		}
		prev = next
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
