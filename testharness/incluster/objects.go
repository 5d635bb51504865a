package incluster

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Namespace is the namespace of Slipway's own objects in the install.
const Namespace = "slipway-system"

// The Secrets the install reads (docs/install-kubernetes.md), created by
// the operator, never in the manifests, and their keys.
const (
	SecretDB           = "slipway-db"            // key dsn: the PostgreSQL URL
	SecretRuntimeToken = "slipway-runtime-token" // key token: the runtime's API token
	SecretGit          = "slipway-git"           // key token: the config repository's, "" for none
)

// Deployments are the install's Deployments, both planes.
var Deployments = []string{"slipway-control", "slipway-runtime"}

// The base's images entry before a release pins it (deploy/base/kustomization.yaml).
const (
	baseImage  = "newName: ghcr.io/slipway-dev/slipway\n"
	baseTag    = "    newTag: v0.0.0-unreleased\n"
	baseDigest = "digest: sha256:0000000000000000000000000000000000000000000000000000000000000000"
)

// Objects is overlay (a folder of root/overlays) as kustomize builds it
// from root's base and overlays once the base's images entry pins image
// (NAME@sha256:..., as make pin-deploy writes it), with the settings
// ConfigMap's data set to settings, as an overlay of the operator's own
// would (configMapGenerator behavior: merge).
func Objects(root, overlay, image string, settings map[string]string) ([]*unstructured.Unstructured, error) {
	name, digest, ok := strings.Cut(image, "@")
	if !ok || !byDigest.MatchString(image) {
		return nil, fmt.Errorf("image %q: %w", image, ErrNotByDigest)
	}
	mem := filesys.MakeFsInMemory()
	for _, top := range []string{"base", "overlays"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			p, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if p == filepath.Join("base", "kustomization.yaml") {
				if b, err = pin(path, b, name, digest); err != nil {
					return err
				}
			}
			return mem.WriteFile(filepath.Join("/deploy", p), b)
		})
		if err != nil {
			return nil, fmt.Errorf("read the install in %s: %w", root, err)
		}
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/deploy/overlays/"+overlay)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s with image %s: %w", filepath.Join(root, "overlays", overlay), image, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			return nil, fmt.Errorf("overlays/%s's %s: %w", overlay, r.CurId(), err)
		}
		if u.GetKind() == "ConfigMap" && strings.HasPrefix(u.GetName(), "slipway-settings-") {
			data := map[string]any{}
			for k, v := range settings {
				data[k] = v
			}
			u.Object["data"] = data
		}
		out = append(out, u)
	}
	return out, nil
}

// pin is the base's kustomization.yaml (file) with its images entry
// naming name at digest.
func pin(file string, b []byte, name, digest string) ([]byte, error) {
	s := string(b)
	for _, r := range [][2]string{
		{baseImage, "newName: " + name + "\n"},
		{baseTag, ""},
		{baseDigest, "digest: " + digest},
	} {
		if !strings.Contains(s, r[0]) {
			return nil, fmt.Errorf("%s has no %q to pin", file, strings.TrimSpace(r[0]))
		}
		s = strings.Replace(s, r[0], r[1], 1)
	}
	return []byte(s), nil
}

// Ordered is objs with secrets (name: key: value, in Namespace) as
// kubectl apply orders them: the Namespaces first, then the Secrets (by
// name), then the rest as kustomize built them.
func Ordered(objs []*unstructured.Unstructured, secrets map[string]map[string]string) []*unstructured.Unstructured {
	var ordered []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			ordered = append(ordered, o)
		}
	}
	names := make([]string, 0, len(secrets))
	for n := range secrets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		sd := map[string]any{}
		for k, v := range secrets[name] {
			sd[k] = v
		}
		ordered = append(ordered, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata":   map[string]any{"name": name, "namespace": Namespace},
			"stringData": sd,
		}})
	}
	for _, o := range objs {
		if o.GetKind() != "Namespace" {
			ordered = append(ordered, o)
		}
	}
	return ordered
}
