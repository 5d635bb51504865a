package incidents_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/control/incidents"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
)

// Run manifests on a real store: a credential that expired while its run
// was open is an open incident with an owner; one that expired after its
// run ended (revoked at release) is none; a renewed one is shown as
// renewed; a request key with two runs is flagged doubled. Kinds no source
// covers are marked not read, and a source's failure fails the report.
func TestFromRuns(t *testing.T) {
	ctx := context.Background()
	s, err := runs.OpenSQLite(ctx, filepath.Join(t.TempDir(), runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	fp := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	rc := func(c string, issued time.Time, life time.Duration) runmanifest.Receipt {
		return runmanifest.Receipt{Issuer: "slipway-local-broker", SecretVersion: "vault://kv/agents/api-key#4", SHA256Fingerprint: fp(c),
			IssuedAt: issued, ExpiresAt: issued.Add(life)}
	}
	create := func(id, key string, status runmanifest.Status, released time.Time, rcs ...runmanifest.Receipt) {
		t.Helper()
		m := &runmanifest.Manifest{RunID: id, AllocationAttempt: 1, SandboxID: "sb-" + id, Pool: "agents", Generation: "g-1", RequestKey: key,
			SecretVersion: "vault://kv/agents/api-key#4", CredentialIssuances: rcs,
			Lifecycle: runmanifest.Lifecycle{RequestReceived: t0, ClaimCreated: t0}}
		if err := s.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		if status != runmanifest.StatusGranted {
			if err := s.Update(ctx, id, func(m *runmanifest.Manifest) error {
				m.Status, m.Lifecycle.ResourcesReleased = status, released
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	revoked := func(r runmanifest.Receipt, at time.Time) runmanifest.Receipt { r.RevokedAt = &at; return r }
	renewed := rc("c", t0.Add(2*time.Second), 3*time.Second)
	renewed.Renews = fp("b")
	create("r-open", "j-1.a1", runmanifest.StatusGranted, time.Time{}, rc("a", t0, 2*time.Second))
	create("r-released", "j-2.a1", runmanifest.StatusCompleted, t0.Add(time.Second), revoked(rc("d", t0, 2*time.Second), t0.Add(time.Second)))
	create("r-renewed", "j-3.a1", runmanifest.StatusCompleted, t0.Add(4*time.Second), revoked(rc("b", t0, 3*time.Second), t0.Add(2*time.Second)),
		revoked(renewed, t0.Add(4*time.Second)))
	create("r-twice", "j-3.a1", runmanifest.StatusFailed, t0.Add(time.Second))

	rep, err := incidents.Collect(ctx, incidents.FromRuns(s, func() time.Time { return t0.Add(time.Minute) }))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]incidents.Incident{}
	for _, k := range rep.Kinds {
		if k.Sourced != (incidents.Kind(k.Kind) == incidents.CredentialExpiry || incidents.Kind(k.Kind) == incidents.WorkerCrash) {
			t.Errorf("kind %s sourced %v", k.Kind, k.Sourced)
		}
		for _, i := range k.Incidents {
			got[string(i.Kind)+" "+i.Run] = i
		}
	}
	if len(got) != 3 || rep.Open != 2 {
		t.Fatalf("incidents %v, open %d", got, rep.Open)
	}
	if i := got["credential_expires r-open"]; i.Reason != "expired" || i.Terminal || i.Owner == "" || !strings.Contains(i.Detail, fp("a")) {
		t.Errorf("expired while open: %+v", i)
	}
	if i := got["credential_expires r-renewed"]; i.Reason != "renewed" || !i.Terminal || len(i.Receipts) != 2 || !strings.Contains(i.Receipts[1], "renews "+fp("b")) {
		t.Errorf("renewed: %+v", i)
	}
	if i, ok := got["worker_crashes_after_create r-twice"]; !ok || i.State != "doubled" || i.Terminal || !strings.Contains(i.Detail, "2 runs for request key j-3.a1") {
		t.Errorf("doubled: %+v", got)
	}

	failing := incidents.SourceFunc(func(context.Context) ([]incidents.Incident, error) { return nil, context.DeadlineExceeded })
	if _, err := incidents.Collect(ctx, incidents.FromRuns(s, nil), failing); err == nil {
		t.Fatal("a failing source did not fail the report")
	}
}
