package selfrelease

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/sbom"
	"github.com/slipway-dev/slipway/pkg/release/template"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// LayoutDir is the OCI image layout a release writes under Out.
const LayoutDir = "oci"

// StatementsDir, under the layout, holds each image's in-toto statements
// (PROGRAM.provenance.intoto.json, PROGRAM.spdx.intoto.json): what a push
// attaches, kept so that a release built once can be published later
// (Publish).
const StatementsDir = "statements"

// statementFiles are the names of prog's statements, in built.statements' order.
func statementFiles(prog string) []string {
	return []string{prog + ".provenance.intoto.json", prog + ".spdx.intoto.json"}
}

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

// images waits for each program's platform images (assembled on an empty
// base, the binaries are static, the runner's with Options.RunnerImage, its
// labels pin the binary, and written to the OCI layout beside the builds),
// makes a multi-platform index of them, appends it to the layout's
// index.json in program order, and makes its provenance and SBOM
// statements.
func (r *run) images(ctx context.Context) error {
	sdir := filepath.Join(r.o.Out, LayoutDir, StatementsDir)
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		return err
	}
	if err := r.goVer.wait(ctx); err != nil {
		return err
	}
	for _, prog := range r.o.Programs {
		t0 := time.Now()
		b, img, err := r.image(ctx, prog)
		if err != nil {
			return err
		}
		ann := map[string]string{"org.opencontainers.image.ref.name": prog + ":" + r.o.Version}
		if err := r.layout.AppendIndex(b.index, layout.WithAnnotations(ann)); err != nil {
			return fmt.Errorf("oci layout: %w", err)
		}
		for i, f := range statementFiles(prog) {
			if err := os.WriteFile(filepath.Join(sdir, f), b.statements[i], 0o644); err != nil {
				return err
			}
		}
		r.logf("image %s %s (%.1fs)", prog, img.Digest, time.Since(t0).Seconds())
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
	for _, bin := range r.res.Binaries {
		if bin.Program != prog {
			continue
		}
		p, err := v1.ParsePlatform(bin.Platform)
		if err != nil {
			return nil, img, err
		}
		bt := r.bins[bin.File]
		if err := bt.image.wait(ctx); err != nil {
			return nil, img, err
		}
		im := bt.img
		d, err := im.Digest()
		if err != nil {
			return nil, img, err
		}
		img.Platforms[bin.Platform] = d.String()
		adds = append(adds, mutate.IndexAddendum{Add: im, Descriptor: v1.Descriptor{Platform: p}})
		inputs = append(inputs, attest.Subject{Name: bin.File, Digest: "sha256:" + bin.SHA256})
		subjects = append(subjects, attest.Subject{Name: repo + "@" + d.String(), Digest: d.String()})
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
	is := r.progs[prog]
	if err := is.wait(ctx); err != nil {
		return nil, img, err
	}
	st, err := attest.SBOM(repo, d.String(), attest.PredicateSPDX, is.doc)
	if err != nil {
		return nil, img, err
	}
	sb, err := attest.Marshal(st)
	if err != nil {
		return nil, img, err
	}
	return &built{program: prog, repo: repo, index: idx, digest: d, statements: [][]byte{prov, sb}}, img, nil
}

// imageSBOM is the SPDX SBOM of a program's image: its binaries, every
// platform's, side by side.
type imageSBOM struct {
	*task
	doc []byte
}

// startImageSBOM makes prog's image SBOM once its binaries' SBOMs are made:
// the image holds the binary alone, on an empty base, so its SBOM is theirs
// combined (what syft finds in a folder holding them all, not catalogued
// again), under the image's own name and namespace.
func (r *run) startImageSBOM(prog string) *imageSBOM {
	var bins []*binTasks
	var after []*task
	for _, b := range r.res.Binaries {
		if b.Program == prog {
			bt := r.bins[b.File]
			bins, after = append(bins, bt), append(after, bt.sbom)
		}
	}
	is := &imageSBOM{}
	is.task = r.start(&r.work.imageSBOM, func(context.Context) error {
		parts := make([]*sbom.SBOM, len(bins))
		for i, bt := range bins {
			parts[i] = bt.doc
		}
		name := prog + "-image"
		s, err := sbom.Combine(parts, sbom.WithDocumentName(name), sbom.WithNamespace(r.sbomNamespace(name)), sbom.WithCreated(r.src.epoch))
		if err != nil {
			return fmt.Errorf("sbom of %s's image: %w", prog, err)
		}
		is.doc = s.SPDXJSON()
		return nil
	}, after...)
	return is
}

// platformImage is prog's image for one platform: the binary at
// /usr/local/bin/PROG, owned by root, run as nonroot.
func (r *run) platformImage(ctx context.Context, prog, bin string, p v1.Platform) (v1.Image, error) {
	epoch := r.src.epoch
	var img v1.Image
	var done func() error
	var err error
	if prog == "slipway-runner" && r.o.RunnerImage != nil {
		img, done, err = r.o.RunnerImage(ctx, bin, epoch, p, r.layerOptions()...)
	} else {
		img, done, err = r.programImage(ctx, prog, bin, p)
	}
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.closers = append(r.closers, done)
	r.mu.Unlock()
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
	// Staged beside the binary, so that it is a hard link rather than a
	// copy (slipway is 125 MB): the layer reads it once, to tar and
	// compress it.
	stage, err := os.MkdirTemp(filepath.Dir(bin), ".image-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(stage)
	dst := filepath.Join(stage, "usr", "local", "bin", prog)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, nil, err
	}
	if err := stageBinary(bin, dst); err != nil {
		return nil, nil, err
	}
	for q := dst; q != stage; q = filepath.Dir(q) {
		if err := os.Chtimes(q, r.src.epoch, r.src.epoch); err != nil {
			return nil, nil, err
		}
	}
	lo := append([]rootfs.LayerOption{rootfs.WithOwner(0, 0)}, r.layerOptions()...)
	img, done, err := template.ImageFromDir(ctx, stage, r.src.epoch, p, []string{"PATH=/usr/local/bin"}, lo...)
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

// layerOptions are those of every platform image's layer: gzip level 1 (a
// layer of a large, poorly compressible Go binary costs a third of the time
// at 1 as at 6, for a slightly larger blob), the file under Out (so that
// linkLayers can link it into the layout) and, beside a go build, one block
// compressing at a time: about one core, the one the build leaves.
func (r *run) layerOptions() []rootfs.LayerOption {
	lo := []rootfs.LayerOption{rootfs.WithCompressionLevel(1), rootfs.WithTempDir(r.layers)}
	if r.building.Load() {
		lo = append(lo, rootfs.WithCompressionConcurrency(1))
	}
	return lo
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

// stageBinary puts bin at dst, mode 0755: a hard link when bin already has
// that mode and the file system allows it, else a copy.
func stageBinary(bin, dst string) error {
	if fi, err := os.Stat(bin); err == nil && fi.Mode().Perm() == 0o755 && os.Link(bin, dst) == nil {
		return nil
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

// linkLayers puts img's layer files into the OCI layout's blobs by hard
// link, where the file system allows it: a layer is written once, to its
// file under Out, rather than written again as the layout's copy (tens of
// MB a binary). WriteImage finds them there, of the right size, and writes
// whatever was not linked.
func (r *run) linkLayers(img v1.Image) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		fl, ok := l.(*rootfs.FileLayer)
		if !ok {
			continue
		}
		d, err := fl.Digest()
		if err != nil {
			return err
		}
		dir := filepath.Join(r.o.Out, LayoutDir, "blobs", d.Algorithm)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		// A blob is readable as the layout's others are (the layer file
		// was made private).
		if err := os.Chmod(fl.Path(), 0o644); err != nil {
			return err
		}
		if err := os.Link(fl.Path(), filepath.Join(dir, d.Hex)); err != nil && !errors.Is(err, fs.ErrExist) {
			continue // another file system: WriteImage copies it
		}
	}
	return nil
}
