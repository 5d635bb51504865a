package selfrelease

import (
	"context"
	"fmt"
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

// images assembles each program's image per platform on an empty base (the
// binaries are static), the runner's with Options.RunnerImage (its labels
// pin the binary), makes a multi-platform index of them, writes it to the
// OCI layout, and makes its provenance and SBOM statements.
func (r *run) images(ctx context.Context) error {
	lp, err := layout.Write(filepath.Join(r.o.Out, LayoutDir), empty.Index)
	if err != nil {
		return err
	}
	r.res.Layout = LayoutDir
	for _, prog := range r.o.Programs {
		t0 := time.Now()
		b, img, err := r.image(ctx, prog)
		if err != nil {
			return err
		}
		ann := map[string]string{"org.opencontainers.image.ref.name": prog + ":" + r.o.Version}
		if err := lp.AppendIndex(b.index, layout.WithAnnotations(ann)); err != nil {
			return fmt.Errorf("oci layout: %w", err)
		}
		sdir := filepath.Join(r.o.Out, LayoutDir, StatementsDir)
		if err := os.MkdirAll(sdir, 0o755); err != nil {
			return err
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
	var files []string
	for _, bin := range r.res.Binaries {
		if bin.Program != prog {
			continue
		}
		p, err := v1.ParsePlatform(bin.Platform)
		if err != nil {
			return nil, img, err
		}
		j := r.jobs[bin.File]
		<-j.done
		if j.err != nil {
			return nil, img, fmt.Errorf("image of %s: %w", bin.File, j.err)
		}
		r.res.Seconds.ImageWork += j.took.Seconds()
		im := j.img
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
	t0 := time.Now()
	doc, err := r.sbomOf(r.sbomCtx, prog+"-image", files)
	r.logf("sbom of image %s (%.1fs)", prog, time.Since(t0).Seconds())
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

// imageJob is one platform image being assembled while the release goes on.
type imageJob struct {
	done chan struct{}
	img  v1.Image
	err  error
	took time.Duration
}

// startImages starts assembling the images of binaries (just built) in the
// background: the next platform's go build (mostly a single-threaded link)
// and the SBOMs run meanwhile.
func (r *run) startImages(ctx context.Context, binaries []Binary) {
	for _, b := range binaries {
		j := &imageJob{done: make(chan struct{})}
		r.jobs[b.File] = j
		go func() {
			defer close(j.done)
			t0 := time.Now()
			p, err := v1.ParsePlatform(b.Platform)
			if err != nil {
				j.err = err
				return
			}
			if j.img, j.err = r.platformImage(ctx, b.Program, filepath.Join(r.o.Out, b.File), *p); j.err == nil {
				_, j.err = j.img.Digest()
			}
			j.took = time.Since(t0)
		}()
	}
}

// platformImage is prog's image for one platform: the binary at
// /usr/local/bin/PROG, owned by root, run as nonroot.
func (r *run) platformImage(ctx context.Context, prog, bin string, p v1.Platform) (v1.Image, error) {
	epoch := r.src.epoch
	var img v1.Image
	var done func() error
	var err error
	if prog == "slipway-runner" && r.o.RunnerImage != nil {
		img, done, err = r.o.RunnerImage(ctx, bin, epoch, p)
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
	img, done, err := template.ImageFromDir(ctx, stage, r.src.epoch, p, []string{"PATH=/usr/local/bin"}, rootfs.WithOwner(0, 0), rootfs.WithCompressionLevel(1))
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
