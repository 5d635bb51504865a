package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/console"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
)

// A run's lineage draws the packages the runtime's index recorded for its
// artifacts (read back through GET /v1/runs/{run}/packages): the first
// few of each, each linking the runs that share it, then their count
// linking the full list; an artifact whose SBOM was never indexed says
// so. Above an artifact's packages comes who built it, from its verified
// SLSA provenance, or "no provenance" when the runtime read none, or that
// the runtime never read it. The package's page lists the runs of every artifact holding it, as
// the runtime's package query answers.
func TestRunLineageDrawsPackages(t *testing.T) {
	ctx := context.Background()
	rs, err := runs.OpenSQLite(ctx, filepath.Join(t.TempDir(), runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	tplA, tplB := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	runner := "sha256:" + strings.Repeat("c", 64)
	var many []runmanifest.Package
	for i := range 7 {
		many = append(many, runmanifest.Package{Name: fmt.Sprintf("lib%d", i), Version: "1.0"})
	}
	many = append(many, runmanifest.Package{Name: "openssl", Version: "3.0.17-1~deb12u2"})
	if _, err := rs.RecordPackages(ctx, tplA, many); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.RecordPackages(ctx, tplB, []runmanifest.Package{{Name: "openssl", Version: "3.0.17-1~deb12u2"}}); err != nil {
		t.Fatal(err)
	}
	// who built each artifact, as the runtime records it from verified SLSA
	// provenance: tplA by one builder, the runner image by none (read: it
	// has no provenance); tplB's provenance was never read
	const builder = "https://ci.example/builders/template/v1"
	if _, err := rs.RecordBuilders(ctx, tplA, []runmanifest.Builder{{ID: builder, Attestation: "sha256:" + strings.Repeat("e", 64)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.RecordBuilders(ctx, runner, nil); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for id, tpl := range map[string]string{"run-a": tplA, "run-b": tplB, "run-c": "sha256:" + strings.Repeat("d", 64)} {
		m := &runmanifest.Manifest{RunID: id, AllocationAttempt: 1, SandboxID: "sb-" + id, WorkspaceTemplateID: tpl, RunnerImageDigest: runner,
			Generation: "g-0123456789ab", Pool: "agents", Tenant: "t0", Lifecycle: runmanifest.Lifecycle{RequestReceived: t0, ClaimCreated: t0}}
		if err := rs.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	be, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	d := &runtime.Desired{Revision: "r1", Pools: map[string]*runtime.PoolDesired{}}
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir())), rs, time.Minute)
	rsrv, err := runtime.NewServer(rt, nil, be, runtimeToken)
	if err != nil {
		t.Fatal(err)
	}
	rhs := httptest.NewServer(rsrv)
	t.Cleanup(rhs.Close)
	cp, ops := startControl(t)
	c, err := console.New(cp, console.WithRuntime("a", rhs.URL, runtimeToken))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(c)
	t.Cleanup(hs.Close)

	code, page := get(t, hs.URL+"/runs/run-a", ops)
	if code != http.StatusOK {
		t.Fatalf("GET /runs/run-a: %d\n%s", code, page)
	}
	for _, want := range []string{
		`<a href="/runs?package=lib0%401.0" aria-label="package of the workspace template: lib0@1.0">`,
		`<a href="/runs?package=lib4%401.0"`,
		`8 in all: the full list`,
		`<a href="/runs/run-a/packages" aria-label="workspace template packages: 8 in all: the full list">`,
		`<g class="builder"><rect x="950" y="98" width="330" height="34" rx="4" fill="#fff" stroke="#1d2a3a"/><text x="956" y="111">workspace template builder</text><text x="956" y="126">` + builder + `</text></g>`,
		`>runner image builder</text><text x="956" y="434">no provenance</text>`,
		`>runner image packages</text><text x="956" y="478">not indexed (no verified SBOM)</text>`,
		`id="packages-link"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the run page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "lib5@1.0") || strings.Contains(page, "openssl@") {
		t.Errorf("the lineage draws more than %d packages of the template:\n%s", console.LineagePackages, page)
	}

	code, page = get(t, hs.URL+"/runs/run-a/packages", ops)
	if code != http.StatusOK || !strings.Contains(page, `<a href="/runs?package=openssl%403.0.17-1~deb12u2">openssl@3.0.17-1~deb12u2</a>`) ||
		!strings.Contains(page, "8 packages") || !strings.Contains(page, "Not indexed") ||
		!strings.Contains(page, "Built by <code>"+builder+"</code> (SLSA provenance attestation sha256:"+strings.Repeat("e", 64)+")") || !strings.Contains(page, "Builder: no provenance") {
		t.Errorf("GET /runs/run-a/packages: %d\n%s", code, page)
	}
	code, page = get(t, hs.URL+"/runs?package=openssl%403.0.17-1~deb12u2", ops)
	if code != http.StatusOK || !strings.Contains(page, `<a href="/runs/run-a">`) || !strings.Contains(page, `<a href="/runs/run-b">`) || strings.Contains(page, "run-c") {
		t.Errorf("runs with openssl: %d\n%s", code, page)
	}
	if code, page := get(t, hs.URL+"/runs/run-b", ops); code != http.StatusOK ||
		!strings.Contains(page, `>workspace template builder</text><text x="956" y="`) || !strings.Contains(page, `>provenance not read by the runtime</text>`) {
		t.Errorf("run-b's template's provenance was never read: %d\n%s", code, page)
	}
	if code, page := get(t, hs.URL+"/runs?package=openssl", ops); code != http.StatusBadRequest || !strings.Contains(page, "not name@version") {
		t.Errorf("a package without a version: %d\n%s", code, page)
	}
}
