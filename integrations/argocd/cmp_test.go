package argocd_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/cmpserver"
	cmpclient "github.com/argoproj/argo-cd/v2/cmpserver/apiclient"
	"github.com/argoproj/argo-cd/v2/cmpserver/plugin"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	repoclient "github.com/argoproj/argo-cd/v2/reposerver/apiclient"
	"github.com/argoproj/argo-cd/v2/util/cmp"
	"github.com/golang/protobuf/ptypes/empty"
	"google.golang.org/grpc/status"
)

// cmpServer is Argo CD's CMP server with Slipway's plugin.yaml, serving on
// a unix socket in the plugin sockets folder, and a client of it.
type cmpServer struct {
	address string
	client  cmpclient.ConfigManagementPluginServiceClient
}

// startCMP starts Argo CD's argocd-cmp-server (cmpserver.NewServer) with
// plugin.yaml of this folder, as the sidecar runs it: its sockets folder
// and work folder are the test's (ARGOCD_PLUGINSOCKFILEPATH,
// ARGOCD_CMP_WORKDIR), and the plugin's commands inherit the test's
// environment (slipway first on PATH) plus what each request sends.
func startCMP(t testing.TB, extraEnv ...string) *cmpServer {
	t.Helper()
	sockets := t.TempDir()
	setenv(t, "ARGOCD_PLUGINSOCKFILEPATH", sockets)
	setenv(t, "ARGOCD_CMP_WORKDIR", filepath.Join(memDir(t), "work"))
	for _, kv := range extraEnv {
		k, v, _ := strings.Cut(kv, "=")
		setenv(t, k, v)
	}
	cfg, err := plugin.ReadPluginConfig(".")
	if err != nil {
		t.Fatalf("plugin.yaml: %v", err)
	}
	srv, err := cmpserver.NewServer(plugin.CMPServerInitConstants{PluginConfig: *cfg})
	if err != nil {
		t.Fatal(err)
	}
	g, err := srv.CreateGRPC()
	if err != nil {
		t.Fatal(err)
	}
	address := cfg.Address()
	if address != filepath.Join(sockets, "slipway-v1.sock") {
		t.Fatalf("socket %s, want slipway-v1.sock: Applications name the plugin slipway-v1", address)
	}
	l, err := net.Listen("unix", address)
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(l)
	t.Cleanup(g.Stop)
	closer, client, err := cmpclient.NewConfigManagementPluginClientSet(address).NewConfigManagementPluginClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	return &cmpServer{address: address, client: client}
}

// setenv is t.Setenv for testing.TB (benchmarks too).
func setenv(t testing.TB, k, v string) {
	old, had := os.LookupEnv(k)
	os.Setenv(k, v)
	t.Cleanup(func() {
		if had {
			os.Setenv(k, old)
		} else {
			os.Unsetenv(k)
		}
	})
}

// app is an Application's source as the repo-server turns it into the
// plugin's environment.
type app struct {
	name, path, revision string
	params               map[string]string
	env                  map[string]string // spec.source.plugin.env
	// exclude is the repo-server's reposerver.plugin.tar.exclusions.
	exclude []string
	// alone is an Application annotated argocd.argoproj.io/
	// manifest-generate-paths: "." on a repo-server with
	// reposerver.plugin.use.manifest.generate.paths: "true": it streams
	// only the common root of the Application's path and the annotation's
	// paths, which it computes with getApplicationRootPath (unexported in
	// reposerver/repository) and which for "." is the path itself.
	alone bool
}

// rootPath is what runConfigManagementPluginSidecars streams of the
// checkout at root for a's GenerateManifest.
func (a app) rootPath(root string) string {
	if a.alone {
		return filepath.Join(root, a.path)
	}
	return root
}

// environ is the environment the repo-server sends with a request
// (reposerver/repository's newEnv and getPluginParamEnvs), made with Argo
// CD's own types: the ARGOCD_APP_* variables, the Application's plugin env
// as ARGOCD_ENV_*, and the parameters as ARGOCD_APP_PARAMETERS and PARAM_*.
func (a app) environ(t testing.TB) []string {
	t.Helper()
	env := v1alpha1.Env{
		{Name: "ARGOCD_APP_NAME", Value: a.name},
		{Name: "ARGOCD_APP_NAMESPACE", Value: "argocd"},
		{Name: "ARGOCD_APP_REVISION", Value: a.revision},
		{Name: "ARGOCD_APP_REVISION_SHORT", Value: a.revision[:7]},
		{Name: "ARGOCD_APP_SOURCE_REPO_URL", Value: "https://git.example.com/platform/config.git"},
		{Name: "ARGOCD_APP_SOURCE_PATH", Value: a.path},
		{Name: "ARGOCD_APP_SOURCE_TARGET_REVISION", Value: "main"},
	}.Environ()
	env = append(env, "KUBE_VERSION=1.37.2", "KUBE_API_VERSIONS=v1,apps/v1")
	src := &v1alpha1.ApplicationSourcePlugin{Name: "slipway-v1"}
	for k, v := range a.env {
		src.Env = append(src.Env, &v1alpha1.EnvEntry{Name: k, Value: v})
		env = append(env, "ARGOCD_ENV_"+k+"="+v)
	}
	for k, v := range a.params {
		src.Parameters = append(src.Parameters, v1alpha1.ApplicationSourcePluginParameter{Name: k, String_: &v})
	}
	params, err := src.Parameters.Environ()
	if err != nil {
		t.Fatal(err)
	}
	return append(env, params...)
}

// stream is what a MatchRepository call costs the repo-server: the whole
// checkout at root tarred, streamed and untarred in the sidecar (always
// the whole of it: discovery never uses manifest-generate-paths). The
// repo-server makes it only for a plugin with discovery configured, which
// Slipway's is not, so the answer is "not supported".
func (s *cmpServer) stream(t testing.TB, root string, a app) {
	t.Helper()
	ctx := context.Background()
	stream, err := s.client.MatchRepository(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmp.SendRepoStream(ctx, filepath.Join(root, a.path), root, stream, a.environ(t), a.exclude); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil || resp.IsSupported || resp.IsDiscoveryEnabled {
		t.Fatalf("MatchRepository: %v %+v, want no discovery", err, resp)
	}
}

// announce is the repo-server's GetParametersAnnouncement.
func (s *cmpServer) announce(t testing.TB, root string, a app) []*repoclient.ParameterAnnouncement {
	t.Helper()
	ctx := context.Background()
	stream, err := s.client.GetParametersAnnouncement(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmp.SendRepoStream(ctx, filepath.Join(root, a.path), root, stream, a.environ(t), a.exclude); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		t.Fatalf("GetParametersAnnouncement: %v", err)
	}
	return resp.ParameterAnnouncements
}

// generate is the repo-server's GenerateManifest: the checkout streamed by
// SendRepoStream, the manifests or the gRPC error back.
func (s *cmpServer) generate(t testing.TB, root string, a app) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stream, err := s.client.GenerateManifest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmp.SendRepoStream(stream.Context(), filepath.Join(root, a.path), a.rootPath(root), stream, a.environ(t), a.exclude); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return nil, err
	}
	return resp.Manifests, nil
}

// TestCMPServer drives Argo CD's CMP server, running Slipway's
// plugin.yaml, with Argo CD's own client as the repo-server does: the
// plugin has no discovery (Applications name it); it announces its parameters naming the pools; a verified pool renders its
// objects, the same bytes twice for the same tree and parameters; an
// unsigned or wrongly signed generation is refused with the generation,
// the pin and the failed check in the gRPC error; an empty pool is an
// error unless allow-empty is set.
func TestCMPServer(t *testing.T) {
	w := newWorld(t)
	cp := w.image(t, "platform/cp:v1", "ci")
	runner := w.image(t, "platform/runner:v1", "ci")
	signed := w.generation(t, "signed", "", cp, runner, w.image(t, "templates/tools:v1", "ci"))
	unsigned := w.generation(t, "unsigned", "signed", cp, runner, w.image(t, "templates/tools:v2", ""))
	rogue := w.generation(t, "rogue", "unsigned", cp, runner, w.image(t, "templates/tools:v3", "rogue"))
	s := startCMP(t, "SLIPWAY_VERIFY_CACHE_DIR="+filepath.Join(t.TempDir(), "verify"))

	root := w.checkout(t, t.TempDir(), []*gen{signed}, map[string]string{"clusters/prod/app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"})
	rev := strings.Repeat("5e", 20)
	a := app{name: "pool-agents", path: "pools/agents", revision: rev, params: map[string]string{"pool": "agents"}}

	// No discovery: the repo-server then uses the plugin an Application
	// names without asking MatchRepository (which streams the whole
	// checkout once more before every render).
	if cfg, err := s.client.CheckPluginConfiguration(context.Background(), &empty.Empty{}); err != nil || cfg.IsDiscoveryConfigured || cfg.ProvideGitCreds {
		t.Fatalf("CheckPluginConfiguration: %v %+v, want no discovery and no git credentials", err, cfg)
	}

	// Dynamic first, static after; the UI keeps the last of each name.
	ann := s.announce(t, root, a)
	names := map[string]*repoclient.ParameterAnnouncement{}
	for _, p := range ann {
		if prev := names[p.Name]; prev != nil && prev.String() != p.String() {
			t.Errorf("plugin.yaml's static %s differs from slipway argocd parameters':\n%v\n%v", p.Name, p, prev)
		}
		names[p.Name] = p
	}
	if p := names["pool"]; p == nil || !p.Required || p.String_ != "agents" || !strings.Contains(p.Tooltip, "this repository holds: agents") ||
		names["policy"] == nil || names["allow-empty"] == nil || len(names) != 3 {
		t.Fatalf("announcement: %+v", ann)
	}

	first, err := s.generate(t, root, a)
	if err != nil {
		t.Fatalf("verified pool: %v", err)
	}
	// Argo CD hands the repo-server each object as JSON.
	all := strings.Join(first, "\n---\n")
	kinds := map[string]int{}
	for _, m := range first {
		var o struct {
			Kind     string
			Metadata struct{ Annotations map[string]string }
		}
		if err := json.Unmarshal([]byte(m), &o); err != nil {
			t.Fatalf("manifest %q: %v", m, err)
		}
		kinds[o.Kind]++
		if an := o.Metadata.Annotations; an["slipway.dev/config-revision"] != rev || an["slipway.dev/generation-id"] != signed.id {
			t.Errorf("%s annotations %v, want config revision %s and generation %s", o.Kind, an, rev, signed.id)
		}
		if w := map[string]string{"SandboxTemplate": "1", "SandboxWarmPool": "2"}[o.Kind]; o.Metadata.Annotations["argocd.argoproj.io/sync-wave"] != w {
			t.Errorf("%s sync wave %q, want %q", o.Kind, o.Metadata.Annotations["argocd.argoproj.io/sync-wave"], w)
		}
	}
	if kinds["SandboxTemplate"] != 1 || kinds["SandboxWarmPool"] != 1 || len(first) != 2 {
		t.Errorf("objects %v, want one SandboxTemplate and one SandboxWarmPool:\n%s", kinds, all)
	}
	again, err := s.generate(t, root, a)
	if err != nil || strings.Join(again, "\n---\n") != all {
		t.Fatalf("the same tree and parameters rendered differently: %v", err)
	}
	// The parameter given as the Application's env gives the same bytes.
	viaEnv := a
	viaEnv.params, viaEnv.env = nil, map[string]string{"POOL": "agents"}
	if m, err := s.generate(t, root, viaEnv); err != nil || strings.Join(m, "\n---\n") != all {
		t.Fatalf("pool from ARGOCD_ENV_POOL: %v", err)
	}

	for _, tc := range []struct {
		g     *gen
		check string
	}{{unsigned, "no signature"}, {rogue, "signature"}} {
		w.checkout(t, root, []*gen{signed, tc.g}, nil)
		_, err := s.generate(t, root, a)
		st, _ := status.FromError(err)
		msg := st.Message()
		if err == nil {
			t.Fatalf("generation %s was rendered", tc.g.id)
		}
		for _, want := range []string{tc.g.id, "workspaceTemplate", tc.g.tmpl[strings.Index(tc.g.tmpl, "@")+1:], tc.check, "nothing rendered"} {
			if !strings.Contains(msg, want) {
				t.Errorf("refusal of %s lacks %q: %s", tc.g.id, want, msg)
			}
		}
		if strings.Contains(msg, signed.id) {
			t.Errorf("the refusal names the verified generation %s: %s", signed.id, msg)
		}
	}

	w.checkout(t, root, nil, nil)
	if _, err := s.generate(t, root, a); err == nil || !strings.Contains(err.Error(), "empty render: desired.yaml lists no generation; set the parameter allow-empty=true") {
		t.Fatalf("empty pool: %v", err)
	}
	removing := a
	removing.params = map[string]string{"pool": "agents", "allow-empty": "true"}
	if m, err := s.generate(t, root, removing); err != nil || len(m) != 0 {
		t.Fatalf("empty pool with allow-empty: %v %v", m, err)
	}
}

// memDir is a temporary directory in memory where the host has /dev/shm
// (else t.TempDir()): the sidecar of repo-server-patch.yaml untars each
// checkout into an emptyDir in memory, and a disk still writing back an
// earlier checkout would stall the untar in a way the sidecar never sees.
func memDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/dev/shm", "slipway-cmp-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
