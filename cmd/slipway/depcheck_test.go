package main

import (
	"os/exec"
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
		"pkg/ref":         {},
		"pkg/atomicfile":  {},
		"pkg/groupcommit": {},
		"pkg/resolve":     {"pkg/ref", "pkg/atomicfile"},
		"pkg/pin":         {"pkg/ref", "pkg/resolve", "pkg/atomicfile"},
		"pkg/rootfs":      {},
		"pkg/isolate":     {},
		"pkg/egress":      {},
		// Metrics and traces: the OTel SDK and nothing of Slipway.
		"pkg/telemetry":  {},
		"pkg/scan":       {},
		"pkg/deliver":    {"pkg/scan"},
		"pkg/sbom":       {"pkg/atomicfile"},
		"pkg/strictyaml": {},
		"pkg/generation": {"pkg/ref", "pkg/strictyaml"},
		"pkg/attest":     {},
		"pkg/sign":       {"pkg/attest", "pkg/resolve", "pkg/ref", "pkg/atomicfile"},
		"pkg/policy":     {"pkg/ref", "pkg/resolve", "pkg/atomicfile", "pkg/strictyaml", "pkg/attest", "pkg/sign", "pkg/generation"},
		"pkg/runtime":    {"pkg/egress", "pkg/ref", "pkg/resolve", "pkg/atomicfile", "pkg/strictyaml", "pkg/attest", "pkg/sign", "pkg/generation", "pkg/policy", "pkg/gitops", "pkg/pool", "pkg/sandbox", "pkg/sandbox/runner", "pkg/rootfs", "pkg/runs", "pkg/sbom", "pkg/template", "pkg/scan", "pkg/isolate", "pkg/sandbox/shape", "pkg/telemetry", "pkg/cost", "pkg/tenancy", "pkg/groupcommit"},
		// The runtime on this machine: the local backend under it.
		"pkg/runtime/serve": {"pkg/egress", "pkg/ref", "pkg/resolve", "pkg/atomicfile", "pkg/strictyaml", "pkg/attest", "pkg/sign", "pkg/generation", "pkg/policy", "pkg/gitops", "pkg/pool", "pkg/sandbox", "pkg/sandbox/runner", "pkg/rootfs", "pkg/runs", "pkg/sbom", "pkg/template", "pkg/scan", "pkg/runtime", "pkg/sandbox/local", "pkg/isolate", "pkg/sandbox/shape", "pkg/kubesandbox", "pkg/kubeapply", "pkg/render", "pkg/telemetry", "pkg/cost", "pkg/tenancy", "pkg/reconcile", "pkg/groupcommit"},
		// Rollouts sit on top of the library; the fleet is an interface the
		// runtime's client implements (runtime for its API types).
		"pkg/rollout":      {"pkg/egress", "pkg/ref", "pkg/resolve", "pkg/atomicfile", "pkg/strictyaml", "pkg/attest", "pkg/sign", "pkg/generation", "pkg/policy", "pkg/gitops", "pkg/pool", "pkg/sandbox", "pkg/sandbox/runner", "pkg/rootfs", "pkg/runs", "pkg/sbom", "pkg/template", "pkg/scan", "pkg/isolate", "pkg/runtime", "pkg/sandbox/shape", "pkg/telemetry", "pkg/cost", "pkg/tenancy", "pkg/groupcommit"},
		"pkg/template":     {"pkg/ref", "pkg/resolve", "pkg/atomicfile", "pkg/strictyaml", "pkg/rootfs", "pkg/isolate", "pkg/scan", "pkg/sandbox/shape"},
		"pkg/release":      {"pkg/ref", "pkg/resolve", "pkg/atomicfile", "pkg/strictyaml", "pkg/rootfs", "pkg/isolate", "pkg/scan", "pkg/sbom", "pkg/template", "pkg/attest", "pkg/sign", "pkg/generation", "pkg/gitops", "pkg/policy", "pkg/pool", "pkg/sandbox/shape"},
		"pkg/pool":         {"pkg/ref", "pkg/strictyaml", "pkg/generation"},
		"pkg/tenancy":      {"pkg/ref", "pkg/strictyaml", "pkg/generation", "pkg/pool", "pkg/gitops"},
		"pkg/registrytest": {},
		"pkg/kubetest":     {},
		"pkg/pgtest":       {},
		// Applying a render to a cluster sits on render and nothing else.
		"pkg/kubeapply": {"pkg/ref", "pkg/strictyaml", "pkg/generation", "pkg/attest", "pkg/atomicfile", "pkg/resolve", "pkg/sign", "pkg/policy", "pkg/pool", "pkg/rootfs", "pkg/sandbox/runner", "pkg/isolate", "pkg/sandbox/shape", "pkg/sandbox", "pkg/render"},
		// A rollout's fleet on a cluster: rollout's Fleet over render and
		// kubeapply (the proofs come through an interface).
		"pkg/kubefleet": {"pkg/egress", "pkg/ref", "pkg/resolve", "pkg/atomicfile", "pkg/strictyaml", "pkg/attest", "pkg/sign", "pkg/generation", "pkg/policy", "pkg/gitops", "pkg/pool", "pkg/sandbox", "pkg/sandbox/runner", "pkg/rootfs", "pkg/runs", "pkg/sbom", "pkg/template", "pkg/scan", "pkg/isolate", "pkg/runtime", "pkg/sandbox/shape", "pkg/rollout", "pkg/render", "pkg/kubeapply", "pkg/telemetry", "pkg/cost", "pkg/tenancy", "pkg/groupcommit"},
		// The canary is a client of the runtime's API (runtime for its API
		// types and client), with telemetry's metrics; never a backend.
		"pkg/canary": {"pkg/egress", "pkg/ref", "pkg/resolve", "pkg/atomicfile", "pkg/strictyaml", "pkg/attest", "pkg/sign", "pkg/generation", "pkg/policy", "pkg/gitops", "pkg/pool", "pkg/sandbox", "pkg/sandbox/runner", "pkg/rootfs", "pkg/runs", "pkg/sbom", "pkg/template", "pkg/scan", "pkg/isolate", "pkg/runtime", "pkg/sandbox/shape", "pkg/telemetry", "pkg/cost", "pkg/tenancy", "pkg/groupcommit"},
		// Argo CD's plugins: render and the config repository, nothing of
		// Argo CD itself (its code stays in integrations/argocd).
		"pkg/argocd": {"pkg/ref", "pkg/strictyaml", "pkg/generation", "pkg/gitops", "pkg/attest", "pkg/atomicfile", "pkg/resolve", "pkg/sign", "pkg/policy", "pkg/pool", "pkg/rootfs", "pkg/sandbox/runner", "pkg/isolate", "pkg/sandbox/shape", "pkg/sandbox", "pkg/render"},
		// The control plane: tenancy and the runtime's API client, never a
		// sandbox backend (dispatch crosses the network).
		"pkg/control": {"pkg/egress", "pkg/gitops", "pkg/attest", "pkg/ref", "pkg/strictyaml", "pkg/generation", "pkg/atomicfile", "pkg/resolve", "pkg/sign", "pkg/policy", "pkg/pool", "pkg/runs", "pkg/rootfs", "pkg/sandbox/runner", "pkg/isolate", "pkg/sandbox/shape", "pkg/sandbox", "pkg/sbom", "pkg/scan", "pkg/template", "pkg/runtime", "pkg/tenancy", "pkg/telemetry", "pkg/cost", "pkg/deliver", "pkg/groupcommit"},
		// The incident view: the control plane's store and run manifests,
		// read only.
		"pkg/incidents": {"pkg/egress", "pkg/gitops", "pkg/attest", "pkg/ref", "pkg/strictyaml", "pkg/generation", "pkg/atomicfile", "pkg/resolve", "pkg/sign", "pkg/policy", "pkg/pool", "pkg/runs", "pkg/rootfs", "pkg/sandbox/runner", "pkg/isolate", "pkg/sandbox/shape", "pkg/sandbox", "pkg/sbom", "pkg/scan", "pkg/template", "pkg/runtime", "pkg/tenancy", "pkg/telemetry", "pkg/cost", "pkg/deliver", "pkg/control", "pkg/reconcile", "pkg/groupcommit"},
		// The cleanup reconciler: the Backend interface and the run store it
		// compares, nothing of the runtime (its state reaches it through
		// small interfaces the runtime's serve wires).
		"pkg/reconcile": {"pkg/rootfs", "pkg/isolate", "pkg/sandbox", "pkg/sandbox/runner", "pkg/sandbox/shape", "pkg/runs", "pkg/groupcommit"},
		// Cost by state: the ledger the runtime writes and its reports,
		// priced by tenancy's price table; run manifests for egress bytes.
		"pkg/cost":    {"pkg/runs", "pkg/tenancy", "pkg/ref", "pkg/strictyaml", "pkg/generation", "pkg/pool", "pkg/gitops", "pkg/groupcommit"},
		"pkg/gittest": {},
		"pkg/gitops":  {},
		"pkg/runs":    {"pkg/groupcommit"},
		// Step outputs in CI systems' forms: formatting only, no Slipway
		// package under it but the atomic write of GitLab's code-quality report.
		"pkg/cioutput": {"pkg/atomicfile"},

		// Sandboxes: the runner protocol at the bottom, the shape of a
		// sandbox (refresh phase, workspace, environment) over isolate, shared
		// by the template build's tests and the local backend; the Backend
		// interface over rootfs, the local backend over rootfs and isolate.
		// The runner artifact stays small: the protocol package, and the
		// shape's refresh phase it runs as a pod's init container (over
		// isolate: the standard library and x/sys, which the runner uses
		// anyway), nothing else of Slipway's.
		"pkg/sandbox/runner": {},
		"pkg/sandbox/shape":  {"pkg/isolate"},
		"pkg/sandbox":        {"pkg/rootfs", "pkg/sandbox/runner", "pkg/sandbox/shape", "pkg/isolate"},
		"pkg/sandbox/local":  {"pkg/rootfs", "pkg/isolate", "pkg/egress", "pkg/atomicfile", "pkg/sandbox", "pkg/sandbox/runner", "pkg/sandbox/shape"},
		"cmd/slipway-runner": {"pkg/sandbox/runner", "pkg/sandbox/shape", "pkg/isolate"},
		// The Kubernetes backend: agent-sandbox's objects as render names
		// them, the runner reached through pod exec; nothing of the runtime.
		"pkg/kubesandbox": {"pkg/ref", "pkg/strictyaml", "pkg/generation", "pkg/attest", "pkg/atomicfile", "pkg/resolve", "pkg/sign", "pkg/policy", "pkg/pool", "pkg/rootfs", "pkg/sandbox/runner", "pkg/isolate", "pkg/sandbox/shape", "pkg/sandbox", "pkg/render"},
	}
	// Flags and the CLI stay under cmd/: no library package imports them itself
	// (a dependency such as syft may use cobra internally).
	forbiddenDirect := []string{"github.com/spf13/cobra", "github.com/spf13/pflag"}
	forbidden := []string{mod + "cmd/", mod + "pkg/registrytest", mod + "pkg/gittest", mod + "pkg/kubetest", mod + "pkg/pgtest", mod + "pkg/runtime/runtimetest"}
	for pkg, ok := range allowed {
		direct, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "../../"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, direct)
		}
		for _, dep := range strings.Fields(string(direct)) {
			for _, f := range forbiddenDirect {
				if dep == f {
					t.Errorf("%s imports %s; flags belong under cmd/", pkg, dep)
				}
			}
		}
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../../"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
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
				if strings.HasPrefix(dep, f) && !((pkg == "pkg/registrytest" || pkg == "pkg/gittest" || pkg == "pkg/kubetest" || pkg == "pkg/pgtest") && dep == mod+pkg) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}
