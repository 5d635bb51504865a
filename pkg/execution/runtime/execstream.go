package runtime

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// ExecFrame is one line of a streamed exec's answer (ExecBody.Stream):
// output chunks in the order the command wrote them, then exactly one
// Exit, or an Error when the exec failed after output began.
type ExecFrame struct {
	// Stream is stdout or stderr; Data its chunk.
	Stream string `json:"stream,omitempty"`
	Data   []byte `json:"data,omitempty"`
	// Exit ends a streamed exec: the ExecResult without the output.
	Exit *ExecResult `json:"exit,omitempty"`
	// Error and Status: the exec failed after the answer began (Status is
	// what the buffered form would have answered).
	Error  string `json:"error,omitempty"`
	Status int    `json:"status,omitempty"`
}

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

func (f *frameWriter) frame(fr ExecFrame) error {
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
	if err := s.f.frame(ExecFrame{Stream: s.name, Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}

// execStream runs req answering with the output as it comes. A client
// that goes away cancels the command (its request's context).
func (s *Server) execStream(w http.ResponseWriter, r *http.Request, b ExecBody, req runner.ExecRequest) {
	req.MaxOutput = cmp.Or(b.MaxOutput, runner.MaxOutputLimit)
	f := &frameWriter{w: w, rc: http.NewResponseController(w)}
	st, err := s.rt.Exec(r.Context(), r.PathValue("run"), b.Token, req, streamOf{f, runner.StreamStdout}, streamOf{f, runner.StreamStderr})
	f.mu.Lock()
	started := f.started
	f.mu.Unlock()
	if err != nil {
		if !started {
			writeError(w, claimStatus(err), err)
			return
		}
		_ = f.frame(ExecFrame{Error: err.Error(), Status: claimStatus(err)})
		return
	}
	dropped := max(st.OutputBytes-f.streamed, 0)
	_ = f.frame(ExecFrame{Exit: &ExecResult{ExitCode: st.ExitCode, Truncated: st.Truncated || dropped > 0, DroppedBytes: dropped,
		TimedOut: st.TimedOut, Stop: st.Stop, Outcome: st.Outcome}})
}

// ErrStreamCut: a streamed exec's answer ended before its exit frame (the
// connection dropped): whether the command ended, and how, is not known.
var ErrStreamCut = errors.New("runtime: the exec's answer ended before its exit")

// ExecStream runs a command in a claim with its output streamed as it is
// produced: onOutput gets each chunk (stream is stdout or stderr) in
// order, then ExecStream returns the exit (ExecResult without output).
func (c *Client) ExecStream(ctx context.Context, runID string, b ExecBody, onOutput func(stream string, p []byte)) (*ExecResult, error) {
	b.Stream = true
	body, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/claims/"+url.PathEscape(runID)+"/exec", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		bb, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var e struct{ Error string }
		_ = json.Unmarshal(bb, &e)
		return nil, &APIError{Status: resp.StatusCode, Reason: e.Error}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4*runner.MaxFrameBytes)
	for sc.Scan() {
		var f ExecFrame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return nil, fmt.Errorf("runtime: exec %s: frame: %w", runID, err)
		}
		switch {
		case f.Exit != nil:
			return f.Exit, nil
		case f.Error != "":
			return nil, &APIError{Status: f.Status, Reason: f.Error}
		case f.Stream == runner.StreamStdout || f.Stream == runner.StreamStderr:
			onOutput(f.Stream, f.Data)
		default:
			return nil, fmt.Errorf("runtime: exec %s: a frame of stream %q", runID, f.Stream)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStreamCut, err)
	}
	return nil, ErrStreamCut
}
