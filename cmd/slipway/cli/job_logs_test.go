package cli

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// switchProxy forwards TCP connections to the current backend, so a
// follower keeps one URL across control-plane restarts.
type switchProxy struct {
	ln      net.Listener
	backend atomic.Value // host:port
}

func newSwitchProxy(t *testing.T) *switchProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, err := net.Dial("tcp", p.backend.Load().(string))
				if err != nil {
					return
				}
				defer b.Close()
				go func() { _, _ = io.Copy(b, c); b.Close() }()
				_, _ = io.Copy(c, b)
			}()
		}
	}()
	return p
}

// The output of a running job reaches its event stream as it is produced;
// `job logs -f` prints it to the matching streams; a follower whose
// control plane is killed -9 mid-stream resumes on the next one with
// nothing lost or repeated, and sees the job end unknown (its owner died).
func TestJobLogsFollow(t *testing.T) {
	w := newControlWorld(t)
	ctx := context.Background()
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	cp := w.startControl(t, db)
	tokFile := w.token(t, db, "acme")
	tok, _ := readToken(tokFile)
	c, _ := controlapi.NewClient(cp.url, tok)

	j, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: [][]string{{"sh", "-c", "echo one; sleep 1; echo two >&2; sleep 1; printf '\\033[31mthree\\033[0m\\n'"}}})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan time.Time, 1) // when the first stdout event was read
	go func() {
		_ = c.Follow(ctx, j.ID, controlapi.FollowOptions{}, func(e controlapi.Event) error {
			if e.Kind == controlapi.KindStdout {
				select {
				case first <- time.Now():
				default:
				}
			}
			return nil
		})
	}()
	r := run(t, "", "job", "logs", "-f", j.ID, "--server", cp.url, "--token-file", tokFile)
	doneAt := time.Now()
	var firstAt time.Time
	select {
	case firstAt = <-first:
	case <-time.After(5 * time.Second):
	}
	if r.code != 0 || r.stdout != "one\n\x1b[31mthree\x1b[0m\n" || !strings.Contains(r.stderr, "two\n") || !strings.Contains(r.stderr, "running") || !strings.Contains(r.stderr, "succeeded") {
		t.Fatalf("job logs -f: %+v", r)
	}
	if firstAt.IsZero() || doneAt.Sub(firstAt) < 1500*time.Millisecond {
		t.Errorf("the first output came %s before the end: not streamed", doneAt.Sub(firstAt))
	}
	// without -f, what is stored, the same
	if r2 := run(t, "", "job", "logs", j.ID, "--server", cp.url, "--token-file", tokFile); r2.stdout != r.stdout {
		t.Fatalf("job logs: %+v", r2)
	}

	// kill -9 mid-stream: the follower (through a proxy that keeps its URL)
	// resumes on the restarted plane without a gap or a repeat.
	px := newSwitchProxy(t)
	px.backend.Store(strings.TrimPrefix(cp.url, "http://"))
	pc, _ := controlapi.NewClient("http://"+px.ln.Addr().String(), tok)
	k, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: [][]string{{"sh", "-c", "i=0; while [ $i -lt 400 ]; do i=$((i+1)); echo line $i; sleep 0.02; done"}}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []controlapi.Event
	reconnects := 0
	done := make(chan error, 1)
	go func() {
		done <- pc.Follow(ctx, k.ID, controlapi.FollowOptions{OnReconnect: func(error) { mu.Lock(); reconnects++; mu.Unlock() }}, func(e controlapi.Event) error {
			mu.Lock()
			got = append(got, e)
			mu.Unlock()
			if e.Kind == controlapi.KindState {
				var d controlapi.StateData
				_ = json.Unmarshal(e.Data, &d)
				if d.State == controlapi.Unknown {
					return io.EOF // the outcome is not confirmed: stop
				}
			}
			return nil
		})
	}()
	poll(t, 60*time.Second, "output of the second job", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, e := range got {
			if e.Kind == controlapi.KindStdout {
				n++
			}
		}
		return n >= 10, ""
	})
	cp.kill9(t)
	cp = w.startControl(t, db)
	px.backend.Store(strings.TrimPrefix(cp.url, "http://"))
	select {
	case err := <-done:
		if err != io.EOF {
			t.Fatalf("follow: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("the follower did not see the job end")
	}
	mu.Lock()
	defer mu.Unlock()
	if reconnects == 0 {
		t.Error("the follower never reconnected")
	}
	var text strings.Builder
	for i, e := range got {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has sequence %d: a gap or a repeat", i, e.Seq)
		}
		if e.Kind == controlapi.KindStdout {
			var d controlapi.OutputData
			_ = json.Unmarshal(e.Data, &d)
			text.WriteString(d.Text)
		}
	}
	lines := strings.Split(strings.TrimSuffix(text.String(), "\n"), "\n")
	for i, l := range lines {
		if l != "line "+itoa(i+1) {
			t.Fatalf("line %d is %q", i, l)
		}
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
