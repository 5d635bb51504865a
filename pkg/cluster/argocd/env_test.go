package argocd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/cluster/argocd"
)

func TestReadEnv(t *testing.T) {
	base := map[string]string{"ARGOCD_APP_NAME": "agents-prod", "ARGOCD_APP_REVISION": strings.Repeat("ab", 20),
		"ARGOCD_APP_SOURCE_PATH": "pools/agents", "ARGOCD_APP_SOURCE_REPO_URL": "https://git.example/config.git"}
	for name, tc := range map[string]struct {
		env     map[string]string
		want    argocd.Params
		wantErr string
	}{
		"parameters JSON": {env: map[string]string{
			"ARGOCD_APP_PARAMETERS": `[{"name":"pool","string":"agents"},{"name":"allow-empty","string":"true"},{"name":"policy","string":"policies/other.yaml"}]`,
			"PARAM_POOL":            "agents", "PARAM_ALLOW_EMPTY": "true"},
			want: argocd.Params{Pool: "agents", AllowEmpty: true, Policy: "policies/other.yaml"}},
		"PARAM_ variables": {env: map[string]string{"PARAM_POOL": "agents", "PARAM_ALLOW_EMPTY": "false"},
			want: argocd.Params{Pool: "agents"}},
		"Application env": {env: map[string]string{"ARGOCD_ENV_POOL": "agents"}, want: argocd.Params{Pool: "agents"}},
		"env agrees":      {env: map[string]string{"ARGOCD_ENV_POOL": "agents", "PARAM_POOL": "agents"}, want: argocd.Params{Pool: "agents"}},
		"env disagrees": {env: map[string]string{"ARGOCD_ENV_POOL": "batch", "PARAM_POOL": "agents"},
			wantErr: `parameter pool is "agents" but the Application's env ARGOCD_ENV_POOL is "batch"`},
		"no pool":           {env: map[string]string{}, wantErr: "no pool: set the plugin parameter pool (PARAM_POOL)"},
		"unknown parameter": {env: map[string]string{"ARGOCD_APP_PARAMETERS": `[{"name":"pooll","string":"agents"}]`}, wantErr: `unknown parameter "pooll"`},
		"array parameter":   {env: map[string]string{"ARGOCD_APP_PARAMETERS": `[{"name":"pool","array":["a"]}]`}, wantErr: "parameter pool: want a string"},
		"bad JSON":          {env: map[string]string{"ARGOCD_APP_PARAMETERS": `[{"name":"pool","strin":"a"}]`}, wantErr: "ARGOCD_APP_PARAMETERS: json: unknown field"},
		"bad bool":          {env: map[string]string{"PARAM_POOL": "agents", "PARAM_ALLOW_EMPTY": "yes please"}, wantErr: `allow-empty: "yes please" is not true or false`},
		"no revision":       {env: map[string]string{"PARAM_POOL": "agents", "ARGOCD_APP_REVISION": ""}, wantErr: "ARGOCD_APP_REVISION is not set"},
	} {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			e, err := argocd.ReadEnv(func(k string) string { return env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.Params != tc.want || e.Revision != base["ARGOCD_APP_REVISION"] || e.AppName != "agents-prod" || e.SourcePath != "pools/agents" {
				t.Fatalf("env = %+v", e)
			}
		})
	}
}

func TestFindRoot(t *testing.T) {
	root := t.TempDir()
	app := filepath.Join(root, "pools", "agents")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ wd, sourcePath, want, wantErr string }{
		{app, "pools/agents", root, ""},
		{app, "", root, ""},
		{root, ".", root, ""},
		{app, "other/path", "", "does not end in ARGOCD_APP_SOURCE_PATH"},
		{app, "../x", "", "not a path inside the repository"},
		{t.TempDir(), "", "", "neither it nor a parent holds a pools folder"},
	} {
		got, err := argocd.FindRoot(tc.wd, tc.sourcePath)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("FindRoot(%s, %q): err = %v, want %q", tc.wd, tc.sourcePath, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("FindRoot(%s, %q) = %q, %v; want %q", tc.wd, tc.sourcePath, got, err, tc.want)
		}
	}
}

// Locate tells the whole checkout from a pool's folder streamed alone
// (manifest-generate-paths) and names both layouts when neither fits.
func TestLocate(t *testing.T) {
	root := t.TempDir()
	app := filepath.Join(root, "pools", "agents")
	alone, other := t.TempDir(), t.TempDir()
	for _, f := range []string{filepath.Join(app, "pool.yaml"), filepath.Join(alone, "pool.yaml")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("kind: Pool\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		wd, sourcePath string
		want           argocd.Checkout
		wantErr        string
	}{
		{app, "pools/agents", argocd.Checkout{Dir: root}, ""},
		{root, "", argocd.Checkout{Dir: root}, ""},
		{alone, "pools/agents", argocd.Checkout{Dir: alone, Pool: "agents"}, ""},
		{alone, "pools/agents/", argocd.Checkout{Dir: alone, Pool: "agents"}, ""},
		{alone, "clusters/prod", argocd.Checkout{}, "fits neither layout"},
		{alone, "pools/agents/overlay", argocd.Checkout{}, "fits neither layout"},
		{other, "pools/agents", argocd.Checkout{}, "nor is it a pool's folder streamed alone"},
		{root, "pools/agents", argocd.Checkout{}, "fits neither layout"}, // pools/ at the top: not a pool's folder
	} {
		got, err := argocd.Locate(tc.wd, tc.sourcePath)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Locate(%s, %q): err = %v, want %q", tc.wd, tc.sourcePath, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Locate(%s, %q) = %+v, %v; want %+v", tc.wd, tc.sourcePath, got, err, tc.want)
		}
	}
	if _, err := argocd.FindRoot(alone, "pools/agents"); err == nil || !strings.Contains(err.Error(), "not a config repository's root") {
		t.Errorf("FindRoot of a pool's folder alone: %v", err)
	}
}
