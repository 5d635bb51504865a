package runtime_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/isolate"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

const testSecretVersion = "vault://kv/agents/api-key#3"

// testPolicyCommit is the policy commit secretGeneration pins.
const testPolicyCommit = "0123456789abcdef0123456789abcdef01234567"

// fenceRig is one runtime on a real bubblewrap backend and SQLite store,
// with a broker the test can ask.
type fenceRig struct {
	be       *local.Backend
	beDir    string
	store    runs.Store
	storeDir string
	warm     *runtime.Warm
	rt       *runtime.Runtime
	broker   *runtime.Broker
	d        *runtime.Desired
	log      *syncBuffer
}

func newFenceRig(t *testing.T, w *warmWorld, g *generation.Generation, warmSize int, opts ...runtime.RuntimeOption) *fenceRig {
	t.Helper()
	ctx := context.Background()
	f := &fenceRig{beDir: t.TempDir(), storeDir: t.TempDir(), log: &syncBuffer{}}
	var err error
	if f.be, err = local.New(f.beDir); err != nil {
		t.Fatal(err)
	}
	if f.store, err = runs.OpenSQLite(ctx, filepath.Join(f.storeDir, runs.StateFile)); err != nil {
		t.Fatal(err)
	}
	if f.broker, err = runtime.NewBroker(runtime.LocalIssuer, time.Hour); err != nil {
		t.Fatal(err)
	}
	f.d = w.desired(t, "rev-1", warmSize, g)
	f.warm = runtime.NewWarm(f.be, runtime.NewRegistryArtifacts(t.TempDir()))
	opts = append([]runtime.RuntimeOption{runtime.WithBroker(f.broker), runtime.WithLog(f.log)}, opts...)
	f.rt = runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return f.d, time.Now() }, f.warm, f.store, time.Minute, opts...)
	t.Cleanup(func() {
		f.rt.Close()
		all, _ := f.be.List(ctx, sandbox.Filter{})
		for _, s := range all {
			_ = f.be.Delete(ctx, s.ID)
		}
		f.be.Close()
		f.store.Close()
	})
	return f
}

// secretGeneration is a generation of the world's runner and template that
// also pins a secret version.
func secretGeneration(t *testing.T, w *warmWorld) *generation.Generation {
	t.Helper()
	img, _ := random.Image(32, 1)
	cp := registrytest.Push(t, w.host+"/platform/cp:secret", img)
	g, err := generation.New("agents", nil, map[generation.Kind]generation.Pin{
		generation.ControlPlane: {Image: cp.String()}, generation.Runner: {Image: w.runner}, generation.WorkspaceTemplate: {Image: w.template},
		generation.SecretVersion: {ID: testSecretVersion},
		generation.Policy:        {Git: &generation.GitPin{Repo: "https://git.example/config.git", Commit: testPolicyCommit}},
	}, &generation.Compatibility{ControlPlaneProtocol: generation.Range{Min: 1, Max: 1}, RunnerProtocol: generation.Range{Min: 1, Max: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// stopRunner sends SIGSTOP to the runner of sandbox id, and SIGCONT when
// the test ends (the sandbox is normally gone by then).
func stopRunner(t *testing.T, be *local.Backend, id string) {
	t.Helper()
	pids, err := be.Pids(id)
	if err != nil || pids.Runner == 0 {
		t.Fatalf("Pids(%s) = %+v, %v", id, pids, err)
	}
	// The stop is asynchronous: Stop returns once the runner is stopped, so
	// a claim's ping right after cannot be answered on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t.Cleanup(func() { _ = syscall.Kill(pids.Runner, syscall.SIGCONT) })
	if err := isolate.Stop(ctx, pids.Runner); err != nil {
		t.Fatal(err)
	}
}

func execOut(t *testing.T, rt *runtime.Runtime, g *runtimeapi.Grant, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb strings.Builder
	st, err := rt.Exec(ctx, g.RunID, g.Token, runner.ExecRequest{Argv: []string{"sh", "-c", script}}, &out, &errb)
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("exec %q on attempt %d: %+v %v (stderr %q)", script, g.AllocationAttempt, st, err, errb.String())
	}
	return out.String()
}

func sha256Fingerprint(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Fencing is real: a claim whose runner stops answering (SIGSTOP) moves
// to a new sandbox by itself; the old attempt's token and its command
// still running are refused, the old sandbox is killed, the credential is
// reissued to the new sandbox and the old one revoked. A warm member that
// does not answer within the pool's readyTimeout is replaced before the
// claim is granted. The claim's credential is readable in the sandbox,
// matches its receipt, and is revoked on release; no token is stored.
func TestFencingIsReal(t *testing.T) {
	w := newWarmWorld(t)
	g := secretGeneration(t, w)

	t.Run("missed heartbeats move the claim", func(t *testing.T) {
		ctx := context.Background()
		f := newFenceRig(t, w, g, 1, runtime.WithHeartbeat(250*time.Millisecond, 3))
		if rep := f.warm.Reconcile(ctx, f.d); len(rep.Created) != 1 {
			t.Fatalf("reconcile: %+v", rep)
		}
		gr, err := f.rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		if !gr.Warm || gr.AllocationAttempt != 1 {
			t.Fatalf("grant %+v", gr)
		}
		tok1 := execOut(t, f.rt, gr, "cat "+sandbox.CredentialDir+"/"+runtime.CredentialFile)

		// A long command on attempt 1, running when the runner stops.
		started := make(chan struct{})
		type result struct {
			st  *runner.ExitStatus
			err error
		}
		long := make(chan result, 1)
		go func() {
			st, err := f.rt.Exec(ctx, gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"sh", "-c", "echo started; sleep 60; echo finished"}},
				&signalWriter{once: started}, &strings.Builder{})
			long <- result{st, err}
		}()
		select {
		case <-started:
		case r := <-long:
			t.Fatalf("the long command ended early: %+v %v", r.st, r.err)
		case <-time.After(time.Minute):
			t.Fatal("the long command did not start")
		}
		stopped := time.Now()
		stopRunner(t, f.be, gr.SandboxID)

		var moved *runtimeapi.Grant
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
			if moved, err = f.rt.Grant(gr.RunID); err == nil && moved.AllocationAttempt == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no move a minute after SIGSTOP: %+v %v; log %q", moved, err, f.log.String())
			}
		}
		t.Logf("moved %s after SIGSTOP", time.Since(stopped).Round(time.Millisecond))
		if moved.SandboxID == gr.SandboxID || moved.SandboxID == "" || moved.Token == gr.Token || moved.Warm {
			t.Fatalf("moved grant %+v (was %+v)", moved, gr)
		}
		select {
		case r := <-long:
			if !errors.Is(r.err, runtime.ErrFenced) {
				t.Errorf("the long command of attempt 1: %+v %v, want ErrFenced", r.st, r.err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the long command of attempt 1 still runs after the move")
		}
		// The old sandbox is gone, processes and all.
		all, _ := f.be.List(ctx, sandbox.Filter{})
		for _, s := range all {
			if s.ID == gr.SandboxID {
				t.Errorf("the old sandbox is still listed: %+v", *s)
			}
		}
		if _, err := f.be.Pids(gr.SandboxID); err == nil {
			t.Error("the old sandbox's processes still run")
		}
		// The old token is refused; the new one works.
		if _, err := f.rt.Exec(ctx, gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"true"}}, &strings.Builder{}, &strings.Builder{}); !errors.Is(err, runtime.ErrFenced) {
			t.Errorf("exec with the old token: %v, want ErrFenced", err)
		}
		if err := f.rt.Release(ctx, gr.RunID, gr.Token, nil); !errors.Is(err, runtime.ErrFenced) {
			t.Errorf("release with the old token: %v, want ErrFenced", err)
		}
		tok2 := execOut(t, f.rt, moved, "cat "+sandbox.CredentialDir+"/"+runtime.CredentialFile)
		if tok2 == tok1 || f.broker.Valid(tok1) || !f.broker.Valid(tok2) {
			t.Errorf("credentials after the move: new differs %v, old valid %v, new valid %v", tok2 != tok1, f.broker.Valid(tok1), f.broker.Valid(tok2))
		}
		m, err := f.store.Get(ctx, gr.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if m.AllocationAttempt != 2 || m.SandboxID != moved.SandboxID || m.Warm || m.Lifecycle.Ready.IsZero() ||
			!m.Lifecycle.SandboxAssigned.After(m.Lifecycle.ClaimCreated) || len(m.CredentialIssuances) != 2 ||
			m.CredentialIssuances[0].SHA256Fingerprint != sha256Fingerprint(tok1) || m.CredentialIssuances[1].SHA256Fingerprint != sha256Fingerprint(tok2) {
			t.Fatalf("manifest after the move: %+v", m)
		}
		if len(m.Fences) != 1 || m.Fences[0].AllocationAttempt != 1 || m.Fences[0].SandboxID != gr.SandboxID || m.Fences[0].Reason != "missed 3 heartbeats" ||
			m.Fences[0].FencedAt.After(m.Lifecycle.SandboxAssigned) || m.CredentialIssuances[0].RevokedAt == nil {
			t.Fatalf("the fenced attempt's record: %+v, receipts %+v", m.Fences, m.CredentialIssuances)
		}
		if !strings.Contains(f.log.String(), "moved from sandbox "+gr.SandboxID+" to "+moved.SandboxID+" (allocation attempt 2): missed 3 heartbeats") {
			t.Errorf("log: %q", f.log.String())
		}
		zero := 0
		if err := f.rt.Release(ctx, gr.RunID, moved.Token, &zero); err != nil {
			t.Fatal(err)
		}
		if f.broker.Valid(tok2) {
			t.Error("the token is valid after release")
		}
		if left, _ := f.be.List(ctx, sandbox.Filter{Owner: gr.RunID}); len(left) != 0 {
			t.Errorf("sandboxes of the claim after release: %d", len(left))
		}
		assertNoToken(t, f, gr.RunID, tok1, tok2)
	})

	t.Run("a warm member not ready in time is replaced", func(t *testing.T) {
		ctx := context.Background()
		// Every claim pings here (no ready freshness): a member its runner
		// answered for a moment ago is otherwise taken as ready, and the
		// heartbeat monitor finds it stuck after the grant (the subtest
		// above).
		f := newFenceRig(t, w, g, 1, runtime.WithReadyFreshness(-1))
		f.d.Pools["agents"].Pool.Spec.ReadyTimeout = pool.Duration{Duration: time.Second}
		if rep := f.warm.Reconcile(ctx, f.d); len(rep.Created) != 1 {
			t.Fatalf("reconcile: %+v", rep)
		}
		stuck := rep1(t, f)
		stopRunner(t, f.be, stuck)
		gr, err := f.rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Deadline: time.Now().Add(2 * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if gr.AllocationAttempt != 2 || gr.Warm || gr.SandboxID == stuck {
			t.Fatalf("grant %+v, the stuck member was %s", gr, stuck)
		}
		if _, err := f.be.Pids(stuck); err == nil {
			t.Error("the stuck member still runs")
		}
		tok := execOut(t, f.rt, gr, "cat "+sandbox.CredentialDir+"/"+runtime.CredentialFile)
		m, err := f.store.Get(ctx, gr.RunID)
		if err != nil {
			t.Fatal(err)
		}
		// The stuck member had its credential too (issued beside the ready
		// check), revoked with the move.
		if m.AllocationAttempt != 2 || m.Warm || m.SandboxID != gr.SandboxID || len(m.CredentialIssuances) != 2 || m.CredentialIssuances[1].SHA256Fingerprint != sha256Fingerprint(tok) {
			t.Fatalf("manifest %+v", m)
		}
		if !strings.Contains(f.log.String(), "moved from sandbox "+stuck+" to "+gr.SandboxID+" (allocation attempt 2): sandbox "+stuck+" did not answer within the ready timeout 1s") {
			t.Errorf("log: %q", f.log.String())
		}
		if err := f.rt.Release(ctx, gr.RunID, gr.Token, nil); err != nil {
			t.Fatal(err)
		}

		// A deadline too short for any sandbox to answer: no grant.
		if rep := f.warm.Reconcile(ctx, f.d); len(rep.Created) != 1 {
			t.Fatalf("reconcile: %+v", rep)
		}
		stuck = rep1(t, f)
		stopRunner(t, f.be, stuck)
		if gr, err := f.rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Deadline: time.Now().Add(200 * time.Millisecond)}); err == nil {
			t.Fatalf("a claim with a 200ms deadline on a stuck member was granted: %+v", gr)
		}
		if _, err := f.be.Pids(stuck); err == nil {
			t.Error("the stuck member of the refused claim still runs")
		}

		// The same with a request key, the claimant going away while the
		// member does not answer (a control plane stopped mid-claim): the
		// claim was never granted (its token never left the runtime: no
		// command could run), so the key is not used up; asked again it is
		// granted, not refused as a key whose claim ended (before, 409
		// request_key_used, and the control plane's job ended unknown,
		// claim_released).
		f.d.Pools["agents"].Pool.Spec.ReadyTimeout = pool.Duration{Duration: time.Minute}
		if rep := f.warm.Reconcile(ctx, f.d); len(rep.Created) != 1 {
			t.Fatalf("reconcile: %+v", rep)
		}
		stuck = rep1(t, f)
		stopRunner(t, f.be, stuck)
		runsOf := func() []string {
			ids, err := f.store.Query(ctx, runmanifest.Query{Generation: g.ID})
			if err != nil {
				t.Fatal(err)
			}
			return ids
		}
		before := len(runsOf())
		const key = "job-7.a1"
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		gr, err = f.rt.Claim(cctx, runtime.ClaimRequest{Pool: "agents", RequestKey: key})
		cancel()
		if err == nil {
			t.Fatalf("a keyed claim whose claimant went away while its member was stuck was granted: %+v", gr)
		}
		if n := len(runsOf()); n != before+1 { // recorded, then abandoned
			t.Fatalf("runs of the generation: %d before the keyed claim, %d after; want its run recorded (%v)", before, n, err)
		}
		gr, err = f.rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", RequestKey: key, Deadline: time.Now().Add(2 * time.Minute)})
		if err != nil {
			t.Fatalf("the key of a claim never granted, asked again: %v", err)
		}
		if gr.Adopted || gr.RequestKey != key {
			t.Errorf("grant %+v", gr)
		}
		if ids, err := f.store.Query(ctx, runmanifest.Query{RequestKey: key}); err != nil || len(ids) != 1 || ids[0] != gr.RunID {
			t.Errorf("runs of key %s: %v, %v; want only the granted %s", key, ids, err, gr.RunID)
		}
		if err := f.rt.Release(ctx, gr.RunID, gr.Token, nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("credential broker", func(t *testing.T) {
		ctx := context.Background()
		f := newFenceRig(t, w, g, 1)
		f.d.PolicyRevision = "rev-verified"
		f.warm.Reconcile(ctx, f.d)
		gr, err := f.rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents"})
		if err != nil {
			t.Fatal(err)
		}
		path := sandbox.CredentialDir + "/" + runtime.CredentialFile
		out := execOut(t, f.rt, gr, "cat "+path+"; echo; stat -c %a "+path+"; grep ' "+sandbox.CredentialDir+" ' /proc/mounts | cut -d' ' -f3")
		tok, rest, _ := strings.Cut(out, "\n")
		if rest != "400\ntmpfs\n" || !strings.HasPrefix(tok, "swt_") {
			t.Fatalf("in the sandbox: %q", out)
		}
		m, err := f.store.Get(ctx, gr.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.CredentialIssuances) != 1 {
			t.Fatalf("receipts %+v", m.CredentialIssuances)
		}
		// the secret version keeps its version; a pinned policy is the
		// policy revision, the verified one is recorded beside it
		if m.SecretVersion != testSecretVersion || m.PolicyRevision != testPolicyCommit || m.VerificationPolicyRevision != "rev-verified" {
			t.Fatalf("manifest: secret_version %q, policy_revision %q, verification_policy_revision %q",
				m.SecretVersion, m.PolicyRevision, m.VerificationPolicyRevision)
		}
		if ids, err := f.store.Query(ctx, runmanifest.Query{SecretVersion: testSecretVersion}); err != nil || len(ids) != 1 || ids[0] != gr.RunID {
			t.Fatalf("runs of secret version %s: %v, %v", testSecretVersion, ids, err)
		}
		rc := m.CredentialIssuances[0]
		if rc.SHA256Fingerprint != sha256Fingerprint(tok) || rc.Issuer != runtime.LocalIssuer || rc.SecretVersion != testSecretVersion ||
			!rc.ExpiresAt.After(rc.IssuedAt) || rc.IssuedAt.IsZero() {
			t.Fatalf("receipt %+v", rc)
		}
		if !f.broker.Valid(tok) || f.broker.Valid(tok+"x") {
			t.Fatal("the broker does not know its token (or knows another)")
		}
		if err := f.rt.Release(ctx, gr.RunID, gr.Token, nil); err != nil {
			t.Fatal(err)
		}
		if f.broker.Valid(tok) {
			t.Error("the token is valid after release")
		}
		assertNoToken(t, f, gr.RunID, tok)

		// A generation without a secret version: no credential, no receipt.
		plain := w.generation(t, nil)
		f.d = w.desired(t, "rev-2", 0, plain)
		gr, err = f.rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents"})
		if err != nil {
			t.Fatal(err)
		}
		if out := execOut(t, f.rt, gr, "ls -A "+sandbox.CredentialDir); out != "" {
			t.Errorf("credentials of a claim without a secret version: %q", out)
		}
		if m, _ := f.store.Get(ctx, gr.RunID); len(m.CredentialIssuances) != 0 {
			t.Errorf("receipts without a secret version: %+v", m.CredentialIssuances)
		}
		if err := f.rt.Release(ctx, gr.RunID, gr.Token, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// rep1 is the id of the rig's one warm member.
func rep1(t *testing.T, f *fenceRig) string {
	t.Helper()
	members, err := f.be.List(context.Background(), sandbox.Filter{Owner: sandbox.OwnerWarm})
	if err != nil || len(members) != 1 {
		t.Fatalf("warm members: %d, %v", len(members), err)
	}
	return members[0].ID
}

// assertNoToken fails when a token is in a manifest's JSON, the runtime's
// log, or any file of the run store or the backend's state.
func assertNoToken(t *testing.T, f *fenceRig, runID string, tokens ...string) {
	t.Helper()
	var blobs []string
	for _, id := range []string{runID} {
		m, err := f.store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(m)
		blobs = append(blobs, string(b))
	}
	blobs = append(blobs, f.log.String())
	for _, dir := range []string{f.storeDir, f.beDir} {
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if b, err := os.ReadFile(p); err == nil {
					blobs = append(blobs, p+"\x00"+string(b))
				}
			}
			return nil
		})
	}
	for _, tok := range tokens {
		for _, b := range blobs {
			if strings.Contains(b, strings.TrimSpace(tok)) {
				name, _, _ := strings.Cut(b, "\x00")
				t.Errorf("a token is stored: %.80s", name)
			}
		}
	}
}

// signalWriter closes once on its first write.
type signalWriter struct {
	once chan struct{}
	done sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.done.Do(func() { close(w.once) })
	return len(p), nil
}

// syncBuffer is a log safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
