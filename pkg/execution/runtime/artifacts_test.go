package runtime_test

import (
	"context"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// A template fetched once under a context that has since ended (a claim's,
// on a cluster, which reads nothing of the image) is still whole for the
// next caller: its config reads, as a rollout's template-tests proof reads
// it. Before, the kept image fetched its config with the ended context
// ("context canceled"), found by TestInClusterUpgrade's rollout to a
// generation that keeps the template.
func TestTemplateOutlivesFirstCallersContext(t *testing.T) {
	host := registrytest.NewInProcess(t)
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := registrytest.Push(t, host+"/templates/t:v1", img)
	g, err := generation.New("agents", nil, map[generation.Kind]generation.Pin{
		generation.WorkspaceTemplate: {Image: tmpl.String()},
	}, &generation.Compatibility{ControlPlaneProtocol: generation.Range{Min: 1, Max: 1}, RunnerProtocol: generation.Range{Min: 1, Max: 1}})
	if err != nil {
		t.Fatal(err)
	}
	art := runtime.NewRegistryArtifacts(t.TempDir())
	first, cancel := context.WithCancel(context.Background())
	if _, _, err := art.Template(first, g); err != nil {
		t.Fatalf("Template: %v", err)
	}
	cancel()
	got, id, err := art.Template(context.Background(), g)
	if err != nil {
		t.Fatalf("Template after the first caller's context ended: %v", err)
	}
	if id != tmpl.DigestStr() {
		t.Errorf("Template's digest = %s, want %s", id, tmpl.DigestStr())
	}
	cf, err := got.ConfigFile()
	if err != nil {
		t.Fatalf("the kept template's config after the first caller's context ended: %v", err)
	}
	want, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.RootFS.DiffIDs[0] != want.RootFS.DiffIDs[0] {
		t.Errorf("the kept template's config names layer %s, the pushed image's %s", cf.RootFS.DiffIDs[0], want.RootFS.DiffIDs[0])
	}
}
