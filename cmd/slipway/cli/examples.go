package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// examples are the Examples of the commands that do not carry their own,
// keyed by command path without "slipway". They live here, apart from the
// command files, so that every command has one (examples_test.go walks the
// tree) without an edit to each constructor; a command that sets its own
// Example keeps it.
var examples = map[string]string{
	"": `  # Pin a workspace's image references to digests, build and sign a template, make a generation
  slipway pin --lock slipway.lock k8s/
  slipway template build templates/tools.yaml --push registry.example/templates/tools
  slipway generation create --pool agents --policy policy.yaml --out-file g1.yaml --pin runner=registry.example/runner@sha256:...

  # The version, for a bug report
  slipway --version`,
	"apply": `  # Apply pool agents at the config repository's head, waiting for its warm pools
  slipway apply --repo https://git.example/platform/config.git --pool agents --kubeconfig ~/.kube/config --wait

  # Apply a given config revision
  slipway apply --repo ./config --pool agents --kubeconfig kubeconfig.yaml --revision 4f2c1e9 --wait --timeout 10m`,
	"argocd": `  # What Argo CD's repo-server runs in the plugin's sidecar (the pool comes from ARGOCD_APP_PARAMETERS)
  slipway argocd generate -o json
  slipway argocd parameters`,
	"argocd generate": `  # In the plugin's sidecar, in the checked-out config repository: one JSON object per line, as plugin.yaml asks
  slipway argocd generate -o json

  # The same objects as YAML documents, keeping verification results between runs
  slipway argocd generate --verify-cache-dir /var/cache/slipway-verify`,
	"argocd generator": `  slipway argocd generator serve --repo https://git.example/platform/config.git --token-file /run/secrets/token --listen :4355`,
	"argocd generator serve": `  # The ApplicationSet plugin generator, one parameter set per pool
  slipway argocd generator serve --repo https://git.example/platform/config.git --token-file /run/secrets/token --listen :4355`,
	"argocd parameters": `  # In the checked-out config repository: the pools Argo CD may offer as the pool parameter
  slipway argocd parameters`,
	"canary": `  # One round against a runtime, for a cron job
  slipway canary --runtime https://runtime.example:8443 --token-file canary.token --pool agents --once

  # Every five minutes, keeping a history and alerting a webhook on a failing round
  slipway canary --runtime https://runtime.example:8443 --token-file canary.token --pool agents --interval 5m --history canary.jsonl --denied https://alerts.example/hook`,
	"canary history": `  slipway canary history --history canary.jsonl -n 20
  slipway canary history --history canary.jsonl -o json`,
	"checkpoint": `  # Checkpoint a run, suspend it (its sandbox is deleted), resume it, and ask what is durable
  slipway checkpoint create r-4f2c1e9a0b --runtime http://127.0.0.1:7070 --token-file api.token --claim-token-file claim.token
  slipway checkpoint suspend r-4f2c1e9a0b --runtime http://127.0.0.1:7070 --token-file api.token --claim-token-file claim.token
  slipway checkpoint resume r-4f2c1e9a0b --runtime http://127.0.0.1:7070 --token-file api.token --claim-token-file claim.token
  slipway checkpoint durable r-4f2c1e9a0b --runtime http://127.0.0.1:7070 --token-file api.token`,
	"checkpoint create": `  # Freeze the run's sandbox, write its workspace as a signed checkpoint, thaw it (the job is at event 118)
  slipway checkpoint create r-4f2c1e9a0b --runtime http://127.0.0.1:7070 --token-file api.token --claim-token-file claim.token --event-seq 118`,
	"checkpoint suspend": `  # Checkpoint the run and free its sandbox; the run stays open
  slipway checkpoint suspend r-4f2c1e9a0b --runtime http://127.0.0.1:7070 --token-file api.token --claim-token-file claim.token`,
	"checkpoint resume": `  # Verify the run's checkpoint and restore it into a new sandbox of the pool's active generation
  slipway checkpoint resume r-4f2c1e9a0b --runtime http://127.0.0.1:7070 --token-file api.token --claim-token-file claim.token -o json`,
	"checkpoint durable": `  # Question 6: what is durable for the run, its head, and when a restore of it was last proved
  slipway checkpoint durable r-4f2c1e9a0b --runtime http://127.0.0.1:7070 --token-file api.token`,
	"claim": `  # Claim a sandbox of pool agents, run a command in it, release it
  slipway claim --runtime https://runtime.example:8443 --token-file tenant.token --pool agents -- sh -c 'uname -a'`,
	"cleanup": `  slipway cleanup list --state /var/lib/slipway`,
	"cleanup list": `  # What remains to clean up after a crash, and what the reconciler did
  slipway cleanup list --state /var/lib/slipway
  slipway cleanup list --state /var/lib/slipway -o json`,
	"completion": `  # Load completions for this bash session
  source <(slipway completion bash)`,
	"completion bash": `  source <(slipway completion bash)
  slipway completion bash > /etc/bash_completion.d/slipway`,
	"completion fish":       `  slipway completion fish > ~/.config/fish/completions/slipway.fish`,
	"completion powershell": `  slipway completion powershell | Out-String | Invoke-Expression`,
	"completion zsh":        `  slipway completion zsh > "${fpath[1]}/_slipway"`,
	"config":                `  slipway config init /srv/git/config.git --pool agents --policy policy.yaml`,
	"config init": `  # Seed a new bare repository for pool agents with a verification policy
  slipway config init /srv/git/config.git --pool agents --policy policy.yaml

  # Seed a remote repository
  slipway config init https://git.example/platform/config.git --pool agents --policy policy.yaml`,
	"console": `  slipway console serve --control https://control.example:8080 --runtime https://runtime.example:8443 \
    --token-file /run/secrets/runtime.token --repo https://git.example/platform/config.git --listen 127.0.0.1:7090`,
	"console serve": `  # The console over one control plane, one runtime and the config repository; log in with an API token
  slipway console serve --control https://control.example:8080 --runtime https://runtime.example:8443 \
    --token-file /run/secrets/runtime.token --repo https://git.example/platform/config.git --listen 127.0.0.1:7090`,
	"control": `  slipway control serve --repo https://git.example/platform/config.git --db sqlite:/var/lib/slipway/control.db \
    --listen :8080 --pool-runtime agents=https://runtime.example:8443,/run/secrets/runtime.token`,
	"control serve": `  # The control plane on SQLite, dispatching pool agents' jobs to one runtime
  slipway control serve --repo https://git.example/platform/config.git --db sqlite:/var/lib/slipway/control.db \
    --listen :8080 --pool-runtime agents=https://runtime.example:8443,/run/secrets/runtime.token

  # On PostgreSQL (several replicas may share it)
  slipway control serve --repo https://git.example/platform/config.git --db postgres://slipway@db/slipway \
    --listen :8080 --pool-runtime agents=https://runtime.example:8443,/run/secrets/runtime.token`,
	"cost": `  # Cost per state of pool agents over a day, at the config repository's prices
  slipway cost --state /var/lib/slipway --pool agents --since 2026-12-05T00:00:00Z --until 2026-12-06T00:00:00Z \
    --repo https://git.example/platform/config.git

  # One run's cost terms, as JSON
  slipway cost --state /var/lib/slipway --run r-01HZX --prices prices.yaml -o json`,
	"evidence": `  slipway evidence verify --repo https://git.example/platform/config.git --pool agents
  slipway evidence show --repo https://git.example/platform/config.git --pool agents -o json`,
	"evidence show": `  # The latest rollout's evidence, as its statement says it (unverified)
  slipway evidence show --repo https://git.example/platform/config.git --pool agents

  # One rollout's, as JSON
  slipway evidence show --repo ./config --pool agents --generation g-7f3a --rollout r-2 -o json`,
	"gc": `  # List the images of retained generations past their windows
  slipway gc --repo https://git.example/platform/config.git --pool agents

  # Delete them
  slipway gc --repo https://git.example/platform/config.git --pool agents --delete

  # Delete a runtime's checkpoints past their pool's restore window too
  slipway gc --repo https://git.example/platform/config.git --runtime http://127.0.0.1:7070 --token-file runtime.token --delete`,
	"generation": `  slipway generation create --pool agents --policy policy.yaml --out-file g2.yaml --from g1.yaml --pin runner=registry.example/runner@sha256:...
  slipway generation diff g1.yaml g2.yaml`,
	"generation diff": `  # Which pins changed between two generation files
  slipway generation diff g1.yaml g2.yaml

  # As JSON
  slipway generation diff g1.yaml g2.yaml -o json`,
	"generation show": `  # A generation file
  slipway generation show g1.yaml

  # A generation by id from the config repository, as YAML
  slipway generation show g-7f3a --repo https://git.example/platform/config.git --pool agents -o yaml`,
	"image": `  slipway image from-dir rootfs/ --push registry.example/slipway/base
  slipway image runner bin/slipway-runner --push registry.example/slipway/runner:v1`,
	"incidents": `  # Every incident kind with the jobs and runs that show it
  slipway incidents --db sqlite:/var/lib/slipway/control.db --state /var/lib/slipway

  # As JSON, for a ticket
  slipway incidents --db postgres://slipway@db/slipway -o json`,
	"job": `  slipway job submit --pool agents --profile build --wait -- make test
  slipway job logs -f j-01HZX`,
	"job cancel": `  slipway job cancel j-01HZX`,
	"job list": `  # The running jobs, newest first
  slipway job list --status running --limit 20

  # As JSON
  slipway job list -o json`,
	"job logs": `  # A job's output so far
  slipway job logs j-01HZX

  # Follow it to the end; events as JSON
  slipway job logs -f j-01HZX -o json`,
	"job show": `  slipway job show j-01HZX
  slipway job show j-01HZX -o yaml`,
	"job submit": `  # Submit a job and print its id
  slipway job submit --pool agents --profile build -- make test

  # Submit once per commit, wait for it, and exit with its exit code
  slipway job submit --pool agents --profile build --idempotency-key "$GIT_COMMIT" --deadline 30m --wait -- make test`,
	"job trace": `  slipway job trace j-01HZX
  slipway job trace j-01HZX -o json`,
	"keys": `  COSIGN_PASSWORD=... slipway keys generate --output-key-prefix release`,
	"lint": `  # Report every mutable image reference under k8s/ (exit 1 on findings)
  slipway lint k8s/

  # As JSON, for a code-quality report
  slipway lint -o json k8s/ deploy.yaml`,
	"pool": `  slipway pool show --repo https://git.example/platform/config.git --pool agents
  slipway pool set --repo https://git.example/platform/config.git --pool agents warm=4`,
	"pool show": `  slipway pool show --repo https://git.example/platform/config.git --pool agents
  slipway pool show --repo ./config --pool agents -o yaml`,
	"render": `  # Pool agents' objects at the config repository's head
  slipway render --repo https://git.example/platform/config.git --pool agents

  # At a given revision, to compare with what is applied
  slipway render --repo ./config --pool agents --revision 4f2c1e9 | kubectl diff -f -`,
	"rollout": `  slipway rollout start --repo https://git.example/platform/config.git --pool agents --to g-7f3a \
    --runtime https://runtime.example:8443 --token-file operator.token --wait
  slipway rollout status --repo https://git.example/platform/config.git --pool agents`,
	"rollout abort": `  slipway rollout abort --repo https://git.example/platform/config.git --pool agents --reason "canary failing"`,
	"rollout resume": `  # After a crash or a failed step: drive the rollout on from where it stands
  slipway rollout resume --repo https://git.example/platform/config.git --pool agents \
    --runtime https://runtime.example:8443 --token-file operator.token

  # On Kubernetes, through Argo CD
  slipway rollout resume --repo https://git.example/platform/config.git --pool agents \
    --kubeconfig ~/.kube/config --namespace agents --argocd-application argocd/agents`,
	"rollout rollback": `  # Back to the newest retained generation
  slipway rollout rollback --repo https://git.example/platform/config.git --pool agents \
    --runtime https://runtime.example:8443 --token-file operator.token

  # Back to a given one
  slipway rollout rollback --repo https://git.example/platform/config.git --pool agents --to g-5c1d \
    --runtime https://runtime.example:8443 --token-file operator.token`,
	"rollout status": `  slipway rollout status --repo https://git.example/platform/config.git --pool agents

  # Watch it, as JSON
  slipway rollout status --repo https://git.example/platform/config.git --pool agents --watch -o json`,
	"runs": `  slipway runs show r-01HZX --state /var/lib/slipway
  slipway runs query --runner-image sha256:... --state /var/lib/slipway`,
	"runs query": `  # Which runs used a runner image
  slipway runs query --runner-image sha256:4c1b... --state /var/lib/slipway

  # Which runs ran under a policy revision, as JSON
  slipway runs query --policy 4f2c1e9 --state /var/lib/slipway -o json`,
	"runs related": `  slipway runs related r-01HZX --state /var/lib/slipway`,
	"runs show": `  # A run manifest
  slipway runs show r-01HZX --state /var/lib/slipway

  # The destinations its sandbox asked for
  slipway runs show r-01HZX --state /var/lib/slipway --egress`,
	"runtime": `  slipway runtime serve --repo https://git.example/platform/config.git --state /var/lib/slipway \
    --listen :8443 --token-file /run/secrets/runtime.token`,
	"runtime policy": `  slipway runtime policy --runtime https://runtime.example:8443 --token-file operator.token
  slipway runtime policy --runtime https://runtime.example:8443 --token-file operator.token -o json`,
	"runtime serve": `  # On this host (bubblewrap sandboxes)
  slipway runtime serve --repo https://git.example/platform/config.git --state /var/lib/slipway \
    --listen :8443 --token-file /run/secrets/runtime.token

  # On a cluster (agent-sandbox objects)
  slipway runtime serve --repo https://git.example/platform/config.git --state /var/lib/slipway \
    --listen :8443 --token-file /run/secrets/runtime.token --backend kubernetes --kubeconfig ~/.kube/config --namespace agents`,
	"template": `  slipway template build templates/tools.yaml --push registry.example/templates/tools
  slipway template scan registry.example/templates/tools@sha256:...`,
	"template scan": `  # An image by reference
  slipway template scan registry.example/templates/tools@sha256:4c1b...

  # An unpacked rootfs, as JSON
  slipway template scan ./rootfs -o json`,
	"tenant": `  slipway tenant token create acme --db sqlite:/var/lib/slipway/control.db --label ci`,
	"tenant token": `  slipway tenant token create acme --db sqlite:/var/lib/slipway/control.db --label ci
  slipway tenant token list --db sqlite:/var/lib/slipway/control.db --tenant acme`,
	"tenant token create": `  # A tenant's token for its CI (printed once)
  slipway tenant token create acme --db sqlite:/var/lib/slipway/control.db --label ci > acme.token

  # An operator's token
  slipway tenant token create ops --db postgres://slipway@db/slipway --scope operator`,
	"tenant token list": `  slipway tenant token list --db sqlite:/var/lib/slipway/control.db --tenant acme
  slipway tenant token list --db sqlite:/var/lib/slipway/control.db -o json`,
	"tenant token revoke": `  slipway tenant token revoke t-01HZX --db sqlite:/var/lib/slipway/control.db`,
	"version": `  slipway version
  slipway --version
  slipway version -o json`,
}

// addExamples gives each command without an Example its entry in examples.
func addExamples(c *cobra.Command) {
	if c.Example == "" {
		c.Example = examples[strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), "slipway"), " ")]
	}
	for _, sub := range c.Commands() {
		addExamples(sub)
	}
}
