package cli

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// A memory balloon through the whole path (issue 37, finding 2): the
// pool's limits are set with `pool set` while the planes serve it; a job
// then fills its sandbox's workspace, /tmp and /dev/shm and starts more
// processes than the rest of its 64 MiB holds. The OOM killer takes the
// workload, not the runner: the job ends failed with reason oom_killed,
// its run records the outcome on its first allocation attempt (no lost
// heartbeat, no second attempt), and the next job runs.
func TestJobRecordsOOMKilled(t *testing.T) {
	w := newControlWorld(t)
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	cp := w.startControl(t, db)
	tok := w.token(t, db, "acme")
	if r := run(t, "", "pool", "set", "--repo", w.repo, "--pool", "agents", "limits.memory=64Mi", "limits.workspace=16Mi", "limits.pids=128"); r.code != 0 {
		t.Fatalf("pool set: %+v", r)
	}
	submit := func(script string) controlapi.Job {
		t.Helper()
		r := run(t, "", "job", "submit", "--server", cp.url, "--token-file", tok, "--pool", "agents", "--profile", "standard", "--wait", "-o", "json", "--", "sh", "-c", script)
		var j controlapi.Job
		if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || j.ID == "" {
			t.Fatalf("job %q: %+v", script, r)
		}
		return j
	}
	// A sandbox made for the new limits: /tmp is an eighth of 64 MiB.
	poll(t, 60*time.Second, "a sandbox with the new limits", func() (bool, string) {
		j := submit("df -k /tmp | tail -1 | grep -q ' 8192 '")
		return j.State == controlapi.Succeeded, string(j.State) + " " + j.Detail
	})

	fill := "head -c 16777216 /dev/zero > /workspace/fill; head -c 8388608 /dev/zero > /tmp/fill; head -c 8388608 /dev/zero > /dev/shm/fill; "
	balloons := `i=0; while [ $i -lt 24 ]; do (x=$(head -c 3000000 /dev/zero | tr '\0' a); sleep 5) & i=$((i+1)); done; wait; echo done`
	j := submit(fill + balloons)
	if j.State != controlapi.Failed || j.Reason != runmanifest.OutcomeOOMKilled || len(j.Results) != 1 || j.Results[0].Outcome != runmanifest.OutcomeOOMKilled {
		t.Fatalf("balloon job: state %s reason %q detail %q, want failed oom_killed", j.State, j.Reason, j.Detail)
	}
	r := run(t, "", "runs", "show", j.RunID, "--state", filepath.Join(w.dir, "runtime-state"))
	var m runmanifest.Manifest
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("runs show: %v %+v", err, r)
	}
	if m.AllocationAttempt != 1 || len(m.Fences) != 0 {
		t.Errorf("the run moved (attempt %d, fences %v): the runner was lost", m.AllocationAttempt, m.Fences)
	}
	if after := submit("echo alive"); after.State != controlapi.Succeeded {
		t.Errorf("the next job: %s %s", after.State, after.Detail)
	}
}
