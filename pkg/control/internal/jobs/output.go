package jobs

import (
	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/control/internal/stream"
)

// newOutputStream starts job j's output stream (internal/stream).
func (e *Engine) newOutputStream(j *controlapi.Job) *stream.Output {
	return stream.NewOutput(e.st, j, e.c.Events, &e.streams, e.c.Logger.Warn)
}

// newBoundedOutput keeps a job's bounded output: its head and its tail
// within maxBytes and maxLines (internal/stream).
func newBoundedOutput(maxBytes, maxLines int64) *stream.Bounded {
	return stream.NewBounded(maxBytes, maxLines)
}
