package template

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/slipway-dev/slipway/pkg/isolate"
	"github.com/slipway-dev/slipway/pkg/isolate/shape"
)

// ErrStep and ErrTest are the families of failed build steps and smoke tests.
var (
	ErrStep = fmt.Errorf("build step failed")
	ErrTest = fmt.Errorf("template test failed")
)

// outputTail is how much of a failed step's output an error shows.
const outputTail = 2 << 10

func (t *Template) stepTimeout(d time.Duration) time.Duration {
	switch {
	case d > 0:
		return d
	case t.Spec.Limits.StepTimeout.Duration > 0:
		return t.Spec.Limits.StepTimeout.Duration
	}
	return DefaultStepTimeout
}

func (t *Template) maxOutput() int {
	if t.Spec.Limits.MaxOutput > 0 {
		return t.Spec.Limits.MaxOutput
	}
	return DefaultMaxOutput
}

func (t *Template) workdir() string {
	if t.Spec.Workdir != "" {
		return t.Spec.Workdir
	}
	return "/"
}

// runSteps runs the copy and run steps in order in the build sandbox: the
// rootfs as /, root with the capabilities a package install needs, no network
// unless the step says so, bounded time and output.
func (t *Template) runSteps(ctx context.Context, tree string, res *Result, o *options) error {
	if err := os.MkdirAll(filepath.Join(tree, t.workdir()), 0o755); err != nil {
		return t.errorf("workdir %s: %w", t.workdir(), err)
	}
	for i, st := range t.Spec.Steps {
		start := time.Now()
		sr := StepResult{Index: i, Name: st.Name, Kind: "run"}
		label := stepLabel(i, st)
		if st.Copy != nil {
			sr.Kind = "copy"
			logf(o.log, "%s: copy %s -> %s", label, st.Copy.Src, st.Copy.Dst)
			in, err := copyStep(t.Dir, st.Copy.Src, st.Copy.Dst, tree)
			if err != nil {
				return fmt.Errorf("%s%d: %s: %w: %v", t.File+":", t.line(fmt.Sprintf("spec.steps[%d].copy.src", i)), label, ErrStep, err)
			}
			res.Inputs = append(res.Inputs, in...)
		} else {
			logf(o.log, "%s: run %s", label, strings.Join(st.Run, " "))
			env := maps.Clone(t.Spec.Env)
			if env == nil {
				env = map[string]string{}
			}
			maps.Copy(env, st.Env)
			r, err := isolate.Run(ctx, isolate.Spec{
				Root:      tree,
				Network:   st.Network,
				Env:       env,
				Dir:       t.workdir(),
				Hostname:  "build",
				Argv:      st.Run,
				Timeout:   t.stepTimeout(st.Timeout.Duration),
				MaxOutput: t.maxOutput(),
				Caps:      isolate.BuildCaps(),
			})
			if err != nil {
				return fmt.Errorf("%s: %w: %v", label, ErrStep, err)
			}
			if r.ExitCode != 0 || r.TimedOut {
				return fmt.Errorf("%s:%d: %s: %w: %s\n%s", t.File, t.line(fmt.Sprintf("spec.steps[%d].run", i)), label, ErrStep, exitText(r), tail(r.Output))
			}
		}
		sr.Duration = time.Since(start)
		res.Steps = append(res.Steps, sr)
	}
	return nil
}

// runTests runs the tests, in order, in one sandbox of the frozen tree
// shaped as the runtime shapes a sandbox of the image (package
// isolate/shape): the refresh phase done (a fresh /etc/machine-id, and the
// random seed and ssh host keys spec.refresh asks for), the root read-only
// with a private workspace at the working directory seeded from the tree,
// the image's environment, user and working directory, no network. A test
// that would fail in every sandbox fails the build. The frozen tree gets
// the empty mount points a read-only root needs; the tests' writes and
// the refreshed files stay outside it.
func (t *Template) runTests(ctx context.Context, frozen string, cf *v1.ConfigFile, o *options) ([]TestResult, error) {
	if len(t.Spec.Tests) == 0 {
		return []TestResult{}, nil
	}
	user, err := parseUser(cf.Config.User)
	if err != nil {
		return nil, t.fieldError("spec.user", "the image's user %q: want uid[:gid] in numbers: %v", cf.Config.User, err)
	}
	if user != nil && user.UID == 0 && user.GID == 0 {
		user = nil
	}
	workdir := shape.Workdir(cf.Config.WorkingDir)
	if err := shape.MountPoints(frozen, workdir, nil, nil); err != nil {
		return nil, t.errorf("test sandbox: %w", err)
	}
	// The sandbox's own files, beside the frozen tree: reachable (0711)
	// by a template's user, not listable.
	dir := filepath.Join(filepath.Dir(frozen), "test-sandbox")
	refreshDir, ws := filepath.Join(dir, "refresh"), filepath.Join(dir, "workspace")
	for _, d := range []string{dir, refreshDir} {
		if err := os.Mkdir(d, 0o711); err != nil {
			return nil, t.errorf("test sandbox: %w", err)
		}
		if err := os.Chmod(d, 0o711); err != nil { // umask
			return nil, t.errorf("test sandbox: %w", err)
		}
	}
	if err := os.Mkdir(ws, 0o700); err != nil {
		return nil, t.errorf("test sandbox: %w", err)
	}
	if err := shape.SeedWorkspace(frozen, workdir, ws, user); err != nil {
		return nil, t.errorf("test sandbox: %w", err)
	}
	mounts, refreshed, err := shape.Refresh(ctx, frozen, t.Spec.Refresh, refreshDir)
	if err != nil {
		return nil, t.errorf("test sandbox: refresh: %w", err)
	}
	mounts = append(mounts, isolate.Mount{Source: ws, Target: workdir})
	var did []string
	for _, r := range refreshed {
		if r.Done {
			did = append(did, r.Kind)
		}
	}
	// A root builder runs the tests as the template's user for real (a host
	// uid in an unprivileged sandbox), as the local backend runs a
	// sandbox, so file ownership means what it will mean in a sandbox;
	// otherwise as the caller, mapped to that uid.
	var hostUser, nsUser *isolate.User
	if user != nil && os.Getuid() == 0 {
		hostUser = user
		if err := os.Chmod(filepath.Dir(frozen), 0o711); err != nil {
			return nil, err
		}
	} else {
		nsUser = user
	}
	env := shape.Env(cf.Config.Env, workdir, nil)
	out := []TestResult{}
	for i, ts := range t.Spec.Tests {
		logf(o.log, "test %s", ts.Name)
		r, err := isolate.Run(ctx, isolate.Spec{
			Root:         frozen,
			ReadOnlyRoot: true,
			Mounts:       mounts,
			Env:          env,
			Dir:          workdir,
			Hostname:     "test",
			Argv:         ts.Run,
			Timeout:      t.stepTimeout(ts.Timeout.Duration),
			MaxOutput:    t.maxOutput(),
			User:         nsUser,
			HostUser:     hostUser,
		})
		if err != nil {
			return nil, fmt.Errorf("test %s: %w: %v", ts.Name, ErrTest, err)
		}
		if r.ExitCode != 0 || r.TimedOut {
			return nil, fmt.Errorf("%s:%d: test %s: %w: %s (tests run as in every sandbox of the template: read-only root, private workspace %s, fresh %s, no network)\n%s",
				t.File, t.line(fmt.Sprintf("spec.tests[%d]", i)), ts.Name, ErrTest, exitText(r), workdir, strings.Join(did, ", "), tail(r.Output))
		}
		out = append(out, TestResult{Name: ts.Name, Run: ts.Run, Passed: true})
	}
	return out, nil
}

func stepLabel(i int, st Step) string {
	if st.Name != "" {
		return fmt.Sprintf("step %d (%s)", i+1, st.Name)
	}
	return fmt.Sprintf("step %d", i+1)
}

func exitText(r *isolate.Result) string {
	switch {
	case r.TimedOut:
		return fmt.Sprintf("timed out after %v", r.Duration.Round(time.Millisecond))
	case r.Signal != "":
		return "killed by " + r.Signal
	}
	return fmt.Sprintf("exit code %d", r.ExitCode)
}

func tail(b []byte) string {
	if len(b) > outputTail {
		b = b[len(b)-outputTail:]
	}
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return "(no output)"
	}
	return "output (tail):\n  " + strings.ReplaceAll(s, "\n", "\n  ")
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// chainOf is the hex sha256 over the image's diff ids, in order.
func chainOf(img v1.Image) (string, error) {
	layers, err := img.Layers()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, l := range layers {
		d, err := l.DiffID()
		if err != nil {
			return "", err
		}
		fmt.Fprintln(h, d.String())
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
