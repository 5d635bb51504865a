package kubesandbox

import "github.com/slipway-dev/slipway/pkg/kubeaccess"

// Permissions is every verb the backend uses on the cluster, with namespace
// its claims' namespace (New's): what the runtime's Role must grant
// (deploy/base/runtime/rbac.yaml holds the same list; a test keeps them
// equal) and what the runtime checks at start (kubeaccess.Check).
//
//   - SandboxClaims: create (Create), get (take up a claim of the same
//     owner; see it gone), watch (until bound and Ready), list (List; the
//     reconciler's Objects), delete (Delete, DeleteObject);
//   - SandboxWarmPools: list (Health, WarmCounts, Objects), get and delete
//     (the reconciler removes the warm pools of generations not kept warm);
//   - Sandboxes and pods: get (placement, image and identity checks,
//     credentials' running pod), list (Objects; ProveWarm), watch
//     (ProveWarm: claims read what they are bound to from its watches),
//     delete (release without a garbage collector; the reconciler);
//   - pods/exec: create (DialRunner, PutCredential, RemoveCredential; a
//     WebSocket exec is authorised as create too);
//   - pods/log: get (the egress proxy's log, WithEgressRecorder);
//   - Secrets: list, get and delete (the reconciler's sweep of the Secrets
//     of runs, LabelRun, once their run is final);
//   - nodes: get, cluster-wide (placement: the node's image and age).
func Permissions(namespace string) []kubeaccess.Permission {
	var out []kubeaccess.Permission
	add := func(group, resource, sub string, verbs ...string) {
		for _, v := range verbs {
			out = append(out, kubeaccess.Permission{Group: group, Resource: resource, Subresource: sub, Verb: v, Namespace: namespace})
		}
	}
	add(claimsGVR.Group, claimsGVR.Resource, "", "create", "delete", "get", "list", "watch")
	add(warmPoolsGVR.Group, warmPoolsGVR.Resource, "", "delete", "get", "list")
	add(sandboxesGVR.Group, sandboxesGVR.Resource, "", "delete", "get", "list", "watch")
	add("", podsGVR.Resource, "", "delete", "get", "list", "watch")
	add("", podsGVR.Resource, "exec", "create")
	add("", podsGVR.Resource, "log", "get")
	add("", secretsGVR.Resource, "", "delete", "get", "list")
	out = append(out, kubeaccess.Permission{Resource: nodesGVR.Resource, Verb: "get"})
	return out
}

// Permissions is the backend's Permissions in its namespace.
func (b *Backend) Permissions() []kubeaccess.Permission { return Permissions(b.namespace) }
