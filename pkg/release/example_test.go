package release_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/pkg/release/template"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// A template built from a base in an OCI layout, with no registry at all:
// built, scanned, frozen, its SBOMs written, and added to a layout.
func ExampleBuildTemplate() {
	ctx := context.Background()
	work, _ := os.MkdirTemp("", "release-example-")
	defer os.RemoveAll(work)

	// A base image made of one file.
	base := filepath.Join(work, "base")
	os.MkdirAll(filepath.Join(base, "etc"), 0o755)
	os.WriteFile(filepath.Join(base, "etc", "os-release"), []byte("NAME=example\n"), 0o644)
	img, done, err := template.ImageFromDir(ctx, base, time.Unix(0, 0), v1.Platform{OS: "linux", Architecture: "amd64"}, nil, rootfs.WithOwner(0, 0))
	if err != nil {
		panic(err)
	}
	defer done()
	layout := filepath.Join(work, "layout")
	if err := template.WriteLayout(layout, img, "base"); err != nil {
		panic(err)
	}
	d, _ := img.Digest()

	// A template that copies one file onto it.
	spec := filepath.Join(work, "tmpl")
	os.MkdirAll(spec, 0o755)
	os.WriteFile(filepath.Join(spec, "motd"), []byte("welcome\n"), 0o644)
	os.WriteFile(filepath.Join(spec, "template.yaml"), []byte(`apiVersion: slipway.dev/v1alpha1
kind: WorkspaceTemplate
metadata: {name: example}
spec:
  base: example.invalid/base@`+d.String()+`
  steps:
    - copy: {src: motd, dst: /etc/motd}
`), 0o644)

	res, err := release.BuildTemplate(ctx, filepath.Join(spec, "template.yaml"), release.TemplateOptions{
		Build:     []template.Option{template.WithSource(template.Layout{Path: layout})},
		OCILayout: layout,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Name, len(res.Inputs), "input,", len(res.Scan.Findings), "findings,", len(res.SBOM.Files), "SBOM files")
	// Output:
	// example 1 input, 0 findings, 2 SBOM files
}
