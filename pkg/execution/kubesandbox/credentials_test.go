//go:build linux

package kubesandbox_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// lockedBuffer is a log the runtime's goroutines write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A claim on a generation that pins a secretVersion, on the Kubernetes
// backend: the runtime's broker issues a token, which reaches the pod
// through a pod exec's stdin as /run/slipway/credentials/token (a tmpfs,
// mode 0400, the sandbox user's, readable by the claim's commands); the
// pinned version's projected Secret is at /run/slipway/secret; the run
// manifest holds the receipt and never the token, which is in no log line
// of the runtime; release revokes it; the backend refuses a name with a
// slash and says a gone pod is not running.
func TestRuntimeCredentialsOnKube(t *testing.T) {
	n := startNode(t, "cred")
	ctx := context.Background()
	const version = "vault://kv/agents/token#7"
	g1 := n.generationPinning(t, nil, "", generation.Pins{generation.SecretVersion: {ID: version}})
	// What syncs secrets into the cluster would make it; the pod does not
	// start without it.
	dyn, err := n.c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": kubeobjects.SecretName(version), "namespace": n.ns},
		"data":     map[string]any{"value": base64.StdEncoding.EncodeToString([]byte("from-the-secret-store"))},
	}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace(n.ns).
		Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := n.desire(t, 1)

	be, err := kubesandbox.New(n.c.Config(), n.ns, kubesandbox.WithClusterName("node-test"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := runs.OpenSQLite(ctx, filepath.Join(t.TempDir(), runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	broker, err := runtime.NewBroker(runtime.LocalIssuer, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var log lockedBuffer
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()), runtime.WithWarmLog(&log))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute,
		runtime.WithBroker(broker), runtime.WithLog(&log))
	defer rt.Close()

	gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: n.pool, Tenant: "t1"})
	if err != nil {
		t.Fatalf("claim on a generation pinning %s: %v", version, err)
	}
	if gr.Generation != g1.ID {
		t.Fatalf("grant %+v, want %s", gr, g1.ID)
	}
	var out bytes.Buffer
	st, err := rt.Exec(ctx, gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"sh", "-c",
		`f=/run/slipway/credentials/token; stat -c '%a %u' $f; id -u; grep ' /run/slipway/credentials ' /proc/mounts | cut -d' ' -f3; cat /run/slipway/secret/value; echo; cat $f`}}, &out, nil)
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("exec: %+v %v %q", st, err, out.String())
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) != 5 {
		t.Fatalf("exec printed %d lines, want 5", len(lines))
	}
	mode, uid, fstype, stored, token := lines[0], lines[1], lines[2], lines[3], lines[4]
	if mode != "400 "+uid {
		t.Errorf("the token file is %q (mode, owner), want 400 of the sandbox user %s", mode, uid)
	}
	if fstype != "tmpfs" {
		t.Errorf("%s is on %q, want tmpfs", sandbox.CredentialDir, fstype)
	}
	if stored != "from-the-secret-store" {
		t.Errorf("the projected Secret at %s holds %q", kubeobjects.SecretDir, stored)
	}
	if !strings.HasPrefix(token, "swt_") || !broker.Valid(token) {
		t.Fatalf("the file holds no valid token (%d bytes)", len(token))
	}
	m, err := store.Get(ctx, gr.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.CredentialIssuances) != 1 {
		t.Fatalf("receipts: %+v", m.CredentialIssuances)
	}
	if rc := m.CredentialIssuances[0]; rc.SHA256Fingerprint != runtime.Fingerprint([]byte(token)) ||
		rc.Issuer != runtime.LocalIssuer || rc.SecretVersion != version {
		t.Errorf("receipt %+v", rc)
	}

	// The backend on its own: a second credential is put and removed; a
	// name with a slash is refused before any exec.
	if err := be.PutCredential(ctx, gr.SandboxID, "other", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := be.RemoveCredential(ctx, gr.SandboxID, "other"); err != nil {
		t.Fatal(err)
	}
	if err := be.PutCredential(ctx, gr.SandboxID, "../token", []byte("x")); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Errorf("a name with a slash: %v", err)
	}
	out.Reset()
	_, err = rt.Exec(ctx, gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"ls", "-a", sandbox.CredentialDir}}, &out, nil)
	if f := strings.Fields(out.String()); err != nil || len(f) != 3 || f[2] != "token" {
		t.Errorf("%s holds %q, want token only: %v", sandbox.CredentialDir, out.String(), err)
	}

	code := 0
	if err := rt.Release(ctx, gr.RunID, gr.Token, &code); err != nil {
		t.Fatal(err)
	}
	if broker.Valid(token) {
		t.Error("the token is valid after release")
	}
	gone(t, n, podsGVR, gr.SandboxID)
	if err := be.PutCredential(ctx, gr.SandboxID, "token", []byte("x")); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Errorf("put in a gone pod: %v", err)
	}
	if err := be.RemoveCredential(ctx, gr.SandboxID, "token"); err != nil {
		t.Errorf("rm in a gone pod: %v", err)
	}
	if strings.Contains(log.String(), token) || strings.Contains(n.c.Log("kubelet"), token) {
		t.Error("the token is in the runtime's or the kubelet's log")
	}
}
