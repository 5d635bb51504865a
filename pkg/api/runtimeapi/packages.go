package runtimeapi

import (
	"context"
	"net/http"
	"net/url"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// RunPackages answers GET /v1/runs/{run}/packages: the packages of each
// artifact the run is made of, as the runtime's package index recorded
// them from the artifact's verified SBOM attestation, and its builders,
// from its verified SLSA provenance.
type RunPackages struct {
	Run       string             `json:"run"`
	Artifacts []ArtifactPackages `json:"artifacts"`
}

// ArtifactPackages is one artifact of a run and its recorded packages.
type ArtifactPackages struct {
	// Kind is what the artifact is to the run: ArtifactTemplate,
	// ArtifactRunnerImage or ArtifactControlPlaneImage.
	Kind string `json:"kind"`
	// ID is the artifact's identity in the manifest (a template id or an
	// image digest).
	ID string `json:"id"`
	// Recorded is false when the index holds nothing for it (its SBOM was
	// never indexed), true for a recorded set, even an empty one.
	Recorded bool `json:"recorded"`
	// Packages are sorted by name then version.
	Packages []runmanifest.Package `json:"packages"`
	// ProvenanceRead is false when the runtime never read the artifact's
	// provenance (nor recorded that it has none); true with no Builders
	// when it has no SLSA provenance verified with a key the runtime's
	// verification policy trusts for it.
	ProvenanceRead bool `json:"provenanceRead"`
	// Builders are those its verified SLSA provenance names
	// (runDetails.builder.id, with the attestation's digest), sorted.
	Builders []runmanifest.Builder `json:"builders"`
}

// The artifacts of a run whose packages the index records.
const (
	ArtifactTemplate          = "workspace template"
	ArtifactRunnerImage       = "runner image"
	ArtifactControlPlaneImage = "control plane image"
)

// RunPackages returns the packages of run runID's artifacts (GET
// /v1/runs/{run}/packages).
func (c *Client) RunPackages(ctx context.Context, runID string) (*RunPackages, error) {
	var out RunPackages
	if err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID)+"/packages", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
