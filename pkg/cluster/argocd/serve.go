package argocd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Serve serves h on listen until ctx ends, then shuts down (waiting up to
// five seconds for requests in flight). ready, if set, learns the address
// once it listens.
func Serve(ctx context.Context, listen string, h http.Handler, ready func(addr string)) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("argocd: %w", err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: 2 * time.Minute}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if ready != nil {
		ready(ln.Addr().String())
	}
	err = hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		return nil
	}
	return fmt.Errorf("argocd: %w", err)
}
