package sandbox

import "context"

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
