package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	goyaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// Files Slipway adds to the pool's folder in the in-memory copy of the
// tree that kustomize builds. A tree holding either is refused.
const (
	GeneratedFile = "slipway-generated.yaml"
	ConfigFile    = "slipway-kustomizeconfig.yaml"
)

// kustomizeConfig teaches kustomize that a SandboxWarmPool refers to its
// SandboxTemplate by name, so that namePrefix and nameSuffix keep the two
// together.
const kustomizeConfig = `nameReference:
- kind: SandboxTemplate
  group: extensions.agents.x-k8s.io
  fieldSpecs:
  - kind: SandboxWarmPool
    group: extensions.agents.x-k8s.io
    path: spec/sandboxTemplateRef/name
`

const emptyKustomization = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"

// build copies what the pool's kustomization can read (its folder and the
// folders its resources, components and bases name, transitively: see
// copyNeeded) into an in-memory file system (without the pools'
// generations and evidence folders, which are Slipway's documents and no
// kustomize input), adds the generated objects to the pool's
// kustomization as one more resource, so that its transformers
// (namespace, labels, patches, name prefixes) apply to them too, builds
// it, stamps every object, checks that no transformer changed a pin, and
// returns the sorted YAML.
func build(t Tree, pl *pool.Pool, revision string, objects []map[string]any, gens map[string]*generation.Generation, jsonLines bool, hook func(filesys.FileSystem, string)) ([]byte, error) {
	name := pl.Metadata.Name
	fsys := filesys.MakeFsInMemory()
	if err := copyNeeded(t, pool.Dir(name), fsys, map[string]bool{}); err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	dir := "/" + pool.Dir(name)
	for _, f := range []string{GeneratedFile, ConfigFile} {
		if fsys.Exists(path.Join(dir, f)) {
			return nil, fmt.Errorf("render: %s: %w: the name is Slipway's (it adds the generated objects under it)", path.Join(pool.Dir(name), f), ErrRender)
		}
	}
	kfile := pool.KustomizationFile(name)
	kb, err := t.ReadFile(kfile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		kb = []byte(emptyKustomization)
	case err != nil:
		return nil, fmt.Errorf("render: %w", err)
	}
	k, err := yaml.Parse(string(kb))
	if err != nil {
		return nil, fmt.Errorf("render: %s: %w: %v", kfile, ErrRender, err)
	}
	for field, file := range map[string]string{"resources": GeneratedFile, "configurations": ConfigFile} {
		seq, err := k.Pipe(yaml.LookupCreate(yaml.SequenceNode, field))
		if err != nil {
			return nil, fmt.Errorf("render: %s: %s: %w: %v", kfile, field, ErrRender, err)
		}
		if err := seq.PipeE(yaml.Append(yaml.NewStringRNode(file).YNode())); err != nil {
			return nil, fmt.Errorf("render: %s: %s: %w: %v", kfile, field, ErrRender, err)
		}
	}
	var gen strings.Builder
	for _, o := range objects {
		b, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("render: %w", err)
		}
		gen.WriteString("---\n")
		gen.Write(b)
	}
	files := map[string]string{path.Join(dir, GeneratedFile): gen.String(), path.Join(dir, ConfigFile): kustomizeConfig, "/" + kfile: k.MustString()}
	for f, s := range files {
		if err := fsys.WriteFile(f, []byte(s)); err != nil {
			return nil, fmt.Errorf("render: %w", err)
		}
	}
	if hook != nil {
		hook(fsys, dir)
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("render: kustomize build %s: %w: %v", pool.Dir(name), ErrRender, err)
	}
	nodes := rm.ToRNodeSlice()
	for _, n := range nodes {
		if err := n.PipeE(yaml.SetLabel(kubeobjects.LabelPool, name)); err != nil {
			return nil, fmt.Errorf("render: %w", err)
		}
		if err := n.PipeE(yaml.SetAnnotation(kubeobjects.AnnotationConfigRevision, revision)); err != nil {
			return nil, fmt.Errorf("render: %w", err)
		}
		if n.GetKind() == "Namespace" && n.GetApiVersion() == "v1" {
			if err := restrictNamespace(n, name); err != nil {
				return nil, err
			}
		}
		if wave := syncWave(n); wave != "" {
			if err := n.PipeE(yaml.SetAnnotation(kubeobjects.AnnotationSyncWave, wave)); err != nil {
				return nil, fmt.Errorf("render: %w", err)
			}
		}
	}
	if err := checkPins(nodes, name, gens); err != nil {
		return nil, err
	}
	sort.SliceStable(nodes, func(i, j int) bool { return less(nodes[i], nodes[j]) })
	var out strings.Builder
	if jsonLines {
		for _, n := range nodes {
			var v any
			if err := n.YNode().Decode(&v); err != nil {
				return nil, fmt.Errorf("render: %w", err)
			}
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("render: %s %s: %w", n.GetKind(), n.GetName(), err)
			}
			out.Write(b)
			out.WriteByte('\n')
		}
		return []byte(out.String()), nil
	}
	for i, n := range nodes {
		if i > 0 {
			out.WriteString("---\n")
		}
		s, err := n.String()
		if err != nil {
			return nil, fmt.Errorf("render: %w", err)
		}
		out.WriteString(s)
	}
	return []byte(out.String()), nil
}

// restrictNamespace labels namespace n of pool poolName to enforce, warn
// and audit Pod Security "restricted" (kubeobjects.PodSecurityLabels): the
// API server's PodSecurity admission then refuses any pod in it that runs
// as root, escalates privilege, keeps a capability or runs without a
// seccomp profile, whoever makes it. A kustomization that sets one of
// these labels to another level is an error: Slipway's sandboxes are
// never weakened by a patch.
func restrictNamespace(n *yaml.RNode, poolName string) error {
	have := n.GetLabels()
	want := kubeobjects.PodSecurityLabels()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if v, ok := have[k]; ok && v != want[k] {
			return fmt.Errorf("render: %s: Namespace %s: %w: label %s=%s, but Slipway's sandboxes run under Pod Security %q", pool.KustomizationFile(poolName), n.GetName(), ErrRender, k, v, want[k])
		}
		if err := n.PipeE(yaml.SetLabel(k, want[k])); err != nil {
			return fmt.Errorf("render: %w", err)
		}
	}
	return nil
}

// copyNeeded copies the folder dir of t into fsys and, for the
// kustomization it holds, every folder its resources, components and
// bases name (relative paths inside the tree), the same way. That is all
// kustomize can read with its default load restrictions (a file it loads
// must be inside the kustomization's folder; only a resource, component or
// base may be another folder), so a config repository of 10,000 files is
// not copied for a pool that reads forty. An entry that is a file is in
// dir already; a URL or a path out of the tree is left for kustomize to
// refuse.
func copyNeeded(t Tree, dir string, fsys filesys.FileSystem, done map[string]bool) error {
	if done[dir] {
		return nil
	}
	done[dir] = true
	if err := copyTree(t, dir, fsys); err != nil {
		return err
	}
	var kb []byte
	for _, f := range konfig.RecognizedKustomizationFileNames() {
		b, err := t.ReadFile(path.Join(dir, f))
		if err == nil {
			kb = b
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if kb == nil {
		return nil
	}
	var k struct {
		Resources  []string `yaml:"resources"`
		Components []string `yaml:"components"`
		Bases      []string `yaml:"bases"`
	}
	if err := goyaml.Unmarshal(kb, &k); err != nil {
		return nil // kustomize reports it, naming the file
	}
	for _, e := range slices.Concat(k.Resources, k.Components, k.Bases) {
		if strings.Contains(e, "://") || path.IsAbs(e) {
			continue
		}
		p := path.Clean(path.Join(dir, e))
		if p == ".." || strings.HasPrefix(p, "../") || p == "." {
			if p == "." {
				if err := copyTree(t, "", fsys); err != nil {
					return err
				}
			}
			continue
		}
		if _, err := t.ReadFile(p); err == nil || !errors.Is(err, fs.ErrNotExist) {
			continue // a file (in dir already), or kustomize's error to give
		}
		if err := copyNeeded(t, p, fsys, done); err != nil {
			return err
		}
	}
	return nil
}

// copyTree copies the files below dir of t into fsys, skipping every
// pool's generations and evidence folders.
func copyTree(t Tree, dir string, fsys filesys.FileSystem) error {
	names, err := t.List(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		p := path.Join(dir, n)
		if m, _ := path.Match("pools/*/generations", p); m {
			continue
		}
		if m, _ := path.Match("pools/*/evidence", p); m {
			continue
		}
		b, err := t.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			if err := copyTree(t, p, fsys); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if err := fsys.WriteFile("/"+p, b); err != nil {
			return err
		}
	}
	return nil
}

// checkPins refuses a build in which a transformer of the kustomization
// (an images entry, a patch) changed what a generation pins, or its
// generation label: pins are not overridable.
func checkPins(nodes []*yaml.RNode, poolName string, gens map[string]*generation.Generation) error {
	seen := map[string]bool{}
	for _, n := range nodes {
		id := n.GetAnnotations()[kubeobjects.AnnotationGenerationID]
		if n.GetApiVersion() != kubeobjects.ExtensionsAPIVersion || id == "" {
			continue
		}
		g, ok := gens[id]
		if !ok {
			continue
		}
		where := fmt.Sprintf("render: pool %s: %s %s of generation %s", poolName, n.GetKind(), n.GetName(), id)
		if n.GetLabels()[kubeobjects.LabelGeneration] != kubeobjects.GenerationLabel(id) {
			return fmt.Errorf("%s: %w: the kustomization changed its label %s", where, ErrRender, kubeobjects.LabelGeneration)
		}
		if n.GetKind() != kubeobjects.KindSandboxTemplate {
			continue
		}
		seen[id] = true
		spec := []string{"spec", "podTemplate", "spec"}
		for _, c := range []struct{ list, name, want string }{
			{"initContainers", kubeobjects.RunnerInitContainer, g.Pins[generation.Runner].Image},
			{"containers", kubeobjects.WorkspaceContainer, g.Pins[generation.WorkspaceTemplate].Image},
		} {
			img, err := n.Pipe(yaml.Lookup(append(spec, c.list, "[name="+c.name+"]", "image")...))
			if err != nil || img == nil {
				return fmt.Errorf("%s: %w: the kustomization removed container %s", where, ErrRender, c.name)
			}
			if got := yaml.GetValue(img); got != c.want {
				return fmt.Errorf("%s: %w: the kustomization changed container %s's image from the pinned %s to %s (an images entry or a patch): pins are not overridable", where, ErrRender, c.name, c.want, got)
			}
		}
	}
	for id := range gens {
		if !seen[id] {
			return fmt.Errorf("render: pool %s: %w: the kustomization removed the SandboxTemplate of generation %s", poolName, ErrRender, id)
		}
	}
	return nil
}

// less orders objects: Namespace first, the pool's own objects by kind,
// then SandboxTemplate, then SandboxWarmPool (a warm pool after its
// template); then by namespace and name.
func less(a, b *yaml.RNode) bool {
	ra, rb := rank(a.GetKind()), rank(b.GetKind())
	if ra != rb {
		return ra < rb
	}
	if a.GetKind() != b.GetKind() {
		return a.GetKind() < b.GetKind()
	}
	if a.GetApiVersion() != b.GetApiVersion() {
		return a.GetApiVersion() < b.GetApiVersion()
	}
	if a.GetNamespace() != b.GetNamespace() {
		return a.GetNamespace() < b.GetNamespace()
	}
	return a.GetName() < b.GetName()
}

func rank(kind string) int {
	switch kind {
	case "Namespace":
		return 0
	case kubeobjects.KindSandboxTemplate:
		return 2
	case kubeobjects.KindSandboxWarmPool:
		return 3
	}
	return 1
}

// syncWave is the Argo CD sync wave of a generation's object: its
// SandboxTemplate in WaveTemplate, its SandboxWarmPool in WaveWarmPool
// (after the template it names); "" for the pool's own objects, which
// keep whatever wave their kustomization gives them (0 by default, before
// both).
func syncWave(n *yaml.RNode) string {
	if n.GetApiVersion() != kubeobjects.ExtensionsAPIVersion || n.GetAnnotations()[kubeobjects.AnnotationGenerationID] == "" {
		return ""
	}
	switch n.GetKind() {
	case kubeobjects.KindSandboxTemplate:
		return kubeobjects.WaveTemplate
	case kubeobjects.KindSandboxWarmPool:
		return kubeobjects.WaveWarmPool
	}
	return ""
}
