package selfrelease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/internal/version"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// BuilderID is the SLSA builder.id of a release built by slipway release;
// the verification policy a release writes requires it.
const BuilderID = "https://slipway.dev/builders/slipway-release/v1"

// Source is the repository URI the provenance names.
const Source = "git+https://github.com/slipway-dev/slipway"

// DefaultRepository is where the images are published when no --push
// registry is given: the policy and the image labels name it.
const DefaultRepository = "ghcr.io/slipway-dev"

// ErrRefused is a release that must not be built: a dirty tree, an untagged
// commit, a version that is not the tag at HEAD.
var ErrRefused = errors.New("release refused")

// Programs are the main packages a release builds, by program name.
var Programs = []string{"slipway", "slipway-cmp", "slipway-runner"}

// Platforms a release builds by default.
var Platforms = []string{"linux/amd64", "linux/arm64"}

// Options say what to release and where.
type Options struct {
	Dir       string // the module's root, a git work tree
	Out       string // output directory, created; must not hold a release already
	Version   string // vX.Y.Z, the tag at HEAD; with Snapshot, empty means v0.0.0-<commit12>
	Snapshot  bool   // build a dirty or untagged tree anyway (never a release)
	Platforms []string
	Programs  []string // program names under cmd/; default Programs
	// Signer signs checksums.txt, the provenance and the images; nil
	// releases unsigned (only with Snapshot).
	Signer signature.SignerVerifier
	// Repository is the images' registry prefix (host[/path]); the
	// images are REPOSITORY/<program>. Default DefaultRepository.
	Repository string
	// Push pushes the images to Repository, signs and attests them, and
	// tags them Version last.
	Push          bool
	RemoteOptions []remote.Option
	Go            string // the go command; default "go"
	// RunnerImage makes slipway-runner's image from its binary: the
	// execution plane's sandbox.RunnerImage, whose labels pin the binary
	// (given by the caller: release tooling does not import the execution
	// plane). Nil makes it like the others.
	// It is given the options of the release's layers (gzip level, where
	// the layer file goes, how many blocks compress at once).
	RunnerImage func(ctx context.Context, binary string, epoch time.Time, p v1.Platform, opts ...rootfs.LayerOption) (v1.Image, func() error, error)
	Log         io.Writer
}

// Binary is one program built for one platform.
type Binary struct {
	Program  string `json:"program"`
	Platform string `json:"platform"`
	File     string `json:"file"`
	SHA256   string `json:"sha256"`
	Size     int64  `json:"size"`
	SBOM     string `json:"sbom"`
	// Reports is what the binary says when run with "version", read back
	// (only for the platform the release ran on).
	Reports string `json:"reports,omitempty"`
}

// Image is one program's multi-platform index.
type Image struct {
	Program   string            `json:"program"`
	Digest    string            `json:"digest"`
	Platforms map[string]string `json:"platforms"` // os/arch → image manifest digest
	Ref       string            `json:"ref,omitempty"`
	Tag       string            `json:"tag,omitempty"`
}

// Result is what a release built, read back from what it wrote.
type Result struct {
	Version    string   `json:"version"`
	Commit     string   `json:"commit"`
	Dirty      bool     `json:"dirty"`
	Snapshot   bool     `json:"snapshot"`
	GoVersion  string   `json:"goVersion"`
	BuilderID  string   `json:"builderID"`
	Epoch      int64    `json:"sourceDateEpoch"`
	Out        string   `json:"out"`
	Binaries   []Binary `json:"binaries"`
	Checksums  string   `json:"checksums"`
	Signature  string   `json:"signature,omitempty"`
	Provenance string   `json:"provenance"`
	Policy     string   `json:"policy,omitempty"`
	Layout     string   `json:"ociLayout"`
	Images     []Image  `json:"images"`
	// Files is the artifact of the release's files, when pushed.
	Files   *Files  `json:"files,omitempty"`
	Seconds Timings `json:"seconds"`
}

// Timings are the seconds each phase took (B17). Build, SBOM, Images,
// Files and Push are on the release's critical path, one after another;
// the ...Work figures are CPU-side work done in the background, beside the
// builds, summed over its tasks (they may add up to more than Total).
type Timings struct {
	// Prepare is reading the source (git) before the first build.
	Prepare float64 `json:"prepare"`
	// Build is the go build commands, one per platform, as the floor runs
	// them, and the moves of their binaries into Out.
	Build  float64 `json:"build"`
	SBOM   float64 `json:"sbom"`   // what the SBOMs add: they are made beside the builds, this is the wait for the last
	Images float64 `json:"images"` // what image assembly adds to the release's time (its wait, the image SBOMs, the indexes)
	// Files is the provenance, the checksums, their signatures and the policy.
	Files float64 `json:"files"`
	Push  float64 `json:"push,omitempty"`
	// Tail is from the end of the last go build to the end of the
	// release: what the release adds after the floor's work.
	Tail  float64 `json:"tail"`
	Total float64 `json:"total"`
	// HashWork is hashing the binaries and reading back their version.
	HashWork float64 `json:"hashWork"`
	// SBOMWork is syft cataloguing the binaries, one SBOM per binary.
	SBOMWork float64 `json:"sbomWork"`
	// ImageWork is the time the platform images took to assemble and to
	// write to the OCI layout, in the background, beside the builds.
	ImageWork float64 `json:"imageWork"`
	// ImageSBOMWork is the images' SBOMs, each combined from its
	// binaries' SBOMs (no cataloguing of its own).
	ImageSBOMWork float64 `json:"imageSBOMWork"`
}

// Release builds a release as o says. It refuses (ErrRefused) a dirty tree or
// an untagged commit unless o.Snapshot, naming the files or the tags.
func Release(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	if err := o.defaults(); err != nil {
		return nil, err
	}
	src, err := readSource(ctx, o.Dir)
	if err != nil {
		return nil, err
	}
	if err := o.check(src); err != nil {
		return nil, err
	}
	r := newRun(ctx, o, src, &Result{
		Version: o.Version, Commit: src.commit, Dirty: len(src.dirty) > 0, Snapshot: o.Snapshot,
		BuilderID: BuilderID, Epoch: src.epoch.Unix(), Out: o.Out,
	})
	defer r.close()
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	if entries, _ := os.ReadDir(o.Out); len(entries) > 0 {
		return nil, fmt.Errorf("%w: %s is not empty", ErrRefused, o.Out)
	}
	r.res.Seconds.Prepare = time.Since(start).Seconds()
	steps := []struct {
		t  *float64
		fn func(context.Context) error
	}{
		{&r.res.Seconds.Build, r.build},
		{&r.res.Seconds.SBOM, r.sboms},
		{&r.res.Seconds.Images, r.images},
		{&r.res.Seconds.Files, r.files},
		{&r.res.Seconds.Push, r.push},
	}
	for _, s := range steps {
		t0 := time.Now()
		if err := s.fn(r.ctx); err != nil {
			return nil, err
		}
		*s.t = time.Since(t0).Seconds()
	}
	r.res.Seconds.Total = time.Since(start).Seconds()
	r.res.Seconds.Tail = time.Since(r.built0).Seconds()
	r.mu.Lock()
	r.res.Seconds.HashWork, r.res.Seconds.SBOMWork = r.work.hash.Seconds(), r.work.sbom.Seconds()
	r.res.Seconds.ImageWork, r.res.Seconds.ImageSBOMWork = r.work.image.Seconds(), r.work.imageSBOM.Seconds()
	r.mu.Unlock()
	return r.res, nil
}

func (o *Options) defaults() error {
	if o.Dir == "" || o.Out == "" {
		return errors.New("release: Dir and Out are required")
	}
	if len(o.Platforms) == 0 {
		o.Platforms = Platforms
	}
	if len(o.Programs) == 0 {
		o.Programs = Programs
	}
	if o.Repository == "" {
		o.Repository = DefaultRepository
	}
	o.Repository = strings.TrimSuffix(o.Repository, "/")
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Push && o.Signer == nil {
		return fmt.Errorf("%w: pushing needs a signing key: a pushed release is always signed", ErrRefused)
	}
	if o.Signer == nil && !o.Snapshot {
		return fmt.Errorf("%w: a release is signed: give a signing key (or --snapshot)", ErrRefused)
	}
	return nil
}

// check refuses what must not be released, and settles the version.
func (o *Options) check(src *source) error {
	if len(src.dirty) > 0 && !o.Snapshot {
		return fmt.Errorf("%w: the tree has uncommitted changes (give --snapshot to build it anyway): %s", ErrRefused, strings.Join(src.dirty, ", "))
	}
	if o.Version == "" {
		if !o.Snapshot {
			switch len(src.tags) {
			case 0:
				return fmt.Errorf("%w: commit %s has no release tag v*.*.* (tag it, or give --snapshot)", ErrRefused, src.commit[:12])
			case 1:
				o.Version = src.tags[0]
			default:
				return fmt.Errorf("%w: commit %s has several release tags (%s): give the version", ErrRefused, src.commit[:12], strings.Join(src.tags, ", "))
			}
		} else {
			o.Version = version.Untagged(src.commit, len(src.dirty) > 0)
		}
	}
	if o.Snapshot {
		if version.IsRelease(o.Version) {
			return fmt.Errorf("%w: a snapshot is never a release: %s is a release version (leave the version out)", ErrRefused, o.Version)
		}
		return nil
	}
	if !version.IsRelease(o.Version) {
		return fmt.Errorf("%w: %q is not a release version vX.Y.Z", ErrRefused, o.Version)
	}
	for _, t := range src.tags {
		if t == o.Version {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not a tag of commit %s (tags there: %s); give --snapshot for an untagged build", ErrRefused, o.Version, src.commit[:12], strings.Join(append([]string{"none"}, src.tags...)[min(1, len(src.tags)):], ", "))
}

// run is one release under way.
type run struct {
	o      Options
	src    *source
	res    *Result
	ctx    context.Context // cancelled when Release returns: background tasks stop
	cancel context.CancelFunc
	built  []built // per image, for files and push
	built0 time.Time
	// bins are the binaries' tasks, by file, in build order; progs are
	// the image SBOMs' tasks, by program. Made by build's goroutine.
	bins  map[string]*binTasks
	progs map[string]*imageSBOM
	// layout is the OCI layout the platform images are written to as
	// they are made; its index.json is written in program order at the end.
	layout   layout.Path
	goVer    *task           // go env GOVERSION, beside the first build
	prepared *task           // syft's licence matcher, compiled beside the first build
	sbomCtx  context.Context // carries it, once prepared is done
	// slots bound the background tasks running at once: one while a go
	// build runs (the build has the machine's cores as its -p budget, as
	// the floor's has, and is the release's critical path: the work
	// beside it takes what the build leaves idle, about one core, rather
	// than every core it can), all of them after the last build. held is
	// how many build holds while it runs.
	slots chan struct{}
	held  int
	// building is set while go builds run: a layer made then compresses
	// one block at a time.
	building atomic.Bool
	// layers is the folder under Out the platform images' layer files
	// are written to, so that the OCI layout takes them by hard link.
	layers  string
	tasks   sync.WaitGroup
	mu      sync.Mutex // guards closers and work
	closers []func() error
	work    struct{ hash, sbom, image, imageSBOM time.Duration }
}

func newRun(ctx context.Context, o Options, src *source, res *Result) *run {
	ctx, cancel := context.WithCancel(ctx)
	return &run{o: o, src: src, res: res, ctx: ctx, cancel: cancel,
		bins: map[string]*binTasks{}, progs: map[string]*imageSBOM{},
		slots: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))}
}

// close stops and waits for the background tasks, then releases what they
// hold (the images' layer files).
func (r *run) close() {
	r.cancel()
	r.tasks.Wait()
	for _, c := range r.closers {
		_ = c()
	}
	if r.layers != "" {
		_ = os.RemoveAll(r.layers)
	}
}

// hold takes n of the background's slots until unhold: while the go builds
// run, the tasks beside them run one at a time.
func (r *run) hold(n int) {
	for range n {
		r.slots <- struct{}{}
	}
	r.held += n
	r.building.Store(true)
}

// unhold gives the slots hold took back: the tasks left run on every core.
func (r *run) unhold() {
	for range r.held {
		<-r.slots
	}
	r.held = 0
	r.building.Store(false)
}

// task is work done in the background while the release goes on.
type task struct {
	done chan struct{}
	err  error
}

// start runs fn in the background, when a slot is free; its time is added
// to *work. after are the tasks it needs done first: it waits for them
// before taking a slot, and fails with the first one's error.
func (r *run) start(work *time.Duration, fn func(ctx context.Context) error, after ...*task) *task {
	t := &task{done: make(chan struct{})}
	r.tasks.Add(1)
	go func() {
		defer r.tasks.Done()
		defer close(t.done)
		for _, a := range after {
			if t.err = a.wait(r.ctx); t.err != nil {
				return
			}
		}
		select {
		case r.slots <- struct{}{}:
		case <-r.ctx.Done():
			t.err = r.ctx.Err()
			return
		}
		defer func() { <-r.slots }()
		t0 := time.Now()
		t.err = fn(r.ctx)
		if work != nil {
			r.mu.Lock()
			*work += time.Since(t0)
			r.mu.Unlock()
		}
	}()
	return t
}

// wait waits for t and returns its error.
func (t *task) wait(ctx context.Context) error {
	select {
	case <-t.done:
		return t.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *run) logf(format string, args ...any) { fmt.Fprintf(r.o.Log, format+"\n", args...) }

func hostPlatform() string { return runtime.GOOS + "/" + runtime.GOARCH }
