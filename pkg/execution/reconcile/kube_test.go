package reconcile_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

const (
	genActive = "g-1111111111111111111111111111111111111111111111111111111111111111"
	genOld    = "g-0000000000000000000000000000000000000000000000000000000000000000"
)

func newKubeReconciler(t *testing.T, w *kubeWorld, log io.Writer, edit func(*reconcile.Config)) *reconcile.Reconciler {
	t.Helper()
	c := reconcile.Config{Backend: w.be, Runs: w.store, Records: w.records, Owner: "kube-host/127.0.0.1:7070",
		Warm: func() (map[string]map[string]bool, bool) {
			return map[string]map[string]bool{"agents": {genActive: true}}, true
		},
		Held:   func(owner string) bool { return owner == "p-held" },
		Logger: slog.New(slog.NewJSONHandler(log, nil)), Grace: time.Second, StuckAfter: time.Second, ActionTimeout: 10 * time.Second}
	if edit != nil {
		edit(&c)
	}
	r, err := reconcile.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestKubeSweep: the reconciler on the Kubernetes backend, against a real
// API server as the authority. Each sweeper finds its leak and deletes it
// (a claim with the Sandbox and pod it got): a claim of a terminal run at
// once; a claim of a run never recorded, a claim of an earlier allocation
// attempt, a Sandbox with no controller, a pod whose Sandbox is gone and
// a Secret of an unrecorded run after the grace; the warm pool of a
// generation no longer warm with its members; a Secret of a final run; a
// pod stuck terminating past StuckAfter (its node is gone: forced). Live
// ones stay: a claim of an open run, a proof claim the runtime holds, the
// active generation's warm pool and members, a Secret of an open run. A
// second sweep of the same state finds nothing: repeat-safe.
func TestKubeSweep(t *testing.T) {
	w := newKubeWorld(t)
	ctx := context.Background()
	liveClaim, liveSB := w.claim(t, "r-live", "agents", genActive, false)
	w.run(t, "r-live", "agents", liveSB, runmanifest.StatusRunning)
	doneClaim, doneSB := w.claim(t, "r-done", "agents", genActive, false)
	w.run(t, "r-done", "agents", doneSB, runmanifest.StatusReleased)
	ghostClaim, ghostSB := w.claim(t, "r-ghost", "agents", genActive, false)
	heldClaim, _ := w.claim(t, "p-held", "agents", genActive, true)
	otherClaim, otherSB := w.claim(t, "r-of-another-runtime", "other", genActive, false) // a pool this runtime does not know
	movedClaim, movedSB := w.claim(t, "r-moved", "agents", genActive, false)
	w.run(t, "r-moved", "agents", "sb-elsewhere", runmanifest.StatusRunning)
	activePool, activeMembers := w.warmPool(t, "agents", genActive, 1)
	oldPool, oldMembers := w.warmPool(t, "agents", genOld, 2)
	w.sandboxOf(t, "sb-orphan", "agents", genActive, nil)
	gone, err := w.res(sandboxesGVR).Get(ctx, "sb-orphan", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gone.SetUID("00000000-0000-0000-0000-000000000000") // a Sandbox that no longer exists
	w.pod(t, "pod-orphan", "agents", "", gone)
	member, err := w.res(sandboxesGVR).Get(ctx, activeMembers[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.pod(t, "pod-stuck", "agents", "node-gone", member)
	one := int64(1) // its deletionTimestamp: 1 s from now, the most its kubelet gets
	if err := w.res(podsGVR).Delete(ctx, "pod-stuck", metav1.DeleteOptions{GracePeriodSeconds: &one}); err != nil {
		t.Fatal(err)
	}
	w.secret(t, "cred-done", "agents", "r-done")
	w.secret(t, "cred-live", "agents", "r-live")
	w.secret(t, "cred-ghost", "agents", "r-ghost-2")

	r := newKubeReconciler(t, w, io.Discard, nil)
	rep, err := r.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// at once: the terminal claim, the old warm pool and its 2 members,
	// the Secret of the final run; pending: the ghost claim, the moved
	// claim, the orphan Sandbox and pod, the ghost Secret, the stuck pod
	// (its deletion is younger than StuckAfter: not even a candidate yet)
	if rep.Cleaned != 5 || rep.Pending != 5 || rep.Unknown != 0 {
		t.Fatalf("pass 1: %+v", rep)
	}
	time.Sleep(3 * time.Second) // past the grace; the stuck pod past its deletionTimestamp (whole seconds) and StuckAfter
	rep, err = r.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cleaned != 6 || rep.Pending != 0 || rep.Unknown != 0 {
		open, _ := w.records.Open(ctx)
		t.Fatalf("pass 2: %+v\nopen records: %+v", rep, open)
	}
	for _, g := range []struct {
		gvr  schema.GroupVersionResource
		name string
		want bool
	}{
		{claimsGVR, liveClaim, true}, {sandboxesGVR, liveSB, true}, {podsGVR, liveSB, true},
		{claimsGVR, heldClaim, true}, {claimsGVR, otherClaim, true}, {sandboxesGVR, otherSB, true},
		{warmPoolsGVR, activePool, true}, {sandboxesGVR, activeMembers[0], true}, {podsGVR, activeMembers[0], true},
		{secretsGVR, "cred-live", true},
		{claimsGVR, doneClaim, false}, {sandboxesGVR, doneSB, false}, {podsGVR, doneSB, false},
		{claimsGVR, ghostClaim, false}, {sandboxesGVR, ghostSB, false},
		{claimsGVR, movedClaim, false}, {sandboxesGVR, movedSB, false},
		{warmPoolsGVR, oldPool, false}, {sandboxesGVR, oldMembers[0], false}, {sandboxesGVR, oldMembers[1], false},
		{sandboxesGVR, "sb-orphan", false}, {podsGVR, "pod-orphan", false}, {podsGVR, "pod-stuck", false},
		{secretsGVR, "cred-done", false}, {secretsGVR, "cred-ghost", false},
	} {
		if have := w.exists(t, g.gvr, g.name); have != g.want {
			t.Errorf("%s %s: there %v, want %v", g.gvr.Resource, g.name, have, g.want)
		}
	}
	recs, err := w.records.Recent(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, rc := range recs {
		if rc.State != reconcile.StateDone {
			continue
		}
		kinds = append(kinds, rc.Kind+" "+rc.Resource)
	}
	sort.Strings(kinds)
	want := []string{
		"credential Secret/cred-done", "credential Secret/cred-ghost",
		"fenced-sandbox SandboxClaim/" + movedClaim,
		"lease-terminal SandboxClaim/" + doneClaim,
		"sandbox-no-lease SandboxClaim/" + ghostClaim,
		"stuck-stopping Pod/pod-stuck",
		"unrecorded Pod/pod-orphan", "unrecorded Sandbox/sb-orphan",
		"warm-inactive Sandbox/" + oldMembers[0], "warm-inactive Sandbox/" + oldMembers[1],
		"warm-inactive SandboxWarmPool/" + oldPool,
	}
	if strings.Join(kinds, "\n") != strings.Join(want, "\n") {
		t.Fatalf("done records:\n%s\nwant:\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
	}
	rep, err = r.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Found) != 0 || rep.Live != 2 {
		t.Fatalf("a pass over the clean state: %+v", rep)
	}
}

// TestKubeDeleteFenced: a delete carries the resourceVersion the pass
// read as its precondition; an object changed since (its claim taken up,
// relabelled) is refused by the API server and stays.
func TestKubeDeleteFenced(t *testing.T) {
	w := newKubeWorld(t)
	ctx := context.Background()
	name, sb := w.claim(t, "r-1", "agents", genActive, false)
	objs, err := w.be.Objects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var read *sandbox.Object
	for i := range objs {
		if objs[i].Ref() == sandbox.KindClaim+"/"+name {
			read = &objs[i]
		}
	}
	if read == nil || read.Owner != "r-1" || read.Bound != sb || !read.Ready {
		t.Fatalf("claim as listed: %+v", read)
	}
	c, err := w.res(claimsGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.SetLabels(map[string]string{"changed": "yes"})
	if _, err := w.res(claimsGVR).Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := w.be.DeleteObject(ctx, *read, false); !errors.Is(err, sandbox.ErrOwnerConflict) {
		t.Fatalf("delete of a changed claim: %v", err)
	}
	if !w.exists(t, claimsGVR, name) || !w.exists(t, sandboxesGVR, sb) {
		t.Fatal("a fenced delete removed the claim or its Sandbox")
	}
}
