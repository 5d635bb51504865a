// Package kube is the Kubernetes sandbox backend (see DialRunner; the
// backend itself follows).
package kube
