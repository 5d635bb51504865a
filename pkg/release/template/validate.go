package template

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/slipway-dev/slipway/pkg/ref"
)

func (t *Template) validate() error {
	if t.APIVersion != APIVersion {
		return t.fieldError("apiVersion", "want %s, got %q", APIVersion, t.APIVersion)
	}
	if t.Kind != Kind {
		return t.fieldError("kind", "want %s, got %q", Kind, t.Kind)
	}
	if !namePattern.MatchString(t.Metadata.Name) {
		return t.fieldError("metadata.name", "%q must be lower-case letters, digits, '.' or '-', at most 63", t.Metadata.Name)
	}
	s := &t.Spec
	if s.Base == "" {
		return t.fieldError("spec.base", "required: the base image, by digest")
	}
	if _, err := ref.Parse(s.Base); err != nil {
		return t.fieldError("spec.base", "%v", err)
	}
	if err := t.validateEnv("spec.env", s.Env); err != nil {
		return err
	}
	if s.Workdir != "" && !cleanAbs(s.Workdir) {
		return t.fieldError("spec.workdir", "%q must be a clean absolute path", s.Workdir)
	}
	if s.User != "" && !userPattern.MatchString(s.User) {
		return t.fieldError("spec.user", "%q must be uid or uid:gid (numbers)", s.User)
	}
	for i, st := range s.Steps {
		if err := t.validateStep(fmt.Sprintf("spec.steps[%d]", i), st); err != nil {
			return err
		}
	}
	for i, c := range s.Caches {
		if !cleanAbs(c.Path) || c.Path == "/" {
			return t.fieldError(fmt.Sprintf("spec.caches[%d].path", i), "%q must be a clean absolute path below /", c.Path)
		}
	}
	for i, p := range s.Scrub {
		if !path.IsAbs(p) || strings.Contains(p, "..") || p == "/" {
			return t.fieldError(fmt.Sprintf("spec.scrub[%d]", i), "%q must be an absolute path or glob below /, without ..", p)
		}
		if _, err := path.Match(p, "/"); err != nil {
			return t.fieldError(fmt.Sprintf("spec.scrub[%d]", i), "%q: %v", p, err)
		}
	}
	for i, r := range s.Refresh {
		if !slices.Contains([]string{RefreshMachineID, RefreshSSHHostKeys, RefreshRandomSeed}, r) {
			return t.fieldError(fmt.Sprintf("spec.refresh[%d]", i), "unknown %q: want %s, %s or %s", r, RefreshMachineID, RefreshSSHHostKeys, RefreshRandomSeed)
		}
		if slices.Index(s.Refresh, r) != i {
			return t.fieldError(fmt.Sprintf("spec.refresh[%d]", i), "%q listed twice", r)
		}
	}
	names := map[string]bool{}
	for i, ts := range s.Tests {
		p := fmt.Sprintf("spec.tests[%d]", i)
		if ts.Name == "" {
			return t.fieldError(p+".name", "required")
		}
		if names[ts.Name] {
			return t.fieldError(p+".name", "%q used twice", ts.Name)
		}
		names[ts.Name] = true
		if len(ts.Run) == 0 || ts.Run[0] == "" {
			return t.fieldError(p+".run", "required: an argv such as [\"/bin/sh\", \"-c\", \"…\"]")
		}
	}
	for i, a := range s.Allow {
		p := fmt.Sprintf("spec.allow[%d]", i)
		if a.Rule == "" {
			return t.fieldError(p+".rule", "required")
		}
		if !path.IsAbs(a.Path) {
			return t.fieldError(p+".path", "%q must be an absolute path or glob", a.Path)
		}
		if _, err := path.Match(a.Path, "/"); err != nil {
			return t.fieldError(p+".path", "%q: %v", a.Path, err)
		}
	}
	if s.SourceDateEpoch != nil && *s.SourceDateEpoch < 0 {
		return t.fieldError("spec.sourceDateEpoch", "must not be negative")
	}
	if s.Limits.MaxOutput < 0 || s.Limits.MaxSize < 0 {
		return t.fieldError("spec.limits", "limits must not be negative")
	}
	return nil
}

func (t *Template) validateStep(p string, st Step) error {
	switch {
	case st.Copy != nil && len(st.Run) > 0:
		return t.fieldError(p, "a step is either copy or run, not both")
	case st.Copy == nil && len(st.Run) == 0:
		return t.fieldError(p, "a step needs copy or run")
	case st.Copy != nil:
		c := st.Copy
		if c.Src == "" || path.IsAbs(c.Src) || slices.Contains(strings.Split(path.Clean(c.Src), "/"), "..") {
			return t.fieldError(p+".copy.src", "%q must be a path inside the spec's folder (relative, no ..)", c.Src)
		}
		if !path.IsAbs(c.Dst) || slices.Contains(strings.Split(c.Dst, "/"), "..") {
			return t.fieldError(p+".copy.dst", "%q must be an absolute path in the rootfs, without ..", c.Dst)
		}
		if st.Network {
			return t.fieldError(p+".network", "only run steps take network")
		}
	default:
		if st.Run[0] == "" {
			return t.fieldError(p+".run", "the program must not be empty")
		}
	}
	return t.validateEnv(p+".env", st.Env)
}

func (t *Template) validateEnv(p string, env map[string]string) error {
	for k, v := range env {
		if !envPattern.MatchString(k) {
			return t.fieldError(p, "variable name %q is not valid", k)
		}
		if strings.ContainsRune(v, 0) {
			return t.fieldError(p, "variable %s holds a NUL byte", k)
		}
	}
	return nil
}
