//go:build linux

package kubesandbox_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// execCount counts, per pod, the pod execs a backend opens to its runner
// (DialRunner, each one an exec through the API server) and the pings
// sent over them.
type execCount struct {
	mu    sync.Mutex
	dials map[string]int
	pings map[string]int
}

func (e *execCount) dial(cfg *rest.Config, ns, pod string) runner.DialFunc {
	d := kubesandbox.DialRunner(cfg, ns, pod)
	return func(ctx context.Context) (net.Conn, error) {
		e.mu.Lock()
		e.dials[pod]++
		e.mu.Unlock()
		c, err := d(ctx)
		if err != nil {
			return nil, err
		}
		return &pingCounting{Conn: c, count: func() { e.mu.Lock(); e.pings[pod]++; e.mu.Unlock() }}, nil
	}
}

func (e *execCount) of(pod string) (dials, pings int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dials[pod], e.pings[pod]
}

// since counts pod's execs and pings since snapshot before.
func (e *execCount) since(before *execCount, pod string) (dials, pings int) {
	d, p := e.of(pod)
	bd, bp := before.of(pod)
	return d - bd, p - bp
}

func (e *execCount) snapshot() *execCount {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := &execCount{dials: map[string]int{}, pings: map[string]int{}}
	for k, v := range e.dials {
		c.dials[k] = v
	}
	for k, v := range e.pings {
		c.pings[k] = v
	}
	return c
}

// pingCounting counts the ping requests written to its connection.
type pingCounting struct {
	net.Conn
	count func()
}

// Unwrap is the pod exec under c (the backend watches it end).
func (c *pingCounting) Unwrap() net.Conn { return c.Conn }

func (c *pingCounting) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte(`"op":"`+runner.OpPing+`"`)) {
		c.count()
	}
	return c.Conn.Write(b)
}

// A warm member's proof connection is its claim's heartbeat's: the
// runtime on the Kubernetes backend claims a proved warm member, and its
// heartbeats go over the pod exec the proof was asked over (the backend
// opens no exec to that pod at or after the grant); the manifest's runner
// is what that runner answered. Then the kept connections of the
// remaining members are killed for real (their `slipway-runner connect`
// processes, SIGKILL from the host): the backend sees their execs end and
// drops them, and a claim of such a member is granted all the same, its
// heartbeat dialling one exec of its own and not moving the claim.
func TestWarmClaimHeartbeatOnProofConnection(t *testing.T) {
	n := startNode(t, "kept")
	g := n.generation(t, nil)
	d := n.desire(t, 2)
	ctx := context.Background()
	execs := &execCount{dials: map[string]int{}, pings: map[string]int{}}
	be, err := kubesandbox.New(n.c.Config(), n.ns, kubesandbox.WithDial(execs.dial))
	if err != nil {
		t.Fatal(err)
	}
	pctx, stopProofs := context.WithCancel(ctx)
	proving := make(chan struct{})
	go func() { defer close(proving); be.ProveWarm(pctx) }()
	defer func() { stopProofs(); <-proving }()
	until := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Minute); !ok(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 3m (proved %d, kept %d)", what, be.ProvedWarm(), be.KeptWarm())
			}
		}
	}
	until("2 warm members proved, their connections kept", func() bool { return be.ProvedWarm() == 2 && be.KeptWarm() == 2 })

	store, err := runs.OpenSQLite(ctx, filepath.Join(t.TempDir(), runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	// a ping every 300 ms, and ten missed before a move: the test holds
	// the connections, not the node's speed
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute,
		runtime.WithHeartbeat(300*time.Millisecond, 10))
	defer rt.Close()
	warm.Reconcile(ctx, d)

	before := execs.snapshot()
	gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: n.pool})
	if err != nil {
		t.Fatal(err)
	}
	if !gr.Warm || gr.Generation != g.ID {
		t.Fatalf("grant %+v, want a warm member of %s", gr, g.ID)
	}
	until("5 heartbeats of the claim", func() bool { _, p := execs.since(before, gr.SandboxID); return p >= 5 })
	if dials, _ := execs.since(before, gr.SandboxID); dials != 0 {
		t.Fatalf("%d execs to pod %s from its claim to 5 heartbeats, want 0: they go over its proof's, kept", dials, gr.SandboxID)
	}
	m, err := store.Get(ctx, gr.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if m.RunnerBinarySHA256 != runnerDigest(t, n) || m.SandboxID != gr.SandboxID || m.AllocationAttempt != 1 {
		t.Fatalf("manifest: runner %s, sandbox %s, attempt %d", m.RunnerBinarySHA256, m.SandboxID, m.AllocationAttempt)
	}
	var out bytes.Buffer
	if st, err := rt.Exec(ctx, gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"sh", "-c", "echo $SLIPWAY_SANDBOX_ID"}}, &out, nil); err != nil || st.ExitCode != 0 || strings.TrimSpace(out.String()) != gr.SandboxID {
		t.Fatalf("exec: %+v %v %q", st, err, out.String())
	}
	if err := rt.Release(ctx, gr.RunID, gr.Token, nil); err != nil {
		t.Fatal(err)
	}

	// the replacement proved and kept too; then every kept connection's
	// bridge killed in its pod
	until("the pool's 2 members proved again", func() bool { return be.ProvedWarm() == 2 && be.KeptWarm() == 2 })
	if killed := killBridges(t, g.ID); killed != 2 {
		t.Fatalf("killed %d bridges of kept connections, want 2", killed)
	}
	until("the killed connections dropped", func() bool { return be.KeptWarm() == 0 })
	if be.ProvedWarm() != 2 {
		t.Fatalf("%d members proved after their connections died, want 2: the proofs stay", be.ProvedWarm())
	}
	before = execs.snapshot()
	gr2, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: n.pool})
	if err != nil {
		t.Fatalf("a claim of a member whose kept connection died: %v", err)
	}
	until("5 heartbeats of the second claim", func() bool { _, p := execs.since(before, gr2.SandboxID); return p >= 5 })
	if dials, _ := execs.since(before, gr2.SandboxID); dials != 1 {
		t.Fatalf("%d execs to pod %s from its claim to 5 heartbeats, want 1: the heartbeat's own", dials, gr2.SandboxID)
	}
	g2, err := rt.Grant(gr2.RunID)
	if err != nil || g2.AllocationAttempt != 1 || g2.SandboxID != gr2.SandboxID {
		t.Fatalf("the second claim after its heartbeats: %+v %v, want attempt 1 on %s", g2, err, gr2.SandboxID)
	}
	if err := rt.Release(ctx, gr2.RunID, gr2.Token, nil); err != nil {
		t.Fatal(err)
	}
}

// killBridges SIGKILLs every `slipway-runner connect` process on this
// host in a pod of generation gen (the pod execs' bridges to their
// runners; only kept connections are open when it is called) and says how
// many it killed.
func killBridges(t *testing.T, gen string) int {
	t.Helper()
	want := strings.Join([]string{kubeobjects.RunnerBinary, "connect", kubeobjects.RunnerSocket}, "\x00") + "\x00"
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || string(b) != want {
			continue
		}
		env, err := os.ReadFile(filepath.Join(filepath.Dir(p), "environ"))
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), runner.EnvGeneration+"="+gen) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			killed++
		}
	}
	return killed
}
