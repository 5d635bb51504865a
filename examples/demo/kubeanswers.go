package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/cluster/kubefleet"
	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
)

// traceMust is what `job trace` must show of a job that ran one command:
// the control plane's claim with the runtime's spans under it (sandbox
// ready, runner awake), the runtime's command with the runner's exec
// under it, and the runtime's release.
var traceMust = []string{"  claim", "    runtime claim", "      sandbox ready", "      runner awake", "    runtime command", "      runner exec", "    runtime release"}

// kubeAnswers answers three of the operator's questions on the Kubernetes
// backend, as the local demo does, through the in-cluster planes: a job
// through the control plane's Service, dispatched to the runtime's, and
// its trace (the control plane's, the runtime's and the runner's spans), a
// leaked SandboxClaim cleaned by the runtime's reconciler and `cleanup
// list`, and `cost` from the ledger the runtime keeps from the cluster's
// timestamps; both read from the planes' PostgreSQL (--db), where the
// in-cluster runtime keeps them. Each answer missing or empty fails the
// demo.
func kubeAnswers(ctx context.Context, sh shell, work, here string, dyn dynamic.Interface, pl *planes, g2 string) error {
	section("tenants", "tenants/, profiles/ and pricing.yaml reviewed into config.git like code (git push); the control plane reads it over HTTP")
	if err := commitConfig(work, filepath.Join(here, "control"), "tenants acme and globex, profiles, prices", nil); err != nil {
		return err
	}
	section("tenant token create", "acme's API token, in the control plane's database (the host's PostgreSQL): printed once (kept in acme.token here), stored as a hash")
	tok, err := sh.capture("tenant", "token", "create", "acme", "--db", pl.dsn())
	if err != nil {
		return fmt.Errorf("tenant token create acme: %w", err)
	}
	if err := os.WriteFile(filepath.Join(work, "acme.token"), tok, 0o600); err != nil {
		return err
	}
	server := pl.control
	fmt.Printf("  the control plane: Service slipway-control at %s (it alone holds the runtime's token, from Secret slipway-runtime-token)\n", server)
	as := func(args ...string) []string {
		return append(append([]string{}, args[0], args[1]), append([]string{"--control", server, "--token-file", "acme.token"}, args[2:]...)...)
	}

	section("job submit --wait", "acme's job: admitted, a claim on a warm pod of g2 through the runtime's Service, its command in the pod, released")
	job, err := submitAcme(sh, as("job", "submit", "--pool", "agents", "--profile", "standard", "--wait", "-o", "json", "--",
		"sh", "-c", "echo hello from acme in pod $(hostname) on $SLIPWAY_GENERATION; echo TRACEPARENT=$TRACEPARENT"))
	if err != nil {
		return err
	}
	fmt.Printf("  job %s: %s, run %s\n", job.ID, job.State, job.RunID)
	section("job show", "the job's story: its run on the cluster, its events")
	if err := sh.run(0, as("job", "show", job.ID)...); err != nil {
		return err
	}
	section("question 2", "where did the job's time go, span by span (the control plane's, the runtime's, the runner's in the pod)?")
	if err := sh.answer(as("job", "trace", job.ID), 40, traceMust); err != nil {
		return err
	}

	if err := leakAndClean(ctx, sh, dyn, pl.dsn(), g2); err != nil {
		return err
	}

	section("question 9", "what cleanup remains? (the in-cluster runtime's reconciler records in PostgreSQL; the cluster is the authority)")
	if err := sh.answer([]string{"cleanup", "list", "--db", pl.dsn()}, 12, []string{"REMAINING:", "SandboxClaim/" + kubesandbox.ClaimName(leakRun)}); err != nil {
		return err
	}

	section("cost", "time by state on the cluster (warm idle, active, proof), from its own timestamps, at config.git's prices")
	if err := awaitCost(sh, pl.dsn()); err != nil {
		return err
	}
	return sh.answer([]string{"cost", "--db", pl.dsn(), "--pool", "agents", "--since", "1h", "--repo", "config.git"}, 0,
		[]string{string(cost.WarmIdle), string(cost.Active), string(cost.Proof), "credits"})
}

// leakRun owns the leaked claim: a run no runtime recorded.
const leakRun = "r-demo-leaked"

// leakAndClean leaves a SandboxClaim on g2's warm pool the way a runtime
// that died between its claim and its run's record would (Slipway's labels
// and owner, no run), and waits (at most 90 s) until the runtime's
// reconciler has deleted it and recorded that it did (in db).
func leakAndClean(ctx context.Context, sh shell, dyn dynamic.Interface, db, g2 string) error {
	name := kubesandbox.ClaimName(leakRun)
	section("leak", "a SandboxClaim %s on g2's warm pool with no run: a runtime that died between its claim and its record", name)
	claim := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kubeobjects.ExtensionsAPIVersion, "kind": "SandboxClaim",
		"metadata": map[string]any{"name": name, "namespace": kubeNamespace,
			"labels":      map[string]any{kubesandbox.LabelClaim: "true", kubeobjects.LabelPool: "agents", kubeobjects.LabelGeneration: kubeobjects.GenerationLabel(g2)},
			"annotations": map[string]any{kubesandbox.AnnotationOwner: leakRun, kubeobjects.AnnotationGenerationID: g2}},
		"spec": map[string]any{"warmPoolRef": map[string]any{"name": kubeobjects.ObjectName("agents", g2)}},
	}}
	claims := dyn.Resource(kubefleet.SandboxClaims).Namespace(kubeNamespace)
	if _, err := claims.Create(ctx, claim, metav1.CreateOptions{FieldManager: "demo-crashed-runtime"}); err != nil {
		return fmt.Errorf("create the leaked SandboxClaim %s: %w", name, err)
	}
	fmt.Printf("  sandboxclaim/%s created (owner %s, no run record)\n", name, leakRun)
	start := time.Now()
	for {
		_, err := claims.Get(ctx, name, metav1.GetOptions{})
		gone := apierrors.IsNotFound(err)
		if gone && cleaned(sh, db, leakRun) {
			fmt.Printf("  gone from the cluster, and recorded done by the in-cluster runtime's reconciler, %.1fs after it was created (its grace is 5s, a pass every 30s)\n", time.Since(start).Seconds())
			return nil
		}
		if time.Since(start) > 90*time.Second {
			return fmt.Errorf("the leaked SandboxClaim %s was not cleaned within 90s (gone from the cluster: %v)", name, gone)
		}
		time.Sleep(time.Second)
	}
}

// cleaned says the reconciler's records in db hold a done action on run's
// claim.
func cleaned(sh shell, db, run string) bool {
	cmd := exec.Command(sh.bin, "cleanup", "list", "--db", db, "-o", "json")
	cmd.Dir = sh.dir
	b, err := cmd.Output()
	if err != nil {
		return false
	}
	var v reconcile.Remaining
	if json.Unmarshal(b, &v) != nil {
		return false
	}
	for _, r := range v.Recent {
		if r.RunID == run && r.Kind == reconcile.KindNoLease && r.State == reconcile.StateDone {
			return true
		}
	}
	return false
}

// awaitCost waits (at most 2 minutes: the in-cluster runtime reads the
// cluster's objects every 30 s) until the ledger in db holds known time
// warm idle and active for pool agents, and a price for it.
func awaitCost(sh shell, db string) error {
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for {
		cmd := exec.Command(sh.bin, "cost", "--db", db, "--pool", "agents", "--since", "1h", "--repo", "config.git", "-o", "json")
		cmd.Dir = sh.dir
		b, err := cmd.Output()
		var rep cost.PoolReport
		if err == nil && json.Unmarshal(b, &rep) == nil {
			secs := map[cost.State]float64{}
			for _, s := range rep.States {
				secs[s.State] = s.Seconds
			}
			if secs[cost.WarmIdle] > 0 && secs[cost.Active] > 0 && rep.Known > 0 {
				return nil
			}
		}
		last = fmt.Sprintf("%v: %s", err, b)
		if time.Now().After(deadline) {
			return fmt.Errorf("cost --pool agents: no known warm idle and active time within 2m: %s", last)
		}
		time.Sleep(time.Second)
	}
}

// submitAcme submits acme's job (args, with -o json and --wait) and
// returns it once it succeeded. The control plane reads config.git every
// 5 s: while it has not read tenant acme yet, the job is refused and
// asked again (at most 60 s).
func submitAcme(sh shell, args []string) (*controlapi.Job, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, out, err := sh.outcome(args...)
		if err != nil {
			return nil, err
		}
		var job controlapi.Job
		var derr error
		if i := strings.Index(out, "{"); i >= 0 {
			derr = json.NewDecoder(strings.NewReader(out[i:])).Decode(&job) // then the CLI's last word on stderr
		}
		if derr == nil && code == 0 && job.State == controlapi.Succeeded {
			return &job, nil
		}
		if job.ID != "" || !strings.Contains(out, "tenant acme is not declared in the config repository") || time.Now().After(deadline) {
			return nil, fmt.Errorf("acme's job through the in-cluster control plane: exit %d, %v:\n%s", code, derr, out)
		}
		fmt.Printf("  refused before the control plane read tenant acme: %s", indentText(strings.TrimSpace(out)))
		time.Sleep(2 * time.Second)
	}
}
