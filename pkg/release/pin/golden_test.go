package pin

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/rewrite/*/out")

// TestRewriteGolden pins each testdata/rewrite/<case>/in tree and compares
// the result with <case>/out byte for byte; a second run must change nothing.
func TestRewriteGolden(t *testing.T) {
	cases := []struct {
		name   string
		config string // PinConfig beside in/, if any
		opts   []PlanOption
	}{
		{name: "workloads"},
		{name: "list"},
		{name: "kustomize"},
		{name: "custom", config: "pinconfig.yaml"},
		{name: "droptag", opts: []PlanOption{WithDropTag()}},
		{name: "refresh", opts: []PlanOption{WithRefresh()}},
		{name: "anchors"},
		{name: "placeholders"},
		{name: "kinds"},
		{name: "shapes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := filepath.Join("testdata", "rewrite", tc.name)
			dir := t.TempDir()
			copyTree(t, filepath.Join(base, "in"), dir)
			var find []Option
			if tc.config != "" {
				cfg, err := LoadConfig(filepath.Join(base, tc.config))
				if err != nil {
					t.Fatal(err)
				}
				find = append(find, WithConfig(cfg))
			}
			tr := newTableResolver(t, testTable())
			if _, err := pinTree(t, dir, tr.resolver(), find, tc.opts...); err != nil {
				t.Fatalf("pin: %v", err)
			}
			got := readTree(t, dir)
			outDir := filepath.Join(base, "out")
			if *update {
				if err := os.RemoveAll(outDir); err != nil {
					t.Fatal(err)
				}
				for name, content := range got {
					writeFiles(t, outDir, map[string]string{filepath.FromSlash(name): content})
				}
			}
			want := readTree(t, outDir)
			for name, w := range want {
				if got[name] != w {
					t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got[name], w)
				}
			}
			if len(got) != len(want) {
				t.Errorf("got files %v, want %v", keys(got), keys(want))
			}

			// Idempotence: a second run resolves nothing new and changes nothing.
			res, err := pinTree(t, dir, tr.resolver(), find, tc.opts...)
			if err != nil {
				t.Fatalf("second pin: %v", err)
			}
			for _, f := range res.Files {
				if f.Status != Unchanged || len(f.Changes) != 0 {
					t.Errorf("second run: %s is %s with %d changes", f.Path, f.Status, len(f.Changes))
				}
			}
			if again := readTree(t, dir); !equalMaps(again, got) {
				t.Error("second run changed the files")
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
