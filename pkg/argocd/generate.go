package argocd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/slipway-dev/slipway/pkg/policy"
	"github.com/slipway-dev/slipway/pkg/pool"
	"github.com/slipway-dev/slipway/pkg/render"
)

// Errors: ErrEmpty is a render with no generation while allow-empty is
// not set (Argo CD would prune every object of the pool).
var ErrEmpty = errors.New("empty render")

// FindRoot returns the config repository's root for the working directory
// wd: wd with sourcePath (ARGOCD_APP_SOURCE_PATH, relative to the root)
// taken off its end when given, else the nearest of wd and its parents
// holding a pools folder.
func FindRoot(wd, sourcePath string) (string, error) {
	wd = filepath.Clean(wd)
	if sp := filepath.Clean(filepath.FromSlash(sourcePath)); sourcePath != "" && sp != "." {
		if filepath.IsAbs(sp) || sp == ".." || strings.HasPrefix(sp, ".."+string(filepath.Separator)) {
			return "", fmt.Errorf("argocd: ARGOCD_APP_SOURCE_PATH %q is not a path inside the repository", sourcePath)
		}
		root, ok := strings.CutSuffix(wd, string(filepath.Separator)+sp)
		if !ok {
			return "", fmt.Errorf("argocd: the working directory %s does not end in ARGOCD_APP_SOURCE_PATH %s", wd, sourcePath)
		}
		return root, nil
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if fi, err := os.Stat(filepath.Join(dir, "pools")); err == nil && fi.IsDir() {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("argocd: no config repository at %s: neither it nor a parent holds a pools folder", wd)
		}
	}
}

// Generate renders pool e.Params.Pool of the config repository checked out
// at root, at e.Revision, verified (render.Pool): the YAML Argo CD
// applies. A render with no generation is ErrEmpty unless allow-empty is
// set; with allow-empty, a pool whose folder is gone renders to nothing.
// opts reach render.Pool (a verification cache, registry options).
func Generate(ctx context.Context, root string, e *Env, opts ...render.Option) (*render.Result, error) {
	tree, err := render.OpenDir(root)
	if err != nil {
		return nil, fmt.Errorf("argocd: %w", err)
	}
	defer tree.Close()
	name := e.Params.Pool
	if _, err := tree.ReadFile(pool.PoolFile(name)); errors.Is(err, fs.ErrNotExist) {
		if e.Params.AllowEmpty && pool.ValidName(name) {
			return &render.Result{Pool: name, Revision: e.Revision, Generations: []render.Generation{}, YAML: []byte{}}, nil
		}
		return nil, fmt.Errorf("argocd: the config repository at %s has no pool %s (%s)", e.Revision, name, pool.PoolFile(name))
	}
	if e.Params.Policy != "" {
		p, err := policy.ReadFrom(tree.ReadFile, e.Params.Policy, e.Params.Policy)
		if err != nil {
			return nil, fmt.Errorf("argocd: parameter %s: %w", ParamPolicy, err)
		}
		opts = append([]render.Option{render.WithPolicy(p)}, opts...)
	}
	res, err := render.Pool(ctx, tree, name, e.Revision, opts...)
	if err != nil {
		return nil, err
	}
	if len(res.Generations) == 0 && !e.Params.AllowEmpty {
		return nil, fmt.Errorf("argocd: pool %s at %s: %w: desired.yaml lists no generation; set the parameter %s=true only while the pool is being removed", name, e.Revision, ErrEmpty, ParamAllowEmpty)
	}
	return res, nil
}
