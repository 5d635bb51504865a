package kubetest

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// StartSandboxController runs agent-sandbox v0.5.6's own controller (with
// its extensions: templates, warm pools, claims) against the cluster as
// the admin, its webhook off (the cluster reads and writes only v1beta1,
// the CRDs' storage version, so no conversion is ever asked for) and
// returns once its readiness probe answers. It is killed first by Close.
// Without a kubelet, it creates Sandboxes and Pods that never run.
func (c *Cluster) StartSandboxController(ctx context.Context) error {
	bin, err := Binary("agent-sandbox-controller")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	return retryPort(func() error {
		probe, err := freeAddr()
		if err != nil {
			return err
		}
		p, err := startProcEnv("agent-sandbox-controller", bin, filepath.Join(c.dir, "logs", "agent-sandbox-controller.log"),
			append(os.Environ(), "KUBECONFIG="+c.kubeconfig),
			"--extensions", "--leader-elect=false", "--enable-webhook=false", "--manage-webhook-certs=false",
			"--metrics-bind-address=0", "--health-probe-bind-address="+probe)
		if err != nil {
			return err
		}
		hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
		err = waitFor(ctx, p, "agent-sandbox-controller /readyz", func(ctx context.Context) bool {
			return get(ctx, hc, "http://"+probe+"/readyz") == http.StatusOK
		})
		if err != nil {
			p.kill()
			return err
		}
		c.extra = append(c.extra, p)
		return nil
	})
}

// StartScheduler runs kube-scheduler v1.37.2 (built by `make kube-bins`)
// against the cluster as the admin, so pods that name no node (those of
// agent-sandbox's warm pools) are bound to the node of StartNode. It
// serves nothing (no secure port) and returns once it runs; it is killed
// first by Close, with the controllers.
func (c *Cluster) StartScheduler(ctx context.Context) error {
	bin, err := Binary("kube-scheduler")
	if err != nil {
		return err
	}
	p, err := startProc("kube-scheduler", bin, filepath.Join(c.dir, "logs", "kube-scheduler.log"),
		"--kubeconfig="+c.kubeconfig, "--authentication-kubeconfig="+c.kubeconfig, "--authorization-kubeconfig="+c.kubeconfig,
		"--leader-elect=false", "--secure-port=0", "--v=1")
	if err != nil {
		return err
	}
	// A bad flag or kubeconfig ends it at once.
	select {
	case <-p.exited:
		return p.exitError()
	case <-time.After(500 * time.Millisecond):
	case <-ctx.Done():
		p.kill()
		return ctx.Err()
	}
	c.extra = append(c.extra, p)
	return nil
}
