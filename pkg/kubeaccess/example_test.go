package kubeaccess_test

import (
	"errors"
	"fmt"

	"github.com/slipway-dev/slipway/pkg/kubeaccess"
)

// A missing permission is named the way the runtime's log and /readyz name
// it: verb, resource, subresource, group and namespace.
func Example() {
	perms := []kubeaccess.Permission{
		{Resource: "pods", Subresource: "exec", Verb: "create", Namespace: "slipway-sandboxes"},
		{Group: "agents.x-k8s.io", Resource: "sandboxes", Verb: "delete", Namespace: "slipway-sandboxes"},
		{Resource: "nodes", Verb: "get"},
	}
	for _, p := range perms {
		fmt.Println(p)
	}
	var err error = &kubeaccess.Missing{Permissions: perms[1:]}
	fmt.Println(err)
	fmt.Println(errors.Is(err, kubeaccess.ErrDenied))
	// Output:
	// create pods/exec in namespace slipway-sandboxes
	// delete sandboxes.agents.x-k8s.io in namespace slipway-sandboxes
	// get nodes cluster-wide
	// may not delete sandboxes.agents.x-k8s.io in namespace slipway-sandboxes; may not get nodes cluster-wide
	// true
}
