package argocd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

// Errors: ErrEmpty is a render with no generation while allow-empty is
// not set (Argo CD would prune every object of the pool).
var ErrEmpty = errors.New("empty render")

// Checkout is the config repository as Argo CD hands it to the plugin, in
// one of two layouts: the whole checkout (Dir is its root), or, with the
// repo-server's reposerver.plugin.use.manifest-generate-paths and the
// Application's annotation argocd.argoproj.io/manifest-generate-paths: .,
// pool Pool's folder alone (Dir holds pool.yaml at its top and is read as
// pools/<Pool>).
type Checkout struct {
	Dir  string
	Pool string // set in the pool-folder layout
}

// Open is the checkout as the tree render reads.
func (c Checkout) Open() (*render.DirTree, error) {
	if c.Pool != "" {
		return render.OpenPoolDir(c.Dir, c.Pool)
	}
	return render.OpenDir(c.Dir)
}

// Layout names the checkout's layout for messages.
func (c Checkout) Layout() string {
	if c.Pool != "" {
		return fmt.Sprintf("pool %s's folder alone (manifest-generate-paths)", c.Pool)
	}
	return "the whole config repository"
}

// FindRoot returns the config repository's root for the working directory
// wd: wd with sourcePath (ARGOCD_APP_SOURCE_PATH, relative to the root)
// taken off its end when given, else the nearest of wd and its parents
// holding a pools folder. A pool's folder streamed alone is Locate's.
func FindRoot(wd, sourcePath string) (string, error) {
	c, err := Locate(wd, sourcePath)
	if err != nil {
		return "", err
	}
	if c.Pool != "" {
		return "", fmt.Errorf("argocd: %s holds %s, not a config repository's root", wd, c.Layout())
	}
	return c.Dir, nil
}

// Locate finds the checkout the working directory wd belongs to, given
// sourcePath (ARGOCD_APP_SOURCE_PATH): the whole repository when wd ends in
// sourcePath (its root is what comes before) or, with no sourcePath, the
// nearest of wd and its parents holding a pools folder; pool p's folder
// alone when sourcePath is pools/<p>, wd does not end in it, and wd holds
// pool.yaml and no pools folder (Argo CD streams only the Application's
// path when it uses manifest-generate-paths). Any other layout is an error
// that names both.
func Locate(wd, sourcePath string) (Checkout, error) {
	wd = filepath.Clean(wd)
	if sp := filepath.Clean(filepath.FromSlash(sourcePath)); sourcePath != "" && sp != "." {
		if filepath.IsAbs(sp) || sp == ".." || strings.HasPrefix(sp, ".."+string(filepath.Separator)) {
			return Checkout{}, fmt.Errorf("argocd: ARGOCD_APP_SOURCE_PATH %q is not a path inside the repository", sourcePath)
		}
		if root, ok := strings.CutSuffix(wd, string(filepath.Separator)+sp); ok {
			return Checkout{Dir: root}, nil
		}
		name, isPool := strings.CutPrefix(filepath.ToSlash(sp), "pools/")
		if isPool && pool.ValidName(name) && isFile(filepath.Join(wd, "pool.yaml")) && !exists(filepath.Join(wd, "pools")) {
			return Checkout{Dir: wd, Pool: name}, nil
		}
		return Checkout{}, fmt.Errorf("argocd: the working directory %s fits neither layout: it does not end in ARGOCD_APP_SOURCE_PATH %s (the whole repository streamed), "+
			"nor is it a pool's folder streamed alone (ARGOCD_APP_SOURCE_PATH pools/<pool>, with pool.yaml at the top and no pools folder: manifest-generate-paths)", wd, sourcePath)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if fi, err := os.Stat(filepath.Join(dir, "pools")); err == nil && fi.IsDir() {
			return Checkout{Dir: dir}, nil
		}
		if filepath.Dir(dir) == dir {
			return Checkout{}, fmt.Errorf("argocd: no config repository at %s: neither it nor a parent holds a pools folder", wd)
		}
	}
}

func isFile(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular()
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// EnvPolicyFile names the operator's policy file in the sidecar's
// environment (a mounted ConfigMap): when set, it is the policy.
const EnvPolicyFile = "SLIPWAY_ARGOCD_POLICY_FILE"

// OperatorPolicy is the verification policy the sidecar's operator gives,
// outside any checkout: it verifies every render, whatever the checkout
// holds.
type OperatorPolicy struct {
	File   string
	Policy *policy.Policy
}

// LoadOperatorPolicy reads the operator's policy at file (its keys
// relative to file's folder).
func LoadOperatorPolicy(file string) (*OperatorPolicy, error) {
	p, err := policy.Load(file)
	if err != nil {
		return nil, fmt.Errorf("argocd: %s: %w", EnvPolicyFile, err)
	}
	return &OperatorPolicy{File: file, Policy: p}, nil
}

// Policy names the policy a render verified against, for the plugin's
// stderr: where it came from and its digest.
type Policy struct {
	// Source is "operator FILE", "repository policies/verification.yaml"
	// or "parameter policy FILE".
	Source string
	Digest string
}

func (p Policy) String() string { return p.Source + " (" + p.Digest + ")" }

// Generate renders pool e.Params.Pool of the config repository checkout
// co, at e.Revision, verified (render.Pool): the YAML Argo CD applies, and
// the policy it verified against. With operator (the sidecar's
// SLIPWAY_ARGOCD_POLICY_FILE) that policy verifies every generation and
// nothing in the checkout is read as a policy; without it the checkout's
// policies/verification.yaml does (or the parameter policy, a file in the
// checkout, when it holds none), and a pool's folder alone, which holds no
// policy its writer does not control, is refused. A render with no
// generation is ErrEmpty unless allow-empty is set; with allow-empty, a
// pool whose folder is gone renders to nothing. opts reach render.Pool (a
// verification cache, registry options).
func Generate(ctx context.Context, co Checkout, e *Env, op *OperatorPolicy, opts ...render.Option) (*render.Result, *Policy, error) {
	name := e.Params.Pool
	if co.Pool != "" && co.Pool != name {
		return nil, nil, fmt.Errorf("argocd: the checkout is %s, but the parameter %s is %q", co.Layout(), ParamPool, name)
	}
	tree, err := co.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("argocd: %w", err)
	}
	defer tree.Close()
	if _, err := tree.ReadFile(pool.PoolFile(name)); errors.Is(err, fs.ErrNotExist) {
		if e.Params.AllowEmpty && pool.ValidName(name) {
			return &render.Result{Pool: name, Revision: e.Revision, Generations: []render.Generation{}, YAML: []byte{}}, nil, nil
		}
		return nil, nil, fmt.Errorf("argocd: the config repository at %s has no pool %s (%s)", e.Revision, name, pool.PoolFile(name))
	}
	used := Policy{Source: "repository " + pool.PolicyPath}
	switch {
	case op != nil:
		opts = append([]render.Option{render.WithOperatorPolicy(op.Policy)}, opts...)
		used.Source = "operator " + op.File
	case co.Pool != "":
		return nil, nil, fmt.Errorf("argocd: the checkout is %s, which holds no policy that its writer does not control: "+
			"give the sidecar an operator policy (%s, a mounted ConfigMap); verification is never skipped", co.Layout(), EnvPolicyFile)
	case e.Params.Policy != "":
		if _, err := tree.ReadFile(pool.PolicyPath); err == nil {
			break // the repository's own policy wins
		}
		p, err := policy.ReadFrom(tree.ReadFile, e.Params.Policy, e.Params.Policy)
		if err != nil {
			return nil, nil, fmt.Errorf("argocd: parameter %s: %w", ParamPolicy, err)
		}
		opts = append([]render.Option{render.WithPolicy(p)}, opts...)
		used.Source = "parameter " + ParamPolicy + " " + e.Params.Policy
	}
	res, err := render.Pool(ctx, tree, name, e.Revision, opts...)
	if err != nil {
		return nil, nil, err
	}
	if len(res.Generations) == 0 && !e.Params.AllowEmpty {
		return nil, nil, fmt.Errorf("argocd: pool %s at %s: %w: desired.yaml lists no generation; set the parameter %s=true only while the pool is being removed", name, e.Revision, ErrEmpty, ParamAllowEmpty)
	}
	used.Digest = res.Policy
	return res, &used, nil
}
