package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
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
// indexed, and the desired state says why.
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
	d, err := name.NewDigest(tpl.Image)
	if err != nil {
		t.Fatal(err)
	}
	st, err := attest.SBOM(d.Context().Name(), d.DigestStr(), attest.PredicateSPDX, doc.SPDXJSON())
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
	if got := ds.Packages[tpl.Identity()]; !strings.HasPrefix(got, "2 packages from SBOM attestation sha256:") {
		t.Errorf("template %s: %q", tpl.Identity(), got)
	}
	if !strings.Contains(ds.Summary(), "2 packages") {
		t.Errorf("summary %q", ds.Summary())
	}

	t0 := time.Now()
	if err := store.Create(ctx, &runmanifest.Manifest{RunID: "r-1", AllocationAttempt: 1, SandboxID: "sb-1", WorkspaceTemplateID: tpl.Identity(),
		Generation: g1.ID, Pool: "agents", Lifecycle: runmanifest.Lifecycle{RequestReceived: t0, ClaimCreated: t0}}); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string][]string{"openssl@3.0.17-1~deb12u2": {"r-1"}, "zlib1g@1:1.2.13.dfsg-1": {"r-1"}, "openssl@3.0.7": nil} {
		ids, err := store.Query(ctx, runmanifest.Query{Package: q})
		if err != nil || !slices.Equal(ids, want) {
			t.Errorf("runs with %s: %v %v, want %v", q, ids, err, want)
		}
	}
}
