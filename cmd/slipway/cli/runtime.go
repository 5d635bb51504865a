package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/control/incidents"
	"github.com/slipway-dev/slipway/pkg/execution/leader"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/pkg/kubeconfig"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// readToken reads a bearer token from a file (trailing newline dropped).
func readToken(file string) (string, error) {
	if file == "" {
		return "", usage(errors.New("--token-file is required"))
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", usage(err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", usage(fmt.Errorf("%s is empty", file))
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", usage(fmt.Errorf("%s: a token is one line without spaces", file))
	}
	return tok, nil
}

// NewCmdRuntime groups the runtime verbs.
func NewCmdRuntime(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "runtime", Short: "Run the thin runtime: warm sandboxes per generation, claims, run manifests"}
	cmd.AddCommand(newCmdRuntimeServe(g), newCmdRuntimePolicy(g))
	return cmd
}

func newCmdRuntimeServe(g *globals) *cobra.Command {
	var (
		c         serve.Config
		tokenFile string
		vf        verifierFlags
		db        dbFlags
		ckptKey   string
	)
	cmd := &cobra.Command{
		Use:   "serve --repo URL --state DIR --listen ADDR --token-file FILE [--backend kubernetes --kubeconfig F [--namespace N]]",
		Short: "Follow the config repository, keep warm pools, and serve the claims API",
		Long: `Serve polls the config repository (every 2 s, and on POST /v1/sync), verifies each generation
the pools want against the repository's policies/verification.yaml before unpacking it, keeps
each warming and active generation's warm sandboxes (bubblewrap, no network), grants claims on
the active generation, and records a run manifest for every claim in DIR/runs.db (or the PostgreSQL
database of --db-file, --db or $SLIPWAY_DB, which several runtimes may share). Beside it the
cleanup reconciler makes a pass every --reconcile-interval: sandboxes with no live
lease, leases of ended runs, sandboxes of fenced attempts, dead and stuck ones, warm members of
inactive generations, and credentials that outlive their run; its records are in DIR/cleanup.db
(slipway cleanup list).
Claims get 503 while its view of the repository is older than --max-staleness.

With --backend kubernetes the sandboxes are agent-sandbox's on the cluster of --kubeconfig (in
--namespace, default the kubeconfig context's): the cluster keeps each generation's warm pool
(apply the render: slipway apply), a claim is a SandboxClaim on the active generation's warm pool
named for its run, commands reach the runner through the API server's pod exec, and release
deletes the claim. It serves the same API. The reconciler sweeps the namespace's objects with the
cluster as the authority (claims with no live lease or of ended runs, warm pools of removed
generations, Sandboxes and pods whose controller is gone, pods stuck terminating, run Secrets),
each delete fenced by the resourceVersion it read; the cost ledger (DIR/cost.db, or with --db one
ledger the replicas share in that database; slipway cost) is kept from the cluster's own
timestamps: each claim this runtime deletes (a release, the reconciler) is recorded as it goes,
however short it lived; warm idle and retained Sandboxes, and other replicas' claims, are read
every --storage-sample-interval (by the Lease's holder with --leader-elect).

The Kubernetes backend asks the API server at start whether its service account holds every verb
it uses (SelfSubjectAccessReviews): a missing one is named in the log, with its resource and
namespace, and GET /readyz fails naming it until the Role grants it. With --leader-elect, several
replicas serve claims on one cluster while the reconciler and the cost ledger's sampling run on the
one holding the Lease --leader-election-lease; a killed leader's work moves to another replica
within --leader-election-lease-duration. Replicas that share --db with --leader-elect record
--advertise (this replica's address, e.g. its pod's $(POD_IP):7070) in the run manifests of the
claims they grant, and pass a request about a claim another replica holds (exec, release, identity,
checkpoint) on to it, with the same token, instead of answering 404.

On SIGTERM or SIGINT the runtime drains: at once it refuses new claims (503 with Retry-After, code
draining: nothing is recorded, so the same request key is granted by another replica) and
GET /readyz fails, and it gives its Lease up; the requests under way are answered (a command
running runs to its end) within --drain-timeout. Replicas that share --db with --leader-elect also
serve the claims they hold (their next commands, releases, heartbeats) until each is released or
--drain-timeout has passed. Set --drain-timeout to the pod's grace period less a margin.

With --checkpoint-key the runtime checkpoints, suspends and resumes runs (slipway checkpoint) on the
local backend: the sandbox is frozen (cgroup freezer) for the copy of its workspace, the checkpoint is
an OCI artifact in DIR/` + serve.CheckpointDir + ` with an attestation signed by the key, and a resume verifies it before
it restores. With --checkpoint-repository each checkpoint is also pushed there by digest, signed and
attested with the key (cosign's .sig and .att tags), and a resume whose checkpoint DIR lacks pulls it
from there, verified before anything is written. The runtime's checkpoint sweep deletes them there
too once their pool's restore window closes, never a run's head (slipway gc --runtime).

The files of its secrets (--token-file, --db-file) may come after it starts (a Secret created after
the pod): it serves /healthz, stays not ready on /readyz and logs one line per distinct error naming
the file, and the Secret and key it is mounted from when $SLIPWAY_SECRET_MOUNTS says
(DIR=SECRET,...), until they are there; the DSN file is read again on each try to reach the
database. The config repository's token may be a file, $SLIPWAY_GIT_TOKEN_FILE, read before each fetch.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Repo == "" || c.State == "" || c.Listen == "" {
				return usage(errors.New("--repo, --state and --listen are required"))
			}
			if tokenFile == "" {
				return usage(errors.New("--token-file is required"))
			}
			var err error
			c.TokenFile = tokenFile // read by serve, again until it exists (a Secret created after the pod)
			if c.Mounts, err = secretMounts(); err != nil {
				return err
			}
			if c.Verify.Policy, err = vf.load(); err != nil {
				return err
			}
			c.Verify.Skip = vf.skip
			if c.Backend == serve.BackendKubernetes && c.Kubeconfig == "" {
				c.Kubeconfig = os.Getenv("KUBECONFIG")
				if c.Kubeconfig == "" && !kubeconfig.InPod() {
					return usage(errors.New("--backend kubernetes needs --kubeconfig (or $KUBECONFIG), or to run in a pod (its service account: in-cluster config)"))
				}
			}
			if err := checkKubeFlags(cmd, c); err != nil {
				return usage(err)
			}
			if db.dsn != "" || db.file != "" || os.Getenv(envDB) != "" {
				if c.DB, c.DBFile, err = db.source(); err != nil {
					return err
				}
			}
			if err := checkDrainFlags(c); err != nil {
				return usage(err)
			}
			if c.CheckpointRepository != "" && ckptKey == "" {
				return usage(errors.New("--checkpoint-repository needs --checkpoint-key (the key signs what is pushed)"))
			}
			if ckptKey != "" {
				if c.CheckpointSigner, err = sign.LoadSignerRef(cmd.Context(), ckptKey, keyPassword); err != nil {
					return usage(fmt.Errorf("--checkpoint-key: %w", err))
				}
			}
			c.Log = g.stderr
			c.Failpoint = os.Getenv("SLIPWAY_TEST_FAILPOINT") // fault tests only
			// GET /v1/incidents: what slipway incidents --state reads,
			// from the runtime's own records.
			c.Incidents = runtimeIncidents
			c.OTLP = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
			err = serve.Run(cmd.Context(), c, func(addr string) { fmt.Fprintf(g.stderr, "serving on %s\n", addr) })
			if err != nil {
				return usage(err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&c.Repo, "repo", "", "the config repository (path, file://, http(s)://, ssh://)")
	cmd.Flags().StringVar(&c.Branch, "branch", "main", "its branch")
	cmd.Flags().StringVar(&c.State, "state", "", "state directory (sandboxes, run manifests, caches)")
	cmd.Flags().StringVar(&c.Listen, "listen", "", "address of the API, e.g. 127.0.0.1:7070")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding the API's bearer token")
	cmd.Flags().StringVar(&ckptKey, "checkpoint-key", "", "cosign key (file or KMS ref; password in $COSIGN_PASSWORD) that signs the runs' checkpoints (DIR/"+serve.CheckpointDir+") and verifies them before a restore; without it the runtime takes no checkpoints")
	cmd.Flags().StringVar(&c.CheckpointRepository, "checkpoint-repository", "", "registry repository each checkpoint is also pushed to by digest, signed and attested (credentials from the docker keychain); a resume pulls a checkpoint the state lacks from it, verified first")
	cmd.Flags().DurationVar(&c.MaxStaleness, "max-staleness", 30*time.Second, "refuse claims (503) when the view of the config repository is older")
	cmd.Flags().DurationVar(&c.SyncInterval, "sync-interval", 2*time.Second, "how often the config repository is read")
	cmd.Flags().StringVar(&c.Environment, "environment", "", "label every metric environment=NAME (e.g. prod)")
	cmd.Flags().DurationVar(&c.CredentialTTL, "credential-ttl", runtime.DefaultCredentialTTL, "lifetime of a claim's credential; an open claim's is renewed at 2/3 of it")
	cmd.Flags().BoolVar(&c.NoCredentialRenewal, "no-credential-renewal", false, "do not renew open claims' credentials (they expire)")
	cmd.Flags().DurationVar(&c.ReconcileInterval, "reconcile-interval", reconcile.DefaultInterval, "how often the cleanup reconciler makes a pass (0 disables it)")
	cmd.Flags().DurationVar(&c.StorageEvery, "storage-sample-interval", 30*time.Second, "how often the cost ledger samples each sandbox's workspace bytes (local backend) or reads the cluster's objects (kubernetes)")
	cmd.Flags().StringVar(&c.LogFormat, "log-format", serve.LogJSON, "format of the log on standard error: json (one object a line; the lines about a run carry run_id, session_id, allocation_attempt, sandbox_id and trace_id) or text")
	cmd.Flags().StringVar(&c.Backend, "backend", serve.BackendLocal, "where sandboxes run: local (bubblewrap on this host) or kubernetes (agent-sandbox)")
	db.add(cmd.Flags(), "the run manifests', cleanup records' and (Kubernetes) cost ledger's database (default: SQLite in --state; postgres://… for runtimes that share one)")
	cmd.Flags().StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig file of the cluster for --backend kubernetes (default $KUBECONFIG; in a pod without either: its service account)")
	cmd.Flags().StringVar(&c.Namespace, "namespace", "", "namespace of the pool's warm pools and claims (default: the kubeconfig context's; in a pod: $POD_NAMESPACE or its own)")
	cmd.Flags().DurationVar(&c.DrainTimeout, "drain-timeout", 25*time.Second, "on SIGTERM, how long the requests under way (and, with --db and --leader-elect, the claims this replica holds) may go on before it stops; new claims are refused at once. The pod's grace period less a margin (at least 5 s is given to the requests under way)")
	cmd.Flags().StringVar(&c.Advertise, "advertise", "", "host:port other replicas reach this one's API at (with --db and --leader-elect; e.g. $(POD_IP):7070): recorded for the claims it grants, so a replica asked about one passes the request on to it")
	cmd.Flags().BoolVar(&c.LeaderElect, "leader-elect", false, "with several replicas on one cluster: run the reconciler, the cost ledger's sampling and the cluster's pool counts on /metrics only on the replica holding a Lease (every replica serves claims)")
	cmd.Flags().StringVar(&c.LeaderNamespace, "leader-election-namespace", "", "namespace of the Lease (default: in a pod, its own; else --namespace's)")
	cmd.Flags().StringVar(&c.LeaderLease, "leader-election-lease", serve.DefaultLeaderLease, "name of the Lease")
	cmd.Flags().DurationVar(&c.LeaseDuration, "leader-election-lease-duration", leader.DefaultLeaseDuration, "how long the Lease holds without renewal: a killed leader's work moves to another replica within it")
	vf.add(cmd)
	cmd.Flags().Lookup("policy").Usage = "VerificationPolicy for when the config repository holds none"
	return cmd
}

// runtimeIncidents are the incidents of the runtime's run store and
// cleanup records (nil when it runs no reconciler).
func runtimeIncidents(ctx context.Context, st runs.Store, records *reconcile.Records) (*incidents.Report, error) {
	var cr incidents.CleanupRecords
	if records != nil {
		cr = records
	}
	return incidents.Runtime(ctx, st, cr)
}

// checkKubeFlags refuses the Kubernetes backend's flags with another
// backend.
func checkKubeFlags(cmd *cobra.Command, c serve.Config) error {
	if c.Backend == serve.BackendKubernetes {
		return nil
	}
	if c.Kubeconfig != "" || c.Namespace != "" {
		return errors.New("--kubeconfig and --namespace are for --backend kubernetes")
	}
	if c.LeaderElect || cmd.Flags().Changed("leader-election-namespace") || cmd.Flags().Changed("leader-election-lease") ||
		cmd.Flags().Changed("leader-election-lease-duration") {
		return errors.New("--leader-elect and its --leader-election-* flags are for --backend kubernetes (the local backend is one host)")
	}
	return nil
}

// checkDrainFlags refuses a --drain-timeout below 0, and an --advertise
// that is not host:port or that no shared run store needs.
func checkDrainFlags(c serve.Config) error {
	if c.DrainTimeout < 0 {
		return fmt.Errorf("--drain-timeout %s: want 0 or more", c.DrainTimeout)
	}
	if c.Advertise == "" {
		return nil
	}
	if _, port, err := net.SplitHostPort(c.Advertise); err != nil || port == "" {
		return fmt.Errorf("--advertise %q: want host:port (e.g. $(POD_IP):7070)", c.Advertise)
	}
	if (c.DB == "" && c.DBFile == "") || !c.LeaderElect {
		return errors.New("--advertise is for replicas that share a run store: it needs --db (or --db-file) and --leader-elect")
	}
	return nil
}

// NewCmdClaim runs a command in a fresh claim.
func NewCmdClaim(g *globals) *cobra.Command {
	var server, tokenFile, pool, tenant string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "claim --runtime URL --token-file FILE --pool P [--tenant T] -- CMD...",
		Short: "Claim a sandbox, run a command in it, release it, and print the result as JSON",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if server == "" || pool == "" {
				return usage(errors.New("--runtime and --pool are required"))
			}
			tok, err := readToken(tokenFile)
			if err != nil {
				return err
			}
			c, err := runtimeapi.NewClient(server, tok)
			if err != nil {
				return usage(err)
			}
			ctx := cmd.Context()
			gr, err := c.Claim(ctx, pool, runtimeapi.ClaimBody{Tenant: tenant})
			if err != nil {
				return failed(err)
			}
			res, err := c.Exec(ctx, gr.RunID, runtimeapi.ExecBody{Token: gr.Token, Argv: args, TimeoutSeconds: timeout.Seconds()})
			code := -1
			if res != nil {
				code = res.ExitCode
			}
			if rerr := c.Release(ctx, gr.RunID, runtimeapi.ReleaseBody{Token: gr.Token, ExitCode: &code}); rerr != nil && err == nil {
				err = rerr
			}
			if err != nil {
				return failed(err)
			}
			return g.printJSON(map[string]any{
				"runId": gr.RunID, "sandboxId": gr.SandboxID, "generation": gr.Generation, "warm": gr.Warm,
				"allocationAttempt": gr.AllocationAttempt, "exitCode": res.ExitCode, "output": res.Stdout + res.Stderr,
				"stdout": res.Stdout, "stderr": res.Stderr, "truncated": res.Truncated,
			})
		},
	}
	cmd.Flags().StringVar(&server, "runtime", "", "the runtime's API, e.g. http://127.0.0.1:7070")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding the API's bearer token")
	cmd.Flags().StringVar(&pool, "pool", "", "the pool")
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant the run is for")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "kill the command after this long")
	return cmd
}
