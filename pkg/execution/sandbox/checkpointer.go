package sandbox

import (
	"context"
	"io"
)

// Checkpointer is a Backend that can hold a sandbox still and reach its
// workspace from the host, for checkpoints (package checkpoint): the local
// backend, with the cgroup freezer.
type Checkpointer interface {
	// Freeze stops every process of the running sandbox id at once and
	// returns the function that resumes them.
	Freeze(ctx context.Context, id string) (thaw func() error, err error)
	// WorkspaceDir is the running sandbox's workspace as the host reaches
	// it.
	WorkspaceDir(ctx context.Context, id string) (string, error)
	// ClearWorkspace empties the running sandbox's workspace, for a
	// restore.
	ClearWorkspace(ctx context.Context, id string) error
}

// WorkspaceStreamer is the checkpoint form of a Backend whose workspace
// the host cannot reach as a directory (the Kubernetes backend: it is a
// volume of a pod on some node): the workspace leaves the sandbox and
// comes back as a tar stream. The runtime unpacks what WorkspaceTar
// writes as untrusted (package rootfs's checks) into a directory of its
// own and takes the checkpoint of that copy; a restore streams a tar the
// runtime builds from the verified checkpoint, never one the sandbox
// wrote.
type WorkspaceStreamer interface {
	// Freeze holds the workload of the running sandbox id still, as far
	// as the backend can (its doc says what is and is not stopped), and
	// returns the function that lets it go on.
	Freeze(ctx context.Context, id string) (thaw func() error, err error)
	// WorkspaceTar writes the running sandbox's workspace to w as one
	// uncompressed tar stream, names relative to the workspace.
	WorkspaceTar(ctx context.Context, id string, w io.Writer) error
	// RestoreTar empties the running sandbox's workspace and unpacks the
	// tar stream r into it: directories, regular files and symbolic links.
	RestoreTar(ctx context.Context, id string, r io.Reader) error
}
