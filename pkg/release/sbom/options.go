package sbom

import (
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/anchore/syft/syft"
)

// DefaultDocumentName names the document when WithDocumentName is not given.
const DefaultDocumentName = "rootfs"

// DefaultCatalogers are the syft catalogers Generate runs on a root filesystem: the installed-package
// databases of the Linux distributions, Go binaries, installed Python and npm packages, Java archives,
// and the binary classifier, which names well-known tools copied in outside a package manager (node,
// python, busybox, …) by the few file names it knows; its finds that dpkg, apk or rpm own are dropped.
// They are a subset of what syft runs on a container image, whose full set finds the same packages on a
// root filesystem more slowly (benchmark B4's tree compares them). Declared-only catalogers (lock files, manifests)
// are left out because they describe what could be installed, not what is. Pass WithCatalogers to
// choose others, for example elf-binary-package-cataloger or cargo-auditable-binary-cataloger, which
// read every executable.
func DefaultCatalogers() []string {
	return []string{
		"alpm-db-cataloger",
		"apk-db-cataloger",
		"dpkg-db-cataloger",
		"rpm-db-cataloger",
		"go-module-binary-cataloger",
		"python-installed-package-cataloger",
		"javascript-package-cataloger",
		"java-archive-cataloger",
		"binary-classifier-cataloger",
	}
}

// Option configures Generate.
type Option func(*options) error

type options struct {
	name        string
	namespace   string // empty: derived from the name, the time and the package list
	created     time.Time
	parallelism int
	catalogers  []string
	// configHook edits the syft configuration after Slipway set it; tests only.
	configHook func(*syft.CreateSBOMConfig)
}

func defaultOptions() options {
	return options{
		name:        DefaultDocumentName,
		created:     time.Unix(0, 0).UTC(),
		parallelism: runtime.GOMAXPROCS(0),
		catalogers:  DefaultCatalogers(),
	}
}

func newOptions(opts []Option) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return options{}, fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
	}
	return o, nil
}

// WithDocumentName sets the SPDX document name and the name of the described root (the CycloneDX
// metadata component), for example the template name. It must be non-empty and printable.
func WithDocumentName(name string) Option {
	return func(o *options) error {
		if strings.TrimSpace(name) == "" {
			return errors.New("document name is empty")
		}
		if strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("document name %q has control characters", name)
		}
		o.name = name
		return nil
	}
}

// WithNamespace sets the SPDX document namespace, an absolute URI without a fragment, for example one
// made from the template's digest. The CycloneDX serial number is a name-based UUID of it. Without this
// option the namespace is derived from the document name, the creation time and the package list, so
// the same rootfs gives the same namespace.
func WithNamespace(uri string) Option {
	return func(o *options) error {
		u, err := url.Parse(uri)
		if err != nil {
			return fmt.Errorf("namespace %q: %w", uri, err)
		}
		if !u.IsAbs() || u.Fragment != "" || strings.Contains(uri, "#") {
			return fmt.Errorf("namespace %q is not an absolute uri without a fragment", uri)
		}
		o.namespace = uri
		return nil
	}
}

// WithCreated sets the documents' creation time, normally SOURCE_DATE_EPOCH as read by the caller. It
// is written in UTC at second precision. The default is the Unix epoch, never the clock.
func WithCreated(t time.Time) Option {
	return func(o *options) error {
		if t.IsZero() {
			return errors.New("creation time is zero")
		}
		if t.Before(time.Unix(0, 0)) {
			return fmt.Errorf("creation time %s is before the unix epoch", t.UTC().Format(time.RFC3339))
		}
		o.created = t.UTC().Truncate(time.Second)
		return nil
	}
}

// WithParallelism bounds how many catalogers and files syft works on at once; 1 runs serially. The
// default is GOMAXPROCS. The output does not depend on it.
func WithParallelism(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("parallelism %d is below 1", n)
		}
		o.parallelism = n
		return nil
	}
}

// WithCatalogers replaces DefaultCatalogers with the named syft package catalogers (see `syft
// cataloger list`). Network lookups stay off whichever catalogers run.
func WithCatalogers(names ...string) Option {
	return func(o *options) error {
		if len(names) == 0 {
			return errors.New("no catalogers named")
		}
		for _, n := range names {
			if strings.TrimSpace(n) == "" || strings.ContainsAny(n, ", ") {
				return fmt.Errorf("cataloger name %q is not a single name", n)
			}
		}
		o.catalogers = slices.Clone(names)
		return nil
	}
}

// withConfigHook lets a test change the syft configuration after Slipway has set it.
func withConfigHook(f func(*syft.CreateSBOMConfig)) Option {
	return func(o *options) error {
		o.configHook = f
		return nil
	}
}
