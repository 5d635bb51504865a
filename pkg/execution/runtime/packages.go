package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/api/sbomdoc"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

// PackageIndex records the packages of the artifacts a run is made of (its
// workspace template, runner and control-plane images), by the artifact's
// identity, so runs can be found by the packages those contain, and who
// built each (the builders its verified SLSA provenance names).
// runs.Store is one.
type PackageIndex interface {
	RecordPackages(ctx context.Context, templateID string, pkgs []runmanifest.Package) (runmanifest.Change, error)
	RecordBuilders(ctx context.Context, artifactID string, bs []runmanifest.Builder) (runmanifest.Change, error)
}

// indexedKinds are the pins whose SBOM attestations are indexed: what a
// run is made of, and what a run manifest names by digest.
var indexedKinds = []generation.Kind{generation.ControlPlane, generation.Runner, generation.WorkspaceTemplate}

// packages indexes each artifact once: its SBOM attestation, verified with
// a key the repository's policy trusts for that kind of artifact, is
// decoded and its packages recorded, and the builders its provenance
// names (readBuilders). The outcome (or the reason there is none) is kept,
// except for errors worth trying again (a registry that did not answer).
type packages struct {
	index PackageIndex
	mu    sync.Mutex
	done  map[string]string // policy digest + template id → outcome
}

// indexPin indexes g's pin of kind k (an image) under pol, once, and says
// what the index holds for it ("" when g pins no image of that kind).
func (p *packages) indexPin(ctx context.Context, pol *policy.Policy, g *generation.Generation, k generation.Kind, opts []policy.Option) string {
	pin, ok := g.Pins[k]
	if !ok || pin.Form() != generation.FormImage {
		return ""
	}
	id := pin.Identity()
	key := pol.Digest + " " + id
	p.mu.Lock()
	out, ok := p.done[key]
	p.mu.Unlock()
	if ok {
		return out
	}
	out, err := p.read(ctx, pol, pin.Image, k, id, opts)
	if err != nil {
		return "not indexed, will retry: " + err.Error()
	}
	built, err := p.readBuilders(ctx, pol, pin.Image, k, id, opts)
	if err != nil {
		return out + "; provenance not read, will retry: " + err.Error()
	}
	out += "; " + built
	p.mu.Lock()
	p.done[key] = out
	p.mu.Unlock()
	return out
}

func (p *packages) read(ctx context.Context, pol *policy.Policy, image string, k generation.Kind, id string, opts []policy.Option) (string, error) {
	atts, err := pol.Attestations(ctx, policy.Target{Ref: image, Kind: k.ArtifactKind()},
		[]string{attest.PredicateSPDX, attest.PredicateCycloneDX}, opts...)
	if err != nil {
		return "", err
	}
	if len(atts) == 0 {
		return fmt.Sprintf("no SBOM attestation of %s by a key policy %s trusts: packages not indexed", id, pol.Metadata.Name), nil
	}
	a := atts[0]
	doc, err := protojson.Marshal(a.Statement.GetPredicate())
	if err != nil {
		return "", err
	}
	found, err := sbomdoc.Decode(doc)
	if errors.Is(err, sbomdoc.ErrDecode) {
		return fmt.Sprintf("SBOM attestation %s of %s: %v", a.Digest, id, err), nil
	}
	if err != nil {
		return "", err
	}
	// Entries without a version, or that the index cannot hold (a
	// version holding '@', control characters), are left out and counted.
	pkgs := make([]runmanifest.Package, 0, len(found))
	skipped := 0
	for _, f := range found {
		pk, err := runmanifest.ParsePackage(f.Name + "@" + f.Version)
		if err != nil || pk.Name != f.Name {
			skipped++
			continue
		}
		pkgs = append(pkgs, pk)
	}
	if _, err := p.index.RecordPackages(ctx, id, pkgs); err != nil {
		if errors.Is(err, runs.ErrInvalid) {
			return fmt.Sprintf("SBOM attestation %s of %s: %v", a.Digest, id, err), nil
		}
		return "", err
	}
	out := fmt.Sprintf("%d packages from SBOM attestation %s", len(pkgs), a.Digest)
	if skipped > 0 {
		out += fmt.Sprintf(" (%d entries without a usable name@version left out)", skipped)
	}
	return out, nil
}

// runPackages serves GET /v1/runs/{run}/packages: the recorded packages
// and builders of each artifact the run's manifest names (its workspace
// template, its runner and control-plane images), read back from the run
// store.
func (s *Server) runPackages(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	m, err := s.rt.store.Get(ctx, r.PathValue("run"))
	if errors.Is(err, runs.ErrNotFound) {
		s.writeError(w, r, http.StatusNotFound, err)
		return
	}
	if err != nil {
		s.writeError(w, r, http.StatusInternalServerError, err)
		return
	}
	out := runtimeapi.RunPackages{Run: m.RunID, Artifacts: []runtimeapi.ArtifactPackages{}}
	for _, a := range []struct{ kind, id string }{
		{runtimeapi.ArtifactTemplate, m.WorkspaceTemplateID},
		{runtimeapi.ArtifactRunnerImage, m.RunnerImageDigest},
		{runtimeapi.ArtifactControlPlaneImage, m.ControlPlaneDigest},
	} {
		if a.id == "" {
			continue
		}
		pkgs, recorded, err := s.rt.store.Packages(ctx, a.id)
		if err != nil {
			s.writeError(w, r, http.StatusInternalServerError, err)
			return
		}
		if pkgs == nil {
			pkgs = []runmanifest.Package{}
		}
		bs, read, err := s.rt.store.Builders(ctx, a.id)
		if err != nil {
			s.writeError(w, r, http.StatusInternalServerError, err)
			return
		}
		if bs == nil {
			bs = []runmanifest.Builder{}
		}
		out.Artifacts = append(out.Artifacts, runtimeapi.ArtifactPackages{Kind: a.kind, ID: a.id, Recorded: recorded, Packages: pkgs,
			ProvenanceRead: read, Builders: bs})
	}
	writeJSON(w, http.StatusOK, out)
}
