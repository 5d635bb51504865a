package incluster_test

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/slipway-dev/slipway/testharness/incluster"
)

// The install's objects as Apply applies them: overlays/single of this
// tree's deploy folder with the base's image pinned to a release's digest
// and the settings set, the Secrets placed after the Namespaces. No
// cluster is needed to build them.
func ExampleOrdered() {
	image := "10.217.42.1:5000/slipway-dev/slipway@sha256:" + strings.Repeat("ab", 32)
	objs, err := incluster.Objects("../../deploy", "single", image, map[string]string{
		"repo": "http://10.217.42.1:8080/config.git", "branch": "main", "pool": "agents"})
	if err != nil {
		fmt.Println(err)
		return
	}
	secrets := map[string]map[string]string{
		incluster.SecretDB:           {"dsn": "postgres://postgres@10.217.42.1:5432/slipway"},
		incluster.SecretRuntimeToken: {"token": "a-token"},
		incluster.SecretGit:          {"token": ""},
	}
	for _, o := range incluster.Ordered(objs, secrets) {
		name := o.GetName()
		if strings.HasPrefix(name, "slipway-settings-") {
			name = "slipway-settings-<hash>"
		}
		line := fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), name)
		if o.GetKind() == "Deployment" {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			img, _, _ := unstructured.NestedString(cs[0].(map[string]any), "image")
			line += " image " + strings.TrimPrefix(img, "10.217.42.1:5000/slipway-dev/")[:len("slipway@sha256:abab")]
		}
		fmt.Println(line)
	}
	_, err = incluster.Objects("../../deploy", "single", "slipway:latest", nil)
	fmt.Println(err)
	// Output:
	// Namespace /slipway-system
	// Namespace /slipway-sandboxes
	// Secret slipway-system/slipway-db
	// Secret slipway-system/slipway-git
	// Secret slipway-system/slipway-runtime-token
	// ServiceAccount slipway-system/slipway-control
	// Deployment slipway-system/slipway-control image slipway@sha256:abab
	// Service slipway-system/slipway-control
	// PodDisruptionBudget slipway-system/slipway-control
	// ServiceAccount slipway-system/slipway-runtime
	// Role slipway-sandboxes/slipway-runtime
	// RoleBinding slipway-sandboxes/slipway-runtime
	// Role slipway-system/slipway-runtime-leader
	// RoleBinding slipway-system/slipway-runtime-leader
	// ClusterRole /slipway-runtime-nodes
	// ClusterRoleBinding /slipway-runtime-nodes
	// Deployment slipway-system/slipway-runtime image slipway@sha256:abab
	// Service slipway-system/slipway-runtime
	// PodDisruptionBudget slipway-system/slipway-runtime
	// ConfigMap slipway-system/slipway-settings-<hash>
	// image "slipway:latest": not by digest
}
