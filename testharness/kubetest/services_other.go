//go:build !linux

package kubetest

import (
	"context"
	"errors"
)

// CheckServices says a cluster WithServices needs Linux.
func CheckServices() error { return errors.New("kubetest: Services need a node, which needs Linux") }

func (c *Cluster) prepareNetwork(context.Context) error { return CheckServices() }

func (c *Cluster) releaseNetwork() {}

func (c *Cluster) startControllerManager(context.Context) error { return CheckServices() }
