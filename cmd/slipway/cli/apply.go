package cli

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/cluster/kubeapply"
	"github.com/slipway-dev/slipway/pkg/kubeconfig"
)

// NewCmdApply applies a pool's render to a cluster with server-side apply.
func NewCmdApply(g *globals) *cobra.Command {
	var (
		rf             repoFlags
		vf             verifierFlags
		revision       string
		kubeconfigPath string
		wait           bool
		timeout        time.Duration
		force          bool
	)
	cmd := &cobra.Command{
		Use:   "apply --repo R --pool P --kubeconfig F [--revision COMMIT] [--wait] [--timeout D]",
		Short: "Apply a pool's render to a Kubernetes cluster (server-side apply, prune by inventory, wait for warm pools)",
		Long: `apply renders the pool as slipway render does (verified first) and applies every object with
server-side apply under the field manager "slipway". A field another manager owns is a conflict
naming the object and the manager, unless --force-conflicts. The applied objects are recorded in
the ConfigMap slipway-inventory-<pool> (in the namespace of the pool's templates); an object in
the previous inventory that the render no longer has is pruned only if it still carries the
label slipway.dev/pool=<pool> and no other field manager owns a field of it outside metadata;
otherwise it is kept and reported. Namespaces are never pruned. Each object is reported as
Created, Updated, Unchanged, Pruned or Kept (with -o json, the change set). With --wait, it waits
until every SandboxWarmPool's status.readyReplicas reaches spec.replicas.
Exit 0 applied (and ready), 1 refused (not verified, a conflict, warm pools not ready within
--timeout), 2 usage, input, I/O or the cluster's errors.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rf.repo == "" || rf.pool == "" {
				return usage(errors.New("--repo and --pool are required"))
			}
			if kubeconfigPath == "" {
				kubeconfigPath = os.Getenv("KUBECONFIG")
			}
			if kubeconfigPath == "" {
				return usage(errors.New("--kubeconfig (or $KUBECONFIG) is required"))
			}
			if timeout <= 0 {
				return usage(fmt.Errorf("--timeout must be positive, got %s", timeout))
			}
			cfg, ns, err := kubeconfig.Load(kubeconfigPath)
			if err != nil {
				return usage(err)
			}
			res, err := renderPool(cmd, &rf, &vf, revision)
			if err != nil {
				return err
			}
			opts := []kubeapply.Option{kubeapply.WithNamespace(ns)}
			if force {
				opts = append(opts, kubeapply.WithForceConflicts())
			}
			a, err := kubeapply.New(cfg, opts...)
			if err != nil {
				return usage(err)
			}
			out := struct {
				*kubeapply.ChangeSet
				Ready []kubeapply.PoolStatus `json:"ready,omitempty"`
			}{}
			out.ChangeSet, err = a.Apply(cmd.Context(), res)
			if !g.json() && out.ChangeSet != nil {
				for _, c := range out.ChangeSet.Changes {
					fmt.Fprintln(g.stdout, c)
				}
			}
			if err != nil {
				if errors.Is(err, kubeapply.ErrConflict) {
					return failed(err)
				}
				return usage(err)
			}
			if wait {
				out.Ready, err = a.Wait(cmd.Context(), out.WarmPools, timeout)
				if !g.json() && err == nil {
					for _, s := range out.Ready {
						fmt.Fprintln(g.stdout, s)
					}
				}
				if err != nil {
					if errors.Is(err, kubeapply.ErrNotReady) {
						if g.json() {
							_ = g.printJSON(out)
						}
						return failed(err)
					}
					return usage(err)
				}
			}
			if g.json() {
				return g.printJSON(out)
			}
			return nil
		},
	}
	rf.add(cmd)
	vf.add(cmd)
	cmd.Flags().StringVar(&revision, "revision", "", "the config repository commit to apply (full id; default: the branch head)")
	cmd.Flags().StringVar(&kubeconfigPath, "kubeconfig", "", "kubeconfig file of the cluster (default $KUBECONFIG); its context's namespace is the default namespace")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until every warm pool's readyReplicas reaches its replicas")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long --wait waits")
	cmd.Flags().BoolVar(&force, "force-conflicts", false, "take over fields another field manager owns instead of failing")
	return cmd
}
