package scan

import (
	"fmt"
	"path"
	"runtime"
	"strings"
)

// DefaultMaxFileSize is the largest file the content rules read (10 MiB).
// Larger files are counted in Report.SkippedLarge.
const DefaultMaxFileSize = 10 << 20

// DefaultSetuidAllowList returns the setuid and setgid programs a Debian or
// Ubuntu base legitimately ships: the brief's usual set plus Debian's setgid
// shadow helpers (chage, expiry, unix_chkpwd), ssh-agent (setgid _ssh) and
// the pre-usrmerge /bin locations. A new slice on every call.
func DefaultSetuidAllowList() []string {
	return []string{
		"/usr/bin/passwd", "/usr/bin/su", "/usr/bin/sudo", "/usr/bin/mount", "/usr/bin/umount",
		"/usr/bin/newgrp", "/usr/bin/chsh", "/usr/bin/chfn", "/usr/bin/gpasswd",
		"/usr/bin/chage", "/usr/bin/expiry", "/usr/sbin/unix_chkpwd", "/usr/bin/ssh-agent",
		"/bin/su", "/bin/mount", "/bin/umount",
		"/usr/lib/openssh/ssh-keysign", "/usr/lib/dbus-1.0/dbus-daemon-launch-helper",
	}
}

// Allow exempts the findings of one rule (or AnyRule) at the paths matching a
// glob. Path is absolute inside the rootfs; '*', '?' and [classes] match
// within one path element (path.Match) and a "**" element matches any number
// of elements. Allowed findings are reported in Report.Allowed.
type Allow struct {
	Rule Rule   `json:"rule"`
	Path string `json:"path"`
}

// String is the form ParseAllow reads: rule:glob.
func (a Allow) String() string { return string(a.Rule) + ":" + a.Path }

// ParseAllow reads rule:glob, as given to `slipway template scan --allow`.
func ParseAllow(s string) (Allow, error) {
	r, p, ok := strings.Cut(s, ":")
	if !ok {
		return Allow{}, fmt.Errorf("%w: allow %q: want rule:/path/glob", ErrConfig, s)
	}
	a := Allow{Rule: Rule(r), Path: p}
	return a, a.validate()
}

func (a Allow) validate() error {
	if a.Rule != AnyRule && !knownRule(a.Rule) {
		return fmt.Errorf("%w: allow %q: unknown rule %q", ErrConfig, a.String(), a.Rule)
	}
	return validGlob("allow "+a.String(), a.Path)
}

func (a Allow) matches(f Finding) bool {
	return (a.Rule == AnyRule || a.Rule == f.Rule) && globMatch(a.Path, f.Path)
}

// validGlob checks that p is an absolute, clean glob path.match accepts.
func validGlob(what, p string) error {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return fmt.Errorf("%w: %s: path %q must be absolute and clean", ErrConfig, what, p)
	}
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("%w: %s: bad pattern %q: %w", ErrConfig, what, p, err)
	}
	return nil
}

// globMatch matches a slash path against a pattern whose "**" elements match
// zero or more elements and whose other elements follow path.Match.
func globMatch(pattern, name string) bool {
	return matchElems(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func matchElems(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchElems(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

type options struct {
	maxSize     int64
	allow       []Allow
	setuid      []string
	extraSetuid []string
	workers     int
	// values, when set by tests, collects matched secret values.
	values *[][]byte
}

// Option configures Scan.
type Option func(*options) error

// WithMaxFileSize sets the largest file (in bytes) the content rules read;
// larger files are counted as skipped. The default is DefaultMaxFileSize.
func WithMaxFileSize(n int64) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("%w: max file size %d must be positive", ErrConfig, n)
		}
		o.maxSize = n
		return nil
	}
}

// WithAllow adds exemptions. Each must name a known rule (or AnyRule) and an
// absolute glob.
func WithAllow(allows ...Allow) Option {
	return func(o *options) error {
		for _, a := range allows {
			if err := a.validate(); err != nil {
				return err
			}
		}
		o.allow = append(o.allow, allows...)
		return nil
	}
}

// WithSetuidAllowList replaces DefaultSetuidAllowList: only these paths
// (absolute globs) may be setuid or setgid. An empty call allows none.
func WithSetuidAllowList(paths ...string) Option {
	return func(o *options) error {
		if err := validGlobs(paths); err != nil {
			return err
		}
		o.setuid = append([]string{}, paths...)
		return nil
	}
}

// WithExtraSetuidAllowed adds paths (absolute globs) to the setuid allow-list
// in force, the default one unless WithSetuidAllowList replaced it.
func WithExtraSetuidAllowed(paths ...string) Option {
	return func(o *options) error {
		if err := validGlobs(paths); err != nil {
			return err
		}
		o.extraSetuid = append(o.extraSetuid, paths...)
		return nil
	}
}

func validGlobs(paths []string) error {
	for _, p := range paths {
		if err := validGlob("setuid allow-list", p); err != nil {
			return err
		}
	}
	return nil
}

// WithConcurrency sets how many files are read at once. The default is
// GOMAXPROCS, at most 8.
func WithConcurrency(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: concurrency %d must be at least 1", ErrConfig, n)
		}
		o.workers = n
		return nil
	}
}

// withValues is a test hook: it collects each content finding's matched value.
func withValues(v *[][]byte) Option {
	return func(o *options) error { o.values = v; return nil }
}

func newOptions(opts []Option) (*options, error) {
	o := &options{
		maxSize: DefaultMaxFileSize,
		setuid:  DefaultSetuidAllowList(),
		workers: min(runtime.GOMAXPROCS(0), 8),
	}
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	o.setuid = append(o.setuid, o.extraSetuid...)
	return o, nil
}
