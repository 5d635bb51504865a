//go:build linux

package harness

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/testharness/incluster"
)

// OnePodOfEach deletes one pod of each plane (B15).
var OnePodOfEach = map[string]int{"slipway-control": 1, "slipway-runtime": 1}

// HAResult is what deleting a pod of each plane with jobs in flight came
// to.
type HAResult struct {
	Jobs, Lost, Twice int
	ByState           map[string]int
	// Next is the time from the deletion to the next job admitted (-1:
	// none was); NextRunning to the next job that started running.
	Next, NextRunning time.Duration
	// RuntimeUnknown are the jobs left unknown for a runtime's reason
	// (exec_unconfirmed, claim_released): id, reason and detail.
	RuntimeUnknown []string
}

// HADeletion is TestInClusterHAJobs with jobs jobs in flight (B15 runs
// it with 50) and kill[app] pods of each plane deleted at once (1: the
// replica whose log names a running job's run, or else the first; 2:
// both): it fails tb on a job lost or run twice, and returns what
// happened.
func HADeletion(t testing.TB, jobs int, kill map[string]int) HAResult {
	e, control, rt, gen := JobPlanes(t, "ha", 2)
	ctx := context.Background()
	var ids []string
	for i := range jobs {
		j, _, err := control.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", IdempotencyKey: fmt.Sprintf("ha-%d", i),
			Commands: [][]string{{"sh", "-c", fmt.Sprintf("echo job %d from $(hostname); sleep 6; echo job %d done", i, i)}}})
		if err != nil {
			t.Fatalf("job %d: POST /v1/jobs to Service slipway-control: %v", i, err)
		}
		ids = append(ids, j.ID)
	}
	// Until one runs.
	deadline := time.Now().Add(3 * time.Minute)
	var running []string // the runs of the jobs running
	for len(running) == 0 {
		for _, id := range ids {
			if j, err := control.Get(ctx, id); err == nil && j.State == controlapi.Running {
				running = append(running, j.RunID)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("none of %d jobs runs after 3m\n%s", jobs, PodsState(t, e.C, "slipway-runtime"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	before := states(ctx, control, ids)
	var deleted []string
	for _, app := range incluster.Deployments {
		if kill[app] == 0 {
			continue
		}
		pods, err := e.CS.CoreV1().Pods(incluster.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + app})
		if err != nil || len(pods.Items) != 2 {
			t.Fatalf("pods of %s: %v (%d)", app, err, len(pods.Items))
		}
		// The replica whose log names a running job's run (its work is
		// in flight), or else the first.
		pick, why := pods.Items[0].Name, "the first listed"
		for _, p := range pods.Items {
			b, err := e.CS.CoreV1().Pods(incluster.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				continue
			}
			for _, r := range running {
				if strings.Contains(string(b), r) {
					pick, why = p.Name, "its log names running run "+r
				}
			}
		}
		if kill[app] >= len(pods.Items) {
			for _, p := range pods.Items {
				deleted = append(deleted, p.Name)
				t.Logf("deleting %s pod %s: every replica at once", app, p.Name)
			}
			continue
		}
		deleted = append(deleted, pick)
		t.Logf("deleting %s pod %s: %s", app, pick, why)
	}
	// The deleted pods' logs, read until they end: what they said while
	// they went is the detail a job's error id points at.
	logs := make([]*syncBuf, len(deleted))
	logsDone := make(chan struct{}, len(deleted))
	for i, p := range deleted {
		logs[i] = &syncBuf{}
		rc, err := e.CS.CoreV1().Pods(incluster.Namespace).GetLogs(p, &corev1.PodLogOptions{Follow: true, SinceSeconds: ptr(int64(60))}).Stream(ctx)
		if err != nil {
			t.Fatalf("follow the log of pod %s: %v", p, err)
		}
		go func() {
			defer rc.Close()
			_, _ = io.Copy(logs[i], rc)
			logsDone <- struct{}{}
		}()
	}
	at := time.Now()
	for _, p := range deleted {
		if err := e.CS.CoreV1().Pods(incluster.Namespace).Delete(ctx, p, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete pod %s: %v", p, err)
		}
	}
	t.Logf("deleted pods %v with the jobs %v", deleted, before)

	// Every job ends terminal or unknown with an owner and a deadline: the
	// control plane's Service answers from the replica left (a request
	// that met the deleted one is asked again).
	final := map[string]*controlapi.Job{}
	deadline = time.Now().Add(4 * time.Minute)
	for len(final) < len(ids) && time.Now().Before(deadline) {
		for _, id := range ids {
			if final[id] != nil {
				continue
			}
			j, err := control.Get(ctx, id)
			if err != nil {
				continue
			}
			if j.State.Terminal() || (j.State == controlapi.Unknown && j.Owner != "" && j.OwnerDeadline != nil) {
				final[id] = j
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	for range deleted {
		select {
		case <-logsDone:
		case <-time.After(30 * time.Second):
		}
	}
	// The deleted pods' logs come last, after what failed: a long log
	// printed first pushes the failure out of a truncated CI excerpt.
	defer func() {
		for i, p := range deleted {
			t.Logf("pod %s's log, its last minute (lines cut at 600 characters):\n%s", p, Clip(Tail(logs[i].String(), 40), 600))
		}
	}()
	byState := map[string][]string{}
	next := time.Duration(-1)
	res := HAResult{Jobs: len(ids), ByState: map[string]int{}, NextRunning: -1}
	for _, id := range ids {
		j := final[id]
		if j == nil {
			res.Lost++
			last, err := control.Get(ctx, id)
			t.Errorf("job %s: neither terminal nor unknown with an owner after 4m: %+v (%v)", id, last, err)
			continue
		}
		if j.State == controlapi.Unknown {
			j = AfterOwnerDeadline(t, ctx, control, j)
		}
		if j.State == controlapi.Unknown && (j.Reason == "exec_unconfirmed" || j.Reason == "claim_released") {
			res.RuntimeUnknown = append(res.RuntimeUnknown, fmt.Sprintf("job %s: %s: %s", id, j.Reason, j.Detail))
		}
		byState[string(j.State)] = append(byState[string(j.State)], id)
		if j.AdmittedAt != nil && j.AdmittedAt.After(at) && (next < 0 || j.AdmittedAt.Sub(at) < next) {
			next = j.AdmittedAt.Sub(at)
		}
		if j.StartedAt != nil && j.StartedAt.After(at) && (res.NextRunning < 0 || j.StartedAt.Sub(at) < res.NextRunning) {
			res.NextRunning = j.StartedAt.Sub(at)
		}
	}

	// None ran twice: per job, the runs of the generation whose runner
	// fetched the job's command.
	runIDs, err := rt.Query(ctx, runmanifest.Query{Generation: gen})
	if err != nil {
		t.Fatalf("GET /v1/runs?generation=%s from Service slipway-runtime: %v", gen, err)
	}
	ran := map[string][]string{}
	for _, r := range runIDs {
		m, err := rt.Run(ctx, r)
		if err != nil {
			t.Fatalf("run %s: %v", r, err)
		}
		if !m.Lifecycle.PayloadFetched.IsZero() {
			ran[m.SessionID] = append(ran[m.SessionID], r)
		}
	}
	for _, id := range ids {
		if len(ran[id]) > 1 {
			res.Twice++
			t.Errorf("job %s ran in %d runs: %v", id, len(ran[id]), ran[id])
		}
	}
	var summary []string
	for s, js := range byState {
		summary = append(summary, fmt.Sprintf("%s %d", s, len(js)))
		res.ByState[s] = len(js)
	}
	sort.Strings(summary)
	b15, started := "no job admitted after the deletion", "no job started after the deletion"
	if next >= 0 {
		b15 = next.Round(10 * time.Millisecond).String()
	}
	if res.NextRunning >= 0 {
		started = res.NextRunning.Round(10 * time.Millisecond).String()
	}
	t.Logf("%d jobs: %s; %d runs of %s, %d jobs with a run that fetched its command; deletion to the next admitted job: %s, to the next running: %s; %s",
		len(ids), strings.Join(summary, ", "), len(runIDs), gen, len(ran), b15, started, strings.Join(e.Timings, ", "))
	res.Next = next
	return res
}

func ptr[T any](v T) *T { return &v }

// syncBuf is a buffer one goroutine writes while another reads.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// states is each job's state, as the control plane says now.
func states(ctx context.Context, c *controlapi.Client, ids []string) map[string]int {
	out := map[string]int{}
	for _, id := range ids {
		j, err := c.Get(ctx, id)
		if err != nil {
			out["error"]++
			continue
		}
		out[string(j.State)]++
	}
	return out
}
