package canary

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// stepTimeout bounds each command a step runs in the sandbox.
const stepTimeout = 30 * time.Second

// claimRun is the claim of one round and what its steps learnt.
type claimRun struct {
	c     *Canary
	r     *Round
	body  runtimeapi.ClaimBody // the claim request, with its request key
	grant *runtimeapi.Grant
	// unknown: the claim request got no answer (the round was cut short,
	// the connection dropped), so a claim may have been made.
	unknown bool
	runner  string // the runner's path in the sandbox
	pinned  string // the runner binary's sha256 the manifest records
}

func (cl *claimRun) do(ctx context.Context, step string) (string, error) {
	switch step {
	case StepClaim:
		return cl.claim(ctx)
	case StepIdentity:
		return cl.identity(ctx)
	case StepApproved:
		return cl.approved(ctx)
	case StepDenied:
		return cl.denied(ctx)
	case StepWorkspace:
		return cl.workspace(ctx)
	case StepOutput:
		return cl.output(ctx)
	case StepCheckpoint:
		return cl.checkpoint(ctx)
	}
	return "", fmt.Errorf("canary: no step %q", step)
}

// claim: the pool grants a sandbox of its active generation.
func (cl *claimRun) claim(ctx context.Context) (string, error) {
	n := nonce()
	cl.body = runtimeapi.ClaimBody{Tenant: Tenant, SessionID: "canary-" + n, RequestKey: "canary-" + n}
	if dl, ok := ctx.Deadline(); ok {
		cl.body.DeadlineSeconds = max(time.Until(dl).Seconds(), 1)
	}
	g, err := cl.c.client.Claim(ctx, cl.c.pool, cl.body)
	if err != nil {
		var ae *runtimeapi.APIError
		cl.unknown = !errors.As(err, &ae) && !errors.Is(err, syscall.ECONNREFUSED)
		return "", fmt.Errorf("pool %s granted no sandbox: %w", cl.c.pool, err)
	}
	cl.grant = g
	cl.r.RunID, cl.r.SandboxID, cl.r.Generation, cl.r.Warm = g.RunID, g.SandboxID, g.Generation, g.Warm
	if g.RunID == "" || g.SandboxID == "" || g.Token == "" || g.Generation == "" {
		return "", fmt.Errorf("the grant lacks a run, sandbox, generation or token: run %q sandbox %q generation %q", g.RunID, g.SandboxID, g.Generation)
	}
	start := "cold start"
	if g.Warm {
		start = "warm member"
	}
	return fmt.Sprintf("run %s: sandbox %s (%s) of %s, attempt %d", g.RunID, g.SandboxID, start, g.Generation, g.AllocationAttempt), nil
}

// identity: the runner of the claim's sandbox, asked now, says it runs
// the binary the run manifest records as pinned, for the generation and
// sandbox the grant names; the binary at the runner's path in the sandbox
// hashes to the same.
func (cl *claimRun) identity(ctx context.Context) (string, error) {
	g := cl.grant
	id, err := cl.c.client.Identity(ctx, g.RunID, g.Token)
	if err != nil {
		return "", fmt.Errorf("the runtime did not relay the runner's identity: %w", err)
	}
	m, err := cl.c.client.Run(ctx, g.RunID)
	if err != nil {
		return "", fmt.Errorf("the run manifest of %s: %w", g.RunID, err)
	}
	var why []string
	check := func(what, got, want string) {
		if got != want {
			why = append(why, fmt.Sprintf("%s is %q, want %q", what, got, want))
		}
	}
	check("the runner's sandbox", id.Runner.SandboxID, g.SandboxID)
	check("the runner's generation", id.Runner.Generation, g.Generation)
	check("the runtime's sandbox of the claim", id.SandboxID, g.SandboxID)
	check("the manifest's sandbox", m.SandboxID, g.SandboxID)
	check("the manifest's generation", m.Generation, g.Generation)
	check("the manifest's pool", m.Pool, cl.c.pool)
	if m.AllocationAttempt != g.AllocationAttempt || id.AllocationAttempt != g.AllocationAttempt {
		why = append(why, fmt.Sprintf("allocation attempt %d (manifest) and %d (runtime), the grant's is %d", m.AllocationAttempt, id.AllocationAttempt, g.AllocationAttempt))
	}
	if !strings.HasPrefix(m.RunnerBinarySHA256, "sha256:") {
		why = append(why, fmt.Sprintf("the manifest records no pinned runner binary (%q)", m.RunnerBinarySHA256))
	} else {
		check("the runner's binary", id.Runner.RunnerBinarySHA256, m.RunnerBinarySHA256)
	}
	if len(why) > 0 {
		return "", fmt.Errorf("the runner is not the one the runtime granted: %s", strings.Join(why, "; "))
	}
	if id.RunnerPath == "" {
		return "", errors.New("the runtime did not say where the runner lives in the sandbox")
	}
	cl.runner, cl.pinned = id.RunnerPath, m.RunnerBinarySHA256
	// The file the probes run is that binary too.
	res, err := cl.exec(ctx, cl.runner, "version")
	if err != nil {
		return "", fmt.Errorf("%s version did not run: %w", cl.runner, err)
	}
	var v struct {
		RunnerBinarySHA256 string `json:"runnerBinarySha256"`
	}
	if res.ExitCode != 0 || json.Unmarshal([]byte(res.Stdout), &v) != nil {
		return "", fmt.Errorf("%s version: exit %d: %s", cl.runner, res.ExitCode, clip(res.Stdout+res.Stderr))
	}
	if v.RunnerBinarySHA256 != m.RunnerBinarySHA256 {
		return "", fmt.Errorf("the binary at %s in the sandbox is %s, the manifest's pinned runner is %s", cl.runner, v.RunnerBinarySHA256, m.RunnerBinarySHA256)
	}
	return fmt.Sprintf("runner %s for %s in %s (runner image %s), protocol %d..%d", id.Runner.RunnerBinarySHA256, id.Runner.Generation,
		id.Runner.SandboxID, m.RunnerImageDigest, id.Runner.MinProtocolVersion, id.Runner.ProtocolVersion), nil
}

// Probe exits: 0 yes, 3 no (slipway-runner probe).
const probeRefused = 3

// approved: the sandbox reaches the approved destination through its
// egress proxy, or, where the sandbox has no proxy (a cluster's sandboxes
// go out by its network policy), directly.
func (cl *claimRun) approved(ctx context.Context) (string, error) {
	dest := cl.c.o.approved
	var refused []string
	for _, probe := range [][]string{{"probe", "connect", sandbox.EgressProxyAddr, dest}, {"probe", "dial", dest}} {
		how := "through the egress proxy"
		if probe[1] == "dial" {
			how = "directly"
		}
		res, err := cl.exec(ctx, append([]string{cl.runner}, probe...)...)
		switch {
		case err != nil:
			return "", fmt.Errorf("the probe of %s %s did not run: %w", dest, how, err)
		case res.ExitCode == 0:
			return fmt.Sprintf("reached %s %s", dest, how), nil
		case res.ExitCode != probeRefused:
			return "", fmt.Errorf("the probe of %s %s failed (exit %d): %s", dest, how, res.ExitCode, clip(res.Stdout+res.Stderr))
		}
		refused = append(refused, how+": "+clip(res.Stdout))
	}
	return "", fmt.Errorf("the approved destination %s was not reached (%s)", dest, strings.Join(refused, "; "))
}

// denied: the sandbox reaches the denied destination neither by itself
// nor through its egress proxy, and the run manifest records no attempt
// to it as allowed.
func (cl *claimRun) denied(ctx context.Context) (string, error) {
	dest := cl.c.o.denied
	var refused []string
	for _, probe := range [][]string{{"probe", "dial", dest}, {"probe", "connect", sandbox.EgressProxyAddr, dest}} {
		how := "directly"
		if probe[1] == "connect" {
			how = "through the egress proxy"
		}
		res, err := cl.exec(ctx, append([]string{cl.runner}, probe...)...)
		switch {
		case err != nil:
			return "", fmt.Errorf("the probe of %s %s did not run: %w", dest, how, err)
		case res.ExitCode == 0:
			return "", fmt.Errorf("the denied destination %s was reached %s: %s", dest, how, clip(res.Stdout))
		case res.ExitCode != probeRefused:
			return "", fmt.Errorf("the probe of %s %s failed (exit %d): %s", dest, how, res.ExitCode, clip(res.Stdout+res.Stderr))
		}
		refused = append(refused, how)
	}
	m, err := cl.c.client.Run(ctx, cl.grant.RunID)
	if err != nil {
		return "", fmt.Errorf("the run manifest of %s: %w", cl.grant.RunID, err)
	}
	recorded := ""
	for _, a := range m.Egress {
		if a.Destination != dest {
			continue
		}
		if a.Allowed {
			return "", fmt.Errorf("the run manifest records %s as allowed (rule %s)", dest, a.Rule)
		}
		recorded = "; the egress proxy recorded the denial: " + a.Reason
	}
	return fmt.Sprintf("%s refused %s%s", dest, strings.Join(refused, " and "), recorded), nil
}

// workspace: a file written in the workspace by one command is read back
// by another, then removed.
func (cl *claimRun) workspace(ctx context.Context) (string, error) {
	n := nonce()
	name := ".slipway-canary-" + n
	want := "slipway canary " + n + "\n"
	res, err := cl.exec(ctx, "sh", "-c", `printf '%s' "$1" > "$2"`, "sh", want, name)
	if err != nil || res.ExitCode != 0 {
		return "", fmt.Errorf("writing %s in the workspace: %s", name, failure(res, err))
	}
	res, err = cl.exec(ctx, "cat", name)
	if err != nil || res.ExitCode != 0 {
		return "", fmt.Errorf("reading %s back: %s", name, failure(res, err))
	}
	if res.Stdout != want {
		return "", fmt.Errorf("%s read back %q, %q was written", name, clip(res.Stdout), want)
	}
	if res, err = cl.exec(ctx, "rm", "-f", name); err != nil || res.ExitCode != 0 {
		return "", fmt.Errorf("removing %s: %s", name, failure(res, err))
	}
	return fmt.Sprintf("wrote, read back and removed %s (%d bytes)", name, len(want)), nil
}

// output: a command's numbered lines arrive through the streamed exec,
// all of them, in order, and then its exit.
func (cl *claimRun) output(ctx context.Context) (string, error) {
	n := cl.c.o.lines
	script := `i=1; while [ "$i" -le "$1" ]; do echo "canary line $i"; i=$((i+1)); done`
	var stdout, stderr bytes.Buffer
	chunks := 0
	res, err := cl.c.client.ExecStream(ctx, cl.grant.RunID, runtimeapi.ExecBody{Token: cl.grant.Token, Argv: []string{"sh", "-c", script, "sh", strconv.Itoa(n)},
		TimeoutSeconds: stepTimeout.Seconds()}, func(stream string, p []byte) {
		chunks++
		if stream == "stdout" {
			stdout.Write(p)
		} else {
			stderr.Write(p)
		}
	})
	if err != nil {
		return "", fmt.Errorf("the streamed exec: %w", err)
	}
	if res.ExitCode != 0 || res.Truncated || res.TimedOut {
		return "", fmt.Errorf("the streamed command exited %d (truncated %v, timed out %v): %s", res.ExitCode, res.Truncated, res.TimedOut, clip(stderr.String()))
	}
	lines := strings.Split(stdout.String(), "\n")
	if len(lines) == 0 || lines[len(lines)-1] != "" {
		return "", fmt.Errorf("the stream ended within a line: %q", clip(lines[len(lines)-1]))
	}
	lines = lines[:len(lines)-1]
	for i, l := range lines {
		if want := "canary line " + strconv.Itoa(i+1); l != want {
			return "", fmt.Errorf("line %d of %d is %q, want %q", i+1, len(lines), clip(l), want)
		}
	}
	if len(lines) != n {
		return "", fmt.Errorf("%d lines arrived, %d were written", len(lines), n)
	}
	return fmt.Sprintf("%d lines in order (%d bytes in %d chunks)", n, stdout.Len(), chunks), nil
}

// release: the claim ends, its manifest completes with the resources
// released, its sandbox leaves the pool, and its token is refused.
func (cl *claimRun) release(ctx context.Context) (string, error) {
	g := cl.grant
	zero := 0
	if err := cl.c.client.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token, ExitCode: &zero}); err != nil {
		return "", fmt.Errorf("release of %s: %w", g.RunID, err)
	}
	m, err := cl.c.client.Run(ctx, g.RunID)
	if err != nil {
		return "", fmt.Errorf("the run manifest of %s: %w", g.RunID, err)
	}
	if m.Status != runmanifest.StatusCompleted || m.Lifecycle.ResourcesReleased.IsZero() {
		return "", fmt.Errorf("after release the manifest of %s is %s with resources released at %v, want completed and a time", g.RunID, m.Status, m.Lifecycle.ResourcesReleased)
	}
	st, err := cl.c.client.PoolStatus(ctx, cl.c.pool)
	if err != nil {
		return "", fmt.Errorf("pool status: %w", err)
	}
	for _, gs := range st.Generations {
		if slices.ContainsFunc(gs.Sandboxes, func(s runtimeapi.SandboxStatus) bool { return s.ID == g.SandboxID }) || slices.Contains(gs.Runs, g.RunID) {
			return "", fmt.Errorf("sandbox %s of %s is still in pool %s after release", g.SandboxID, g.RunID, cl.c.pool)
		}
	}
	_, err = cl.c.client.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, Argv: []string{"true"}})
	var ae *runtimeapi.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		return "", fmt.Errorf("a command on the released claim %s was not refused as no claim: %v", g.RunID, err)
	}
	return fmt.Sprintf("run %s completed, resources released at %s, sandbox %s gone, its token refused",
		g.RunID, m.Lifecycle.ResourcesReleased.UTC().Format(time.RFC3339Nano), g.SandboxID), nil
}

// releaseUnknown ends the claim a request that got no answer may have
// made: the same request key adopts it (or, when none was made, makes
// one), and it is released.
func (cl *claimRun) releaseUnknown(ctx context.Context) (string, error) {
	key := cl.body.RequestKey
	body := cl.body
	body.DeadlineSeconds = 0
	g, err := cl.c.client.Claim(ctx, cl.c.pool, body)
	var ae *runtimeapi.APIError
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusConflict:
		return fmt.Sprintf("the claim of request key %s has ended: nothing to release", key), nil
	case errors.As(err, &ae):
		return fmt.Sprintf("the runtime made no claim for request key %s: %v", key, err), nil
	case err != nil:
		return "", fmt.Errorf("the claim request got no answer and the runtime cannot be asked again: a claim may be open under request key %s: %w", key, err)
	}
	zero := 0
	if err := cl.c.client.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token, ExitCode: &zero}); err != nil {
		return "", fmt.Errorf("release of %s (request key %s): %w", g.RunID, key, err)
	}
	return fmt.Sprintf("released %s, the claim of request key %s (adopted %v)", g.RunID, key, g.Adopted), nil
}

// exec runs argv in the claim's sandbox, bounded.
func (cl *claimRun) exec(ctx context.Context, argv ...string) (*runtimeapi.ExecResult, error) {
	return cl.c.client.Exec(ctx, cl.grant.RunID, runtimeapi.ExecBody{Token: cl.grant.Token, Argv: argv, TimeoutSeconds: stepTimeout.Seconds(), MaxOutput: 64 << 10})
}

func failure(res *runtimeapi.ExecResult, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("exit %d: %s", res.ExitCode, clip(res.Stdout+res.Stderr))
}

// clip keeps text for a detail line short.
func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

func joinHostPort(h, p string) string { return net.JoinHostPort(h, p) }

func splitHostPort(hp string) (string, string, bool) {
	h, p, err := net.SplitHostPort(hp)
	if err != nil || h == "" {
		return "", "", false
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return "", "", false
	}
	return h, p, true
}
