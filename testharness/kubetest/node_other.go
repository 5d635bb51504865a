//go:build !linux

package kubetest

import (
	"context"
	"errors"
)

// Node is a kubelet with containerd on Linux only.
type Node struct{}

// StartNode fails: a node needs Linux.
func (c *Cluster) StartNode(ctx context.Context, registry string) (*Node, error) {
	return nil, errors.New("kubetest: a node needs Linux")
}

// CheckNode says a node needs Linux.
func CheckNode() error { return errors.New("kubetest: a node needs Linux") }

// Name is empty.
func (n *Node) Name() string { return "" }

// Close does nothing.
func (n *Node) Close() {}

func (n *Node) procs() []*proc { return nil }
