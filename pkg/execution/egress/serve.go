package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// Serve runs p on ln until ctx ends, then closes ln and every connection
// (open CONNECT tunnels included) and returns once every attempt has been
// recorded: after Serve returns, Record is not called again. It returns
// nil when ctx ended it.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu     sync.Mutex
		conns  = map[net.Conn]struct{}{}
		closed bool
		wg     sync.WaitGroup // handlers running
	)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			if closed {
				mu.Unlock()
				return
			}
			wg.Add(1)
			mu.Unlock()
			defer wg.Done()
			p.ServeHTTP(w, r)
		}),
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: 30 * time.Second,
		ConnState: func(c net.Conn, s http.ConnState) {
			mu.Lock()
			defer mu.Unlock()
			if s == http.StateClosed || s == http.StateHijacked {
				delete(conns, c) // a tunnel closes itself when ctx ends
			} else {
				conns[c] = struct{}{}
			}
		},
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel() // ends the tunnels (see connect)
	_ = srv.Close()
	mu.Lock()
	closed = true
	for c := range conns {
		_ = c.Close()
	}
	mu.Unlock()
	wg.Wait()
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
