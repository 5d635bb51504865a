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
// PROGRAM-OS-ARCH, and reads back each binary's digest (and, for the host's
// platform, what it says its version is).
func (r *run) build(ctx context.Context) error {
	r.res.GoVersion = goVersion(ctx, r.o)
	go func() { // syft's licence matcher compiles beside the first build
		defer close(r.prepared)
		r.sbomCtx, r.prepErr = sbom.Prepare(ctx)
	}()
	flags := buildFlags(r.o.Version, r.src.commit, r.res.Dirty)
	for _, p := range r.o.Platforms {
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
			dst := filepath.Join(r.o.Out, name)
			if err := os.Rename(filepath.Join(tmp, prog), dst); err != nil {
				return err
			}
			b := Binary{Program: prog, Platform: p, File: name}
			if b.SHA256, b.Size, err = fileSHA256(dst); err != nil {
				return err
			}
			if p == hostPlatform() {
				if b.Reports, err = r.readBack(ctx, dst); err != nil {
					return err
				}
			}
			r.res.Binaries = append(r.res.Binaries, b)
		}
		if err := os.Remove(tmp); err != nil {
			return err
		}
		r.startSBOMs(r.res.Binaries[len(r.res.Binaries)-len(r.o.Programs):])
		r.startImages(ctx, r.res.Binaries[len(r.res.Binaries)-len(r.o.Programs):])
	}
	return nil
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

// startSBOMs starts writing an SPDX SBOM of each of binaries (just built),
// PROGRAM-OS-ARCH.spdx.json, made by package sbom from a folder holding the
// binary alone, in the background beside the next platform's build.
func (r *run) startSBOMs(binaries []Binary) {
	j := &imageJob{done: make(chan struct{})}
	for _, b := range binaries {
		r.jobs["sbom:"+b.File] = j
	}
	go func() {
		defer close(j.done)
		t0 := time.Now()
		<-r.prepared
		if j.err = r.prepErr; j.err != nil {
			return
		}
		for _, b := range binaries {
			doc, err := r.sbomOf(r.sbomCtx, b.File, []string{b.File})
			if err == nil {
				err = os.WriteFile(filepath.Join(r.o.Out, b.File+".spdx.json"), doc, 0o644)
			}
			if err != nil {
				j.err = err
				return
			}
		}
		j.took = time.Since(t0)
	}()
}

// sboms waits for the binaries' SBOMs.
func (r *run) sboms(context.Context) error {
	for i := range r.res.Binaries {
		b := &r.res.Binaries[i]
		j := r.jobs["sbom:"+b.File]
		<-j.done
		if j.err != nil {
			return j.err
		}
		b.SBOM = b.File + ".spdx.json"
	}
	return nil
}

// sbomOf catalogs the files of Out named (linked into a folder of their
// own) and returns the SPDX JSON document named name.
func (r *run) sbomOf(ctx context.Context, name string, files []string) ([]byte, error) {
	stage, err := os.MkdirTemp("", "slipway-release-sbom-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	for _, f := range files {
		if err := linkOrCopy(filepath.Join(r.o.Out, f), filepath.Join(stage, f)); err != nil {
			return nil, err
		}
	}
	// The folder holds Go binaries alone: the Go binary cataloger is the
	// one that finds anything in it (the others look for package
	// databases, archives and other tools' binaries).
	s, err := sbom.Generate(ctx, stage,
		sbom.WithCatalogers("go-module-binary-cataloger"),
		sbom.WithDocumentName(name),
		sbom.WithNamespace("https://slipway.dev/releases/"+r.o.Version+"/"+name),
		sbom.WithCreated(r.src.epoch))
	if err != nil {
		return nil, fmt.Errorf("sbom of %s: %w", name, err)
	}
	return s.SPDXJSON(), nil
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
