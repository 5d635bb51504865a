package runner

import (
	"context"
	"io"
	"net"
	"sync"
)

// Forward accepts connections on ln until ctx ends and joins each to a
// new connection to the unix socket at socket, copying both ways: an
// allow-list sandbox's runner offers the egress proxy the backend binds
// into the sandbox as a socket on 127.0.0.1 this way (the sandbox's own
// network namespace has loopback only). A connection the socket refuses
// is closed at once. Forward closes ln and every connection before it
// returns.
func Forward(ctx context.Context, ln net.Listener, socket string) error {
	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	track := func(c net.Conn, on bool) {
		mu.Lock()
		if on {
			conns[c] = struct{}{}
		} else {
			delete(conns, c)
		}
		mu.Unlock()
	}
	stop := context.AfterFunc(ctx, func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	defer stop()
	defer wg.Wait()
	for {
		down, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			track(down, true)
			defer track(down, false)
			defer down.Close()
			var d net.Dialer
			up, err := d.DialContext(ctx, "unix", socket)
			if err != nil {
				return
			}
			track(up, true)
			defer track(up, false)
			defer up.Close()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(up, down)
				if c, ok := up.(*net.UnixConn); ok {
					_ = c.CloseWrite()
				}
				close(done)
			}()
			_, _ = io.Copy(down, up)
			if c, ok := down.(*net.TCPConn); ok {
				_ = c.CloseWrite()
			}
			<-done
		}()
	}
}
