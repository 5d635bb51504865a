package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestDependenciesPointDown keeps the layering of ../shared/DESIGN.md honest:
// each library package may import only the Slipway packages below it, no
// library package imports the CLI or cobra, and test helpers stay out of
// production code.
func TestDependenciesPointDown(t *testing.T) {
	const mod = "github.com/slipway-dev/slipway/"
	allowed := map[string][]string{
		"pkg/ref":              {},
		"pkg/api/kubeobjects":  {},
		"pkg/kubeconfig":       {},
		"internal/atomicfile":  {},
		"internal/groupcommit": {},
		"pkg/release/resolve":  {"pkg/ref", "internal/atomicfile"},
		"pkg/release/pin":      {"pkg/ref", "pkg/release/resolve", "internal/atomicfile"},
		"pkg/rootfs":           {},
		"pkg/isolate":          {},
		"pkg/execution/egress": {},
		// Metrics and traces: the OTel SDK and nothing of Slipway.
		"pkg/telemetry":         {},
		"pkg/release/scan":      {},
		"pkg/control/deliver":   {"pkg/release/scan"},
		"pkg/release/sbom":      {"internal/atomicfile"},
		"internal/strictyaml":   {},
		"pkg/config/generation": {"pkg/ref", "internal/strictyaml"},
		"pkg/release/attest":    {},
		"pkg/release/sign":      {"pkg/release/attest", "pkg/release/resolve", "pkg/ref", "internal/atomicfile"},
		"pkg/release/policy":    {"pkg/ref", "pkg/release/resolve", "internal/atomicfile", "internal/strictyaml", "pkg/release/attest", "pkg/release/sign", "pkg/config/generation"},
		"pkg/execution/runtime": {"pkg/execution/egress", "pkg/ref", "pkg/release/resolve", "internal/atomicfile", "internal/strictyaml", "pkg/release/attest", "pkg/release/sign", "pkg/config/generation", "pkg/release/policy", "pkg/config/gitops", "pkg/config/pool", "pkg/execution/sandbox", "pkg/execution/sandbox/runner", "pkg/rootfs", "pkg/execution/runs", "pkg/release/sbom", "pkg/release/template", "pkg/release/scan", "pkg/isolate", "pkg/isolate/shape", "pkg/telemetry", "pkg/execution/cost", "pkg/config/tenancy", "internal/groupcommit"},
		// The runtime on this machine: the local backend under it.
		"pkg/execution/runtime/serve": {"pkg/api/kubeobjects", "pkg/kubeconfig", "pkg/execution/egress", "pkg/ref", "pkg/release/resolve", "internal/atomicfile", "internal/strictyaml", "pkg/release/attest", "pkg/release/sign", "pkg/config/generation", "pkg/release/policy", "pkg/config/gitops", "pkg/config/pool", "pkg/execution/sandbox", "pkg/execution/sandbox/runner", "pkg/rootfs", "pkg/execution/runs", "pkg/release/sbom", "pkg/release/template", "pkg/release/scan", "pkg/execution/runtime", "pkg/execution/sandbox/local", "pkg/isolate", "pkg/isolate/shape", "pkg/execution/kubesandbox", "pkg/cluster/kubeapply", "pkg/cluster/render", "pkg/telemetry", "pkg/execution/cost", "pkg/config/tenancy", "pkg/execution/reconcile", "internal/groupcommit"},
		// Rollouts sit on top of the library; the fleet is an interface the
		// runtime's client implements (runtime for its API types).
		"pkg/release/rollout":  {"pkg/execution/egress", "pkg/ref", "pkg/release/resolve", "internal/atomicfile", "internal/strictyaml", "pkg/release/attest", "pkg/release/sign", "pkg/config/generation", "pkg/release/policy", "pkg/config/gitops", "pkg/config/pool", "pkg/execution/sandbox", "pkg/execution/sandbox/runner", "pkg/rootfs", "pkg/execution/runs", "pkg/release/sbom", "pkg/release/template", "pkg/release/scan", "pkg/isolate", "pkg/execution/runtime", "pkg/isolate/shape", "pkg/telemetry", "pkg/execution/cost", "pkg/config/tenancy", "internal/groupcommit"},
		"pkg/release/template": {"pkg/ref", "pkg/release/resolve", "internal/atomicfile", "internal/strictyaml", "pkg/rootfs", "pkg/isolate", "pkg/release/scan", "pkg/isolate/shape"},
		"pkg/release":          {"pkg/ref", "pkg/release/resolve", "internal/atomicfile", "internal/strictyaml", "pkg/rootfs", "pkg/isolate", "pkg/release/scan", "pkg/release/sbom", "pkg/release/template", "pkg/release/attest", "pkg/release/sign", "pkg/config/generation", "pkg/config/gitops", "pkg/release/policy", "pkg/config/pool", "pkg/isolate/shape"},
		"pkg/config/pool":      {"pkg/ref", "internal/strictyaml", "pkg/config/generation"},
		"pkg/config/tenancy":   {"pkg/ref", "internal/strictyaml", "pkg/config/generation", "pkg/config/pool", "pkg/config/gitops"},
		// Test harnesses say what a test needs through need (skip, or fail
		// when CI=true) and nothing else of Slipway's.
		"internal/testharness/need":         {},
		"internal/testharness/registrytest": {"internal/testharness/need"},
		"internal/testharness/kubetest":     {"internal/testharness/need"},
		"internal/testharness/pgtest":       {"internal/testharness/need"},
		// Applying a render to a cluster sits on render and nothing else.
		"pkg/cluster/kubeapply": {"pkg/api/kubeobjects", "pkg/kubeconfig", "pkg/ref", "internal/strictyaml", "pkg/config/generation", "pkg/release/attest", "internal/atomicfile", "pkg/release/resolve", "pkg/release/sign", "pkg/release/policy", "pkg/config/pool", "pkg/rootfs", "pkg/execution/sandbox/runner", "pkg/isolate", "pkg/isolate/shape", "pkg/execution/sandbox", "pkg/cluster/render"},
		// A rollout's fleet on a cluster: rollout's Fleet over render and
		// kubeapply (the proofs come through an interface).
		"pkg/cluster/kubefleet": {"pkg/api/kubeobjects", "pkg/kubeconfig", "pkg/execution/egress", "pkg/ref", "pkg/release/resolve", "internal/atomicfile", "internal/strictyaml", "pkg/release/attest", "pkg/release/sign", "pkg/config/generation", "pkg/release/policy", "pkg/config/gitops", "pkg/config/pool", "pkg/execution/sandbox", "pkg/execution/sandbox/runner", "pkg/rootfs", "pkg/execution/runs", "pkg/release/sbom", "pkg/release/template", "pkg/release/scan", "pkg/isolate", "pkg/execution/runtime", "pkg/isolate/shape", "pkg/release/rollout", "pkg/cluster/render", "pkg/cluster/kubeapply", "pkg/telemetry", "pkg/execution/cost", "pkg/config/tenancy", "internal/groupcommit"},
		// The canary is a client of the runtime's API (runtime for its API
		// types and client), with telemetry's metrics; never a backend.
		"pkg/execution/canary": {"pkg/execution/egress", "pkg/ref", "pkg/release/resolve", "internal/atomicfile", "internal/strictyaml", "pkg/release/attest", "pkg/release/sign", "pkg/config/generation", "pkg/release/policy", "pkg/config/gitops", "pkg/config/pool", "pkg/execution/sandbox", "pkg/execution/sandbox/runner", "pkg/rootfs", "pkg/execution/runs", "pkg/release/sbom", "pkg/release/template", "pkg/release/scan", "pkg/isolate", "pkg/execution/runtime", "pkg/isolate/shape", "pkg/telemetry", "pkg/execution/cost", "pkg/config/tenancy", "internal/groupcommit"},
		// Argo CD's plugins: render and the config repository, nothing of
		// Argo CD itself (its code stays in integrations/argocd).
		"pkg/cluster/argocd": {"pkg/api/kubeobjects", "pkg/kubeconfig", "pkg/ref", "internal/strictyaml", "pkg/config/generation", "pkg/config/gitops", "pkg/release/attest", "internal/atomicfile", "pkg/release/resolve", "pkg/release/sign", "pkg/release/policy", "pkg/config/pool", "pkg/rootfs", "pkg/execution/sandbox/runner", "pkg/isolate", "pkg/isolate/shape", "pkg/execution/sandbox", "pkg/cluster/render"},
		// The control plane: tenancy and the runtime's API client, never a
		// sandbox backend (dispatch crosses the network).
		"pkg/control": {"pkg/execution/egress", "pkg/config/gitops", "pkg/release/attest", "pkg/ref", "internal/strictyaml", "pkg/config/generation", "internal/atomicfile", "pkg/release/resolve", "pkg/release/sign", "pkg/release/policy", "pkg/config/pool", "pkg/execution/runs", "pkg/rootfs", "pkg/execution/sandbox/runner", "pkg/isolate", "pkg/isolate/shape", "pkg/execution/sandbox", "pkg/release/sbom", "pkg/release/scan", "pkg/release/template", "pkg/execution/runtime", "pkg/config/tenancy", "pkg/telemetry", "pkg/execution/cost", "pkg/control/deliver", "internal/groupcommit"},
		// The incident view: the control plane's store and run manifests,
		// read only.
		"pkg/control/incidents": {"pkg/execution/egress", "pkg/config/gitops", "pkg/release/attest", "pkg/ref", "internal/strictyaml", "pkg/config/generation", "internal/atomicfile", "pkg/release/resolve", "pkg/release/sign", "pkg/release/policy", "pkg/config/pool", "pkg/execution/runs", "pkg/rootfs", "pkg/execution/sandbox/runner", "pkg/isolate", "pkg/isolate/shape", "pkg/execution/sandbox", "pkg/release/sbom", "pkg/release/scan", "pkg/release/template", "pkg/execution/runtime", "pkg/config/tenancy", "pkg/telemetry", "pkg/execution/cost", "pkg/control/deliver", "pkg/control", "pkg/execution/reconcile", "internal/groupcommit"},
		// The cleanup reconciler: the Backend interface and the run store it
		// compares, nothing of the runtime (its state reaches it through
		// small interfaces the runtime's serve wires).
		"pkg/execution/reconcile": {"pkg/rootfs", "pkg/isolate", "pkg/execution/sandbox", "pkg/execution/sandbox/runner", "pkg/isolate/shape", "pkg/execution/runs", "internal/groupcommit"},
		// Cost by state: the ledger the runtime writes and its reports,
		// priced by tenancy's price table; run manifests for egress bytes.
		"pkg/execution/cost":           {"pkg/execution/runs", "pkg/config/tenancy", "pkg/ref", "internal/strictyaml", "pkg/config/generation", "pkg/config/pool", "pkg/config/gitops", "internal/groupcommit"},
		"internal/testharness/gittest": {"internal/testharness/need"},
		"pkg/config/gitops":            {},
		"pkg/execution/runs":           {"internal/groupcommit"},
		// Step outputs in CI systems' forms: formatting only, no Slipway
		// package under it but the atomic write of GitLab's code-quality report.
		"internal/cioutput": {"internal/atomicfile"},

		// Sandboxes: the runner protocol at the bottom, the shape of a
		// sandbox (refresh phase, workspace, environment) over isolate, shared
		// by the template build's tests and the local backend; the Backend
		// interface over rootfs, the local backend over rootfs and isolate.
		// The runner artifact stays small: the protocol package, and the
		// shape's refresh phase it runs as a pod's init container (over
		// isolate: the standard library and x/sys, which the runner uses
		// anyway), nothing else of Slipway's.
		"pkg/execution/sandbox/runner": {},
		"pkg/isolate/shape":            {"pkg/isolate"},
		"pkg/execution/sandbox":        {"pkg/rootfs", "pkg/execution/sandbox/runner", "pkg/isolate/shape", "pkg/isolate"},
		"pkg/execution/sandbox/local":  {"pkg/rootfs", "pkg/isolate", "pkg/execution/egress", "internal/atomicfile", "pkg/execution/sandbox", "pkg/execution/sandbox/runner", "pkg/isolate/shape"},
		"cmd/slipway-runner":           {"pkg/execution/sandbox/runner", "pkg/isolate/shape", "pkg/isolate"},
		// The Kubernetes backend: agent-sandbox's objects as render names
		// them, the runner reached through pod exec; nothing of the runtime.
		"pkg/execution/kubesandbox": {"pkg/api/kubeobjects", "pkg/kubeconfig", "pkg/ref", "internal/strictyaml", "pkg/config/generation", "pkg/release/attest", "internal/atomicfile", "pkg/release/resolve", "pkg/release/sign", "pkg/release/policy", "pkg/config/pool", "pkg/rootfs", "pkg/execution/sandbox/runner", "pkg/isolate", "pkg/isolate/shape", "pkg/execution/sandbox", "pkg/cluster/render"},
	}
	// Flags and the CLI stay under cmd/: no library package imports them itself
	// (a dependency such as syft may use cobra internally).
	forbiddenDirect := []string{"github.com/spf13/cobra", "github.com/spf13/pflag"}
	forbidden := []string{mod + "cmd/", mod + "internal/testharness/registrytest", mod + "internal/testharness/gittest", mod + "internal/testharness/kubetest", mod + "internal/testharness/pgtest", mod + "internal/testharness/runtimetest", mod + "internal/testharness/need"}
	// One go list for every package (a call each took over a minute on a
	// busy machine): its direct imports, then its dependencies.
	args := []string{"list", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .Deps " "}}`}
	for pkg := range allowed {
		args = append(args, "../../"+pkg)
	}
	listed, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, listed)
	}
	imports, deps := map[string]string{}, map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(listed)), "\n") {
		f := strings.SplitN(line, "|", 3)
		if len(f) != 3 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		imports[strings.TrimPrefix(f[0], mod)], deps[strings.TrimPrefix(f[0], mod)] = f[1], f[2]
	}
	for pkg, ok := range allowed {
		direct, found := imports[pkg]
		if !found {
			t.Fatalf("go list said nothing of %s", pkg)
		}
		for _, dep := range strings.Fields(direct) {
			for _, f := range forbiddenDirect {
				if dep == f {
					t.Errorf("%s imports %s; flags belong under cmd/", pkg, dep)
				}
			}
		}
		out := deps[pkg]
		for _, dep := range strings.Fields(out) {
			if dep == mod+pkg {
				continue
			}
			if strings.HasPrefix(dep, mod+"pkg/") {
				rel := strings.TrimPrefix(dep, mod)
				allowedDep := false
				for _, a := range ok {
					if rel == a {
						allowedDep = true
					}
				}
				if !allowedDep {
					t.Errorf("%s imports %s; allowed: %v", pkg, rel, ok)
				}
			}
			for _, f := range forbidden {
				// A harness may sit on another one it lists (need).
				if strings.HasPrefix(dep, f) && !slices.Contains(ok, strings.TrimPrefix(dep, mod)) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}
