//go:build linux

package deploy_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/deploy/internal/harness"
)

// The install in a cluster: overlays/single applied, as kubectl apply -k
// applies it, to a real node that routes Services (kubetest.WithServices),
// with Slipway's images from a snapshot release of this tree pushed to the
// node's registry and pinned by digest, its database the host's
// PostgreSQL and its config repository a git server on the node's bridge.
// Both planes' pods become Ready (the kubelet's probes of /readyz: the
// control plane reaches its database and config repository, the runtime
// its cluster, config repository and every verb of its Role), and their
// /readyz, read through the API server's service proxy, says so.
func TestInClusterSingle(t *testing.T) {
	e := harness.Start(t, false)
	ctx := context.Background()
	// The runtime verifies what it runs against the repository's policy:
	// the release's own (its key, its builder, its images).
	e.Git.Seed(t, "config.git", "main", map[string]string{"policies/verification.yaml": string(e.Policy)})
	e.InstallPlanes(t, "single", 1, map[string]string{"repo": e.Git.URLAlso("config.git"), "branch": "main", "pool": "default"})
	for _, svc := range []string{"slipway-control", "slipway-runtime"} {
		b, err := e.CS.CoreV1().Services("slipway-system").ProxyGet("http", svc, "http", "/readyz", nil).DoRaw(ctx)
		if err != nil {
			t.Fatalf("GET /readyz of Service %s through the API server: %v: %s", svc, err, b)
		}
		var rd struct{ Ready bool }
		if err := json.Unmarshal(b, &rd); err != nil || !rd.Ready {
			t.Fatalf("Service %s's /readyz: %s (%v)", svc, b, err)
		}
	}
	t.Logf("%s", strings.Join(e.Timings, ", "))
}
