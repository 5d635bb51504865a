package runtime

import (
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// frameWriter writes ExecFrames as NDJSON, flushing each, and sends the
// 200 header with the first.
type frameWriter struct {
	mu       sync.Mutex
	w        http.ResponseWriter
	rc       *http.ResponseController
	started  bool
	streamed int64
	err      error
}

func (f *frameWriter) frame(fr runtimeapi.ExecFrame) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if !f.started {
		f.started = true
		f.w.Header().Set("Content-Type", "application/x-ndjson")
		f.w.WriteHeader(http.StatusOK)
	}
	b, err := json.Marshal(fr)
	if err != nil {
		return err
	}
	if _, err := f.w.Write(append(b, '\n')); err != nil {
		f.err = err
		return err
	}
	f.streamed += int64(len(fr.Data))
	if err := f.rc.Flush(); err != nil {
		f.err = err
	}
	return f.err
}

type streamOf struct {
	f    *frameWriter
	name string
}

func (s streamOf) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if err := s.f.frame(runtimeapi.ExecFrame{Stream: s.name, Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}

// execStream runs req answering with the output as it comes. A client
// that goes away cancels the command (its request's context).
func (s *Server) execStream(w http.ResponseWriter, r *http.Request, b runtimeapi.ExecBody, req runner.ExecRequest) {
	req.MaxOutput = cmp.Or(b.MaxOutput, runner.MaxOutputLimit)
	f := &frameWriter{w: w, rc: http.NewResponseController(w)}
	var stdout io.Writer = streamOf{f, runner.StreamStdout}
	if b.Events {
		stdout = eventsOf{streamOf{f, runner.StreamStdout}}
	}
	st, err := s.rt.Exec(r.Context(), r.PathValue("run"), b.Token, req, stdout, streamOf{f, runner.StreamStderr})
	f.mu.Lock()
	started := f.started
	f.mu.Unlock()
	if err != nil {
		if !started {
			s.writeError(w, r, claimStatus(err), err)
			return
		}
		e := s.errorBody(r, claimStatus(err), err)
		_ = f.frame(runtimeapi.ExecFrame{Error: e.Error, Code: e.Code, Status: claimStatus(err), ErrorID: e.ID})
		return
	}
	dropped := max(st.OutputBytes-f.streamed, 0)
	_ = f.frame(runtimeapi.ExecFrame{Exit: &runtimeapi.ExecResult{ExitCode: st.ExitCode, Truncated: st.Truncated || dropped > 0, DroppedBytes: dropped,
		TimedOut: st.TimedOut, Stop: st.Stop, Outcome: st.Outcome, EventsRejected: st.EventsRejected}})
}

// eventsOf is a stdout stream that also answers with the command's
// events (ExecBody.Events).
type eventsOf struct{ streamOf }

func (s eventsOf) WriteEvent(e runner.Event) error {
	return s.f.frame(runtimeapi.ExecFrame{Event: &runtimeapi.WorkloadEvent{Kind: e.Kind, At: e.At, Data: e.Data}})
}
