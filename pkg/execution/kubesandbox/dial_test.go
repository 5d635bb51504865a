//go:build linux

package kubesandbox_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// The runner of a rendered warm member, reached through the API server's
// pod exec, proves the generation and the sandbox (its pod) it runs for
// and the binary of the pinned runner image, runs commands (stdout,
// stderr, exit code), and has a command killed when the caller gives up;
// a pod that does not exist fails the dial as unreachable.
func TestDialRunnerThroughPodExec(t *testing.T) {
	n := startNode(t, "dial")
	g := n.generation(t, nil)
	n.desire(t, 1)
	ctx := context.Background()
	dyn, err := n.c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	pods, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace(n.ns).
		List(ctx, metav1.ListOptions{LabelSelector: kubeobjects.LabelPool + "=dial"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of the warm pool: %v %v", pods, err)
	}
	pod := pods.Items[0].GetName()
	rc := runner.NewClient(kubesandbox.DialRunner(n.c.Config(), n.ns, pod))

	start := time.Now()
	id, err := rc.Identity(ctx)
	if err != nil {
		t.Fatalf("identity: %v; kubelet log:\n%s", err, n.c.Log("kubelet"))
	}
	t.Logf("identity through pod exec in %s", time.Since(start).Round(time.Millisecond))
	rb := runnerDigest(t, n)
	if id.Generation != g.ID || id.SandboxID != pod || id.RunnerBinarySHA256 != rb {
		t.Fatalf("identity %+v, want generation %s, sandbox %s, binary %s", id, g.ID, pod, rb)
	}

	var stdout, stderr bytes.Buffer
	st, err := rc.Exec(ctx, runner.ExecRequest{Argv: []string{"sh", "-c", "pwd; echo oops >&2; exit 3"}}, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if st.ExitCode != 3 || strings.TrimSpace(stdout.String()) != "/workspace" || strings.TrimSpace(stderr.String()) != "oops" {
		t.Fatalf("exec: %+v, stdout %q, stderr %q", st, stdout.String(), stderr.String())
	}
	start = time.Now()
	for range 5 {
		if _, err := rc.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("ping through pod exec: %s each", (time.Since(start) / 5).Round(time.Millisecond))

	// A caller that gives up kills the command: closing the exec's stdin
	// closes the runner's connection.
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = rc.Exec(cctx, runner.ExecRequest{Argv: []string{"sh", "-c", "echo $$ > /tmp/sleeper; exec sleep 600"}}, nil, nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("exec past its context: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		stdout.Reset()
		st, err := rc.Exec(ctx, runner.ExecRequest{Argv: []string{"sh", "-c", "kill -0 $(cat /tmp/sleeper) 2>/dev/null && echo alive || echo gone"}}, &stdout, nil)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(stdout.String()) == "gone" && st.ExitCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command of a cancelled exec still runs after 20s")
		}
		time.Sleep(200 * time.Millisecond)
	}

	if _, err := runner.NewClient(kubesandbox.DialRunner(n.c.Config(), n.ns, "no-such-pod")).Ping(ctx); !errors.Is(err, runner.ErrUnavailable) {
		t.Fatalf("ping of a pod that does not exist: %v, want ErrUnavailable", err)
	}
}

// runnerDigest is the sha256 of the world's runner binary, from its image's
// label.
func runnerDigest(t testing.TB, n *node) string {
	t.Helper()
	img := pulled(t, n.w.Runner)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return "sha256:" + cf.Config.Labels[sandbox.LabelRunnerSHA256]
}
