package kubeobjects_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
)

// A reader of the cluster finds a generation's objects by these names and
// labels, without importing the renderer.
func Example() {
	id := "g-3f2a9c41d07be5aa00112233445566778899aabbccddeeff0011223344556677"
	fmt.Println(kubeobjects.ObjectName("agents", id))
	fmt.Println(kubeobjects.LabelGeneration + "=" + kubeobjects.GenerationLabel(id))
	fmt.Println(kubeobjects.SecretName("vault://kv/agents/token#7"))
	// Output:
	// agents-3f2a9c41d07b
	// slipway.dev/generation=g-3f2a9c41d07be5aa00112233445566778899aabbccddeeff0011223344556
	// vault-kv-agents-token-7-0890b2e1
}
