package controlapi

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEventOutput: Output reads every output event as encoding/json does:
// the shape the plane writes directly, escapes and surrogates included,
// and any other shape through encoding/json.
func TestEventOutput(t *testing.T) {
	texts := []string{"", "plain", "line\n", "tab\tq\"b\\s/", "<&>\u2028\u2029", "é日本\U0001F600", "\x00\x01\x1f\x7f"}
	raws := []string{`{"command":3,"text":"\ud83d\ude00 \u00e9 \/"}`, `{"command":0,"text":"\ud83d x"}`, `{"command":0,"text":"\ud83d\u0041"}`,
		`{"command":0,"text":"\udc00"}`, `{"command":1,"base64":"AAEC"}`, `{"text":"x","command":2}`, `{"command":0}`, `{"command":0,"text":"` + "\xff" + `"}`,
		`{"command":0,"text":"a\qb"}`, `{"command":0,"text":"a` + "\n" + `b"}`, `{"command":0,"text":"\u12"}`}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		texts = append(texts, string(b))
	}
	for i, s := range texts {
		raw := mustJSON(t, OutputData{Command: i, Text: s})
		if _, ok := readOutputShape(raw); s != "" && !ok {
			t.Fatalf("%s: not read directly", raw)
		}
		raws = append(raws, string(raw))
	}
	for _, raw := range raws {
		var want OutputData
		werr := json.Unmarshal([]byte(raw), &want)
		got, err := Event{Kind: KindStdout, Data: json.RawMessage(raw)}.Output()
		if (err != nil) != (werr != nil) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\ngot  %+v, %v\nwant %+v, %v", raw, got, err, want, werr)
		}
	}
}
