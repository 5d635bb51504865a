package serve_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/pkg/api/incidentreport"
	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/control/incidents"
	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/testharness/kubetest"
	"github.com/slipway-dev/slipway/testharness/pgtest"
)

// A runtime replica that shares its run store with others (--db and
// --leader-elect) starts and stops without ending their runs: the open run
// another replica serves keeps its SandboxClaim and stays open, and so
// does one whose sandbox another replica is still making (no sandbox yet).
// A replica alone on its store releases such claims and finalises such
// runs at start, which on a shared store would destroy the other's work.
func TestSharedStoreLeavesOtherReplicasRuns(t *testing.T) {
	c := kubetest.New(t)
	dsn := pgtest.New(t)
	ctx := context.Background()
	const ns = "shared"
	if err := c.PrepareNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	store, err := runs.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// the other replica's two open runs
	for id, sb := range map[string]string{"r-serving": "sb-serving", "r-starting": "sb-not-yet"} {
		if err := store.Create(ctx, &runmanifest.Manifest{RunID: id, Pool: "agents", SandboxID: sb, AllocationAttempt: 1, Status: runmanifest.StatusGranted}); err != nil {
			t.Fatal(err)
		}
	}
	const gen = "g-4444444444444444444444444444444444444444444444444444444444444444"
	labels := map[string]any{kubesandbox.LabelClaim: "true", kubeobjects.LabelPool: "agents", kubeobjects.LabelGeneration: kubeobjects.GenerationLabel(gen)}
	claim := kubesandbox.ClaimName("r-serving")
	cl := create(t, dyn, claimsGVR, ns, map[string]any{"apiVersion": kubeobjects.ExtensionsAPIVersion, "kind": "SandboxClaim",
		"metadata": map[string]any{"name": claim, "labels": labels, "annotations": map[string]any{kubesandbox.AnnotationOwner: "r-serving", kubeobjects.AnnotationGenerationID: gen}},
		"spec":     map[string]any{"warmPoolRef": map[string]any{"name": kubeobjects.ObjectName("agents", gen)}}})
	create(t, dyn, sandboxesGVR, ns, sandboxObject("sb-serving", map[string]any{"labels": map[string]any{kubeobjects.LabelPool: "agents"}, "ownerReferences": controlledBy(cl)}))
	cl.Object["status"] = map[string]any{"sandbox": map[string]any{"name": "sb-serving"},
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "bound", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
	if _, err := dyn.Resource(claimsGVR).Namespace(ns).UpdateStatus(ctx, cl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// two ended runs of one request key (a doubled sandbox): an incident
	// the shared store's runs show
	for _, id := range []string{"r-dup-1", "r-dup-2"} {
		if err := store.Create(ctx, &runmanifest.Manifest{RunID: id, Pool: "agents", SandboxID: "sb-" + id, AllocationAttempt: 1,
			Status: runmanifest.StatusReleased, RequestKey: "k-doubled"}); err != nil {
			t.Fatal(err)
		}
	}

	state := t.TempDir()
	rt := startServed(ctx, t, serve.Config{Backend: serve.BackendKubernetes, Kubeconfig: c.Kubeconfig(), Namespace: ns,
		Repo: configRepo(ctx, t), State: state, Verify: runtime.Verify{Skip: true}, DB: dsn,
		LeaderElect: true, LeaderNamespace: ns, LeaseDuration: 6 * time.Second, SyncInterval: 300 * time.Millisecond,
		// composed as the CLI composes it (runtime serve)
		Incidents: func(ctx context.Context, st runs.Store, records *reconcile.Records) (*incidentreport.Report, error) {
			var cr incidents.CleanupRecords
			if records != nil {
				cr = records
			}
			return incidents.Runtime(ctx, st, cr)
		}})
	time.Sleep(2 * time.Second) // a few warm syncs and a Lease
	// a replica on PostgreSQL serves the incidents its shared runs show
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+rt.addr+"/v1/incidents", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var rep incidentreport.Report
	err = json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/incidents: %d %v", resp.StatusCode, err)
	}
	doubled := false
	for _, k := range rep.Kinds {
		for _, i := range k.Incidents {
			doubled = doubled || (k.Sourced && i.Reason == "request_key_doubled" && strings.Contains(i.Detail, "k-doubled"))
		}
	}
	if !doubled {
		t.Errorf("the runtime on PostgreSQL reports no doubled request key: %+v", rep)
	}
	// the Lease's holder samples the cluster into the ledger in the shared
	// database (schema slipway_cost), not into a file of its own
	deadline := time.Now().Add(60 * time.Second)
	for {
		rc, err := ledgerRun(ctx, dsn, "r-serving")
		if err == nil && rc.Open && rc.Attempts == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other replica's run in the shared cost ledger: %+v, %v\n%s", rc, err, rt.log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	rt.stop(t)
	if _, err := os.Stat(filepath.Join(state, cost.StateFile)); err == nil {
		t.Errorf("a ledger file in the state directory beside the shared database's")
	}

	if _, err := dyn.Resource(claimsGVR).Namespace(ns).Get(ctx, claim, metav1.GetOptions{}); err != nil {
		t.Errorf("the other replica's SandboxClaim after this one started and stopped: %v\n%s", err, rt.log.String())
	}
	for _, id := range []string{"r-serving", "r-starting"} {
		m, err := store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if m.Status != runmanifest.StatusGranted {
			t.Errorf("the other replica's run %s is %s after this one started and stopped, want still granted\n%s", id, m.Status, rt.log.String())
		}
	}
}

// ledgerRun is run's cost from the ledger in the PostgreSQL database dsn.
func ledgerRun(ctx context.Context, dsn, run string) (*cost.RunCost, error) {
	recs, err := cost.OpenPostgres(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer recs.Close()
	return recs.Run(ctx, run, nil, nil, time.Time{})
}
