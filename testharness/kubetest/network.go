package kubetest

// The node's pod network: a CNI bridge on this machine only, with
// host-local addresses from PodCIDR, no default route and no masquerade:
// pods reach each other and the host (the bridge's address, PodGateway),
// nothing else. One node runs on a machine at a time (a lock file).
const (
	PodCIDR    = "10.217.42.0/24"
	PodGateway = "10.217.42.1"
	BridgeName = "kubetest0"
)
