package argocd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/cluster/argocd"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/testharness/gittest"
)

func digest(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

// poolFiles adds pool name with one generation per state (sequence 1, 2,
// ...) to files and returns the generations.
func poolFiles(t *testing.T, files map[string]string, name string, states ...string) []*generation.Generation {
	t.Helper()
	b, err := pool.Marshal(pool.Default(name))
	if err != nil {
		t.Fatal(err)
	}
	files[pool.PoolFile(name)] = string(b)
	st := pool.NewState(name)
	var gens []*generation.Generation
	var prev *generation.Generation
	for i, s := range states {
		c := byte('a' + i)
		g, err := generation.New(name, prev, map[generation.Kind]generation.Pin{
			generation.ControlPlane:      {Image: "registry.example/platform/cp@" + digest(c)},
			generation.Runner:            {Image: "registry.example/platform/runner@" + digest(c)},
			generation.WorkspaceTemplate: {Image: "registry.example/templates/" + name + "@" + digest(c)},
			generation.RuntimeClass:      {ID: "gvisor"},
		}, &generation.Compatibility{ControlPlaneProtocol: generation.Range{Min: 1, Max: 1}, RunnerProtocol: generation.Range{Min: 1, Max: 1}})
		if err != nil {
			t.Fatal(err)
		}
		gb, err := generation.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		files[pool.GenerationFile(name, g.ID)] = string(gb)
		st.Generations = append(st.Generations, pool.GenState{ID: g.ID, Sequence: g.Sequence, State: s, WarmSize: 2, Since: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)})
		gens, prev = append(gens, g), g
	}
	if len(gens) > 0 {
		st.Target = gens[len(gens)-1].ID
	}
	sb, err := pool.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	files[pool.StateFile(name)] = string(sb)
	return gens
}

// The generator over a real repository served by git over HTTP: one
// parameter set per pool, filtered on request; a bad token gets 403 and
// nothing else; malformed input gets 400 and the reason.
func TestGenerator(t *testing.T) {
	srv := gittest.NewServer(t)
	files := map[string]string{"README.md": "config\n"}
	agents := poolFiles(t, files, "agents", pool.Retained, pool.Draining, pool.Active, pool.Warming)
	batch := poolFiles(t, files, "batch", pool.Active)
	files["pools/notapool/README.md"] = "no pool.yaml here\n"
	url := srv.Seed(t, "config.git", "main", files)
	head := gittest.Git(t, srv.Dir("config.git"), "rev-parse", "main")

	ctx := context.Background()
	repo, err := gitops.Open(ctx, url, gitops.WithCacheDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	gen, err := argocd.NewGenerator(repo, "main", []byte("s3cret-token\n"))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(gen)
	defer hs.Close()
	post := func(token, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, hs.URL+argocd.GeneratorPath, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	sets := func(body string) []map[string]string {
		t.Helper()
		code, out := post("s3cret-token", body)
		var resp argocd.Response
		if code != http.StatusOK || json.Unmarshal([]byte(out), &resp) != nil {
			t.Fatalf("%s: %d %s", body, code, out)
		}
		return resp.Output.Parameters
	}

	all := sets(`{"applicationSetName":"pools","input":{"parameters":{}}}`)
	if len(all) != 2 || all[0]["pool"] != "agents" || all[1]["pool"] != "batch" {
		t.Fatalf("all pools: %v", all)
	}
	a := all[0]
	want := map[string]string{
		"generation": agents[2].ID, "sequence": "3", "target": agents[3].ID, "configRevision": head,
		"warming": agents[3].ID, "draining": agents[1].ID, "retained": agents[0].ID,
		"pins.workspaceTemplate": digest('c'), "pins.runtimeClass": "gvisor", "pins.runner": digest('c'),
	}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("agents %s = %q, want %q", k, a[k], v)
		}
	}
	if all[1]["generation"] != batch[0].ID || all[1]["warming"] != "" {
		t.Errorf("batch: %v", all[1])
	}
	if got := sets(`{"applicationSetName":"pools","input":{"parameters":{"pool":"batch"}}}`); len(got) != 1 || got[0]["pool"] != "batch" {
		t.Errorf("pool filter: %v", got)
	}
	if got := sets(`{"applicationSetName":"pools","input":{"parameters":{"pools":["batch","agents"]}}}`); len(got) != 2 {
		t.Errorf("pools filter: %v", got)
	}
	if got := sets(`{"applicationSetName":"pools"}`); len(got) != 2 {
		t.Errorf("no input: %v", got)
	}

	for _, tok := range []string{"", "wrong-token", "s3cret-token-and-more"} {
		if code, out := post(tok, `{"applicationSetName":"pools"}`); code != http.StatusForbidden || out != "" {
			t.Errorf("token %q: %d %q", tok, code, out)
		}
	}
	for body, reason := range map[string]string{
		`{"applicationSetName":"pools","extra":1}`:                                         `unknown field "extra"`,
		`{"applicationSetName":"pools","input":{"parameters":{"cluster":"x"}}}`:            `unknown input parameter "cluster"`,
		`{"applicationSetName":"pools","input":{"parameters":{"pool":3}}}`:                 "input.parameters.pool: want a string",
		`{"applicationSetName":"pools","input":{"parameters":{"pool":"gone"}}}`:            "the config repository has no pool gone at " + head,
		`{"applicationSetName":"pools","input":{"parameters":{"pool":"../x"}}}`:            `"../x" is not a pool name`,
		`{"applicationSetName":"pools"} {}`:                                                "data after the request object",
		`{"applicationSetName":` + `"` + strings.Repeat("x", argocd.MaxRequestBody) + `"}`: fmt.Sprintf("the body is over %d bytes", argocd.MaxRequestBody),
		`not json`: "invalid character",
	} {
		code, out := post("s3cret-token", body)
		if code != http.StatusBadRequest || !strings.Contains(out, reason) {
			if len(body) > 80 {
				body = body[:80]
			}
			t.Errorf("%s: %d %q, want 400 %q", body, code, out, reason)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, hs.URL+argocd.GeneratorPath, nil)
	req.Header.Set("Authorization", "Bearer s3cret-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", resp.StatusCode)
	}
	if _, err := argocd.NewGenerator(repo, "main", []byte(" \n")); err == nil {
		t.Error("an empty token was accepted")
	}
}
