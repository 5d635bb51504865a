// Package kubeconfig loads a kubeconfig file: the client configuration of
// its current context and that context's namespace. The Kubernetes sandbox
// backend, the applier and the CLI share it, so none of them imports another
// for it.
//
// It is not a client: it returns client-go's rest.Config for one.
package kubeconfig
