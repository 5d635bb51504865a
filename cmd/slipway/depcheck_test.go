package main

import (
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// The layers of the tree, bottom first. A package may import Slipway
// packages of its own layer and of the layers below it, never above: the
// planes are folders, and the arrows between them point down.
var layers = []struct {
	name     string
	prefixes []string
}{
	{"foundations", []string{"internal/atomicfile", "internal/version", "internal/strictyaml", "internal/groupcommit", "internal/cioutput", "internal/idprefix", "internal/progress", "internal/spelling", "internal/apierror", "internal/startup", "internal/sqlarg", "internal/secretfile", "pkg/ref", "pkg/rootfs", "pkg/isolate", "pkg/telemetry", "pkg/kubeconfig", "pkg/kubeaccess"}},
	{"contracts", []string{"pkg/api/"}},
	{"config repository", []string{"pkg/config/"}},
	{"release tooling", []string{"pkg/release"}},
	{"execution plane", []string{"pkg/execution/"}},
	{"delivery to clusters", []string{"pkg/cluster/"}},
	{"control plane", []string{"pkg/control"}},
	{"console", []string{"pkg/console"}},
	{"programs", []string{"cmd/"}},
}

// Heavy modules, by what they are. A rule below names the groups a layer
// may not reach, directly or through anything it imports.
var heavy = map[string][]string{
	"syft":       {"github.com/anchore/"},
	"cosign":     {"github.com/sigstore/cosign"},
	"sigstore":   {"github.com/sigstore/"},
	"go-git":     {"github.com/go-git/"},
	"pgx":        {"github.com/jackc/"},
	"SQLite":     {"modernc.org/"},
	"River":      {"github.com/riverqueue/"},
	"client-go":  {"k8s.io/client-go", "k8s.io/apimachinery", "k8s.io/api"},
	"kustomize":  {"sigs.k8s.io/kustomize/api"},
	"kyaml":      {"sigs.k8s.io/kustomize/kyaml"},
	"cloud SDKs": {"github.com/aws/", "cloud.google.com/", "google.golang.org/api", "github.com/Azure/"},
	"OTel SDK":   {"go.opentelemetry.io/otel/sdk"},
	"cobra":      {"github.com/spf13/cobra", "github.com/spf13/pflag"},
}

var allHeavy = []string{"syft", "cosign", "sigstore", "go-git", "pgx", "SQLite", "River", "client-go", "kustomize", "cloud SDKs"}

// rules say what each package (an exact path, or a prefix ending in /) may
// not depend on. Contracts and the runner stay small enough that a program
// which only talks to a server, or runs beside a workload, pays for nothing
// else.
var rules = []struct {
	prefix    string
	forbidden []string
	maxDeps   int // packages in go list -deps, 0: no bound
}{
	{"pkg/api/", append(slices.Clone(allHeavy), "kyaml", "OTel SDK", "cobra"), 200},
	// The runner carries an allow-list pool's egress proxy into a pod
	// (slipway-runner egress, package egress): standard library only, but
	// net/http and crypto/tls with it, about 75 packages of the standard
	// library more than the runner protocol needs.
	{"cmd/slipway-runner", append(slices.Clone(allHeavy), "kyaml", "OTel SDK", "cobra"), 240},
	{"pkg/ref", allHeavy, 200},
	{"pkg/isolate", allHeavy, 200},
	{"pkg/rootfs", allHeavy, 0},
	{"internal/", []string{"syft", "cosign", "sigstore", "go-git", "client-go", "kustomize", "cloud SDKs", "cobra"}, 0},
	// The config repository: go-git and kyaml (YAML with comments and
	// lines), nothing of signing, SBOMs, databases or clusters.
	{"pkg/config/", []string{"syft", "cosign", "sigstore", "pgx", "SQLite", "River", "client-go", "kustomize", "cloud SDKs", "cobra"}, 0},
	// Flags and the CLI stay under cmd/ (a dependency such as syft may use
	// cobra internally, so the library's own imports are checked below).
	{"pkg/", nil, 0},
}

// modulePkg is one package of go list -deps.
type modulePkg struct {
	path, module string
	standard     bool
	imports      []string
	testHarness  bool
}

const mod = "github.com/slipway-dev/slipway/"

var (
	listOnce sync.Once
	listed   map[string]*modulePkg
	listErr  error
)

// listAll lists every package the module's packages depend on: one go list
// for every test of this file.
func listAll(t *testing.T) map[string]*modulePkg {
	t.Helper()
	listOnce.Do(func() { listed, listErr = goListAll() })
	if listErr != nil {
		t.Fatal(listErr)
	}
	return listed
}

func goListAll() (map[string]*modulePkg, error) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{if .Module}}{{.Module.Path}}{{end}}\t{{.Standard}}\t{{join .Imports \",\"}}", "../../...").Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		return nil, fmt.Errorf("go list -deps: %v\n%s", err, stderr)
	}
	all := map[string]*modulePkg{}
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("go list: unexpected line %q", line)
		}
		p := &modulePkg{path: f[0], module: f[1], standard: f[2] == "true"}
		if f[3] != "" {
			p.imports = strings.Split(f[3], ",")
		}
		p.testHarness = strings.HasPrefix(p.path, mod+"testharness/")
		all[p.path] = p
	}
	return all, nil
}

// closure is every package path under root, root included.
func closure(all map[string]*modulePkg, root string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		if seen[p] {
			return
		}
		seen[p] = true
		if q, ok := all[p]; ok {
			for _, i := range q.imports {
				walk(i)
			}
		}
	}
	walk(root)
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func layerOf(rel string) int {
	for i, l := range layers {
		for _, p := range l.prefixes {
			if rel == strings.TrimSuffix(p, "/") || strings.HasPrefix(rel, strings.TrimSuffix(p, "/")+"/") {
				return i
			}
		}
	}
	return -1
}

func heavyGroup(all map[string]*modulePkg, path string) string {
	p := all[path]
	if p == nil || p.standard {
		return ""
	}
	for _, g := range append(slices.Clone(allHeavy), "kyaml", "OTel SDK", "cobra") {
		for _, prefix := range heavy[g] {
			if strings.HasPrefix(path, prefix) {
				return g
			}
		}
	}
	return ""
}

// TestLayersPointDown keeps the planes layered: every Slipway package
// belongs to a layer, imports nothing of a layer above its own, and product
// code never imports a test harness.
func TestLayersPointDown(t *testing.T) {
	all := listAll(t)
	var n int
	for path, p := range all {
		if !strings.HasPrefix(path, mod) || p.testHarness {
			continue
		}
		rel := strings.TrimPrefix(path, mod)
		if strings.HasPrefix(rel, "examples/") || rel == "pipelines" || rel == "deploy" || strings.HasPrefix(rel, "deploy/") || strings.HasPrefix(rel, "integrations/") {
			continue // runnable examples and test-only packages sit above everything
		}
		n++
		l := layerOf(rel)
		if l < 0 {
			t.Errorf("%s belongs to no layer: add it to a plane's folder (and to layers in this test)", rel)
			continue
		}
		for _, imp := range p.imports {
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			irel := strings.TrimPrefix(imp, mod)
			if all[imp] != nil && all[imp].testHarness {
				t.Errorf("%s imports the test harness %s: harnesses are for tests only", rel, irel)
				continue
			}
			if il := layerOf(irel); il > l {
				t.Errorf("%s (%s) imports %s (%s): an arrow pointing up", rel, layers[l].name, irel, layers[il].name)
			}
		}
	}
	if n < 40 {
		t.Fatalf("checked only %d packages: is go list reading the module?", n)
	}
}

// TestHeavyModulesStayOut checks each rule on the whole dependency closure
// of every package it covers, modules included, and prints the dependency
// count of every contract package.
func TestHeavyModulesStayOut(t *testing.T) {
	all := listAll(t)
	var paths []string
	for path := range all {
		if strings.HasPrefix(path, mod) && !all[path].testHarness {
			paths = append(paths, path)
		}
	}
	sort.Strings(paths)
	for _, path := range paths {
		rel := strings.TrimPrefix(path, mod)
		for _, r := range rules {
			if rel != r.prefix && !strings.HasPrefix(rel, r.prefix) {
				continue
			}
			deps := closure(all, path)
			why := map[string]string{}
			for _, d := range deps {
				if g := heavyGroup(all, d); g != "" && slices.Contains(r.forbidden, g) && why[g] == "" {
					why[g] = d
				}
			}
			for _, g := range r.forbidden {
				if d := why[g]; d != "" {
					t.Errorf("%s depends on %s (%s): not allowed under %s", rel, g, d, r.prefix)
				}
			}
			if r.maxDeps > 0 {
				if len(deps) >= r.maxDeps {
					t.Errorf("%s depends on %d packages, want under %d", rel, len(deps), r.maxDeps)
				}
				t.Logf("%-40s %4d packages", rel, len(deps))
			}
			break // the first matching rule is the package's
		}
		// The library never imports flags itself.
		if strings.HasPrefix(rel, "pkg/") || strings.HasPrefix(rel, "internal/") {
			for _, imp := range all[path].imports {
				if heavyGroup(all, imp) == "cobra" {
					t.Errorf("%s imports %s; flags belong under cmd/", rel, imp)
				}
			}
		}
	}
}

// TestClientDependencyCounts prints how many packages a program pays for
// when it imports each client or contract package.
func TestClientDependencyCounts(t *testing.T) {
	all := listAll(t)
	var rows []string
	for path := range all {
		rel := strings.TrimPrefix(path, mod)
		if strings.HasPrefix(rel, "pkg/api/") || rel == "cmd/slipway-runner" || rel == "pkg/execution/canary" {
			rows = append(rows, fmt.Sprintf("%-40s %4d", rel, len(closure(all, path))))
		}
	}
	sort.Strings(rows)
	if len(rows) == 0 {
		t.Fatal("no contract packages found under pkg/api/")
	}
	t.Log("dependencies (go list -deps) of each contract package:\n" + strings.Join(rows, "\n"))
}

// TestRuleCatchesHeavyImports proves the module rule fails on what it exists
// for: a contract package reaching pgx through another package.
func TestRuleCatchesHeavyImports(t *testing.T) {
	all := map[string]*modulePkg{
		mod + "pkg/api/x":         {path: mod + "pkg/api/x", imports: []string{mod + "pkg/execution/y"}},
		mod + "pkg/execution/y":   {path: mod + "pkg/execution/y", imports: []string{"github.com/jackc/pgx/v5"}},
		"github.com/jackc/pgx/v5": {path: "github.com/jackc/pgx/v5", module: "github.com/jackc/pgx/v5"},
	}
	var found string
	for _, d := range closure(all, mod+"pkg/api/x") {
		if g := heavyGroup(all, d); g != "" {
			found = g
		}
	}
	if found != "pgx" {
		t.Fatalf("heavy group found = %q, want pgx", found)
	}
	if l, il := layerOf("pkg/api/x"), layerOf("pkg/execution/y"); il <= l {
		t.Fatalf("layers: contracts %d, execution %d: the upward arrow would pass", l, il)
	}
}
