package kubetest

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// StopAPIServer kills the API server (by its process id) and waits for it
// to exit, leaving etcd, the node and the controllers running: clients,
// the kubelet and the controllers see connections refused until
// RestartAPIServer. For tests of what survives the API server going away.
func (c *Cluster) StopAPIServer() {
	if c.api != nil {
		c.api.kill()
	}
}

// RestartAPIServer starts the API server again on the address it had (so
// the kubeconfig, the node and the controllers reach it unchanged), with
// the same etcd and certificates, and returns once /readyz answers.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	if c.apiBin == "" {
		return errors.New("kubetest: RestartAPIServer: the API server was never started")
	}
	if c.api != nil {
		select {
		case <-c.api.exited:
		default:
			return errors.New("kubetest: RestartAPIServer: the API server still runs (StopAPIServer first)")
		}
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	var err error
	// The old process's port can linger a moment after it exited.
	for attempt := 1; attempt <= maxPortAttempts; attempt++ {
		if err = c.runAPIServer(ctx, c.apiBin, c.apiAddr); !errors.Is(err, errPortTaken) {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		return fmt.Errorf("kubetest: restart the API server on %s: %w", c.apiAddr, err)
	}
	return nil
}
