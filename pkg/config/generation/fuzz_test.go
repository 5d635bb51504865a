package generation_test

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/slipway-dev/slipway/pkg/config/generation"
)

// FuzzParse: Parse never panics, refuses only with ErrInvalid, and what it
// accepts marshals to a document that parses to the same id and marshals
// to the same bytes again.
func FuzzParse(f *testing.F) {
	good, err := os.ReadFile("testdata/agents.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte("apiVersion: slipway.dev/v1alpha1\nkind: Generation\n"))
	f.Add([]byte("apiVersion: slipway.dev/v1alpha1\nkind: Generation\npool: p\nsequence: 1\npins:\n  model: {id: \"m\", name: \"<&>\"}\n" +
		"compatibility: {controlPlaneProtocol: {min: 1, max: 1}, runnerProtocol: {min: 1, max: 1}}\n"))
	f.Add([]byte("pins: {runner: {image: 'a:b'}}\n"))
	f.Add([]byte("- a\n- b\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := generation.Parse(b)
		if err != nil {
			if !errors.Is(err, generation.ErrInvalid) {
				t.Fatalf("error outside ErrInvalid: %v", err)
			}
			return
		}
		if g.ID == "" || g.Pool == "" || g.Sequence < 1 || len(g.Pins) == 0 {
			t.Fatalf("accepted an incomplete generation: %q", b)
		}
		out, err := generation.Marshal(g)
		if err != nil {
			t.Fatalf("Marshal of a parsed generation: %v\n%s", err, b)
		}
		back, err := generation.Parse(out)
		if err != nil {
			t.Fatalf("Parse(Marshal(g)): %v\n%s", err, out)
		}
		if back.ID != g.ID || back.Sequence != g.Sequence || !generation.Diff(g, back).Empty() {
			t.Fatalf("round trip changed the generation:\n%s\n%s", b, out)
		}
		again, err := generation.Marshal(back)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Marshal is not stable: %v\n%s\n%s", err, out, again)
		}
	})
}
