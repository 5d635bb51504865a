package cli

import (
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/internal/progress"
)

// pushProgress shows how many bytes of a push went up, when progress is
// shown: give the options to the push, and call done after it.
func (g *globals) pushProgress(what string) ([]remote.Option, func()) {
	if g.progress == nil {
		return nil, func() {}
	}
	ch := make(chan v1.Update, 16)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for u := range ch {
			if u.Error == nil {
				g.progress.Statusf("push %s: %s of %s", what, progress.Bytes(u.Complete), progress.Bytes(u.Total))
			}
		}
	}()
	return []remote.Option{remote.WithProgress(ch)}, func() {
		select {
		case <-finished:
		case <-time.After(time.Second): // a push that failed before it began may leave the channel open
		}
		g.progress.Clear()
	}
}
