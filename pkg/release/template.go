package release

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/pkg/api/sbomdoc"
	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/sbom"
	"github.com/slipway-dev/slipway/pkg/release/scan"
	"github.com/slipway-dev/slipway/pkg/release/template"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// TemplateOptions say where a template build goes.
type TemplateOptions struct {
	Build     []template.Option
	Push      string          // repository to push to, by digest ("" for none)
	OCILayout string          // OCI image layout directory ("" for none)
	SBOMDir   string          // where the SBOMs are written; default beside the layout, else <spec dir>/out
	Keep      bool            // keep the working directory
	Remote    []remote.Option // registry options for the push
	// Sign, if set, signs the pushed template and attaches its provenance
	// and SBOM attestations (needs Push).
	Sign *Signing
}

// TemplateRelease is the JSON result of `slipway template build`.
type TemplateRelease struct {
	*template.Result
	SBOM SBOMResult  `json:"sbom"`
	Sign *SignResult `json:"sign,omitempty"`
}

// SBOMResult names the SBOM files and the packages found.
type SBOMResult struct {
	Files    []sbom.Written    `json:"files"`
	Packages []sbomdoc.Package `json:"packages"`
}

// BuildTemplate loads the spec at file, builds it, writes its SBOMs, and
// publishes it. Nothing is published when any step fails.
func BuildTemplate(ctx context.Context, file string, o TemplateOptions) (*TemplateRelease, error) {
	if o.Sign != nil && o.Push == "" {
		return nil, fmt.Errorf("release: signing needs a registry: set Push")
	}
	t, err := template.Load(file)
	if err != nil {
		return nil, err
	}
	// syft compiles its licence matcher once per process (about a second):
	// do it while the template builds, so the SBOM step costs only the scan.
	type prepared struct {
		ctx context.Context
		err error
	}
	prep := make(chan prepared, 1)
	go func() {
		c, err := sbom.Prepare(ctx)
		prep <- prepared{c, err}
	}()
	bopts := o.Build
	if o.Keep {
		bopts = append(append([]template.Option(nil), bopts...), template.WithKeepWorkDir())
	}
	res, err := template.Build(ctx, t, bopts...)
	p := <-prep
	if err != nil {
		return nil, err
	}
	if p.err != nil {
		return nil, fmt.Errorf("template %s: sbom: %w", res.Name, p.err)
	}
	defer res.Close()
	out := &TemplateRelease{Result: res}

	created := time.Unix(res.Epoch, 0).UTC() // the SBOM is as reproducible as the image
	doc, err := sbom.Generate(p.ctx, res.Rootfs,
		sbom.WithDocumentName(res.Name+"@"+res.TemplateID),
		sbom.WithNamespace("https://slipway.dev/sbom/"+res.Name+"/"+res.TemplateID),
		sbom.WithCreated(created))
	if err != nil {
		return nil, fmt.Errorf("template %s: sbom: %w", res.Name, err)
	}
	dir := o.SBOMDir
	switch {
	case dir != "":
	case o.OCILayout != "":
		dir = filepath.Join(o.OCILayout, "sbom", res.Name)
	default:
		dir = filepath.Join(t.Dir, "out")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if out.SBOM.Files, err = doc.Write(dir); err != nil {
		return nil, fmt.Errorf("template %s: sbom: %w", res.Name, err)
	}
	out.SBOM.Packages = doc.Packages()

	if o.OCILayout != "" {
		if err := template.WriteLayout(o.OCILayout, res.Image, res.Name); err != nil {
			return nil, err
		}
	}
	if o.Push != "" {
		if res.Ref, err = template.Push(ctx, res.Image, o.Push, o.Remote...); err != nil {
			return nil, err
		}
	}
	if o.Sign != nil {
		s := *o.Sign
		if s.SpecSource == "" {
			s.SpecSource = file
		}
		if out.Sign, err = SignTemplate(ctx, res, doc, s); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ScanTarget scans an unpacked rootfs directory, or an image (by reference,
// pulled and unpacked into a temporary directory).
func ScanTarget(ctx context.Context, target string, allow []scan.Allow, opts ...remote.Option) (*scan.Report, error) {
	if fi, err := os.Stat(target); err == nil && fi.IsDir() {
		return scan.Scan(ctx, target, scan.WithAllow(allow...))
	}
	r, err := ref.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("%s is neither a directory nor an image reference: %w", target, err)
	}
	img, err := remote.Image(r.Target(), append([]remote.Option{remote.WithContext(ctx)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", r, err)
	}
	tmp, err := os.MkdirTemp("", "slipway-scan-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "rootfs")
	if _, err := rootfs.Extract(ctx, img, dir); err != nil {
		return nil, fmt.Errorf("unpack %s: %w", r, err)
	}
	return scan.Scan(ctx, dir, scan.WithAllow(allow...))
}
