package kubeconfig

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// LoadKubeconfig reads a kubeconfig file and returns its current context's
// client configuration and namespace ("default" when it names none).
func Load(path string) (*rest.Config, string, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if ns == "" {
		ns = "default"
	}
	return cfg, ns, nil
}

// namespaceFile is where a pod's service account names its namespace.
const namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// InPod reports whether this process runs in a Kubernetes pod (the
// kubelet sets KUBERNETES_SERVICE_HOST in every container).
func InPod() bool { return os.Getenv("KUBERNETES_SERVICE_HOST") != "" }

// InCluster returns the client configuration of the pod this process runs
// in (its service account's token and the cluster's CA) and its namespace:
// $POD_NAMESPACE (set from the downward API), else the service account's.
func InCluster() (*rest.Config, string, error) {
	if !InPod() {
		return nil, "", errors.New("in-cluster config: not in a pod ($KUBERNETES_SERVICE_HOST is unset): give a kubeconfig")
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, "", fmt.Errorf("in-cluster config: %w", err)
	}
	ns, err := PodNamespace()
	if err != nil {
		return nil, "", fmt.Errorf("in-cluster config: %w", err)
	}
	return cfg, ns, nil
}

// PodNamespace is the namespace of the pod this process runs in:
// $POD_NAMESPACE (set from the downward API), else its service account's.
func PodNamespace() (string, error) {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns, nil
	}
	b, err := os.ReadFile(namespaceFile)
	if err != nil {
		return "", fmt.Errorf("the pod's namespace: set $POD_NAMESPACE from the downward API: %w", err)
	}
	ns := strings.TrimSpace(string(b))
	if ns == "" {
		return "", fmt.Errorf("%s is empty", namespaceFile)
	}
	return ns, nil
}
