package runtime

import (
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// WithLogger writes the runtime's lines about a run (claim granted,
// command ended, claim moved, claim released) to l as records with the
// run's ids: run_id, session_id, allocation_attempt, sandbox_id, pool and
// the trace_id of the request's trace. Without it they are text lines on
// WithLog's writer, and the grant, command and release lines are not
// written.
func WithLogger(l *slog.Logger) RuntimeOption {
	return func(o *runtimeOptions) { o.logger = l }
}

// runLog writes a line about claim c: a record with its ids when the
// runtime has a logger, else the text line text gives (none when text
// is nil). kv are more attributes of the record.
func (r *Runtime) runLog(ctx context.Context, level slog.Level, c *claim, msg string, text func() string, kv ...any) {
	if l := r.o.logger; l != nil {
		if !l.Enabled(ctx, level) {
			return
		}
		c.mu.Lock()
		attrs := []any{"run_id", c.runID, "session_id", c.sessionID, "allocation_attempt", c.attempt, "pool", c.pool}
		if c.sandbox != nil {
			attrs = append(attrs, "sandbox_id", c.sandbox.ID)
		}
		c.mu.Unlock()
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			attrs = append(attrs, "trace_id", sc.TraceID().String())
		}
		l.Log(ctx, level, msg, append(attrs, kv...)...)
		return
	}
	if text != nil {
		r.logf("%s", text())
	}
}

// textf is a text line for runLog.
func textf(format string, args ...any) func() string {
	return func() string { return fmt.Sprintf(format, args...) }
}
