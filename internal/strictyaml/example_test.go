package strictyaml_test

import (
	"errors"
	"fmt"

	"github.com/slipway-dev/slipway/internal/strictyaml"
)

type policy struct {
	Kind string `yaml:"kind"`
	Spec struct {
		Rules []struct {
			Name string   `yaml:"name"`
			Keys []string `yaml:"keys"`
		} `yaml:"rules"`
	} `yaml:"spec"`
}

// A document decodes into its type and keeps its lines, so a validation
// error can name file:line; a misspelt field is refused with its line.
func ExampleDecode() {
	good := []byte(`kind: VerificationPolicy
spec:
  rules:
    - name: signed
      keys: [cosign.pub]
    - name: scanned
`)
	var p policy
	doc, err := strictyaml.Decode(good, &p)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Kind, len(p.Spec.Rules), "rules")
	fmt.Println("spec.rules[1].name at line", doc.Line("spec.rules[1].name"))
	// An absent field: the line of its nearest ancestor that exists.
	fmt.Println("spec.rules[1].keys at line", doc.Line("spec.rules[1].keys"))

	bad := []byte(`kind: VerificationPolicy
spec:
  rules:
    - name: signed
      key: [cosign.pub]
`)
	_, err = strictyaml.Decode(bad, &p)
	var se *strictyaml.Error
	if errors.As(err, &se) {
		fmt.Println("unknown field refused at line", se.Line)
	}

	// A second document is refused at its start.
	_, err = strictyaml.Decode([]byte("kind: A\n---\nkind: B\n"), &p)
	fmt.Println(err)
	// Output:
	// VerificationPolicy 2 rules
	// spec.rules[1].name at line 6
	// spec.rules[1].keys at line 6
	// unknown field refused at line 5
	// 2: one document per file
}
