package template_test

import (
	"errors"
	"fmt"

	"github.com/slipway-dev/slipway/pkg/release/template"
)

// Parsing a spec: strict, and every refusal names the line and the field.
func ExampleParse() {
	t, err := template.Parse([]byte(`apiVersion: slipway.dev/v1alpha1
kind: WorkspaceTemplate
metadata: {name: minimal}
spec:
  base: 127.0.0.1:5000/base@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  steps:
    - run: ["/bin/sh", "-c", "echo hello > /opt/hello"]
  refresh: [machine-id]
`))
	if err != nil {
		panic(err)
	}
	fmt.Println(t.Metadata.Name, len(t.Spec.Steps), t.Spec.Refresh)

	_, err = template.Parse([]byte(`apiVersion: slipway.dev/v1alpha1
kind: WorkspaceTemplate
metadata: {name: minimal}
spec:
  base: 127.0.0.1:5000/base:latest
  steps:
    - copy: {src: ../secrets, dst: /opt/}
`))
	fmt.Println(errors.Is(err, template.ErrSpec), err)
	// Output:
	// minimal 1 [machine-id]
	// true 7: spec.steps[0].copy.src: invalid template spec: "../secrets" must be a path inside the spec's folder (relative, no ..)
}
