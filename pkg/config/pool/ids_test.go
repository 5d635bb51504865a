package pool_test

import (
	"errors"
	"path"
	"sort"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/internal/idprefix"
	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// dirs is a config repository's folders: a Lister over a file list.
func dirs(files ...string) pool.Lister {
	return func(dir string) ([]string, error) {
		seen := map[string]bool{}
		var out []string
		for _, f := range files {
			rest, ok := strings.CutPrefix(f, dir+"/")
			if !ok {
				continue
			}
			first, _, _ := strings.Cut(rest, "/")
			if !seen[first] {
				seen[first] = true
				out = append(out, first)
			}
		}
		sort.Strings(out)
		return out, nil
	}
}

func TestResolveGeneration(t *testing.T) {
	a1, a2, b1 := "g-1a4ee8"+strings.Repeat("a", 58), "g-1a4ee8"+strings.Repeat("b", 58), "g-77aa00"+strings.Repeat("c", 58)
	list := dirs(
		pool.GenerationFile("agents", a1), pool.GenerationFile("agents", a2), pool.StateFile("agents"),
		pool.GenerationFile("batch", b1), path.Join(pool.GenerationsDir("batch"), "README.md"), "pools/Not_A_Pool/x",
	)
	if names, err := pool.Names(list); err != nil || strings.Join(names, ",") != "agents,batch" {
		t.Fatalf("Names: %v %v", names, err)
	}
	p, id, err := pool.ResolveGeneration(list, "", "g-77aa00", "repo")
	if err != nil || p != "batch" || id != b1 {
		t.Fatalf("across pools: %s %s %v", p, id, err)
	}
	if _, _, err := pool.ResolveGeneration(list, "agents", "g-77aa00", "repo"); !errors.Is(err, idprefix.ErrNoMatch) || !strings.Contains(err.Error(), "no generation matches g-77aa00 in pool agents of repo") {
		t.Fatalf("other pool: %v", err)
	}
	_, _, err = pool.ResolveGeneration(list, "agents", "g-1a4ee8", "repo")
	var amb *idprefix.AmbiguousError
	if !errors.As(err, &amb) || len(amb.Candidates) != 2 || amb.Candidates[0] != a1 {
		t.Fatalf("ambiguous: %v", err)
	}
	if _, id, err := pool.ResolveGeneration(list, "agents", a2, "repo"); err != nil || id != a2 {
		t.Fatalf("whole id: %s %v", id, err)
	}
}
