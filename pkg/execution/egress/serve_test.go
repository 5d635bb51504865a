package egress_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/egress"
)

// TestServeEndsOpenTunnelsAndRecordsThem: a tunnel still open when Serve
// stops is closed, and recorded (with its bytes) before Serve returns.
func TestServeEndsOpenTunnelsAndRecordsThem(t *testing.T) {
	origin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer origin.Close()
	go func() {
		for {
			c, err := origin.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c) }() // reads, never answers, never closes
		}
	}()
	pol, err := egress.Parse([]string{"127.0.0.1/32:" + strings.Split(origin.Addr().String(), ":")[1]})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- (&egress.Proxy{Policy: pol, Record: rec.add}).Serve(ctx, ln) }()

	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "CONNECT "+origin.Addr().String()+" HTTP/1.1\r\nHost: "+origin.Addr().String()+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, " 200 ") {
		t.Fatalf("CONNECT answer %q, %v", line, err)
	}
	if _, err := io.WriteString(c, "hello"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the bytes cross the tunnel
	if n := len(rec.all()); n != 0 {
		t.Fatalf("%d attempts recorded while the tunnel is open", n)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return with a tunnel open")
	}
	all := rec.all()
	if len(all) != 1 || !all[0].Allowed || all[0].Method != "CONNECT" || all[0].BytesOut != 5 {
		t.Fatalf("attempts after Serve: %+v", all)
	}
}
