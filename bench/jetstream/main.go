// Command jetstream-peer is B9a's peer: the same events as the control
// plane's event benchmark carried through an embedded NATS server with
// JetStream on file storage (a subject per run, an ordered consumer per
// run). With -closed each writer publishes synchronously, waiting for its
// acknowledgement before its next event (closed-loop, as the control plane's
// writers wait for their append's commit); without it, publishes are
// asynchronous, up to JetStream's own bound in flight. -sync-always makes the
// file store fsync every write (nats-server's sync_always, the counterpart
// of SQLite's synchronous=FULL); without it JetStream syncs every two
// minutes, its default. It lives in a module of its own
// so that nats-server never enters Slipway's go.mod; the benchmark in
// pkg/control runs it beside Slipway in the same run and reads one JSON line:
//
//	{"events":N,"wall_ns":W,"p50_ns":P,"p99_ns":Q}
//
// Each event is stamped with its write time (or, paced, the time it was due),
// exactly as the Slipway side stamps its own.
package main

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	runs := flag.Int("runs", 200, "runs (one subject and one writer each)")
	events := flag.Int("events", 5000, "events per run")
	size := flag.Int("size", 200, "bytes per event (at least 17)")
	every := flag.Duration("every", 0, "one writer's interval between events (0: flat out)")
	dir := flag.String("store", "", "JetStream's store directory (default: a new temporary one)")
	closed := flag.Bool("closed", false, "each writer waits for its publish's acknowledgement before the next (closed-loop)")
	syncAlways := flag.Bool("sync-always", false, "fsync every write to the file store (nats-server's sync_always)")
	flag.Parse()
	if *runs < 1 || *events < 1 || *size < 17 {
		fmt.Fprintln(os.Stderr, "jetstream-peer: -runs and -events must be at least 1, -size at least 17")
		os.Exit(2)
	}
	res, err := run(*runs, *events, *size, *every, *dir, *closed, *syncAlways)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jetstream-peer:", err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
}

// result is what the benchmark reads.
type result struct {
	Events int64 `json:"events"`
	WallNS int64 `json:"wall_ns"`
	P50NS  int64 `json:"p50_ns"`
	P99NS  int64 `json:"p99_ns"`
}

func run(runs, events, size int, every time.Duration, dir string, closed, syncAlways bool) (*result, error) {
	ctx := context.Background()
	if dir == "" {
		d, err := os.MkdirTemp("", "jetstream-peer-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true, SyncAlways: syncAlways})
	if err != nil {
		return nil, err
	}
	go ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		return nil, errors.New("nats-server did not start")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RUNS", Subjects: []string{"runs.>"}, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, err
	}
	lats := make([][]time.Duration, runs)
	var wg sync.WaitGroup
	var got atomic.Int64
	for i := range runs {
		cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{fmt.Sprintf("runs.%d", i)}})
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		n := 0
		cc, err := cons.Consume(func(m jetstream.Msg) {
			if t, ok := stampOf(m.Data()); ok {
				lats[i] = append(lats[i], time.Since(t))
			}
			n++
			got.Add(1)
			if n == events {
				wg.Done()
			}
		})
		if err != nil {
			return nil, err
		}
		defer cc.Stop()
	}
	start := time.Now()
	var pwg sync.WaitGroup
	var perr atomic.Pointer[error]
	for i := range runs {
		pwg.Go(func() {
			subj := fmt.Sprintf("runs.%d", i)
			write(start, i, runs, events, size, every, func(ev []byte) {
				if closed {
					if _, err := js.Publish(ctx, subj, ev); err != nil {
						perr.CompareAndSwap(nil, &err)
					}
					return
				}
				for {
					_, err := js.PublishAsync(subj, ev)
					if err == nil {
						return
					}
					if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
						perr.CompareAndSwap(nil, &err)
						return
					}
					// JetStream's own backpressure: too many publishes
					// unacknowledged; wait and publish again.
					time.Sleep(time.Millisecond)
				}
			})
		})
	}
	pwg.Wait()
	if e := perr.Load(); e != nil {
		return nil, *e
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		return nil, errors.New("JetStream did not acknowledge every publish")
	}
	read := make(chan struct{})
	go func() { wg.Wait(); close(read) }()
	select {
	case <-read:
	case <-time.After(5 * time.Minute):
		return nil, fmt.Errorf("JetStream's consumers read %d of %d events", got.Load(), runs*events)
	}
	wall := time.Since(start)
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	return &result{Events: got.Load(), WallNS: wall.Nanoseconds(), P50NS: pct(all, 0.5).Nanoseconds(), P99NS: pct(all, 0.99).Nanoseconds()}, nil
}

func pct(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// write writes events payloads with w: flat out (every 0), or paced, writer
// i of runs writing event k when start + (i/runs + k) * every is due,
// stamped with that time.
func write(start time.Time, i, runs, events, size int, every time.Duration, w func([]byte)) {
	for k := range events {
		if every == 0 {
			w(stamp(time.Now(), size))
			continue
		}
		due := start.Add(every*time.Duration(k) + every*time.Duration(i)/time.Duration(runs))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		w(stamp(due, size))
	}
}

// stamp is an event's payload: at in hex, padded to size.
func stamp(at time.Time, size int) []byte {
	b := make([]byte, size)
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], uint64(at.UnixNano()))
	hex.Encode(b, t[:])
	for i := 16; i < size-1; i++ {
		b[i] = 'x'
	}
	b[size-1] = '\n'
	return b
}

func stampOf(b []byte) (time.Time, bool) {
	var t [8]byte
	if len(b) < 16 {
		return time.Time{}, false
	}
	if _, err := hex.Decode(t[:], b[:16]); err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(t[:]))), true
}
