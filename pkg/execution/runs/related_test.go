package runs

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

// Related follows each identity a run recorded through the store's indexes,
// leaves out the run itself, cuts at the limit saying so, and never matches
// an identity the run did not record.
func TestRelated(t *testing.T) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, id := range []string{"r-1", "r-2", "r-3", "r-4"} {
		m := fullManifest(id)
		m.RuntimeClass = "" // unrecorded on every run
		if i == 3 {
			m.NodeID = "node-other"
		}
		if err := s.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	m, rel, err := Related(ctx, s, "r-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.RunID != "r-1" || len(rel) != 4 {
		t.Fatalf("Related = %s, %+v", m.RunID, rel)
	}
	byID := map[Identity]RelatedRuns{}
	for _, r := range rel {
		byID[r.Shared] = r
	}
	if got := byID[SharedNode].Runs; !slices.Equal(sorted(got), []string{"r-2", "r-3"}) {
		t.Errorf("node: %v, want r-2 r-3 (r-4 ran elsewhere, r-1 is the run)", got)
	}
	if got := byID[SharedTemplate].Runs; !slices.Equal(sorted(got), []string{"r-2", "r-3", "r-4"}) {
		t.Errorf("template: %v", got)
	}
	if r := byID[SharedRuntimeClass]; r.Value != "" || len(r.Runs) != 0 {
		t.Errorf("runtime class unrecorded: %+v, want no runs", r)
	}
	_, rel, err = Related(ctx, s, "r-1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := rel[1]; len(r.Runs) != 1 || !r.More {
		t.Errorf("template at limit 1: %+v, want one run and More", r)
	}
	if _, _, err := Related(ctx, s, "r-9", 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown run: %v, want ErrNotFound", err)
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
