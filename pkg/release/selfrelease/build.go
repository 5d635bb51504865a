package selfrelease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/slipway-dev/slipway/pkg/release/sbom"
)

const versionPkg = "github.com/slipway-dev/slipway/internal/version"

// buildEnv is the environment of go build that changes its output, fixed so
// that the host's own settings do not.
func buildEnv(goos, goarch string) []string {
	return []string{"CGO_ENABLED=0", "GOOS=" + goos, "GOARCH=" + goarch, "GOAMD64=v1", "GOARM64=v8.0", "GOFLAGS=-mod=readonly", "GOEXPERIMENT="}
}

// buildFlags are go build's flags for a release of version v at commit c.
func buildFlags(v, c string, dirty bool) []string {
	ld := fmt.Sprintf("-s -w -buildid= -X %[1]s.version=%[2]s -X %[1]s.commit=%[3]s -X %[1]s.dirty=%[4]t", versionPkg, v, c, dirty)
	return []string{"-trimpath", "-buildvcs=false", "-ldflags", ld}
}

// build runs one go build per platform for every program, into Out as
// PROGRAM-OS-ARCH, one after another as the floor does, and as soon as a
// platform's binaries are there starts, beside the next build, each one's
// tasks: its digest (and, for the host's platform, what it says its version
// is), its SBOM and its platform image; after the last platform, each
// program's image SBOM.
func (r *run) build(ctx context.Context) error {
	// Nothing runs in the background yet: all but one slot are taken for
	// as long as the builds run, before the first task asks for one.
	r.hold(cap(r.slots) - 1)
	r.goVer = r.start(nil, func(ctx context.Context) error {
		r.res.GoVersion = goVersion(ctx, r.o)
		return nil
	})
	r.prepared = r.start(nil, func(ctx context.Context) error { // syft's licence matcher compiles beside the first build
		var err error
		r.sbomCtx, err = sbom.Prepare(ctx)
		return err
	})
	var err error
	if r.layout, err = layout.Write(filepath.Join(r.o.Out, LayoutDir), empty.Index); err != nil {
		return err
	}
	r.res.Layout = LayoutDir
	if r.layers, err = os.MkdirTemp(r.o.Out, ".layers-"); err != nil {
		return err
	}
	flags := buildFlags(r.o.Version, r.src.commit, r.res.Dirty)
	for i, p := range r.o.Platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok {
			return fmt.Errorf("platform %q: want os/arch", p)
		}
		tmp, err := os.MkdirTemp(r.o.Out, ".build-")
		if err != nil {
			return err
		}
		args := append([]string{"build"}, flags...)
		args = append(args, "-o", tmp+string(filepath.Separator))
		for _, prog := range r.o.Programs {
			args = append(args, "./cmd/"+prog)
		}
		r.logf("go build %s (%s)", strings.Join(r.o.Programs, " "), p)
		cmd := exec.CommandContext(ctx, r.o.Go, args...)
		cmd.Dir = r.o.Dir
		cmd.Env = append(os.Environ(), buildEnv(goos, goarch)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build for %s: %v\n%s", p, err, out)
		}
		for _, prog := range r.o.Programs {
			name := prog + "-" + goos + "-" + goarch
			if err := os.Rename(filepath.Join(tmp, prog), filepath.Join(r.o.Out, name)); err != nil {
				return err
			}
			b := Binary{Program: prog, Platform: p, File: name}
			r.res.Binaries = append(r.res.Binaries, b)
			r.bins[name] = r.startBinary(b)
		}
		if err := os.Remove(tmp); err != nil {
			return err
		}
		if i == len(r.o.Platforms)-1 {
			r.built0 = time.Now()
			r.unhold()
			for _, prog := range r.o.Programs {
				r.progs[prog] = r.startImageSBOM(prog)
			}
		}
	}
	return nil
}

// binTasks are the tasks of one binary, and what they read back.
type binTasks struct {
	hash, sbom, image *task
	sha256            string
	size              int64
	reports           string
	img               v1.Image
	doc               *sbom.SBOM // its SBOM, which its image's SBOM is combined from
}

// startBinary starts b's tasks: its platform image (the longest: it
// compresses the binary, so it queues first for a slot), its SBOM, and its
// digest and size (and version read back), each on its own once a slot is
// free: they read the binary, which does not change.
func (r *run) startBinary(b Binary) *binTasks {
	bt := &binTasks{}
	path := filepath.Join(r.o.Out, b.File)
	bt.image = r.start(&r.work.image, func(ctx context.Context) error {
		p, err := v1.ParsePlatform(b.Platform)
		if err != nil {
			return err
		}
		if bt.img, err = r.platformImage(ctx, b.Program, path, *p); err != nil {
			return fmt.Errorf("image of %s: %w", b.File, err)
		}
		// Its blobs go to the layout now; the index that names it is
		// written, in program order, once all are made.
		if err := r.linkLayers(bt.img); err != nil {
			return fmt.Errorf("oci layout: image of %s: %w", b.File, err)
		}
		if err := r.layout.WriteImage(bt.img); err != nil {
			return fmt.Errorf("oci layout: image of %s: %w", b.File, err)
		}
		return nil
	})
	bt.sbom = r.start(&r.work.sbom, func(context.Context) error {
		var err error
		if bt.doc, err = r.sbomOf(r.sbomCtx, b.File); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(r.o.Out, b.File+".spdx.json"), bt.doc.SPDXJSON(), 0o644)
	}, r.prepared)
	bt.hash = r.start(&r.work.hash, func(ctx context.Context) error {
		var err error
		if bt.sha256, bt.size, err = fileSHA256(path); err != nil {
			return err
		}
		if b.Platform == hostPlatform() {
			bt.reports, err = r.readBack(ctx, path)
		}
		return err
	})
	return bt
}

// readBack runs "BINARY version" and checks it names the release's version
// and commit.
func (r *run) readBack(ctx context.Context, bin string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return "", fmt.Errorf("%s version: %w", filepath.Base(bin), err)
	}
	s := strings.TrimSpace(string(out))
	if !strings.Contains(s, r.o.Version) || !strings.Contains(s, r.src.commit) {
		return "", fmt.Errorf("%s reports %q, not version %s at commit %s", filepath.Base(bin), s, r.o.Version, r.src.commit)
	}
	return s, nil
}

func goVersion(ctx context.Context, o Options) string {
	out, err := exec.CommandContext(ctx, o.Go, "env", "GOVERSION").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func fileSHA256(name string) (string, int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// sboms waits for the binaries' digests and SBOMs.
func (r *run) sboms(ctx context.Context) error {
	for i := range r.res.Binaries {
		b := &r.res.Binaries[i]
		bt := r.bins[b.File]
		if err := bt.hash.wait(ctx); err != nil {
			return err
		}
		b.SHA256, b.Size, b.Reports = bt.sha256, bt.size, bt.reports
		if err := bt.sbom.wait(ctx); err != nil {
			return err
		}
		b.SBOM = b.File + ".spdx.json"
	}
	return nil
}

// sbomOf catalogs the binary file of Out (linked into a folder of its own)
// and returns its SBOM, the SPDX document named after it.
func (r *run) sbomOf(ctx context.Context, file string) (*sbom.SBOM, error) {
	stage, err := os.MkdirTemp("", "slipway-release-sbom-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	if err := linkOrCopy(filepath.Join(r.o.Out, file), filepath.Join(stage, file)); err != nil {
		return nil, err
	}
	// The folder holds a Go binary alone: the Go binary cataloger is the
	// one that finds anything in it (the others look for package
	// databases, archives and other tools' binaries).
	s, err := sbom.Generate(ctx, stage,
		sbom.WithCatalogers("go-module-binary-cataloger"),
		sbom.WithDocumentName(file),
		sbom.WithNamespace(r.sbomNamespace(file)),
		sbom.WithCreated(r.src.epoch))
	if err != nil {
		return nil, fmt.Errorf("sbom of %s: %w", file, err)
	}
	return s, nil
}

// sbomNamespace is the SPDX namespace of the release's document named name.
func (r *run) sbomNamespace(name string) string {
	return "https://slipway.dev/releases/" + r.o.Version + "/" + name
}

func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}
