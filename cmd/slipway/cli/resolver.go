package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/slipway-dev/slipway/pkg/release/resolve"
)

// resolverFlags are the flags of every command that resolves references.
type resolverFlags struct {
	platform    string
	concurrency int
	lockFile    string
	hermetic    bool
}

func (f *resolverFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.platform, "platform", "", "pin one platform's manifest (os/arch[/variant]) instead of the index digest")
	fs.IntVar(&f.concurrency, "concurrency", resolve.DefaultConcurrency, "look-ups in flight per registry")
	fs.StringVar(&f.lockFile, "lock", "", "write the lock to FILE (even in a dry run); with --hermetic, resolve only from it")
	fs.BoolVar(&f.hermetic, "hermetic", false, "resolve only from --lock FILE, never touching the network; fail on any reference it lacks")
}

// session is a resolver built from the flags and the lock it fills.
type session struct {
	resolver resolve.Resolver
	lock     *resolve.Lock
	write    bool // write the lock back when done
	path     string
}

func (f *resolverFlags) build() (*session, error) {
	if f.concurrency < 1 {
		return nil, usage(fmt.Errorf("--concurrency must be at least 1, got %d", f.concurrency))
	}
	if f.hermetic {
		if f.lockFile == "" {
			return nil, usage(errors.New("--hermetic needs --lock FILE"))
		}
		l, err := resolve.ReadLock(f.lockFile)
		if err != nil {
			return nil, usage(err)
		}
		return &session{resolver: resolve.Hermetic(l, f.platform), lock: l}, nil
	}
	reg, err := resolve.NewRegistry(
		resolve.WithPlatform(f.platform),
		resolve.WithTransport(resolve.NewTransport(f.concurrency)),
	)
	if err != nil {
		return nil, usage(err)
	}
	r := resolve.Stack(reg, f.concurrency)
	s := &session{resolver: r}
	if f.lockFile != "" {
		s.lock = resolve.NewLock()
		s.resolver = resolve.Record(r, s.lock)
		s.write, s.path = true, f.lockFile
	}
	return s, nil
}

// finish writes the lock when one was asked for.
func (s *session) finish() error {
	if !s.write {
		return nil
	}
	if err := resolve.WriteLock(s.path, s.lock); err != nil {
		return usage(err)
	}
	return nil
}
