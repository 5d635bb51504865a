package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/cluster/argocd"
	"github.com/slipway-dev/slipway/pkg/cluster/kubeapply"
	"github.com/slipway-dev/slipway/pkg/cluster/kubefleet"
	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/kubeconfig"
	"github.com/slipway-dev/slipway/pkg/release/policy"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
)

// kubeFleetFlags drive a rollout on a cluster: the pool's objects applied
// from the config repository's render (by Slipway, or by Argo CD), read
// back per generation.
type kubeFleetFlags struct {
	kubeconfig, namespace, prover, argoApp string
	vf                                     verifierFlags
}

func (f *kubeFleetFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "drive the rollout on the Kubernetes cluster of this kubeconfig file (agent-sandbox v0.5.6) instead of a runtime (--runtime)")
	cmd.Flags().StringVar(&f.namespace, "namespace", "", "namespace of the pool's SandboxTemplates and warm pools (default: the kubeconfig context's)")
	cmd.Flags().StringVar(&f.prover, "prover", "", "with --kubeconfig: the API (http://host:port, token from --token-file) of the runtime on the cluster (slipway runtime serve --backend kubernetes) that runs the proof checks and, with onDrainDeadline: checkpoint, moves the old generation's runs at the drain deadline")
	cmd.Flags().StringVar(&f.argoApp, "argocd-application", "", "with --kubeconfig: Argo CD applies the pool (this Application, NAMESPACE/NAME, with Slipway's plugin): a step is served once the Application reports its commit or a later one as synced and healthy; Slipway applies nothing itself")
	f.vf.add(cmd)
}

// fleet is the pool's fleet on the cluster: each step renders the branch
// head (verified as --policy or the repository's policy says) and applies
// it with server-side apply before reading the cluster back; the proofs
// run through the runtime at --prover (its token in tokenFile).
func (f *kubeFleetFlags) fleet(cmd *cobra.Command, rf *repoFlags, tokenFile string) (*kubefleet.Fleet, error) {
	cfg, ns, err := kubeconfig.Load(f.kubeconfig)
	if err != nil {
		return nil, usage(err)
	}
	if f.namespace != "" {
		ns = f.namespace
	}
	pol, err := f.vf.load()
	if err != nil {
		return nil, err
	}
	ropts := []render.Option{render.WithVerifyCache(policy.NewCache())}
	if pol != nil {
		ropts = append(ropts, render.WithPolicy(pol))
	}
	if f.vf.skip {
		ropts = append(ropts, render.WithInsecureSkipVerify())
	}
	applier, err := f.applier(cmd, rf, cfg, ns, ropts)
	if err != nil {
		return nil, err
	}
	// Proofs run through the runtime on the Kubernetes sandbox backend (a
	// proof claim on the new generation's warm pool, the checks through the
	// runner in its pod); without --prover, step 3 reports that no prover
	// ran the checks and the rollout rolls back.
	opts := []kubefleet.Option{kubefleet.WithApplier(applier)}
	if f.prover != "" {
		tok, err := readToken(tokenFile)
		if err != nil {
			return nil, err
		}
		c, err := runtimeapi.NewClient(f.prover, tok)
		if err != nil {
			return nil, usage(err)
		}
		opts = append(opts, kubefleet.WithProver(c))
	}
	fl, err := kubefleet.New(cfg, rf.pool, ns, opts...)
	if err != nil {
		return nil, usage(err)
	}
	return fl, nil
}

// applier brings the cluster to the branch head for each step: Argo CD
// (--argocd-application: its Application's synced revision, read through
// the API server) or Slipway itself (the branch head rendered and applied
// with server-side apply, on a repository handle of its own: the driver's
// is for the driver).
func (f *kubeFleetFlags) applier(cmd *cobra.Command, rf *repoFlags, cfg *rest.Config, ns string, ropts []render.Option) (kubefleet.Applier, error) {
	if f.argoApp != "" {
		appNS, name, ok := strings.Cut(f.argoApp, "/")
		if !ok {
			return nil, usage(fmt.Errorf("--argocd-application %q: want NAMESPACE/NAME (Argo CD's namespace, usually argocd)", f.argoApp))
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, usage(err)
		}
		app, err := argocd.NewApplication(dyn, appNS, name)
		if err != nil {
			return nil, usage(err)
		}
		return app, nil
	}
	repo, err := gitops.Open(cmd.Context(), rf.repo, rf.options()...)
	if err != nil {
		return nil, usage(err)
	}
	a, err := kubeapply.New(cfg, kubeapply.WithNamespace(ns))
	if err != nil {
		return nil, usage(err)
	}
	ra, err := kubefleet.NewRenderApplier(repo, rf.branch, rf.pool, a, ropts...)
	if err != nil {
		return nil, usage(err)
	}
	return ra, nil
}

// syncAfterRollback has a cluster follow a rollback commit at once (the
// new generation's objects pruned) rather than at the next apply: a
// runtime polls the repository by itself, a cluster without Argo CD does
// not. A failure is reported, not fatal: the rollout's outcome stands.
func syncAfterRollback(ctx context.Context, g *globals, d *rollout.Driver) {
	fl, ok := d.Fleet.(*kubefleet.Fleet)
	if !ok {
		return
	}
	rev, err := fl.Sync(ctx)
	if err != nil {
		fmt.Fprintf(g.stderr, "the cluster did not take the rollback yet (its applier will: Argo CD, slipway apply or the next rollout): %v\n", err)
		return
	}
	fmt.Fprintf(g.stderr, "the cluster serves %s (the rollback)\n", rev)
}
