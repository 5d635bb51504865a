package selfrelease

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/slipway-dev/slipway/pkg/api/sbomdoc"
	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

// checkPublish publishes r (built, not pushed) to another registry with
// Publish: the same index digests, tagged with the version, passing the
// release policy for that registry; and each image's SBOM attestation,
// read as the runtime's package index reads it, names Slipway's own Go
// dependencies at go.mod's versions (github.com/spf13/cobra in slipway,
// golang.org/x/sys in slipway-runner), so a run pinning these images is
// found by them.
func checkPublish(t *testing.T, ctx context.Context, r *Result, sv signature.SignerVerifier, pub []byte) {
	t.Helper()
	repo := newRegistry(t, nil) + "/published"
	got, err := Publish(ctx, r.Out, PublishOptions{Repository: repo, Signer: sv})
	if err != nil {
		t.Fatal(err)
	}
	if got.Files == nil || got.Files.Tag == "" || got.Files.ArtifactType != FilesArtifactType {
		t.Errorf("published files: %+v", got.Files)
	}
	if len(got.Images) != len(r.Images) || got.Version != r.Version {
		t.Fatalf("published %d images of %s, want %d of %s", len(got.Images), got.Version, len(r.Images), r.Version)
	}
	p, err := policy.Parse(Policy(pub, repo, Programs))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"slipway": "github.com/spf13/cobra", "slipway-runner": "golang.org/x/sys"}
	kinds := map[string]string{"slipway": "control-plane", "slipway-runner": "runner"}
	for i, im := range got.Images {
		if im.Program != r.Images[i].Program || im.Digest != r.Images[i].Digest || im.Ref != repo+"/"+im.Program+"@"+im.Digest {
			t.Errorf("published %+v, built %+v", im, r.Images[i])
		}
		tag, _ := name.NewTag(im.Tag)
		if desc, err := remote.Head(tag); err != nil || desc.Digest.String() != im.Digest {
			t.Errorf("tag %s: %v %v", im.Tag, desc, err)
		}
		if res, err := p.Verify(ctx, policy.Target{Ref: im.Ref}); err != nil || !res.Verified {
			t.Errorf("verify %s: %v %+v", im.Ref, err, res)
		}
		mod, ok := want[im.Program]
		if !ok {
			continue
		}
		atts, err := p.Attestations(ctx, policy.Target{Ref: im.Ref, Kind: kinds[im.Program]}, []string{attest.PredicateSPDX})
		if err != nil || len(atts) != 1 {
			t.Fatalf("SBOM attestations of %s: %d, %v", im.Ref, len(atts), err)
		}
		doc, err := protojson.Marshal(atts[0].Statement.GetPredicate())
		if err != nil {
			t.Fatal(err)
		}
		pkgs, err := sbomdoc.Decode(doc)
		if err != nil {
			t.Fatal(err)
		}
		v := goModVersion(t, mod)
		if !slices.ContainsFunc(pkgs, func(p sbomdoc.Package) bool { return p.Name == mod && p.Version == v }) {
			t.Errorf("the SBOM attestation of %s (%d packages) has no %s@%s", im.Program, len(pkgs), mod, v)
		}
	}
	// A folder that is not a release is refused, naming it.
	if _, err := Publish(ctx, t.TempDir(), PublishOptions{Repository: repo, Signer: sv}); err == nil || !strings.Contains(err.Error(), "not a release") {
		t.Errorf("publish of an empty folder: %v", err)
	}
}

// goModVersion is the version this module's go.mod requires of mod.
func goModVersion(t *testing.T, mod string) string {
	f, err := os.Open(filepath.Join(moduleRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fs) >= 2 && fs[0] == mod {
			return fs[1]
		}
	}
	t.Fatalf("go.mod requires no %s", mod)
	return ""
}
