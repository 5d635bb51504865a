package incidents_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/control/incidents"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
)

// manifests lists run manifests as runs.SQLite's Latest would.
type manifests []*runmanifest.Manifest

func (l manifests) Latest(_ context.Context, n int) ([]*runmanifest.Manifest, error) {
	return l[:min(n, len(l))], nil
}

// cleanups lists the reconciler's records as reconcile.Records would.
type cleanups []reconcile.Record

func (l cleanups) Open(context.Context) ([]reconcile.Record, error) {
	var out []reconcile.Record
	for _, r := range l {
		if r.Open() {
			out = append(out, r)
		}
	}
	return out, nil
}

func (l cleanups) Recent(context.Context, int) ([]reconcile.Record, error) { return nil, nil }

// A report over a runtime's run manifests and its cleanup records: a
// credential that expired while its run was open and a request key with
// two runs (a doubled sandbox) from the manifests, a delete that timed out
// from the reconciler; the kinds only the control plane's database shows
// are marked as not read rather than shown as empty.
func ExampleCollect() {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	receipt := runmanifest.Receipt{Issuer: "slipway-local-broker", SecretVersion: "vault://kv/agents/api-key#4",
		SHA256Fingerprint: "sha256:" + strings.Repeat("a", 64), IssuedAt: t0, ExpiresAt: t0.Add(time.Minute)}
	run := func(id, key string, status runmanifest.Status, rcs ...runmanifest.Receipt) *runmanifest.Manifest {
		return &runmanifest.Manifest{RunID: id, AllocationAttempt: 1, SandboxID: "sb-" + id, Pool: "agents", RequestKey: key, Status: status,
			SecretVersion: receipt.SecretVersion, CredentialIssuances: rcs, Lifecycle: runmanifest.Lifecycle{ClaimCreated: t0}}
	}
	fromRuns := incidents.FromRuns(manifests{
		run("r-1", "j-1.a1", runmanifest.StatusRunning, receipt),
		run("r-2", "j-2.a1", runmanifest.StatusFailed),
		run("r-3", "j-2.a1", runmanifest.StatusRunning),
	}, func() time.Time { return t0.Add(5 * time.Minute) })
	fromCleanup := incidents.FromCleanup(cleanups{{ID: 9, Kind: "sandbox-no-lease", Resource: "sb-r-4", RunID: "r-4", Action: "delete",
		State: reconcile.StateUnknown, LastError: "delete timed out after 30s", Owner: "host/127.0.0.1:7070",
		Deadline: t0.Add(10 * time.Minute), Attempts: 3, First: t0, Updated: t0}})

	rep, err := incidents.Collect(context.Background(), fromRuns, fromCleanup)
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range rep.Kinds {
		if !k.Sourced {
			fmt.Printf("%s: not read\n", k.Kind)
			continue
		}
		fmt.Printf("%s: %d\n", k.Kind, len(k.Incidents))
		for _, i := range k.Incidents {
			fmt.Printf("  %s %s (%s) terminal=%v owner=%q\n", i.Run, i.State, i.Reason, i.Terminal, i.Owner)
			fmt.Printf("    %s\n", i.Detail)
		}
	}
	fmt.Println("open:", rep.Open)
	// Output:
	// agent_hangs: not read
	// worker_crashes_after_create: 1
	//   r-2 doubled (request_key_doubled) terminal=false owner="the runtime's operator"
	//     DOUBLED: 2 runs for request key j-2.a1
	// credential_expires: 1
	//   r-1 running (expired) terminal=false owner="the runtime's operator"
	//     credential sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa of secret version vault://kv/agents/api-key#4 expired at 2026-01-01T12:01:00Z while the run was open
	// policy_propagation_lags: not read
	// artifact_export_fails: not read
	// delete_times_out: 1
	//   r-4 cleanup unknown (sandbox-no-lease) terminal=false owner="host/127.0.0.1:7070"
	//     delete sb-r-4
	// open: 3
}
