package gitops

import (
	"context"
	"path/filepath"
	"testing"
)

func TestLog(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "config.git")
	if err := InitBare(dir, "main"); err != nil {
		t.Fatal(err)
	}
	w, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []Commit{
		{Subject: "first"},
		{Subject: "second", Body: "why: it says so\n\nmore", Trailers: []Trailer{{"Slipway-Step", "warm"}, {"Slipway-Pool", "agents"}}},
		{Subject: "third", Trailers: []Trailer{{"Slipway-Step", "prove"}}},
	} {
		c := c
		if _, err := w.Update(ctx, Request{Branch: "main", Edit: func(t *Tree) (*Commit, error) {
			return &c, t.WriteFile("f", []byte{byte('a' + i)})
		}}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(opts ...Option) []*LogEntry {
		r, err := Open(ctx, dir, opts...)
		if err != nil {
			t.Fatal(err)
		}
		var out []*LogEntry
		if err := r.Log(ctx, "main", func(e *LogEntry) error { out = append(out, e); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	all := read(WithDepth(0))
	if len(all) != 3 || all[0].Subject != "third" || all[2].Subject != "first" {
		t.Fatalf("log: %+v", all)
	}
	if e := all[1]; e.Body != "why: it says so\n\nmore" || e.Trailer("Slipway-Step") != "warm" || e.Trailer("slipway-pool") != "agents" || len(e.Trailers) != 2 {
		t.Fatalf("second: %+v", e)
	}
	if all[2].Trailers != nil || all[2].Body != "" {
		t.Fatalf("first: %+v", all[2])
	}
	tr, err := all[1].Tree()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := tr.ReadFile("f"); err != nil || string(b) != "b" {
		t.Fatalf("tree of the second commit: %q %v", b, err)
	}
	if shallow := read(); len(shallow) != 1 || shallow[0].Subject != "third" {
		t.Fatalf("a shallow store holds the head only: %+v", shallow)
	}
}
