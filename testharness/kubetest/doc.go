// Package kubetest runs a real Kubernetes API server for tests and
// benchmarks, in the spirit of net/http/httptest and package registrytest.
//
// Start runs Debian's etcd and kube-apiserver v1.37.2 (built from the Go
// module proxy by `make kube-bins` into a cache outside the clone, see
// CacheDir) as child processes on free ports of 127.0.0.1, with their data,
// certificates and logs in a temporary directory: a certificate authority,
// a serving certificate, a service-account signing key and an admin client
// certificate (group system:masters) in a kubeconfig file. Once /readyz
// answers, it installs agent-sandbox v0.5.6's CRDs, read from its module in
// the Go module cache (never copied into this repository; their conversion
// webhook replaced by conversion None, as the controller runs without its
// webhook), waits until they are established, and creates the default ServiceAccount and the
// kube-root-ca.crt ConfigMap a controller-manager would have created.
// StartSandboxController runs agent-sandbox's own controller (also built by
// `make kube-bins`) against it.
//
// New skips the test, naming the make target to run, when a binary is
// missing; everything is killed by process id at cleanup, and a test binary
// that dies first takes its children with it (parent-death signal). A
// program (the Kubernetes part of the demo, make demo-kube) uses Start with
// a directory of its own and Close instead, after CheckNodeCluster says a
// node can run here.
//
// By default it runs no kubelet, scheduler or controller-manager: objects
// are stored and validated by the real API server against the real CRDs,
// but no pod runs, and the kubernetes Service has no endpoints (the API
// server listens on a loopback address, which cannot be one). CheckStored
// reads objects back to prove a CRD's schema kept every field given.
//
// StartNode adds a real node, as root on Linux (CheckNode says why not):
// Debian's containerd 1.6 (own root, state and socket in the cluster's
// directory; the cri plugin with restrict_oom_score_adj, cgroupfs, runc,
// the registry's hosts.toml) and runc, a CNI bridge (BridgeName, PodCIDR:
// no default route, no masquerade) and kubelet v1.37.2 registered under
// the host's name with a client certificate of the cluster's CA. The pause
// image is made from the static pause binary of `make kube-bins` and
// pushed to the tests' registry. The API server reaches the kubelet by
// the host's name (pod logs). Without a controller-manager, StartNode
// lifts the kubelet's not-ready taint itself once the Node is Ready.
// StartScheduler runs kube-scheduler for pods that name no node. Close
// stops the node first (kubelet, the shims and the pods' processes,
// containerd), unmounts what it mounted and deletes the bridge. One node
// runs on a machine at a time (a lock file).
//
// WithServices makes a cluster that routes Services: it holds the node
// lock from Start to Close, makes the bridge first and runs the API server
// on PodGateway (the kubernetes Service's endpoint), runs
// kube-controller-manager (ServiceControllers) in place of what
// PrepareNamespace writes by hand, and StartNode adds kube-proxy in
// iptables mode, kept local (no localhost NodePorts, conntrack sysctls
// untouched, health and metrics on 127.0.0.1, --cleanup at Close); the
// host and the pods get a route to ServiceCIDR through the bridge (a
// Service IP not programmed yet never leaves the machine), a resolv.conf with no
// nameserver, and ClusterDNS (the kubelet's clusterDNS), which answers
// the cluster's Service names from the API server, in place of CoreDNS.
//
// StopAPIServer kills the API server alone (etcd, the node and the
// controllers keep running) and RestartAPIServer starts it again on the
// same address with the same etcd, for tests of what survives the API
// server going away.
//
// It is not for production use: everything listens on the loopback
// interface only and etcd speaks plain HTTP.
package kubetest
