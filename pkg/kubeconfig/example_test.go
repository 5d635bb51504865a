package kubeconfig_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/slipway-dev/slipway/pkg/kubeconfig"
)

func ExampleLoad() {
	dir, _ := os.MkdirTemp("", "kubeconfig")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "config")
	_ = os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters:
- name: node
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: not-a-real-token}
contexts:
- name: node
  context: {cluster: node, user: admin, namespace: sandboxes}
current-context: node
`), 0o600)
	cfg, ns, err := kubeconfig.Load(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Host, ns)
	_, _, err = kubeconfig.Load(filepath.Join(dir, "missing"))
	fmt.Println(err != nil)
	// Output:
	// https://127.0.0.1:6443 sandboxes
	// true
}
