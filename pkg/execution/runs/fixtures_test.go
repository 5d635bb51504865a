package runs

import (
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// fullManifest sets every field, so that a round trip shows each one (the
// fixture of runmanifest's tests, for the stores').
func fullManifest(runID string) *runmanifest.Manifest {
	t0 := time.Date(2026, 3, 14, 9, 26, 53, 589793238, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	exit := 0
	return &runmanifest.Manifest{
		RunID:                      runID,
		SessionID:                  "s-7f3a",
		AllocationAttempt:          2,
		SandboxID:                  "sb-agents-0042",
		Cluster:                    "local",
		Namespace:                  "tenant-acme",
		NodeID:                     "node-3",
		NodeImageID:                "ami-0abc1234def567890",
		RuntimeClass:               "bwrap",
		ControlPlaneDigest:         "sha256:" + strings.Repeat("1", 64),
		RunnerImageDigest:          "sha256:" + strings.Repeat("2", 64),
		RunnerBinarySHA256:         "sha256:" + strings.Repeat("7", 64),
		WorkspaceTemplateID:        "sha256:" + strings.Repeat("3", 64),
		WorkspaceCheckpointID:      "sha256:" + strings.Repeat("4", 64),
		PolicyRevision:             "9c1e2f0a7b",
		VerificationPolicyRevision: "0f5e7c2d9a1b3c4d5e6f708192a3b4c5d6e7f809",
		SecretVersion:              "github-app/7",
		ModelID:                    "model-2026-01",
		PromptBundleID:             "sha256:" + strings.Repeat("5", 64),
		CredentialIssuances: []runmanifest.Receipt{{
			Issuer:            "local-broker",
			SecretVersion:     "github-app/7",
			SHA256Fingerprint: "sha256:" + strings.Repeat("ab", 32),
			IssuedAt:          at(1500),
			ExpiresAt:         at(1500).Add(time.Hour),
		}},
		Generation:     "g-" + strings.Repeat("6", 64),
		Pool:           "agents",
		Tenant:         "acme",
		Warm:           true,
		ConfigRevision: "0f5e7c2d9a1b3c4d5e6f708192a3b4c5d6e7f809",
		Status:         runmanifest.StatusCompleted,
		ExitCode:       &exit,
		Lifecycle: runmanifest.Lifecycle{
			RequestReceived:   at(0),
			AdmissionAccepted: at(2),
			ClaimCreated:      at(3),
			SandboxAssigned:   at(5),
			Ready:             at(40),
			RunnerAwakened:    at(41),
			FirstOutput:       at(900),
			ResultPublished:   at(60000),
			ResourcesReleased: at(60250),
		},
	}
}
