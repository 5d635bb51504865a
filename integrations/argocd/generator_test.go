package argocd_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/applicationset/services/plugin"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/slipway-dev/slipway/testharness/gittest"
)

// startGenerator runs `slipway argocd generator serve` on the config
// repository at url with token, and returns its base URL.
func startGenerator(t *testing.T, url, token string) string {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, slipwayBin, "argocd", "generator", "serve", "--repo", url, "--token-file", tokenFile,
		"--listen", "127.0.0.1:0", "--cache-dir", t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "serving on "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(time.Minute):
		t.Fatal("the generator did not say where it serves")
		return ""
	}
}

// TestGenerator drives `slipway argocd generator serve` with Argo CD's
// ApplicationSet plugin client (applicationset/services/plugin) as the
// ApplicationSet controller does: one parameter set per pool, filtered by
// the input parameters; a bad token and malformed input are errors
// carrying 403 and 400 with the reason.
func TestGenerator(t *testing.T) {
	w := newWorld(t)
	cp := w.image(t, "platform/cp:v1", "")
	runner := w.image(t, "platform/runner:v1", "")
	g1 := w.generation(t, "g1", "", cp, runner, w.image(t, "templates/tools:v1", ""))
	g2 := w.generation(t, "g2", "g1", cp, runner, w.image(t, "templates/tools:v2", ""))
	b1 := w.generationIn(t, "batch", "b1", "", cp, runner, g1.tmpl)
	gb, err := os.ReadFile(b1.file)
	if err != nil {
		t.Fatal(err)
	}
	files := w.files(t, []*gen{g1, g2}, map[string]string{
		"pools/batch/pool.yaml":                      strings.Replace(poolYAML, "name: agents", "name: batch", 1),
		"pools/batch/desired.yaml":                   strings.Replace(stateYAML([]*gen{b1}), "pool: agents", "pool: batch", 1),
		"pools/batch/generations/" + b1.id + ".yaml": string(gb),
		"pools/notapool/README.md":                   "no pool.yaml here\n",
	})
	srv := gittest.NewServer(t)
	url := srv.Seed(t, "config.git", "main", files)
	head := gittest.Git(t, srv.Dir("config.git"), "rev-parse", "main")
	base := startGenerator(t, url, "s3cret-token")
	ctx := context.Background()

	list := func(token string, params map[string]any) ([]map[string]any, error) {
		t.Helper()
		svc, err := plugin.NewPluginService(ctx, "pools", base, token, 30)
		if err != nil {
			t.Fatal(err)
		}
		pp := v1alpha1.PluginParameters{}
		for k, v := range params {
			b, _ := json.Marshal(v)
			pp[k] = apiextensionsv1.JSON{Raw: b}
		}
		resp, err := svc.List(ctx, pp)
		if err != nil {
			return nil, err
		}
		return resp.Output.Parameters, nil
	}

	all, err := list("s3cret-token", nil)
	if err != nil || len(all) != 2 || all[0]["pool"] != "agents" || all[1]["pool"] != "batch" {
		t.Fatalf("all pools: %v %v", all, err)
	}
	for k, v := range map[string]string{"generation": g1.id, "sequence": "1", "target": g2.id, "warming": g2.id, "configRevision": head,
		"pins.workspaceTemplate": g1.tmpl[strings.Index(g1.tmpl, "@")+1:]} {
		if all[0][k] != v {
			t.Errorf("agents %s = %v, want %s", k, all[0][k], v)
		}
	}
	if got, err := list("s3cret-token", map[string]any{"pool": "batch"}); err != nil || len(got) != 1 || got[0]["pool"] != "batch" {
		t.Errorf("pool filter: %v %v", got, err)
	}
	if got, err := list("s3cret-token", map[string]any{"pools": []string{"batch", "agents"}}); err != nil || len(got) != 2 {
		t.Errorf("pools filter: %v %v", got, err)
	}

	for _, tok := range []string{"wrong-token", ""} {
		if got, err := list(tok, nil); err == nil || !strings.Contains(err.Error(), "status code 403") || got != nil {
			t.Errorf("token %q: %v %v", tok, got, err)
		}
	}
	for _, tc := range []struct {
		params map[string]any
		reason string
	}{
		{map[string]any{"pool": 3}, "status code 400: argocd: generator: bad generator input: input.parameters.pool: want a string"},
		{map[string]any{"cluster": "x"}, `status code 400: argocd: generator: bad generator input: unknown input parameter "cluster"`},
		{map[string]any{"pool": "gone"}, "status code 400: argocd: generator: bad generator input: the config repository has no pool gone at " + head},
	} {
		if got, err := list("s3cret-token", tc.params); err == nil || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%v: %v %v, want %q", tc.params, got, err, tc.reason)
		}
	}
}
