package runtimeapi

import (
	"context"
	"net/http"
	"net/url"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// RunPackages answers GET /v1/runs/{run}/packages: the packages of each
// artifact the run is made of, as the runtime's package index recorded
// them from the artifact's verified SBOM attestation.
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
