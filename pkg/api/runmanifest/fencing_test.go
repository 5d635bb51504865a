package runmanifest

import (
	"strings"
	"testing"
	"time"
)

func TestFencingOf(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	revoked := now.Add(-time.Minute)
	m := &Manifest{RunID: "r-1", Status: StatusRunning, AllocationAttempt: 2, SandboxID: "sb-2",
		Fences: []Fence{{AllocationAttempt: 1, SandboxID: "sb-1", FencedAt: now.Add(-2 * time.Minute), Reason: "missed 3 heartbeats"}},
		CredentialIssuances: []Receipt{
			{SHA256Fingerprint: "a", IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(-time.Second)},
			{SHA256Fingerprint: "b", IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour), RevokedAt: &revoked},
			{SHA256Fingerprint: "c", IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour)},
			{SHA256Fingerprint: "d", IssuedAt: now, ExpiresAt: now.Add(time.Hour)},
		}}
	v := FencingOf(m, now)
	var got []string
	for _, c := range v.Credentials {
		got = append(got, c.Fingerprint+"="+c.Standing)
	}
	if want := "a=expired b=revoked c=NOT REVOKED d=current"; strings.Join(got, " ") != want {
		t.Errorf("standings %q, want %q", strings.Join(got, " "), want)
	}
	if !strings.HasPrefix(v.Verdict, "1 credential(s) not revoked") {
		t.Errorf("verdict %q: the live non-current credential is what to act on", v.Verdict)
	}
	m.CredentialIssuances = m.CredentialIssuances[3:]
	if v := FencingOf(m, now); !strings.HasPrefix(v.Verdict, "no: 1 earlier attempt(s) fenced") {
		t.Errorf("verdict %q", v.Verdict)
	}
	m.Status, m.Fences = StatusCompleted, nil
	v = FencingOf(m, now)
	if v.Credentials[0].Standing != StandingNotRevoked || !strings.HasSuffix(v.Verdict, "the run is completed: its claim is ended") {
		t.Errorf("ended run: %+v", v)
	}
	if v.Fences == nil {
		t.Error("Fences is nil: JSON would say null, not []")
	}
}
