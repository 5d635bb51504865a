//go:build linux

package leader_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/deploy/internal/harness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
)

// holdFinalizer is the finalizer of the test's leaked Secrets whose
// deletion another controller holds up (as a backup or audit controller
// would): the reconciler's delete of one waits until the action timeout.
const holdFinalizer = "test.slipway.dev/hold"

// The leader dies mid-sweep and the next one finishes it. On the HA
// install, the runtime pods' leader (the holder of Lease
// slipway-system/slipway-runtime) sweeps 24 leaked run credentials of pool
// agents (Secrets labelled with runs no runtime recorded, as a runtime that
// died between creating a run's credential and recording the run leaves
// them).
// The first 16 in the sweep's order have a finalizer another controller
// holds, so the sweep's 16 workers all wait on their deletions and the
// last 8 wait their turn. Mid-sweep (the 16 deletions issued, the 8 not
// begun), the leader's pod is deleted with no grace (the API object goes
// at once; the kubelet stops the process within 2 s); then the
// finalizers are cleared. The other replica takes the Lease within its
// duration plus 5 s, and its sweep deletes the 8 the dead leader never
// reached and closes every record the dead one left open: no Secret is
// left, no record is open, and the 8 are recorded done by the new leader
// (the dead one attempted none of them: a stopping reconciler begins no
// action, TestStoppedPassLeavesTheRestPending).
func TestInClusterLeaderDiesMidSweep(t *testing.T) {
	e, _, _, _ := harness.JobPlanes(t, "ha", 2)
	ctx := context.Background()
	const ns = "slipway-sandboxes"
	leaderOf := func() string {
		l, err := e.CS.CoordinationV1().Leases("slipway-system").Get(ctx, "slipway-runtime", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	var leader string
	for deadline := time.Now().Add(time.Minute); leader == ""; time.Sleep(time.Second) {
		if leader = leaderOf(); leader == "" && time.Now().After(deadline) {
			t.Fatalf("no holder of Lease slipway-system/slipway-runtime after 1m")
		}
	}
	leaderPod, _, _ := strings.Cut(leader, "_")
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		pods, err := e.CS.CoreV1().Pods("slipway-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=slipway-runtime"})
		if err != nil {
			return
		}
		for _, p := range pods.Items {
			b, _ := e.CS.CoreV1().Pods("slipway-system").GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			t.Logf("runtime pod %s's log ends (lines cut at 600 characters):\n%s", p.Name, harness.Clip(harness.Tail(string(b), 30), 600))
		}
	})

	// Plant: names sort held first, as the sweep lists them.
	var held, free []string
	for i := range 24 {
		name, run := fmt.Sprintf("sw-leak-b-%02d", i), fmt.Sprintf("r-leak-b-%02d", i)
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{kubesandbox.LabelRun: run, kubeobjects.LabelPool: "agents"}},
			StringData: map[string]string{"token": "leaked"}}
		if i < 16 {
			s.Name, s.Labels[kubesandbox.LabelRun] = fmt.Sprintf("sw-leak-a-%02d", i), fmt.Sprintf("r-leak-a-%02d", i)
			s.Finalizers = []string{holdFinalizer}
			held = append(held, s.Name)
		} else {
			free = append(free, s.Name)
		}
		if _, err := e.CS.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{FieldManager: "crashed-runtime"}); err != nil {
			t.Fatalf("plant Secret %s/%s: %v", ns, s.Name, err)
		}
	}
	planted := time.Now()
	clearHolds := func() {
		for _, n := range held {
			patch := []byte(`{"metadata":{"finalizers":null}}`)
			if _, err := e.CS.CoreV1().Secrets(ns).Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("clear the finalizer of Secret %s/%s: %v", ns, n, err)
			}
		}
	}
	t.Cleanup(clearHolds)

	// Mid-sweep: every held Secret's deletion issued, none of the free
	// ones'. The sweep that acts is the leader's second after the plant
	// (the first waits out the grace): within two intervals.
	deletionBegun := func(names []string) (n int) {
		for _, name := range names {
			s, err := e.CS.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && s.DeletionTimestamp != nil || apierrors.IsNotFound(err) {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(2*reconcile.DefaultInterval + 30*time.Second)
	for deletionBegun(held) < len(held) {
		if time.Now().After(deadline) {
			t.Fatalf("the leader %s began deleting %d of the %d held Secrets within %s of the plant", leader, deletionBegun(held), len(held), time.Since(planted).Round(time.Second))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := deletionBegun(free); n > 0 {
		t.Fatalf("the sweep is not mid-way: %d of the %d free Secrets' deletions began with the held ones' (the workers were not all held)", n, len(free))
	}
	grace := int64(0)
	if err := e.CS.CoreV1().Pods("slipway-system").Delete(ctx, leaderPod, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatalf("delete the leader's pod %s: %v", leaderPod, err)
	}
	killed := time.Now()
	t.Logf("mid-sweep %s after the plant: the leader's pod %s deleted with no grace, its 16 deletions waiting on a finalizer, 8 not begun",
		killed.Sub(planted).Round(100*time.Millisecond), leaderPod)

	// The other replica leads within the Lease's duration plus 5 s.
	var next string
	for next = leaderOf(); next == leader || next == ""; next = leaderOf() {
		if time.Since(killed) > 15*time.Second+5*time.Second {
			t.Fatalf("Lease slipway-system/slipway-runtime still held by %q %s after the leader's pod was deleted", next, time.Since(killed).Round(time.Second))
		}
		time.Sleep(250 * time.Millisecond)
	}
	took := time.Since(killed)
	if strings.HasPrefix(next, leaderPod+"_") {
		t.Fatalf("the Lease went to %s, of the deleted pod", next)
	}
	t.Logf("%s leads %s after the deletion", next, took.Round(100*time.Millisecond))
	clearHolds() // the other controller lets go

	// The new leader finishes: no Secret left, no record open.
	records, err := reconcile.OpenRecordsPostgres(ctx, e.PG.DSN("slipway"))
	if err != nil {
		t.Fatal(err)
	}
	defer records.Close()
	planted24 := append(append([]string{}, held...), free...)
	var left []string
	var open []reconcile.Record
	for deadline := time.Now().Add(3*reconcile.DefaultInterval + 30*time.Second); ; time.Sleep(time.Second) {
		left = left[:0]
		for _, n := range planted24 {
			if _, err := e.CS.CoreV1().Secrets(ns).Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				left = append(left, n)
			}
		}
		open, err = records.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 && len(ours(open)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the takeover: Secrets left %v; open records %+v", time.Since(killed).Round(time.Second), left, ours(open))
		}
	}
	recent, err := records.Recent(ctx, 500)
	if err != nil {
		t.Fatal(err)
	}
	byResource := map[string][]reconcile.Record{}
	for _, r := range ours(recent) {
		byResource[r.RunID] = append(byResource[r.RunID], r)
	}
	var summary []string
	for i, n := range planted24 {
		run := strings.Replace(n, "sw-", "r-", 1)
		rs := byResource[run]
		if len(rs) == 0 {
			t.Errorf("Secret %s (run %s): no cleanup record", n, run)
			continue
		}
		last := rs[0] // newest first
		summary = append(summary, fmt.Sprintf("%s %s %s (%s)", n, last.State, last.Owner, last.Outcome))
		if i >= 16 && (last.State != reconcile.StateDone || strings.HasPrefix(last.Owner, leaderPod)) {
			t.Errorf("Secret %s, never reached by the dead leader: its record is %s by %q (%s); want done by the new leader %s", n, last.State, last.Owner, last.Outcome, next)
		}
	}
	sort.Strings(summary)
	t.Logf("all 24 Secrets gone and their records closed %s after the takeover:\n%s", time.Since(killed).Round(time.Second), strings.Join(summary, "\n"))
}

// ours is the records of the test's leaked Secrets.
func ours(rs []reconcile.Record) []reconcile.Record {
	var out []reconcile.Record
	for _, r := range rs {
		if strings.HasPrefix(r.RunID, "r-leak-") {
			out = append(out, r)
		}
	}
	return out
}
