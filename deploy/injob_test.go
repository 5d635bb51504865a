//go:build linux

package deploy_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/deploy/internal/harness"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// A job through Slipway's planes in the cluster: overlays/single installed
// from a snapshot release (as TestInClusterSingle does), a config
// repository with tenant acme, profile standard, prices and pool agents,
// whose active generation pins the release's control plane and runner and
// a signed template; the pool's objects applied (slipway apply, the
// release's own CLI) in slipway-sandboxes, where agent-sandbox's
// controller keeps its warm members. A job submitted to the control
// plane's Service with acme's token is dispatched to the runtime's
// Service, runs in a warm member's pod (not as root) and succeeds; its run
// manifest, read from the runtime's Service, is the job's, in that pod on
// the node, and names the images that served it by the
// digests the release pushed and the binaries they measured by the sums
// in the release's checksums.txt.
//
// The Services are reached at their cluster IPs, from the host, through
// kube-proxy's rules: the API server's service proxy would do for /readyz,
// but it takes the Authorization header for itself (it authenticates the
// caller, then deletes the header), so a tenant's token never reaches the
// control plane through it.
func TestInClusterJob(t *testing.T) {
	e, control, rt, _ := harness.JobPlanes(t, "single", 1)
	ctx := context.Background()
	job, _, err := control.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard",
		Commands: [][]string{{"sh", "-c", "echo hello from $(hostname) as $(id -u)"}}})
	if err != nil {
		t.Fatalf("POST /v1/jobs to Service slipway-control: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var story []string
	final, err := control.Wait(wctx, job.ID, 300*time.Millisecond, func(j *controlapi.Job) { story = append(story, string(j.State)) })
	if err != nil {
		t.Fatalf("job %s: %v (states %v)\n%s\n%s", job.ID, err, story, harness.PodsState(t, e.C, "slipway-control"), harness.PodsState(t, e.C, "slipway-runtime"))
	}
	if final.State != controlapi.Succeeded || final.RunID == "" || !strings.Contains(final.Output, "hello from ") {
		t.Fatalf("job %s ended %s (%s: %s), run %q, output %q (states %v)\n%s\n%s", job.ID, final.State, final.Reason, final.Detail,
			final.RunID, final.Output, story, harness.PodsState(t, e.C, "slipway-control"), harness.PodsState(t, e.C, "slipway-runtime"))
	}
	e.Mark("job " + job.ID + " succeeded")
	// The pod it ran in is one of the pool's, in slipway-sandboxes.
	said := helloFrom.FindStringSubmatch(final.Output)
	if said == nil {
		t.Fatalf("job %s's output says no pod: %q", job.ID, final.Output)
	}
	pod := said[1]
	if said[2] == "0" {
		t.Errorf("the job ran as root in pod %s", pod)
	}

	m, err := rt.Run(ctx, final.RunID)
	if err != nil {
		t.Fatalf("GET /v1/runs/%s from Service slipway-runtime: %v", final.RunID, err)
	}
	// The run is the job's, in the pod it said, a sandbox of the pool's
	// namespace on the node.
	if m.SessionID != job.ID || m.Namespace != "slipway-sandboxes" || m.NodeID != e.Node || !strings.Contains(m.SandboxID, pod) {
		t.Errorf("run %s: session %q, namespace %q, node %q, sandbox %q; want job %s's, in slipway-sandboxes on %s, in pod %s",
			m.RunID, m.SessionID, m.Namespace, m.NodeID, m.SandboxID, job.ID, e.Node, pod)
	}
	harness.CheckServedBy(t, e, m)
	t.Logf("run %s in pod %s, served by control plane %s, runtime %s, runner %s; %s", m.RunID, pod,
		m.ServedBy.ControlPlane.Image, m.ServedBy.Runtime.Image, m.RunnerImageDigest, strings.Join(e.Timings, ", "))
}

// JobPlanes is the config repository (seedJobConfig), the planes of
// overlay installed with replicas each, pool agents applied and warm, and
// clients of the control plane's Service (as tenant acme) and of the
// runtime's; it returns them and the active generation.

// helloFrom is the job's line: the pod's name and the user it ran as.
var helloFrom = regexp.MustCompile(`hello from (\S+) as (\d+)`)
