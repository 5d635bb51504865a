package runmanifest

import (
	"fmt"
	"time"
)

// Fencing is what a run's manifest says of its fencing: the attempt that
// owns the run, the attempts fenced off, and the standing of each
// credential issued to it. It answers "can an earlier attempt still route
// or mint credentials?" from the record alone.
type Fencing struct {
	RunID             string               `json:"run_id"`
	Status            Status               `json:"status"`
	AllocationAttempt int                  `json:"allocation_attempt"`
	SandboxID         string               `json:"sandbox_id"`
	Fences            []Fence              `json:"fences"`
	Credentials       []CredentialStanding `json:"credentials"`
	// Verdict answers the question in one line.
	Verdict string `json:"verdict"`
}

// The standings of a credential.
const (
	StandingRevoked = "revoked"
	StandingExpired = "expired"
	// StandingCurrent: the owning attempt's, while the run is open.
	StandingCurrent = "current"
	// StandingNotRevoked: live and not the current one: act on it.
	StandingNotRevoked = "NOT REVOKED"
)

// CredentialStanding is one credential issuance and where it stands.
type CredentialStanding struct {
	Fingerprint string     `json:"sha256_fingerprint"`
	IssuedAt    time.Time  `json:"issued_at"`
	ExpiresAt   time.Time  `json:"expires_at"`
	RevokedAt   *time.Time `json:"revoked_at,omitempty"`
	Renews      string     `json:"renews,omitempty"`
	Standing    string     `json:"standing"`
}

// FencingOf reads m's fencing at now.
func FencingOf(m *Manifest, now time.Time) Fencing {
	v := Fencing{RunID: m.RunID, Status: m.Status, AllocationAttempt: m.AllocationAttempt, SandboxID: m.SandboxID,
		Fences: m.Fences, Credentials: []CredentialStanding{}}
	if v.Fences == nil {
		v.Fences = []Fence{}
	}
	open := m.Status == StatusGranted || m.Status == StatusRunning
	live := 0
	for i, r := range m.CredentialIssuances {
		c := CredentialStanding{Fingerprint: r.SHA256Fingerprint, IssuedAt: r.IssuedAt, ExpiresAt: r.ExpiresAt, RevokedAt: r.RevokedAt, Renews: r.Renews}
		switch {
		case r.RevokedAt != nil:
			c.Standing = StandingRevoked
		case !r.ExpiresAt.After(now):
			c.Standing = StandingExpired
		case open && i == len(m.CredentialIssuances)-1:
			c.Standing = StandingCurrent
		default:
			c.Standing, live = StandingNotRevoked, live+1
		}
		v.Credentials = append(v.Credentials, c)
	}
	switch {
	case live > 0:
		v.Verdict = fmt.Sprintf("%d credential(s) not revoked and not the current one: revoke them (slipway cleanup list shows the reconciler's attempts)", live)
	case len(m.Fences) == 0:
		v.Verdict = fmt.Sprintf("no earlier attempt: attempt %d (sandbox %s) is the only one", m.AllocationAttempt, m.SandboxID)
	default:
		v.Verdict = fmt.Sprintf("no: %d earlier attempt(s) fenced (claim token replaced, sandbox deleted, credential revoked or expired); attempt %d (sandbox %s) owns the run",
			len(m.Fences), m.AllocationAttempt, m.SandboxID)
	}
	if !open {
		v.Verdict += fmt.Sprintf("; the run is %s: its claim is ended", m.Status)
	}
	return v
}
