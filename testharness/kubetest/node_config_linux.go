package kubetest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeContainerdConfig writes containerd's config (own root, state and
// socket; the cri plugin's settings this machine needs), the registry's
// hosts.toml and the CNI bridge's config: pods have no default route, and
// a route to ServiceCIDR through the bridge when services (kube-proxy
// rewrites what goes there).
func (n *Node) writeContainerdConfig(registry, pause string, services bool) error {
	cd := filepath.Join(n.dir, "containerd")
	certs := filepath.Join(cd, "certs.d")
	cni := filepath.Join(n.dir, "cni")
	for _, d := range []string{cd, filepath.Join(certs, registry), filepath.Join(cni, "net.d"), filepath.Join(cni, "ipam")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
# Plugins that would write outside root and state, or are not used here.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  # Root here lacks CAP_SYS_RESOURCE: without this every sandbox fails
  # with "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[6]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[9]q
`, filepath.Join(cd, "root"), filepath.Join(cd, "state"), n.sock, n.sock+".ttrpc", pause,
		filepath.Join(cd, "state", "runc"), CNIBinDir, filepath.Join(cni, "net.d"), certs)
	if err := os.WriteFile(filepath.Join(cd, "config.toml"), []byte(config), 0o644); err != nil {
		return err
	}
	hosts := fmt.Sprintf("server = %[1]q\n\n[host.%[1]q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+registry)
	if err := os.WriteFile(filepath.Join(certs, registry, "hosts.toml"), []byte(hosts), 0o644); err != nil {
		return err
	}
	routes := "[]"
	if services {
		routes = fmt.Sprintf(`[{"dst": %q}]`, ServiceCIDR)
	}
	conflist := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "kubetest",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "isDefaultGateway": false,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": %s, "dataDir": %q}
  }]
}
`, BridgeName, PodCIDR, PodGateway, routes, filepath.Join(cni, "ipam"))
	return os.WriteFile(filepath.Join(cni, "net.d", "10-kubetest.conflist"), []byte(conflist), 0o644)
}

// writeKubeletConfig writes the kubelet's certificates, kubeconfig and
// configuration for this machine's hybrid cgroups.
func (n *Node) writeKubeletConfig(c *Cluster, host string) error {
	kd := filepath.Join(n.dir, "kubelet")
	for _, d := range []string{filepath.Join(kd, "pki"), filepath.Join(kd, "root"), filepath.Join(kd, "pods")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	certs, err := c.pki.issueNode(filepath.Join(kd, "pki"), host)
	if err != nil {
		return fmt.Errorf("kubetest: kubelet certificates: %w", err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: c.cfg.Host, CertificateAuthorityData: c.pki.caPEM}
	kc.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{ClientCertificate: certs.clientCert, ClientKey: certs.clientKey}
	kc.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "kubelet"}
	kc.CurrentContext = "kubetest"
	if err := clientcmd.WriteToFile(*kc, filepath.Join(kd, "kubeconfig")); err != nil {
		return err
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(addr)
	resolv, clusterDNS := "/etc/resolv.conf", ""
	if c.opts.services {
		// Pods get no nameserver of the host's: no pod query leaves the
		// machine. Those of dnsPolicy ClusterFirst (the default) ask
		// ClusterDNS, which knows the cluster's Services.
		resolv = filepath.Join(kd, "resolv.conf")
		if err := os.WriteFile(resolv, []byte("options ndots:1\n"), 0o644); err != nil {
			return err
		}
		clusterDNS = fmt.Sprintf("clusterDNS: [%q]\n", PodGateway)
	}
	// The kubelet trusts client certificates of the cluster's CA (the API
	// server's is the admin's) and lets them do anything: it listens on
	// 127.0.0.1 only.
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %[1]s
readOnlyPort: 0
healthzPort: 0
tlsCertFile: %[2]q
tlsPrivateKeyFile: %[3]q
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[4]q}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: %[5]q
podLogsDir: %[6]q
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
serializeImagePulls: false
# a pod's Secret and ConfigMap volumes are rewritten at its periodic sync:
# every 10 s rather than every minute, so a test that creates or fixes a
# Secret sees it in the pod within seconds, as a patient operator would
syncFrequency: 10s
registerNode: true
clusterDomain: %[8]s
%[9]sresolvConf: %[7]q
# The test node shares the host's disk with builds and caches: evict only
# when it is nearly full (the defaults evict at 10 to 15 percent free, and a pod
# evicted for that fails a test for a reason that is not the code's). The
# bound is absolute: a host whose file system reserves most of a large disk
# (ext4 resv_strict) reports a few GiB available of hundreds, under 1%%,
# and a percentage would evict every pod while builds still fit.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 512Mi
  nodefs.inodesFree: 1%%
  imagefs.available: 512Mi
  imagefs.inodesFree: 1%%
# nor collect images for the disk's sake until it is that full
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, port, certs.serveCert, certs.serveKey, c.pki.caCert, "unix://"+n.sock, filepath.Join(kd, "pods"), resolv, ClusterDomain, clusterDNS)
	return os.WriteFile(filepath.Join(kd, "config.yaml"), []byte(config), 0o644)
}
