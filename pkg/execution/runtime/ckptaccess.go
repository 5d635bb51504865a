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
// Kubernetes): a checkpoint holds the sandbox's workload still, syncs the
// stream it writes, as untrusted (rootfs.SyncTar: no path escapes, no
// devices, bounded), into the run's kept copy in the staging folder, lets
// the workload go on, and checkpoints that copy, incremental on the run's
// last checkpoint; a restore verifies the checkpoint, unpacks it into the
// run's kept copy (checkpoint.Restore) and streams a tar built from that
// tree into the sandbox.
//
// The kept copy is what makes a checkpoint incremental: rootfs.Diff tells
// an unchanged file by its inode and ctime, which a fresh copy never keeps
// (and telling it by size and mtime instead would miss a rewrite that set
// its mtime back). SyncTar leaves a file whose bytes and metadata are the
// stream's as it was, so Diff sees it unchanged, and tells a changed one by
// its bytes: each checkpoint reads the kept copy once beside the stream.
// The copy lives while the run holds a sandbox: a suspend, a release and
// the sweeper (for a run this runtime no longer holds) remove it; a resume
// makes it again from the verified checkpoint.
type streamAccess struct {
	b       sandbox.WorkspaceStreamer
	staging string
}

func (a streamAccess) take(ctx context.Context, cps *Checkpoints, id string, meta checkpoint.Meta, base *checkpoint.Base) (*checkpoint.Checkpoint, *checkpoint.Base, error) {
	dir, done, err := a.keptOrStage(meta.RunID)
	if err != nil {
		return nil, nil, err
	}
	ws := filepath.Join(dir, "workspace")
	start := time.Now()
	thaw, err := a.b.Freeze(ctx, id)
	if err != nil {
		done(false)
		return nil, nil, fmt.Errorf("checkpoint: freeze sandbox %s: %w", id, err)
	}
	err = a.copyOut(ctx, id, ws)
	thawErr := thaw()
	frozen := time.Since(start)
	if err != nil {
		done(false)
		return nil, nil, fmt.Errorf("checkpoint: copy workspace of sandbox %s: %w", id, err)
	}
	if thawErr != nil {
		done(false)
		return nil, nil, fmt.Errorf("checkpoint: thaw sandbox %s: %w", id, thawErr)
	}
	src := checkpoint.Source{Dir: ws, Taken: start, Frozen: frozen}
	cp, next, err := checkpoint.Create(ctx, cps.Store, src, meta, checkpoint.WithSigner(cps.Signer), checkpoint.WithBase(base))
	done(err == nil)
	if err != nil || dir != a.keptDir(meta.RunID) {
		return cp, nil, err
	}
	return cp, next, nil
}

// copyOut syncs the sandbox's tar stream into dir, as untrusted.
func (a streamAccess) copyOut(ctx context.Context, id, dir string) error {
	pr, pw := io.Pipe()
	wrote := make(chan error, 1)
	go func() {
		err := a.b.WorkspaceTar(ctx, id, pw)
		_ = pw.CloseWithError(err)
		wrote <- err
	}()
	_, err := rootfs.SyncTar(ctx, pr, dir, rootfs.WithoutOwnership())
	_ = pr.CloseWithError(errors.New("the copy stopped reading"))
	werr := <-wrote
	if err != nil {
		return err // the copy's refusal (it holds the sandbox's error when the stream broke)
	}
	return werr // the sandbox failed after the end of its tar
}

func (a streamAccess) restore(ctx context.Context, cps *Checkpoints, digest string, exp checkpoint.Expect, id string) (*checkpoint.Base, error) {
	// What the run's kept copy held is another workspace's: the restored
	// checkpoint replaces it.
	a.drop(exp.RunID)
	dir, done, err := a.keptOrStage(exp.RunID)
	if err != nil {
		return nil, err
	}
	ws := filepath.Join(dir, "workspace")
	_, base, _, err := checkpoint.Restore(ctx, cps.Store, digest, cps.Verifier, exp, ws, rootfs.WithoutOwnership())
	if err != nil {
		done(false)
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
	done(err == nil)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: restore %s into sandbox %s: %w", digest, id, err)
	}
	if dir != a.keptDir(exp.RunID) {
		return nil, nil
	}
	return base, nil
}

// keptDir is run's kept copy in the staging folder ("" for a run id that
// cannot be a file name of its own).
func (a streamAccess) keptDir(run string) string {
	if safeRunID(run) != nil {
		return ""
	}
	return filepath.Join(a.staging, run)
}

// keptOrStage is run's kept copy (made mode 0700, in a folder of mode
// 0700: a copy may hold a setuid file of the sandbox's, owned by the
// runtime's user, which no other user of the host may reach) or, for a run
// id that cannot name one, a fresh staging directory. done(ok) removes a
// fresh one, and a kept one unless ok: what a failed copy left (a hostile
// stream's part) is not kept.
func (a streamAccess) keptOrStage(run string) (string, func(ok bool), error) {
	if err := os.MkdirAll(a.staging, 0o700); err != nil {
		return "", nil, fmt.Errorf("checkpoint: staging: %w", err)
	}
	dir := a.keptDir(run)
	if dir == "" {
		dir, err := os.MkdirTemp(a.staging, ".fresh-") // no run id begins with "."
		if err != nil {
			return "", nil, fmt.Errorf("checkpoint: staging: %w", err)
		}
		return dir, func(bool) { _ = os.RemoveAll(dir) }, nil
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", nil, fmt.Errorf("checkpoint: staging: %w", err)
	}
	return dir, func(ok bool) {
		if !ok {
			_ = os.RemoveAll(dir)
		}
	}, nil
}

// drop removes run's kept copy.
func (a streamAccess) drop(run string) {
	if dir := a.keptDir(run); dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// dropStaging removes run's kept copy of its workspace, if its sandboxes
// stream their workspaces (streamAccess): the run ended or was suspended.
func (r *Runtime) dropStaging(runID string) {
	if b, _, err := r.checkpointer(); err == nil {
		if a, ok := b.(streamAccess); ok {
			a.drop(runID)
		}
	}
}

// freshStagingAge is how old a fresh staging directory (of a run whose id
// names no kept copy) is before the sweeper takes it for one a crash left.
const freshStagingAge = time.Hour

// sweepStaging removes the kept copies of runs this runtime does not hold
// (one a crash or a restart left), and the fresh staging directories older
// than freshStagingAge; it returns how many it removed.
func (r *Runtime) sweepStaging() (int, error) {
	b, _, err := r.checkpointer()
	a, ok := b.(streamAccess)
	if err != nil || !ok {
		return 0, nil
	}
	// Listed before the claims are: a copy made after this list is of a
	// claim held by then, and is not looked at.
	ents, err := os.ReadDir(a.staging)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("runtime: sweep staging copies: %w", err)
	}
	held := map[string]bool{}
	r.mu.Lock()
	for id := range r.claims {
		held[id] = true
	}
	r.mu.Unlock()
	n := 0
	for _, e := range ents {
		if held[e.Name()] {
			continue
		}
		if strings.HasPrefix(e.Name(), ".") {
			if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < freshStagingAge {
				continue
			}
		}
		if err := os.RemoveAll(filepath.Join(a.staging, e.Name())); err != nil {
			return n, fmt.Errorf("runtime: sweep staging copy of run %s: %w", e.Name(), err)
		}
		n++
	}
	return n, nil
}
