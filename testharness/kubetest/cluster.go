package kubetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/slipway-dev/slipway/testharness/dnstest"
	"github.com/slipway-dev/slipway/testharness/need"
)

// StartTimeout bounds how long Start waits for etcd, the API server and the
// CRDs, unless the context's deadline is sooner (a loaded 2-core machine
// needs tens of seconds).
const StartTimeout = 3 * time.Minute

// ServiceCIDR is the API server's service address range.
const ServiceCIDR = "10.0.0.0/24"

// Cluster is a running etcd and kube-apiserver with agent-sandbox's CRDs.
// Stop it with Close.
type Cluster struct {
	dir        string
	kubeconfig string
	cfg        *rest.Config
	pki        *pki
	etcdURL    string
	etcd, api  *proc
	apiBin     string // the API server's binary and address, for RestartAPIServer
	apiAddr    string
	extra      []*proc // processes started later (controllers), killed first
	node       *Node   // the node, if started: closed after extra, before the API server
	opts       options
	lock       *os.File        // the machine's node lock, held from Start to Close WithServices
	dns        *dnstest.Server // ClusterDNS, WithServices
}

// NeedAPIServer leaves tb out under -short ("left out by -short: needs a real
// Kubernetes API server"), and when etcd or kube-apiserver is not built skips
// it naming the make target to run, or fails it when CI=true (package need).
func NeedAPIServer(tb testing.TB) {
	tb.Helper()
	need.Short(tb, "a real Kubernetes API server (etcd, kube-apiserver)")
	for _, b := range []string{"kube-apiserver", "etcd"} {
		_, err := Binary(b)
		need.Err(tb, err)
	}
}

// New starts a cluster in tb.TempDir and stops it when the test and its
// subtests complete. It leaves the test out as NeedAPIServer does, and calls
// tb.Fatalf if the cluster does not start.
// When the test fails, the end of the API server's log is logged.
// WithServices also needs a node here: it skips or fails as SkipUnlessNode
// does unless CheckServices says the cluster can start.
func New(tb testing.TB, opts ...Option) *Cluster {
	tb.Helper()
	NeedAPIServer(tb)
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			tb.Fatal(err)
		}
	}
	if o.services {
		need.Err(tb, CheckServices())
	}
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		tb.Fatal(err)
	}
	c, err := Start(context.Background(), dir, opts...)
	if err != nil {
		_ = os.RemoveAll(dir)
		tb.Fatalf("start cluster: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("kube-apiserver log ends:\n%s", c.api.tail(3000))
			ps := append([]*proc(nil), c.extra...)
			if c.node != nil {
				ps = append(ps, c.node.procs()...)
			}
			for _, p := range ps {
				if p != nil {
					tb.Logf("%s log ends:\n%s", p.name, p.tail(3000))
				}
			}
		}
		c.Close()
		_ = os.RemoveAll(dir)
	})
	return c
}

// Start starts etcd and kube-apiserver with their data, certificates, logs
// and kubeconfig in dir, installs agent-sandbox's CRDs and the default
// ServiceAccount, and returns once all are served. ctx bounds the start
// only (at most StartTimeout, plus NodeLockTimeout WithServices); the
// processes run until Close.
func Start(ctx context.Context, dir string, opts ...Option) (*Cluster, error) {
	c := &Cluster{dir: dir, kubeconfig: filepath.Join(dir, "kubeconfig")}
	for _, opt := range opts {
		if err := opt(&c.opts); err != nil {
			return nil, err
		}
	}
	etcdBin, err := Binary("etcd")
	if err != nil {
		return nil, err
	}
	apiBin, err := Binary("kube-apiserver")
	if err != nil {
		return nil, err
	}
	crds, err := CRDFiles(ctx)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	for _, d := range []string{"pki", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	apiIP := "127.0.0.1"
	if c.opts.services {
		if err := CheckServices(); err != nil {
			return nil, err
		}
		if err := c.prepareNetwork(ctx); err != nil {
			return nil, err
		}
		apiIP = PodGateway
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	if c.pki, err = newPKI(filepath.Join(dir, "pki")); err != nil {
		return nil, fmt.Errorf("kubetest: certificates: %w", err)
	}
	if err := retryPort(func() error { return c.startEtcd(ctx, etcdBin) }); err != nil {
		return nil, err
	}
	if err := retryPort(func() error { return c.startAPIServer(ctx, apiBin, apiIP) }); err != nil {
		return nil, err
	}
	if err := c.installCRDs(ctx, crds); err != nil {
		return nil, err
	}
	if c.opts.services {
		if err := c.startControllerManager(ctx); err != nil {
			return nil, err
		}
		if err := c.startDNS(); err != nil {
			return nil, err
		}
	}
	if err := c.PrepareNamespace(ctx, "default"); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// retryPort calls start again while it fails with errPortTaken.
func retryPort(start func() error) error {
	for attempt := 1; ; attempt++ {
		err := start()
		if errors.Is(err, errPortTaken) && attempt < maxPortAttempts {
			continue
		}
		return err
	}
}

func (c *Cluster) startEtcd(ctx context.Context, bin string) error {
	client, err := freeAddr()
	if err != nil {
		return err
	}
	peer, err := freeAddr()
	if err != nil {
		return err
	}
	data := filepath.Join(c.dir, "etcd")
	_ = os.RemoveAll(data) // a previous attempt's member
	c.etcdURL = "http://" + client
	p, err := startProc("etcd", bin, filepath.Join(c.dir, "logs", "etcd.log"),
		"--name=kubetest", "--data-dir="+data,
		"--listen-client-urls="+c.etcdURL, "--advertise-client-urls="+c.etcdURL,
		"--listen-peer-urls=http://"+peer, "--initial-advertise-peer-urls=http://"+peer,
		"--initial-cluster=kubetest=http://"+peer, "--initial-cluster-state=new",
		"--logger=zap", "--log-level=warn")
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	err = waitFor(ctx, p, "etcd health", func(ctx context.Context) bool {
		return get(ctx, hc, c.etcdURL+"/health") == http.StatusOK
	})
	if err != nil {
		p.kill()
		return err
	}
	c.etcd = p
	return nil
}

func (c *Cluster) startAPIServer(ctx context.Context, bin, ip string) error {
	addr, err := freeAddrOn(ip)
	if err != nil {
		return err
	}
	return c.runAPIServer(ctx, bin, addr)
}

// runAPIServer starts kube-apiserver on addr and waits for /readyz.
func (c *Cluster) runAPIServer(ctx context.Context, bin, addr string) error {
	ip, port, _ := net.SplitHostPort(addr)
	endpoints := "--endpoint-reconciler-type=lease"
	if ip == "127.0.0.1" {
		// A loopback address cannot be the kubernetes Service's endpoint.
		endpoints = "--endpoint-reconciler-type=none"
	}
	p, err := startProc("kube-apiserver", bin, filepath.Join(c.dir, "logs", "kube-apiserver.log"),
		"--etcd-servers="+c.etcdURL,
		"--bind-address="+ip, "--advertise-address="+ip, "--secure-port="+port,
		endpoints,
		"--cert-dir="+filepath.Join(c.dir, "pki"),
		"--tls-cert-file="+c.pki.serverCert, "--tls-private-key-file="+c.pki.serverKey,
		"--client-ca-file="+c.pki.caCert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+c.pki.saPub, "--service-account-signing-key-file="+c.pki.saKey,
		"--service-cluster-ip-range="+ServiceCIDR,
		"--authorization-mode=Node,RBAC", "--allow-privileged=true",
		// A node's kubelet (StartNode) listens on 127.0.0.1 and refuses a
		// loopback node IP, so the API server reaches it (pod logs, exec) by
		// the host's name, as the admin.
		"--kubelet-preferred-address-types=Hostname",
		"--kubelet-client-certificate="+c.pki.adminCert, "--kubelet-client-key="+c.pki.adminKey,
		"--enable-priority-and-fairness=false", "--profiling=false",
		"--v=1")
	if err != nil {
		return err
	}
	c.cfg = &rest.Config{
		Host: "https://" + addr,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: c.pki.caPEM, CertData: c.pki.adminCertPEM, KeyData: c.pki.adminKeyPEM,
		},
		QPS: 100, Burst: 200,
	}
	hc, err := rest.HTTPClientFor(c.cfg)
	if err != nil {
		p.kill()
		return err
	}
	hc.Timeout = 5 * time.Second
	err = waitFor(ctx, p, "kube-apiserver /readyz", func(ctx context.Context) bool {
		return get(ctx, hc, c.cfg.Host+"/readyz") == http.StatusOK
	})
	if err != nil {
		p.kill()
		return err
	}
	c.api, c.apiBin, c.apiAddr = p, bin, addr
	return c.writeKubeconfig()
}

// writeKubeconfig writes the admin's kubeconfig (client certificate,
// namespace default).
func (c *Cluster) writeKubeconfig() error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: c.cfg.Host, CertificateAuthorityData: c.pki.caPEM}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.pki.adminCertPEM, ClientKeyData: c.pki.adminKeyPEM}
	kc.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "kubetest"
	return clientcmd.WriteToFile(*kc, c.kubeconfig)
}

// waitFor polls ok until it is true, p exits or ctx ends.
func waitFor(ctx context.Context, p *proc, what string, ok func(context.Context) bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if ok(ctx) {
			return nil
		}
		select {
		case <-p.exited:
			return p.exitError()
		case <-ctx.Done():
			return fmt.Errorf("kubetest: %s: %w; log %s ends:\n%s", what, ctx.Err(), p.logFile, p.tail(2000))
		case <-tick.C:
		}
	}
}

// get returns the status code of GET url, 0 when there was none.
func get(ctx context.Context, hc *http.Client, url string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Config returns a copy of the admin's client configuration.
func (c *Cluster) Config() *rest.Config { return rest.CopyConfig(c.cfg) }

// Kubeconfig returns the path of the admin's kubeconfig file (context
// kubetest, namespace default).
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// Host returns the API server's URL, https://127.0.0.1:port (WithServices
// https://PodGateway:port, an address of this machine's bridge).
func (c *Cluster) Host() string { return c.cfg.Host }

// Dynamic returns a dynamic client for the admin.
func (c *Cluster) Dynamic() (dynamic.Interface, error) { return dynamic.NewForConfig(c.Config()) }

// Close kills every process by its process id (controllers, then the API
// server, then etcd) and waits for them. It leaves the directory to the
// caller. It is safe to call more than once.
func (c *Cluster) Close() {
	for i := len(c.extra) - 1; i >= 0; i-- {
		c.extra[i].kill()
	}
	if c.node != nil {
		c.node.Close()
	}
	if c.dns != nil {
		_ = c.dns.Close()
		c.dns = nil
	}
	if c.api != nil {
		c.api.kill()
	}
	if c.etcd != nil {
		c.etcd.kill()
	}
	c.releaseNetwork()
}

// Log returns the end of a process's log (etcd, kube-apiserver, a
// controller's name, kube-scheduler, or the node's containerd and kubelet),
// for a failing test to show.
func (c *Cluster) Log(name string) string {
	ps := append([]*proc{c.etcd, c.api}, c.extra...)
	if c.node != nil {
		ps = append(ps, c.node.procs()...)
	}
	for _, p := range ps {
		if p != nil && p.name == name {
			return p.tail(4096)
		}
	}
	return fmt.Sprintf("no process %q (have%s)", name, names(ps))
}

func names(ps []*proc) string {
	var b strings.Builder
	sep := " "
	for _, p := range ps {
		if p != nil {
			b.WriteString(sep + p.name)
			sep = ", "
		}
	}
	return b.String()
}
