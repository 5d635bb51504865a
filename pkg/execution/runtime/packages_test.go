package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/sbom"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// TestPackagesIndexedFromSBOMAttestation: the runtime reads a verified
// template's SBOM attestation (signed by the key the repository's policy
// trusts) and indexes its packages, so a package query finds the runs of
// that template; a template whose SBOM is signed by another key is not
// indexed, and the desired state says why. It records the builder its
// verified SLSA provenance names, and that the images without provenance
// have none; GET /v1/runs/{run}/packages serves both.
func TestPackagesIndexedFromSBOMAttestation(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	// A real SBOM (syft over a tree with two dpkg packages), attested.
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "var/lib/dpkg"), 0o755)
	os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), []byte("Package: openssl\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.0.17-1~deb12u2\n\nPackage: zlib1g\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1:1.2.13.dfsg-1\n\n"), 0o644)
	doc, err := sbom.Generate(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	g1 := f.promote(true, nil)
	tpl := g1.Pins[generation.WorkspaceTemplate]
	attestSBOM := func(image string, doc []byte) {
		t.Helper()
		d, err := name.NewDigest(image)
		if err != nil {
			t.Fatal(err)
		}
		st, err := attest.SBOM(d.Context().Name(), d.DigestStr(), attest.PredicateSPDX, doc)
		if err != nil {
			t.Fatal(err)
		}
		b, err := attest.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sign.Attest(ctx, d, f.sv, b, sign.WithOfflineNoTlog()); err != nil {
			t.Fatal(err)
		}
	}
	attestSBOM(tpl.Image, doc.SPDXJSON())
	// The runner and control-plane images' SBOMs are indexed too: a Go
	// module each (as a release's images of Slipway's own programs hold).
	cp, runner := g1.Pins[generation.ControlPlane], g1.Pins[generation.Runner]
	attestSBOM(cp.Image, goModuleSBOM(t, "github.com/spf13/cobra", "v1.10.1"))
	attestSBOM(runner.Image, goModuleSBOM(t, "golang.org/x/sys", "v0.49.0"))
	// The template has SLSA provenance, signed by the same key: its
	// builder is recorded. The runner and control-plane images have none:
	// that they have none is recorded.
	const builder = "https://ci.example/builders/template/v1"
	td, err := name.NewDigest(tpl.Image)
	if err != nil {
		t.Fatal(err)
	}
	prov, err := attest.Provenance(attest.TemplateBuild{Name: "agents", TemplateID: td.DigestStr(), SpecDigest: "sha256:" + strings.Repeat("b", 64),
		BaseRef: "registry.example/base:1", BaseDigest: "sha256:" + strings.Repeat("c", 64), BuilderID: builder, Epoch: 1700000000})
	if err != nil {
		t.Fatal(err)
	}
	pb, err := attest.Marshal(prov)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sign.Attest(ctx, td, f.sv, pb, sign.WithOfflineNoTlog()); err != nil {
		t.Fatal(err)
	}

	store := newStore(t)
	repo, err := gitops.Open(ctx, f.url)
	if err != nil {
		t.Fatal(err)
	}
	s := runtime.NewSyncer(repo, "main", runtime.Verify{Packages: store}, time.Hour)
	ds, err := s.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ds.Packages["workspaceTemplate "+tpl.Identity()]; !strings.HasPrefix(got, "2 packages from SBOM attestation sha256:") ||
		!strings.Contains(got, "; built by "+builder+" (sha256:") {
		t.Errorf("template %s: %q (%v)", tpl.Identity(), got, ds.Packages)
	}
	for _, k := range []generation.Kind{generation.ControlPlane, generation.Runner} {
		if got := ds.Packages[string(k)+" "+g1.Pins[k].Identity()]; !strings.HasPrefix(got, "1 packages from SBOM attestation sha256:") ||
			!strings.Contains(got, "; no SLSA provenance of ") {
			t.Errorf("%s %s: %q", k, g1.Pins[k].Identity(), got)
		}
	}
	bs, read, err := store.Builders(ctx, tpl.Identity())
	if err != nil || !read || len(bs) != 1 || bs[0].ID != builder || !strings.HasPrefix(bs[0].Attestation, "sha256:") {
		t.Fatalf("the template's builders in the store: %v read %v, %v", bs, read, err)
	}
	if !strings.Contains(ds.Summary(), "2 packages") {
		t.Errorf("summary %q", ds.Summary())
	}

	t0 := time.Now()
	if err := store.Create(ctx, &runmanifest.Manifest{RunID: "r-1", AllocationAttempt: 1, SandboxID: "sb-1", WorkspaceTemplateID: tpl.Identity(),
		Generation: g1.ID, Pool: "agents", Lifecycle: runmanifest.Lifecycle{RequestReceived: t0, ClaimCreated: t0}}); err != nil {
		t.Fatal(err)
	}
	// r-2 is made of g1's runner and control plane only (another template).
	if err := store.Create(ctx, &runmanifest.Manifest{RunID: "r-2", AllocationAttempt: 1, SandboxID: "sb-2", WorkspaceTemplateID: "sha256:" + strings.Repeat("0", 64),
		RunnerImageDigest: runner.Identity(), ControlPlaneDigest: cp.Identity(),
		Generation: g1.ID, Pool: "agents", Lifecycle: runmanifest.Lifecycle{RequestReceived: t0, ClaimCreated: t0}}); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string][]string{"openssl@3.0.17-1~deb12u2": {"r-1"}, "zlib1g@1:1.2.13.dfsg-1": {"r-1"}, "openssl@3.0.7": nil,
		"github.com/spf13/cobra@v1.10.1": {"r-2"}, "golang.org/x/sys@v0.49.0": {"r-2"}, "golang.org/x/sys@v0.48.0": nil} {
		ids, err := store.Query(ctx, runmanifest.Query{Package: q})
		if err != nil || !slices.Equal(ids, want) {
			t.Errorf("runs with %s: %v %v, want %v", q, ids, err, want)
		}
	}

	// GET /v1/runs/{run}/packages reads the index back for each artifact
	// a run's manifest names; an artifact whose SBOM was never indexed is
	// said to be so, not shown as empty.
	be := newLocalBackend(t)
	d := &runtime.Desired{Revision: "r1", Pools: map[string]*runtime.PoolDesired{}}
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir())), store, time.Minute)
	srv, err := runtime.NewServer(rt, nil, be, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c, err := runtimeapi.NewClient(hs.URL, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	show := func(rp *runtimeapi.RunPackages) string {
		var b strings.Builder
		b.WriteString(rp.Run)
		for _, a := range rp.Artifacts {
			fmt.Fprintf(&b, "; %s %s recorded=%v", a.Kind, a.ID, a.Recorded)
			for _, p := range a.Packages {
				b.WriteString(" " + p.String())
			}
			fmt.Fprintf(&b, " provenance=%v", a.ProvenanceRead)
			for _, x := range a.Builders {
				b.WriteString(" built-by " + x.ID + " " + x.Attestation)
			}
		}
		return b.String()
	}
	for run, want := range map[string]string{
		"r-1": "r-1; workspace template " + tpl.Identity() + " recorded=true openssl@3.0.17-1~deb12u2 zlib1g@1:1.2.13.dfsg-1 provenance=true built-by " +
			builder + " " + bs[0].Attestation,
		"r-2": "r-2; workspace template sha256:" + strings.Repeat("0", 64) + " recorded=false provenance=false; runner image " + runner.Identity() +
			" recorded=true golang.org/x/sys@v0.49.0 provenance=true; control plane image " + cp.Identity() + " recorded=true github.com/spf13/cobra@v1.10.1 provenance=true",
	} {
		got, err := c.RunPackages(ctx, run)
		if err != nil {
			t.Fatalf("GET /v1/runs/%s/packages: %v", run, err)
		}
		if show(got) != want {
			t.Errorf("GET /v1/runs/%s/packages:\n got %s\nwant %s", run, show(got), want)
		}
	}
	var ae *runtimeapi.APIError
	if _, err := c.RunPackages(ctx, "r-none"); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Errorf("the packages of an unknown run: %v, want 404", err)
	}
}

// goModuleSBOM is an SPDX SBOM of one Go module, as syft's Go binary
// cataloger names it in a release's SBOM.
func goModuleSBOM(t *testing.T, module, version string) []byte {
	t.Helper()
	return []byte(`{"spdxVersion":"SPDX-2.3","dataLicense":"CC0-1.0","SPDXID":"SPDXRef-DOCUMENT","name":"t","documentNamespace":"https://slipway.dev/t",` +
		`"creationInfo":{"created":"2026-01-01T00:00:00Z","creators":["Tool: test"]},` +
		`"packages":[{"name":"` + module + `","SPDXID":"SPDXRef-Package-1","versionInfo":"` + version + `","downloadLocation":"NOASSERTION",` +
		`"externalRefs":[{"referenceCategory":"PACKAGE-MANAGER","referenceType":"purl","referenceLocator":"pkg:golang/` + module + `@` + version + `"}]}]}`)
}
