package template

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
	"github.com/slipway-dev/slipway/pkg/isolate"
	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/scan"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// Result is a built, tested, frozen template, not yet published.
type Result struct {
	Name       string            `json:"name"`
	TemplateID string            `json:"templateID"` // the manifest digest
	ContentID  string            `json:"contentID"`  // fs-<12 hex> of the layers' chain id
	Ref        string            `json:"ref,omitempty"`
	Base       ref.Pin           `json:"base"`
	BaseDigest string            `json:"baseDigest"`
	SpecDigest string            `json:"specDigest"`
	Epoch      int64             `json:"sourceDateEpoch"`
	Inputs     []Input           `json:"inputs,omitempty"`
	Steps      []StepResult      `json:"steps"`
	Scrubbed   []scan.ScrubEntry `json:"scrubbed"`
	Scan       *scan.Report      `json:"scan"`
	Layer      LayerResult       `json:"layer"`
	Tests      []TestResult      `json:"tests"`
	WorkDir    string            `json:"workDir,omitempty"` // set when the working directory is kept
	Started    time.Time         `json:"started"`
	Finished   time.Time         `json:"finished"`

	// Image is the frozen image; Rootfs an unpacked copy of it (for the SBOM, with the empty
	// mount points the tests' read-only root needed), removed by Close.
	Image  v1.Image `json:"-"`
	Rootfs string   `json:"-"`
	work   string
	keep   bool
	layer  io.Closer
}

// StepResult says how a step went.
type StepResult struct {
	Index    int           `json:"index"`
	Name     string        `json:"name,omitempty"`
	Kind     string        `json:"kind"` // copy or run
	Duration time.Duration `json:"durationNs"`
}

// LayerResult describes the frozen change over the base.
type LayerResult struct {
	Digest  string `json:"digest"`
	DiffID  string `json:"diffID"`
	Size    int64  `json:"size"`
	Added   int    `json:"added"`
	Changed int    `json:"changed"`
	Deleted int    `json:"deleted"`
}

// TestResult is one smoke test, run in a sandbox of the frozen tree shaped as every sandbox of the image.
type TestResult struct {
	Name   string   `json:"name"`
	Run    []string `json:"run"`
	Passed bool     `json:"passed"`
}

// Close removes the build's working files (unless kept).
func (r *Result) Close() error {
	if r.layer != nil {
		r.layer.Close()
	}
	if r.keep || r.work == "" {
		return nil
	}
	return os.RemoveAll(r.work)
}

// Build runs the recipe: base by digest, steps in a build sandbox, scrub,
// scan (a finding refuses the freeze), freeze, smoke tests in a sandbox of
// the frozen tree shaped as the runtime shapes one (after the refresh phase,
// read-only root, private workspace). It publishes nothing (see Publish).
func Build(ctx context.Context, t *Template, opts ...Option) (res *Result, err error) {
	o := options{source: Remote{}, log: io.Discard}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	res = &Result{Name: t.Metadata.Name, SpecDigest: t.Digest, Started: time.Now().UTC()}
	epoch := time.Unix(0, 0).UTC()
	if o.epoch != nil {
		epoch = *o.epoch
	}
	if t.Spec.SourceDateEpoch != nil {
		epoch = time.Unix(*t.Spec.SourceDateEpoch, 0).UTC()
	}
	res.Epoch = epoch.Unix()

	base, err := t.BaseReference()
	if err != nil {
		return nil, err
	}
	if !base.IsPinned() {
		if o.resolver == nil {
			return nil, t.requirePinnedBase(base)
		}
		p, err := o.resolver.Resolve(ctx, base)
		if err != nil {
			return nil, t.fieldError("spec.base", "%v", err)
		}
		base = base.WithDigest(p.Digest)
		res.Base = p
	} else {
		res.Base = ref.PinOf(base, base.Digest(), ref.Origin{Source: ref.SourceWritten, Registry: base.Registry()})
	}
	res.BaseDigest = base.Digest()

	work := o.workDir
	if work == "" {
		if work, err = os.MkdirTemp("", "slipway-template-"); err != nil {
			return nil, err
		}
	} else {
		res.keep = true
	}
	res.work, res.keep = work, res.keep || o.keep
	if res.keep {
		res.WorkDir = work
	}
	defer func() {
		if err != nil {
			res.Close()
			res = nil
		}
	}()

	logf(o.log, "pull base %s", base)
	baseImg, err := o.source.Image(ctx, base)
	if err != nil {
		return res, t.fieldError("spec.base", "pull %s: %v", base, err)
	}
	tree := filepath.Join(work, "rootfs")
	if _, err := rootfs.Extract(ctx, baseImg, tree); err != nil {
		return res, t.errorf("unpack base %s: %w", base, err)
	}
	snap, err := rootfs.Snapshot(tree)
	if err != nil {
		return res, err
	}
	if err := t.runSteps(ctx, tree, res, &o); err != nil {
		return res, err
	}

	if err := t.scrubAndScan(ctx, tree, res, &o); err != nil {
		return res, err
	}

	logf(o.log, "freeze")
	layer, dr, err := rootfs.Diff(ctx, snap, tree, rootfs.WithEpoch(epoch), rootfs.WithTempDir(work))
	if err != nil {
		return res, t.errorf("freeze: %w", err)
	}
	if c, ok := layer.(io.Closer); ok {
		res.layer = c
	}
	maxSize := t.Spec.Limits.MaxSize
	if maxSize == 0 {
		maxSize = DefaultMaxSize
	}
	if dr.UncompressedSize > maxSize {
		return res, t.errorf("the build adds %d bytes over the base, over spec.limits.maxSize %d", dr.UncompressedSize, maxSize)
	}
	res.Layer = LayerResult{Digest: dr.Digest.String(), DiffID: dr.DiffID.String(), Size: dr.Size, Added: dr.Added, Changed: dr.Changed, Deleted: dr.Deleted}
	logf(o.log, "frozen: %d bytes over the base (%d compressed); %d added, %d changed, %d deleted", dr.UncompressedSize, dr.Size, dr.Added, dr.Changed, dr.Deleted)
	frozen, err := t.freeze(baseImg, layer, epoch, base.Digest(), nil)
	if err != nil {
		return res, err
	}

	logf(o.log, "test")
	res.Rootfs = filepath.Join(work, "frozen")
	if _, err := rootfs.Extract(ctx, frozen, res.Rootfs); err != nil {
		return res, t.errorf("unpack frozen image: %w", err)
	}
	fcf, err := frozen.ConfigFile()
	if err != nil {
		return res, err
	}
	if res.Tests, err = t.runTests(ctx, res.Rootfs, fcf, &o); err != nil {
		return res, err
	}
	// The tests ran on exactly these layers; record them in the config.
	if frozen, err = t.freeze(baseImg, layer, epoch, base.Digest(), res.Tests); err != nil {
		return res, err
	}
	res.Image = frozen
	d, err := frozen.Digest()
	if err != nil {
		return res, err
	}
	res.TemplateID = d.String()
	if res.ContentID, err = ContentID(frozen); err != nil {
		return res, err
	}
	res.Finished = time.Now().UTC()
	return res, nil
}

// scrubAndScan scrubs the built tree (the spec's scrub paths, minus its
// caches) and scans it; a finding the spec does not allow refuses the
// freeze.
func (t *Template) scrubAndScan(ctx context.Context, tree string, res *Result, o *options) error {
	logf(o.log, "scrub")
	var keep []string
	for _, c := range t.Spec.Caches {
		keep = append(keep, c.Path)
	}
	scrub := append([]string(nil), t.Spec.Scrub...)
	if hasRefresh(t, RefreshRandomSeed) {
		scrub = append(scrub, "/var/lib/systemd/random-seed")
	}
	sr, err := scan.Scrub(tree, scrub, keep)
	if err != nil {
		return t.errorf("scrub: %w", err)
	}
	res.Scrubbed = sr.Entries

	logf(o.log, "scan")
	sa := append([]scan.Allow(nil), o.allow...)
	for _, a := range t.Spec.Allow {
		sa = append(sa, scan.Allow{Rule: scan.Rule(a.Rule), Path: a.Path})
	}
	report, err := scan.Scan(ctx, tree, scan.WithAllow(sa...))
	if err != nil {
		return t.errorf("scan: %w", err)
	}
	res.Scan = report
	if err := report.Err(); err != nil {
		return t.errorf("refusing to freeze: %w", err)
	}
	return nil
}

// freeze appends the layer to the base with a canonical config: no host
// detail, timestamps at the epoch, the template's labels.
func (t *Template) freeze(base v1.Image, layer v1.Layer, epoch time.Time, baseDigest string, tests []TestResult) (v1.Image, error) {
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "slipway template build " + t.Metadata.Name, Comment: t.Digest},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: epoch}
	cf.Author, cf.Container = "", ""
	cf.Config.Hostname, cf.Config.Domainname = "", ""
	cf.Config.Env = mergeEnv(cf.Config.Env, t.Spec.Env)
	if t.Spec.Workdir != "" {
		cf.Config.WorkingDir = t.Spec.Workdir
	}
	if t.Spec.User != "" {
		cf.Config.User = t.Spec.User
	}
	labels := map[string]string{}
	for k, v := range cf.Config.Labels {
		labels[k] = v
	}
	for k, v := range t.Metadata.Labels {
		labels[k] = v
	}
	labels[templatemeta.LabelName] = t.Metadata.Name
	labels[templatemeta.LabelSpecDigest] = t.Digest
	labels[templatemeta.LabelBaseDigest] = baseDigest
	labels[templatemeta.LabelRefresh] = strings.Join(t.Spec.Refresh, ",")
	if t.Spec.User != "" {
		labels[templatemeta.LabelUser] = t.Spec.User
	}
	if tests != nil {
		b, err := json.Marshal(tests)
		if err != nil {
			return nil, err
		}
		labels[templatemeta.LabelTests] = string(b)
	}
	cf.Config.Labels = labels
	for i := range cf.History {
		cf.History[i].Created = v1.Time{Time: clampTime(cf.History[i].Created.Time, epoch)}
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	return mutate.ConfigMediaType(img, types.OCIConfigJSON), nil
}

func clampTime(t, epoch time.Time) time.Time {
	if t.IsZero() || t.After(epoch) {
		return epoch
	}
	return t
}

// ContentID is "fs-" and 12 hex of the sha256 of the image's layer diff ids in
// order (its filesystem chain), whatever its config says.
func ContentID(img v1.Image) (string, error) {
	ids, err := chainOf(img)
	if err != nil {
		return "", err
	}
	return "fs-" + ids[:12], nil
}

func hasRefresh(t *Template, kind string) bool {
	for _, r := range t.Spec.Refresh {
		if r == kind {
			return true
		}
	}
	return false
}

// mergeEnv sets the spec's variables over the base's, keeping the base's order then the spec's sorted.
func mergeEnv(base []string, spec map[string]string) []string {
	out := make([]string, 0, len(base)+len(spec))
	seen := map[string]bool{}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := spec[k]; ok {
			kv = k + "=" + v
		}
		seen[k] = true
		out = append(out, kv)
	}
	for _, k := range sortedKeys(spec) {
		if !seen[k] {
			out = append(out, k+"="+spec[k])
		}
	}
	return out
}

func logf(w io.Writer, format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }

// parseUser turns "uid[:gid]" into an isolate.User.
func parseUser(s string) (*isolate.User, error) {
	if s == "" {
		return nil, nil
	}
	u, g, ok := strings.Cut(s, ":")
	uid, err := strconv.Atoi(u)
	if err != nil {
		return nil, err
	}
	gid := uid
	if ok {
		if gid, err = strconv.Atoi(g); err != nil {
			return nil, err
		}
	}
	return &isolate.User{UID: uid, GID: gid}, nil
}
