package runtime

import (
	"context"
	"io"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// stamper passes a command's output (and, for stdout, its events) on to
// w, and records the lifecycle stamps they set on the claim's manifest:
// first_output at the first byte a command of the run writes, unless the
// workload reports its first useful output (which then sets it, once);
// payload_fetched when the runner had the run's first command;
// model_request_started when the workload reports it. Event times are the
// runner's. Only payload_fetched stays here: the workload's events go on to
// w when it takes them (the job's stream).
type stamper struct {
	w io.Writer
	r *Runtime
	c *claim
}

func (s *stamper) Write(p []byte) (int, error) {
	if len(p) > 0 && !s.c.output.Load() && s.c.output.CompareAndSwap(false, true) {
		now := s.r.now()
		s.stamp(func(l *runmanifest.Lifecycle) {
			if l.FirstOutput.IsZero() {
				l.FirstOutput = now
			}
		})
	}
	if s.w == nil { // the caller wants no such output: it still stamps
		return len(p), nil
	}
	return s.w.Write(p)
}

// WriteEvent makes the runner send the command's events (see
// runner.EventWriter).
func (s *stamper) WriteEvent(e runner.Event) error {
	switch e.Kind {
	case runner.EventPayloadFetched:
		if !s.c.payload.CompareAndSwap(false, true) {
			return nil // the run's first command's only: no write for the others
		}
		s.stamp(func(l *runmanifest.Lifecycle) {
			if l.PayloadFetched.IsZero() {
				l.PayloadFetched = e.At
			}
		})
		return nil
	case runner.EventModelRequest:
		s.stamp(func(l *runmanifest.Lifecycle) {
			if l.ModelRequestStarted.IsZero() {
				l.ModelRequestStarted = e.At
			}
		})
	case runner.EventFirstOutput:
		// the workload's word on its first useful output wins over the
		// first byte (the runner takes it once per sandbox)
		s.c.output.Store(true)
		s.stamp(func(l *runmanifest.Lifecycle) { l.FirstOutput = e.At })
	}
	if ew, ok := s.w.(runner.EventWriter); ok {
		return ew.WriteEvent(e)
	}
	return nil
}

func (s *stamper) stamp(fn func(*runmanifest.Lifecycle)) {
	if err := s.r.store.Update(context.Background(), s.c.runID, func(m *runmanifest.Manifest) error {
		fn(&m.Lifecycle)
		return nil
	}); err != nil {
		s.r.logf("runtime: run %s: record a lifecycle stamp: %v", s.c.runID, err)
	}
}
