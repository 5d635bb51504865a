package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/slipway-dev/slipway/testharness/need"
)

// Versions of the parts the harness runs; tools/kube-bins.sh builds the
// same ones.
const (
	KubeVersion         = "v1.37.2"
	AgentSandboxModule  = "sigs.k8s.io/agent-sandbox"
	AgentSandboxVersion = "v0.5.6"
)

// BuildHint is the command that builds the missing binaries.
const BuildHint = "make kube-bins"

// ErrNotBuilt is returned when a binary the harness needs is absent: build
// it with BuildHint (etcd comes from Debian: apt-get install etcd-server).
var ErrNotBuilt = errors.New("not built")

// CacheDir is where `make kube-bins` puts the binaries:
// $SLIPWAY_KUBE_CACHE, else ~/.cache/slipway-kube.
func CacheDir() (string, error) {
	if d := os.Getenv("SLIPWAY_KUBE_CACHE"); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("kubetest: no cache directory: %w", err)
	}
	return filepath.Join(home, ".cache", "slipway-kube"), nil
}

// debianBinaries are the binaries Debian packages provide (found in PATH,
// or at a fixed path for CNI plugins), with the package to install.
var debianBinaries = map[string]string{
	"etcd": "etcd-server", "containerd": "containerd", "runc": "runc",
	"containerd-shim-runc-v2": "containerd", "iptables": "iptables",
	CNIBinDir + "/bridge":     "containernetworking-plugins",
	CNIBinDir + "/host-local": "containernetworking-plugins",
	CNIBinDir + "/loopback":   "containernetworking-plugins",
}

// CNIBinDir is where Debian's containernetworking-plugins puts the CNI
// plugins.
const CNIBinDir = "/usr/lib/cni"

// Binary returns the path of a built binary: kube-apiserver, kubelet,
// kube-scheduler, kube-proxy, kube-controller-manager and pause under
// <cache>/v1.37.2/bin,
// agent-sandbox-controller under <cache>/agent-sandbox-v0.5.6/bin; etcd,
// containerd, runc, containerd-shim-runc-v2 and iptables from PATH, and the CNI
// plugins by their path under CNIBinDir (Debian packages). The error
// matches ErrNotBuilt when it is absent.
func Binary(name string) (string, error) {
	if pkg, ok := debianBinaries[name]; ok {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("kubetest: %s %w: apt-get install %s (make deps)", name, ErrNotBuilt, pkg)
		}
		return p, nil
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	var p string
	switch name {
	case "kube-apiserver", "kubelet", "kube-scheduler", "kube-proxy", "kube-controller-manager", "pause":
		p = filepath.Join(cache, KubeVersion, "bin", name)
	case "agent-sandbox-controller":
		p = filepath.Join(cache, "agent-sandbox-"+AgentSandboxVersion, "bin", name)
	default:
		return "", fmt.Errorf("kubetest: unknown binary %q", name)
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("kubetest: %s %w (%s): run %s", p, ErrNotBuilt, name, BuildHint)
	}
	return p, nil
}

// CRDFiles returns the paths of agent-sandbox v0.5.6's CRDs (k8s/crds/ in
// its module), downloading the module into the Go module cache if needed.
func CRDFiles(ctx context.Context) ([]string, error) {
	dir, err := ModuleDir(ctx, AgentSandboxModule, AgentSandboxVersion)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "k8s", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("kubetest: no CRDs under %s", filepath.Join(dir, "k8s", "crds"))
	}
	return files, nil
}

// ModuleDir returns the folder of module at version in the Go module
// cache, downloading it (that module alone, not its dependencies) if
// needed: a test reads another project's CRDs from there, never from a
// copy in this repository.
func ModuleDir(ctx context.Context, module, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kubetest: go mod download %s@%s: %w: %s", module, version, err, stderr.Bytes())
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", fmt.Errorf("kubetest: go mod download %s@%s: %w", module, version, err)
	}
	if mod.Error != "" || mod.Dir == "" {
		return "", fmt.Errorf("kubetest: go mod download %s@%s: no module directory: %s", module, version, mod.Error)
	}
	return mod.Dir, nil
}

// SkipUnlessNode leaves tb out under -short ("left out by -short: needs a
// real Kubernetes node"), and unless a node can start here with
// kube-apiserver, etcd and the extra binaries named, skips it naming what to
// build or install, or fails it when CI=true (package need): CI builds the
// binaries (make kube-bins) and runs as root.
func SkipUnlessNode(tb testing.TB, extra ...string) {
	tb.Helper()
	need.Short(tb, "a real Kubernetes node (containerd, kubelet, root)")
	need.Err(tb, CheckNodeCluster(extra...))
}

// CheckNodeCluster says why a cluster with a node cannot start here, with
// kube-apiserver, etcd and the extra binaries named (nil when it can): a
// binary not built or installed (matching ErrNotBuilt, naming what to run),
// or CheckNode's reason. SkipUnlessNode skips a test with it; a program
// (make demo-kube) prints it.
func CheckNodeCluster(extra ...string) error {
	for _, b := range append([]string{"kube-apiserver", "etcd"}, extra...) {
		if _, err := Binary(b); err != nil {
			return err
		}
	}
	return CheckNode()
}
