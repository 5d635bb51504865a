package kubetest

// Option configures Start and New.
type Option func(*options) error

type options struct {
	services bool
}

// WithServices makes the cluster route Services, as a real one does, for
// the tests that need them (it costs every other test nothing): Start
// takes the machine's node lock (a cluster with Services holds it from
// Start to Close, as its node's network is the machine's), makes the
// node's bridge (BridgeName, PodGateway) and runs the API server on the
// bridge's address, so that the in-cluster kubernetes Service has an
// endpoint pods reach; it runs kube-controller-manager v1.37.2 (built by
// `make kube-bins`) with the controllers ServiceControllers names, which
// replace what PrepareNamespace writes by hand otherwise; StartNode adds
// kube-proxy v1.37.2 in iptables mode to the node. Linux and root only
// (CheckServices says why not).
func WithServices() Option {
	return func(o *options) error {
		o.services = true
		return nil
	}
}

// ServiceControllers are the controllers of kube-controller-manager a
// cluster WithServices runs: Deployments and ReplicaSets, the
// EndpointSlices of Services with a selector, each namespace's default
// ServiceAccount and kube-root-ca.crt ConfigMap, and the garbage and
// namespace collectors that delete what their owners leave.
var ServiceControllers = []string{
	"deployment-controller", "replicaset-controller", "endpointslice-controller",
	"serviceaccount-controller", "root-ca-certificate-publisher-controller",
	"garbage-collector-controller", "namespace-controller",
}

// serviceParts are the binaries a cluster WithServices runs besides a
// node's.
var serviceParts = []string{"kube-controller-manager", "kube-proxy"}
