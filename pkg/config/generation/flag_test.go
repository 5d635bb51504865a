package generation_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/config/generation"
)

func TestParsePin(t *testing.T) {
	commit := strings.Repeat("ab", 20)
	for _, tc := range []struct {
		in   string
		kind generation.Kind
		want generation.Pin
	}{
		// a secret's version is its identity: two versions, two pins
		{"secretVersion=vault://kv/agents/token#3", generation.SecretVersion, generation.Pin{ID: "vault://kv/agents/token#3"}},
		{"secret-version=vault://kv/agents/token#4", generation.SecretVersion, generation.Pin{ID: "vault://kv/agents/token#4"}},
		{"secretVersion=projects/p/secrets/s/versions/2", generation.SecretVersion, generation.Pin{ID: "projects/p/secrets/s/versions/2"}},
		// other id kinds keep #TAG as a label, as before (their ids do not change)
		{"nodeImage=ami-0abc#debian-12", generation.NodeImage, generation.Pin{ID: "ami-0abc", Tag: "debian-12"}},
		{"model=m-1#latest", generation.Model, generation.Pin{ID: "m-1", Tag: "latest"}},
		{"runtimeClass=bwrap-3", generation.RuntimeClass, generation.Pin{ID: "bwrap-3"}},
		{"policy=https://g/config.git@" + commit + "#main", generation.Policy,
			generation.Pin{Git: &generation.GitPin{Repo: "https://g/config.git", Commit: commit, Ref: "main"}}},
		{"runner=r.example/a/b:v1@" + d1, generation.Runner, generation.Pin{Image: "r.example/a/b:v1@" + d1}},
		{"model=r.example/m@" + d1, generation.Model, generation.Pin{Image: "r.example/m@" + d1}},
	} {
		k, p, err := generation.ParsePin(tc.in)
		if err != nil || k != tc.kind || !p.Equal(tc.want) {
			t.Errorf("ParsePin(%q) = %s, %+v, %v; want %s, %+v", tc.in, k, p, err, tc.kind, tc.want)
		}
	}
	for in, want := range map[string]string{
		"secretVersion":            "want KIND=VALUE",
		"widget=x":                 "unknown artifact kind",
		"policy=nocommit":          "REPO@COMMIT",
		"runner=r.example/a/b:v1":  "is a tag",
		"runner=UPPER/case@sha256": "",
	} {
		_, _, err := generation.ParsePin(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePin(%q) err = %v, want one naming %q", in, err, want)
		}
		if want != "" && want != "is a tag" && !errors.Is(err, generation.ErrInvalid) {
			t.Errorf("ParsePin(%q) err = %v, want ErrInvalid", in, err)
		}
	}
}

// Two generations that differ only in the secret version pinned on the
// command line have different ids; the same flags give the same id.
func TestSecretVersionIsIdentity(t *testing.T) {
	ids := map[string]bool{}
	for _, v := range []string{"#3", "#4", "#3"} {
		_, p, err := generation.ParsePin("secretVersion=vault://kv/agents/token" + v)
		if err != nil {
			t.Fatal(err)
		}
		g, err := generation.New("agents", nil, map[generation.Kind]generation.Pin{
			generation.Runner: {Image: "r.example/a/b@" + d1}, generation.SecretVersion: p,
		}, &generation.Compatibility{ControlPlaneProtocol: generation.Range{Min: 1, Max: 1}, RunnerProtocol: generation.Range{Min: 1, Max: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Pins[generation.SecretVersion].Identity(); got != "vault://kv/agents/token"+v {
			t.Errorf("identity %q, want the version kept", got)
		}
		ids[g.ID] = true
	}
	if len(ids) != 2 {
		t.Errorf("%d distinct ids for two secret versions", len(ids))
	}
}
