package sandbox

import (
	"context"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// CredentialDir is where a sandbox finds the credentials issued to its
// claim: a tmpfs of the sandbox's own (in memory, never on a disk), one
// file per credential, readable only by the sandbox's user.
// `slipway-runner credential put` writes in it (runner.CredentialDir).
const CredentialDir = runner.CredentialDir

// Credentials is implemented by a Backend that can place credentials in a
// running sandbox's CredentialDir after it started (a warm sandbox is made
// before anyone claims it, and a credential is issued per claim). A caller
// asserts it on a Backend; one without it cannot deliver credentials.
//
// Implementations never put the data in an error, a log line or the
// backend's durable state.
type Credentials interface {
	// PutCredential writes data as the file name (a plain file name, no
	// slash) in CredentialDir of the running sandbox id, mode 0400 and owned
	// by the sandbox's user, replacing the file of that name atomically.
	// ErrNotRunning when the sandbox is dead.
	PutCredential(ctx context.Context, id, name string, data []byte) error
	// RemoveCredential removes the file name from CredentialDir of sandbox
	// id. It is repeat-safe: a file, or a sandbox, that is gone already is
	// not an error.
	RemoveCredential(ctx context.Context, id, name string) error
}
