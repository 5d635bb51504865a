package attest_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/release/attest"
)

func Example() {
	st, err := attest.Provenance(attest.TemplateBuild{
		Name:       "python-dev",
		TemplateID: "sha256:" + strings.Repeat("a", 64),
		SpecDigest: "sha256:" + strings.Repeat("b", 64),
		BaseRef:    "registry.example/base/debian:12",
		BaseDigest: "sha256:" + strings.Repeat("c", 64),
		Inputs:     []attest.Input{{Path: "tools/setup.sh", Digest: "sha256:" + strings.Repeat("d", 64)}},
		BuilderID:  "https://slipway.dev/builders/local@v1",
		Started:    time.Unix(1700000000, 0),
		Finished:   time.Unix(1700000060, 0),
		Epoch:      1700000000,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	payload, err := attest.Marshal(st) // what package sign wraps in DSSE
	if err != nil {
		fmt.Println(err)
		return
	}
	back, err := attest.Parse(payload)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := attest.ProvenanceOf(back)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(back.GetPredicateType())
	fmt.Println(p.GetBuildDefinition().GetBuildType())
	fmt.Println(p.GetRunDetails().GetBuilder().GetId())
	for _, d := range p.GetBuildDefinition().GetResolvedDependencies() {
		fmt.Println(d.GetUri()+d.GetName(), d.GetDigest()["sha256"][:8])
	}

	_, err = attest.Provenance(attest.TemplateBuild{Name: "x", TemplateID: "sha256:" + strings.Repeat("a", 64), SpecDigest: "sha256:" + strings.Repeat("b", 64)})
	fmt.Println(err)
	// Output:
	// https://slsa.dev/provenance/v1
	// https://slipway.dev/template-build/v1
	// https://slipway.dev/builders/local@v1
	// oci://registry.example/base/debian:12 cccccccc
	// tools/setup.sh dddddddd
	// attest: invalid input: TemplateBuild.BuilderID: required (runDetails.builder.id)
}
