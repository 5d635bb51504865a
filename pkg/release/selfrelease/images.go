package selfrelease

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/template"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// LayoutDir is the OCI image layout a release writes under Out.
const LayoutDir = "oci"

// nonroot is the user Slipway's images run as (Pod Security "restricted").
const nonroot = "65532:65532"

// built is one program's index and what is said about it.
type built struct {
	program    string
	repo       string
	index      v1.ImageIndex
	digest     v1.Hash
	statements [][]byte // provenance, SBOM: attached when pushed
}

// images assembles each program's image per platform on an empty base (the
// binaries are static), the runner's with sandbox.RunnerImage (its labels
// pin the binary), makes a multi-platform index of them, writes it to the
// OCI layout, and makes its provenance and SBOM statements.
func (r *run) images(ctx context.Context) error {
	lp, err := layout.Write(filepath.Join(r.o.Out, LayoutDir), empty.Index)
	if err != nil {
		return err
	}
	r.res.Layout = LayoutDir
	for _, prog := range r.o.Programs {
		b, img, err := r.image(ctx, prog)
		if err != nil {
			return err
		}
		ann := map[string]string{"org.opencontainers.image.ref.name": prog + ":" + r.o.Version}
		if err := lp.AppendIndex(b.index, layout.WithAnnotations(ann)); err != nil {
			return fmt.Errorf("oci layout: %w", err)
		}
		r.built = append(r.built, *b)
		r.res.Images = append(r.res.Images, img)
	}
	return nil
}

func (r *run) image(ctx context.Context, prog string) (*built, Image, error) {
	repo := r.o.Repository + "/" + prog
	img := Image{Program: prog, Platforms: map[string]string{}}
	var adds []mutate.IndexAddendum
	var inputs, subjects []attest.Subject
	var files []string
	for _, bin := range r.res.Binaries {
		if bin.Program != prog {
			continue
		}
		p, err := v1.ParsePlatform(bin.Platform)
		if err != nil {
			return nil, img, err
		}
		im, err := r.platformImage(ctx, prog, filepath.Join(r.o.Out, bin.File), *p)
		if err != nil {
			return nil, img, fmt.Errorf("image of %s: %w", bin.File, err)
		}
		d, err := im.Digest()
		if err != nil {
			return nil, img, err
		}
		img.Platforms[bin.Platform] = d.String()
		adds = append(adds, mutate.IndexAddendum{Add: im, Descriptor: v1.Descriptor{Platform: p}})
		inputs = append(inputs, attest.Subject{Name: bin.File, Digest: "sha256:" + bin.SHA256})
		subjects = append(subjects, attest.Subject{Name: repo + "@" + d.String(), Digest: d.String()})
		files = append(files, bin.File)
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	idx = mutate.Annotations(idx, r.labels()).(v1.ImageIndex)
	d, err := idx.Digest()
	if err != nil {
		return nil, img, err
	}
	img.Digest = d.String()
	subjects = append(subjects, attest.Subject{Name: repo, Digest: d.String()})
	prov, err := r.provenance(subjects, inputs)
	if err != nil {
		return nil, img, err
	}
	doc, err := r.sbomOf(ctx, prog+"-image", files)
	if err != nil {
		return nil, img, err
	}
	st, err := attest.SBOM(repo, d.String(), attest.PredicateSPDX, doc)
	if err != nil {
		return nil, img, err
	}
	sb, err := attest.Marshal(st)
	if err != nil {
		return nil, img, err
	}
	return &built{program: prog, repo: repo, index: idx, digest: d, statements: [][]byte{prov, sb}}, img, nil
}

// platformImage is prog's image for one platform: the binary at
// /usr/local/bin/PROG, owned by root, run as nonroot.
func (r *run) platformImage(ctx context.Context, prog, bin string, p v1.Platform) (v1.Image, error) {
	epoch := r.src.epoch
	var img v1.Image
	var done func() error
	var err error
	if prog == "slipway-runner" {
		img, done, err = sandbox.RunnerImage(ctx, bin, epoch, p, 0)
	} else {
		img, done, err = r.programImage(ctx, prog, bin, p)
	}
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, done)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	for k, v := range r.labels() {
		cf.Config.Labels[k] = v
	}
	return mutate.ConfigFile(img, cf)
}

func (r *run) programImage(ctx context.Context, prog, bin string, p v1.Platform) (v1.Image, func() error, error) {
	stage, err := os.MkdirTemp("", "slipway-release-image-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(stage)
	dst := filepath.Join(stage, "usr", "local", "bin", prog)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, nil, err
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		return nil, nil, err
	}
	for q := dst; q != stage; q = filepath.Dir(q) {
		if err := os.Chtimes(q, r.src.epoch, r.src.epoch); err != nil {
			return nil, nil, err
		}
	}
	img, done, err := template.ImageFromDir(ctx, stage, r.src.epoch, p, []string{"PATH=/usr/local/bin"}, rootfs.WithOwner(0, 0))
	if err != nil {
		return nil, nil, err
	}
	cf, err := img.ConfigFile()
	if err == nil {
		cf = cf.DeepCopy()
		cf.Config.Entrypoint = []string{"/usr/local/bin/" + prog}
		cf.Config.User = nonroot
		img, err = mutate.ConfigFile(img, cf)
	}
	if err != nil {
		_ = done()
		return nil, nil, err
	}
	return img, done, nil
}

// labels are the OCI annotations of every image and index.
func (r *run) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.version":  r.o.Version,
		"org.opencontainers.image.revision": r.src.commit,
		"org.opencontainers.image.source":   strings.TrimPrefix(Source, "git+"),
		"org.opencontainers.image.created":  r.src.epoch.Format("2006-01-02T15:04:05Z"),
	}
}
