package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// StagingDir is where, in the checkpoint store's directory, the runtime
// keeps the copies of workspaces it streams out of sandboxes (a
// sandbox.WorkspaceStreamer's) while it checkpoints or restores them; each
// copy is removed once done.
const StagingDir = "slipway-staging"

// workspaceAccess is how the runtime reaches a sandbox's workspace for a
// checkpoint, whatever the backend: as a directory on the host
// (sandbox.Checkpointer) or as a tar stream (sandbox.WorkspaceStreamer).
type workspaceAccess interface {
	// take checkpoints the workspace of the running sandbox id into
	// cps.Store, incremental on base where the form allows.
	take(ctx context.Context, cps *Checkpoints, id string, meta checkpoint.Meta, base *checkpoint.Base) (*checkpoint.Checkpoint, *checkpoint.Base, error)
	// restore verifies digest (exp) and only then replaces the workspace
	// of the running sandbox id with it; the Base it returns makes the
	// next checkpoint incremental (nil: the next one is whole).
	restore(ctx context.Context, cps *Checkpoints, digest string, exp checkpoint.Expect, id string) (*checkpoint.Base, error)
}

// dirAccess reaches a workspace as a host directory, frozen in place.
type dirAccess struct{ b sandbox.Checkpointer }

func (a dirAccess) take(ctx context.Context, cps *Checkpoints, id string, meta checkpoint.Meta, base *checkpoint.Base) (*checkpoint.Checkpoint, *checkpoint.Base, error) {
	dir, err := a.b.WorkspaceDir(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	src := checkpoint.Source{Dir: dir, Freeze: func(ctx context.Context) (func() error, error) { return a.b.Freeze(ctx, id) }}
	return checkpoint.Create(ctx, cps.Store, src, meta, checkpoint.WithSigner(cps.Signer), checkpoint.WithBase(base))
}

func (a dirAccess) restore(ctx context.Context, cps *Checkpoints, digest string, exp checkpoint.Expect, id string) (*checkpoint.Base, error) {
	if err := a.b.ClearWorkspace(ctx, id); err != nil {
		return nil, err
	}
	dir, err := a.b.WorkspaceDir(ctx, id)
	if err != nil {
		return nil, err
	}
	_, base, _, err := checkpoint.Restore(ctx, cps.Store, digest, cps.Verifier, exp, dir)
	return base, err
}

// streamAccess reaches a workspace as a tar stream (delete and restore on
// Kubernetes): a checkpoint holds the sandbox's workload still, unpacks
// the stream it writes as untrusted (rootfs.ExtractTar: no path escapes,
// no devices, bounded) into a staging directory, lets the workload go on,
// and checkpoints that copy; a restore verifies the checkpoint, unpacks it
// into a staging directory (checkpoint.Restore) and streams a tar built
// from that tree into the sandbox. Each checkpoint is whole (an unchanged
// workspace still gives the same layer, stored once): rootfs.Diff tells
// an unchanged file by its inode and ctime, which a new copy never keeps,
// and telling it by size and mtime instead would miss a rewrite that set
// its mtime back; an incremental form needs content hashes in the tree.
type streamAccess struct {
	b       sandbox.WorkspaceStreamer
	staging string
}

func (a streamAccess) take(ctx context.Context, cps *Checkpoints, id string, meta checkpoint.Meta, _ *checkpoint.Base) (*checkpoint.Checkpoint, *checkpoint.Base, error) {
	dir, done, err := a.stage(meta.RunID)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	ws := filepath.Join(dir, "workspace")
	start := time.Now()
	thaw, err := a.b.Freeze(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: freeze sandbox %s: %w", id, err)
	}
	err = a.copyOut(ctx, id, ws)
	thawErr := thaw()
	frozen := time.Since(start)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: copy workspace of sandbox %s: %w", id, err)
	}
	if thawErr != nil {
		return nil, nil, fmt.Errorf("checkpoint: thaw sandbox %s: %w", id, thawErr)
	}
	src := checkpoint.Source{Dir: ws, Taken: start, Frozen: frozen}
	cp, _, err := checkpoint.Create(ctx, cps.Store, src, meta, checkpoint.WithSigner(cps.Signer))
	return cp, nil, err
}

// copyOut unpacks the sandbox's tar stream into dir, as untrusted.
func (a streamAccess) copyOut(ctx context.Context, id, dir string) error {
	pr, pw := io.Pipe()
	wrote := make(chan error, 1)
	go func() {
		err := a.b.WorkspaceTar(ctx, id, pw)
		_ = pw.CloseWithError(err)
		wrote <- err
	}()
	_, err := rootfs.ExtractTar(ctx, pr, dir, rootfs.WithoutOwnership())
	_ = pr.CloseWithError(errors.New("the copy stopped reading"))
	werr := <-wrote
	if err != nil {
		return err // the copy's refusal (it holds the sandbox's error when the stream broke)
	}
	return werr // the sandbox failed after the end of its tar
}

func (a streamAccess) restore(ctx context.Context, cps *Checkpoints, digest string, exp checkpoint.Expect, id string) (*checkpoint.Base, error) {
	dir, done, err := a.stage(exp.RunID)
	if err != nil {
		return nil, err
	}
	defer done()
	ws := filepath.Join(dir, "workspace")
	if _, _, _, err := checkpoint.Restore(ctx, cps.Store, digest, cps.Verifier, exp, ws, rootfs.WithoutOwnership()); err != nil {
		return nil, err
	}
	// The tar goes in from the verified tree, never from a sandbox's own
	// stream: directories, regular files and symbolic links; anything else
	// fails the restore, named.
	pr, pw := io.Pipe()
	wrote := make(chan error, 1)
	go func() {
		var left []string
		_, err := runner.WriteWorkspaceTar(ws, pw, func(name, why string) { left = append(left, name+" ("+why+")") })
		if err == nil && len(left) > 0 {
			err = fmt.Errorf("it holds what a sandbox's workspace cannot take: %s", strings.Join(left, ", "))
		}
		_ = pw.CloseWithError(err)
		wrote <- err
	}()
	err = a.b.RestoreTar(ctx, id, pr)
	_ = pr.CloseWithError(errors.New("the restore stopped reading"))
	if werr := <-wrote; werr != nil && !strings.Contains(werr.Error(), "the restore stopped reading") {
		err = werr
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: restore %s into sandbox %s: %w", digest, id, err)
	}
	return nil, nil
}

// stage makes a fresh staging directory for run (mode 0700, in a folder
// of mode 0700: a copy may hold a setuid file of the sandbox's, owned by
// the runtime's user, which no other user of the host may reach); done
// removes it.
func (a streamAccess) stage(run string) (string, func(), error) {
	if err := os.MkdirAll(a.staging, 0o700); err != nil {
		return "", nil, fmt.Errorf("checkpoint: staging: %w", err)
	}
	if err := safeRunID(run); err != nil {
		run = "run"
	}
	dir, err := os.MkdirTemp(a.staging, run+"-")
	if err != nil {
		return "", nil, fmt.Errorf("checkpoint: staging: %w", err)
	}
	return dir, func() { _ = os.RemoveAll(dir) }, nil
}
