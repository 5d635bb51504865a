package kubetest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CheckServices says why a cluster WithServices cannot start here (nil when
// it can): what CheckNode says, kube-proxy or kube-controller-manager not
// built, or iptables not installed.
func CheckServices() error {
	if err := CheckNode(); err != nil {
		return err
	}
	for _, b := range append([]string{"iptables"}, serviceParts...) {
		if _, err := Binary(b); err != nil {
			return err
		}
	}
	return nil
}

// prepareNetwork takes the machine's node lock for the cluster's life,
// clears what a dead test's node left (pods, kube-proxy's rules, the
// bridge) and makes the bridge with PodGateway, for the API server to
// listen on before the node's first pod would have made it.
func (c *Cluster) prepareNetwork(ctx context.Context) error {
	lockCtx, cancel := context.WithTimeout(ctx, NodeLockTimeout)
	lock, err := lockNode(lockCtx)
	cancel()
	if err != nil {
		return err
	}
	c.lock = lock
	killOrphanShims()
	if err := cleanupOrphanProxy(ctx, filepath.Join(c.dir, "logs", "kube-proxy-cleanup.log")); err != nil {
		return err
	}
	deleteBridge()
	for _, args := range [][]string{
		{"link", "add", "name", BridgeName, "type", "bridge"},
		{"addr", "add", PodGateway + "/24", "dev", BridgeName},
		{"link", "set", BridgeName, "up"},
		// The host's route to ServiceCIDR: through the bridge, so that a
		// Service IP kube-proxy has not programmed (yet) stays on this
		// machine and goes unanswered. By the default route it would leave
		// the machine, and whatever answers that address outside (a 404
		// from a proxy of the machine's network, seen in CI) would pass for
		// the Service. A programmed one is rewritten by kube-proxy's rules
		// and routed to its pod as before. Deleted with the bridge.
		{"route", "add", ServiceCIDR, "dev", BridgeName},
	} {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("kubetest: bridge %s: ip %s: %w: %s", BridgeName, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// releaseNetwork deletes the bridge and releases the node lock, if the
// cluster took them (WithServices).
func (c *Cluster) releaseNetwork() {
	if c.lock == nil {
		return
	}
	deleteBridge()
	c.lock.Close()
	c.lock = nil
}

// startControllerManager runs kube-controller-manager v1.37.2 with
// ServiceControllers as the admin, serving nothing (no secure port, no
// leader election), and returns once its serviceaccount controller has
// made kube-system's default ServiceAccount: then it works.
func (c *Cluster) startControllerManager(ctx context.Context) error {
	bin, err := Binary("kube-controller-manager")
	if err != nil {
		return err
	}
	p, err := startProc("kube-controller-manager", bin, filepath.Join(c.dir, "logs", "kube-controller-manager.log"),
		"--kubeconfig="+c.kubeconfig, "--controllers="+strings.Join(ServiceControllers, ","),
		"--leader-elect=false", "--secure-port=0", "--root-ca-file="+c.pki.caCert,
		"--use-service-account-credentials=false", "--v=1")
	if err != nil {
		return err
	}
	c.extra = append(c.extra, p)
	dyn, err := c.Dynamic()
	if err != nil {
		return err
	}
	return waitFor(ctx, p, "kube-controller-manager (kube-system's default ServiceAccount)", func(ctx context.Context) bool {
		_, err := dyn.Resource(saGVR).Namespace("kube-system").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
}

// startProxy runs kube-proxy v1.37.2 in iptables mode for the node, kept
// local: no NodePorts on localhost (route_localnet untouched), conntrack
// sysctls untouched (every limit and timeout 0), its OOM score left as it
// is (root here lacks CAP_SYS_RESOURCE), health and metrics on 127.0.0.1.
// It returns once /healthz says the rules are in sync.
func (n *Node) startProxy(ctx context.Context, c *Cluster) error {
	bin, err := Binary("kube-proxy")
	if err != nil {
		return err
	}
	n.proxyBin = bin
	dir := filepath.Join(n.dir, "kube-proxy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return retryPort(func() error {
		healthz, err := freeAddr()
		if err != nil {
			return err
		}
		metrics, err := freeAddr()
		if err != nil {
			return err
		}
		config := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: %[1]q}
hostnameOverride: %[2]q
healthzBindAddress: %[3]q
metricsBindAddress: %[4]q
clusterCIDR: %[5]q
detectLocalMode: ClusterCIDR
oomScoreAdj: 0
iptables: {localhostNodePorts: false, masqueradeAll: false}
nodePortAddresses: [primary]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s, tcpBeLiberal: false, udpTimeout: 0s, udpStreamTimeout: 0s}
`, c.kubeconfig, n.name, healthz, metrics, PodCIDR)
		file := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
			return err
		}
		p, err := startProc("kube-proxy", bin, filepath.Join(c.dir, "logs", "kube-proxy.log"), "--config="+file, "--v=1")
		if err != nil {
			return err
		}
		hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
		err = waitFor(ctx, p, "kube-proxy /healthz", func(ctx context.Context) bool {
			return get(ctx, hc, "http://"+healthz+"/healthz") == http.StatusOK
		})
		if err != nil {
			p.kill()
			return err
		}
		n.proxy = p
		return nil
	})
}

// stopProxy kills kube-proxy and removes its rules (kube-proxy --cleanup).
func (n *Node) stopProxy() {
	if n.proxy == nil {
		return
	}
	n.proxy.kill()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = cleanupProxy(ctx, n.proxy.logFile)
}

// cleanupProxy runs kube-proxy --cleanup, which removes the rules a
// kube-proxy made (none: nothing to do), its output appended to logFile.
func cleanupProxy(ctx context.Context, logFile string) error {
	bin, err := Binary("kube-proxy")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, bin, "--cleanup", "--v=1")
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubetest: kube-proxy --cleanup (log %s): %w", logFile, err)
	}
	return nil
}

// cleanupOrphanProxy removes the rules of a kube-proxy whose test binary
// died (kube-proxy died with it, by the parent-death signal; its rules did
// not), if there are any (kube-proxy's KUBE-SERVICES chain in the nat
// table) and kube-proxy is built. Called with the node lock held.
func cleanupOrphanProxy(ctx context.Context, logFile string) error {
	if _, err := Binary("kube-proxy"); err != nil {
		return nil // no kube-proxy ever ran from this cache
	}
	if err := exec.CommandContext(ctx, "iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES").Run(); err != nil {
		return nil // no chain: nothing to clean
	}
	return cleanupProxy(ctx, logFile)
}
