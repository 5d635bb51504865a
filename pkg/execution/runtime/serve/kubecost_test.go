package serve_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// TestKubeCostBetweenSamples: on a real API server, with the cost
// ledger's sampler set to read the cluster once an hour, a claim of a run
// and a rollout's proof claim are made (bound to their Sandboxes, as
// agent-sandbox's controller leaves them) and deleted by the runtime's
// reconciler seconds later, well within one sampling interval. The ledger
// (what `slipway cost` reads) still holds, once each, the run's active
// interval and the proof interval, each starting at the cluster's
// creation time of the claim (or its Sandbox, the later) and ended when
// the runtime saw them gone.
func TestKubeCostBetweenSamples(t *testing.T) {
	c := kubetest.New(t)
	ctx := context.Background()
	const ns = "kcost"
	if err := c.PrepareNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	repo := configRepo(ctx, t)
	state := t.TempDir()
	rt := startServed(ctx, t, serve.Config{Backend: serve.BackendKubernetes, Kubeconfig: c.Kubeconfig(), Namespace: ns,
		Repo: repo, State: state, Verify: runtime.Verify{Skip: true},
		SyncInterval: 300 * time.Millisecond, ReconcileInterval: time.Second, StorageEvery: time.Hour})
	addr, log := rt.addr, rt.log
	began := time.Now()

	const gen = "g-3333333333333333333333333333333333333333333333333333333333333333"
	labels := map[string]any{kubeobjects.LabelPool: "agents", kubeobjects.LabelGeneration: kubeobjects.GenerationLabel(gen)}
	ann := map[string]any{kubeobjects.AnnotationGenerationID: gen}
	// claim makes owner's claim bound to its Sandbox sb and returns the
	// start the ledger must record: the later creation of the two.
	claim := func(owner, sb string, proof bool) time.Time {
		cl := map[string]any{kubesandbox.LabelClaim: "true", kubeobjects.LabelPool: "agents", kubeobjects.LabelGeneration: kubeobjects.GenerationLabel(gen)}
		if proof {
			cl[kubesandbox.LabelProof] = "true"
		}
		u := create(t, dyn, claimsGVR, ns, map[string]any{"apiVersion": kubeobjects.ExtensionsAPIVersion, "kind": "SandboxClaim",
			"metadata": map[string]any{"name": kubesandbox.ClaimName(owner), "labels": cl, "annotations": map[string]any{kubesandbox.AnnotationOwner: owner, kubeobjects.AnnotationGenerationID: gen}},
			"spec":     map[string]any{"warmPoolRef": map[string]any{"name": kubeobjects.ObjectName("agents", gen)}}})
		s := create(t, dyn, sandboxesGVR, ns, sandboxObject(sb, map[string]any{"labels": labels, "annotations": ann, "ownerReferences": controlledBy(u)}))
		u.Object["status"] = map[string]any{"sandbox": map[string]any{"name": sb},
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "bound", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
		if _, err := dyn.Resource(claimsGVR).Namespace(ns).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		start := u.GetCreationTimestamp().Time
		if s.GetCreationTimestamp().After(start) {
			start = s.GetCreationTimestamp().Time
		}
		return start
	}
	activeStart := claim("r-short", "sb-short", false)
	proofStart := claim("p-short", "sb-proof", true)

	get := func(path string) []byte {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return b
	}
	deadline := time.Now().Add(reconcile.DefaultGrace + 30*time.Second)
	for {
		var v reconcile.Remaining
		if err := json.Unmarshal(get("/v1/cleanup"), &v); err != nil {
			t.Fatal(err)
		}
		done := map[string]bool{}
		for _, r := range v.Recent {
			if r.State == reconcile.StateDone {
				done[r.Resource] = true
			}
		}
		if done["SandboxClaim/"+kubesandbox.ClaimName("r-short")] && done["SandboxClaim/"+kubesandbox.ClaimName("p-short")] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not cleaned: %+v\n%s", v, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, name := range []string{"sb-short", "sb-proof"} {
		if _, err := dyn.Resource(sandboxesGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			t.Errorf("Sandbox %s still there", name)
		}
	}
	rt.stop(t)
	ended := time.Now()
	if ended.Sub(began) > 30*time.Minute {
		t.Fatalf("the claims lived %s: not within one sampling interval (1 h)", ended.Sub(began))
	}

	// the ledger's intervals, as written
	db, err := sql.Open("sqlite", filepath.Join(state, cost.StateFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT sandbox_id, state, run_id, pool, generation, start_ns, end_ns, end_unknown FROM intervals ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		sb, state, run, pool, gen string
		start                     int64
		end                       sql.NullInt64
		unknown                   int
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.sb, &r.state, &r.run, &r.pool, &r.gen, &r.start, &r.end, &r.unknown); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]row{
		"sb-short": {sb: "sb-short", state: string(cost.Active), run: "r-short", pool: "agents", gen: gen, start: activeStart.UnixNano()},
		"sb-proof": {sb: "sb-proof", state: string(cost.Proof), run: "", pool: "agents", gen: gen, start: proofStart.UnixNano()},
	}
	if len(got) != len(want) {
		t.Fatalf("ledger intervals %+v, want one for each of sb-short and sb-proof\n%s", got, log.String())
	}
	for _, g := range got {
		w, ok := want[g.sb]
		if !ok || g.sb != w.sb || g.state != w.state || g.run != w.run || g.pool != w.pool || g.gen != w.gen || g.start != w.start {
			t.Errorf("interval %+v, want %+v (start %s)", g, w, time.Unix(0, w.start).UTC())
			continue
		}
		if !g.end.Valid || g.unknown != 0 || g.end.Int64 <= g.start || g.end.Int64 > ended.UnixNano() {
			t.Errorf("%s: end %+v (unknown %d), want a known end after %s, before %s", g.sb, g.end, g.unknown, time.Unix(0, g.start).UTC(), ended.UTC())
		}
		delete(want, g.sb)
	}

	// what `slipway cost --state` reads
	recs, err := cost.Open(ctx, filepath.Join(state, cost.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	defer recs.Close()
	rep, err := recs.Pool(ctx, "agents", cost.Window{Since: began.Add(-time.Minute), Until: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	by := map[cost.State]cost.StateTime{}
	for _, s := range rep.States {
		by[s.State] = s
	}
	for _, st := range []cost.State{cost.Active, cost.Proof} {
		if s := by[st]; s.Intervals != 1 || s.Open != 0 || s.UnknownEnd != 0 || s.Seconds <= 0 {
			t.Errorf("%s in `slipway cost`: %+v", st, s)
		}
	}
	rc, err := recs.Run(ctx, "r-short", nil, nil, time.Now())
	if err != nil {
		t.Fatalf("the run's cost: %v", err)
	}
	if len(rc.Terms) == 0 || rc.Terms[0].Quantity == nil || *rc.Terms[0].Quantity <= 0 {
		t.Errorf("run cost terms: %+v", rc.Terms)
	}
}
