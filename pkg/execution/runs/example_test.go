package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "runs-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := runs.OpenSQLite(ctx, filepath.Join(dir, "runs.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	template := "sha256:" + strings.Repeat("3", 64)
	// at build time: the packages of the template's SBOM
	if _, err := s.RecordPackages(ctx, template, []runmanifest.Package{{Name: "openssl", Version: "3.0.7"}, {Name: "zlib", Version: "1.3"}}); err != nil {
		log.Fatal(err)
	}

	// the runtime grants a claim ...
	t0 := time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)
	err = s.Create(ctx, &runmanifest.Manifest{
		RunID: "r-123", SessionID: "s-1", AllocationAttempt: 1, SandboxID: "sb-7",
		WorkspaceTemplateID: template, RunnerImageDigest: "sha256:" + strings.Repeat("2", 64),
		Generation: "g-" + strings.Repeat("6", 64), Pool: "agents", Warm: true,
		Lifecycle: runmanifest.Lifecycle{RequestReceived: t0, ClaimCreated: t0.Add(3 * time.Millisecond)},
	})
	if err != nil {
		log.Fatal(err)
	}
	// ... and finalises the manifest when the claim ends
	err = s.Update(ctx, "r-123", func(m *runmanifest.Manifest) error {
		exit := 0
		m.Status, m.ExitCode = runmanifest.StatusCompleted, &exit
		m.Lifecycle.ResourcesReleased = t0.Add(61 * time.Second)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	// which runs used a template containing openssl 3.0.7?
	ids, err := s.Query(ctx, runmanifest.Query{Package: "openssl@3.0.7"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ids)

	// what did r-123 use?
	m, err := s.Get(ctx, "r-123")
	if err != nil {
		log.Fatal(err)
	}
	out, _ := json.Marshal(struct {
		Status    runmanifest.Status    `json:"status"`
		Template  string                `json:"workspace_template_id"`
		Lifecycle runmanifest.Lifecycle `json:"lifecycle"`
	}{m.Status, m.WorkspaceTemplateID[:15] + "…", m.Lifecycle})
	fmt.Println(string(out))

	// a final manifest is a record
	err = s.Update(ctx, "r-123", func(m *runmanifest.Manifest) error { m.Status = runmanifest.StatusRunning; return nil })
	fmt.Println(err)
	// Output:
	// [r-123]
	// {"status":"completed","workspace_template_id":"sha256:33333333…","lifecycle":{"request_received":"2026-03-14T09:26:53Z","claim_created":"2026-03-14T09:26:53.003Z","resources_released":"2026-03-14T09:27:54Z"}}
	// runs: run is final: r-123 is completed
}
