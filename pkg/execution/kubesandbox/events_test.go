//go:build linux

package kubesandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// eventSink is a command's stdout that also takes its events
// (runner.EventWriter), in order with the output.
type eventSink struct {
	mu  sync.Mutex
	out bytes.Buffer
	seq []string
	evs []runner.Event
}

func (s *eventSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out.Write(p)
	s.seq = append(s.seq, "out")
	return len(p), nil
}

func (s *eventSink) WriteEvent(e runner.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, e)
	s.seq = append(s.seq, "event:"+e.Kind)
	return nil
}

// The workload's own events reach the job on Kubernetes: a command run in
// a warm member's pod through the runtime reports a status event with the
// runner's `slipway-runner event` (its socket in the pod, named by
// $SLIPWAY_EVENTS), and the command's stdout gets the event frame, with
// the workload's data and the runner's clock; the command's environment
// has TRACEPARENT in the caller's trace.
func TestWorkloadEventsOnKube(t *testing.T) {
	n := startNode(t, "events")
	n.generation(t, nil)
	d := n.desire(t, 1)
	ctx := context.Background()
	be, err := kubesandbox.New(n.c.Config(), n.ns)
	if err != nil {
		t.Fatal(err)
	}
	store, err := runs.OpenSQLite(ctx, filepath.Join(t.TempDir(), runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tr, err := telemetry.NewTracing(ctx)
	if err != nil {
		t.Fatal(err)
	}
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute, runtime.WithTracing(tr))
	defer rt.Close()

	gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: n.pool, Tenant: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		code := 0
		if err := rt.Release(ctx, gr.RunID, gr.Token, &code); err != nil {
			t.Error(err)
		}
	}()
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	cctx := telemetry.FromTraceParent(ctx, "00-"+traceID+"-00f067aa0ba902b7-01")
	sink := &eventSink{}
	var stderr bytes.Buffer
	script := `echo "traceparent=$TRACEPARENT"; ` + kubeobjects.RunnerBinary + ` event status --data '{"msg":"hi"}' && echo sent`
	st, err := rt.Exec(cctx, gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"sh", "-c", script}}, sink, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if st.ExitCode != 0 {
		t.Fatalf("exit %d: stdout %q, stderr %q", st.ExitCode, sink.out.String(), stderr.String())
	}
	if len(sink.evs) != 1 || sink.evs[0].Kind != runner.EventStatus {
		t.Fatalf("events %+v (sequence %v), want one status event; stdout %q, stderr %q", sink.evs, sink.seq, sink.out.String(), stderr.String())
	}
	var data struct{ Msg string }
	if err := json.Unmarshal(sink.evs[0].Data, &data); err != nil || data.Msg != "hi" {
		t.Errorf("event data %s: %v", sink.evs[0].Data, err)
	}
	if at := sink.evs[0].At; at.IsZero() || time.Since(at) > 5*time.Minute {
		t.Errorf("event time %v: not the runner's clock", at)
	}
	var tp string
	for _, l := range strings.Split(sink.out.String(), "\n") {
		if v, ok := strings.CutPrefix(l, "traceparent="); ok {
			tp = v
		}
	}
	if !runner.ValidTraceParent(tp) || !strings.HasPrefix(tp, "00-"+traceID+"-") || strings.Contains(tp, "00f067aa0ba902b7") {
		t.Errorf("TRACEPARENT in the pod %q: want a child span in trace %s", tp, traceID)
	}
	if !strings.Contains(sink.out.String(), "sent") {
		t.Errorf("stdout %q", sink.out.String())
	}
}
