package runtime

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

// PolicyView is GET /v1/policy: the config revision in effect, how old the
// runtime's view of it is, whether claims are refused for it, and the
// rules in effect (the verification policy and each pool's network and
// active generation). It answers "which policy is this runtime enforcing,
// and since when" when propagation lags.
type PolicyView struct {
	// Revision is the config repository commit in effect ("" before the
	// first sync); ConfirmedAt when it was last confirmed current, Age how
	// long ago that was.
	Revision    string    `json:"revision"`
	ConfirmedAt time.Time `json:"confirmedAt,omitzero"`
	AgeSeconds  float64   `json:"ageSeconds"`
	// MaxStalenessSeconds is the runtime's --max-staleness: claims are
	// refused (503) once Age passes it; Stale says they are now, and
	// ClaimsRefused says why.
	MaxStalenessSeconds float64 `json:"maxStalenessSeconds"`
	Stale               bool    `json:"stale"`
	ClaimsRefused       string  `json:"claimsRefused,omitempty"`
	// LastSyncError is the last read of the repository's error, if it
	// failed.
	LastSyncError string           `json:"lastSyncError,omitempty"`
	Verification  VerificationView `json:"verification"`
	Pools         []PoolPolicy     `json:"pools"`
	// Denials counts the egress attempts denied so far, by policy
	// revision.
	Denials map[string]float64 `json:"denials,omitempty"`
}

// VerificationView is the verification policy in effect.
type VerificationView struct {
	// Source is "repository" (policies/verification.yaml at Revision),
	// "file" (the runtime's --policy) or "skipped".
	Source string `json:"source"`
	// Revision is the policy's revision as run manifests record it
	// (verification_policy_revision).
	Revision string        `json:"revision,omitempty"`
	Name     string        `json:"name,omitempty"`
	Keys     []string      `json:"keys,omitempty"`
	Rules    []policy.Rule `json:"rules,omitempty"`
}

// PoolPolicy is one pool's rules in effect.
type PoolPolicy struct {
	Pool             string       `json:"pool"`
	Network          pool.Network `json:"network"`
	ActiveGeneration string       `json:"activeGeneration,omitempty"`
	// PolicyPin is the active generation's policy pin, if it has one.
	PolicyPin string `json:"policyPin,omitempty"`
	// Refused lists generations the state names that did not verify.
	Refused map[string]string `json:"refused,omitempty"`
}

// stale is ErrStale, with the revision in effect and its age, when the
// view d (confirmed current at at) is too old to grant claims from.
func (r *Runtime) stale(d *Desired, at time.Time) error {
	if d == nil {
		return fmt.Errorf("%w: no revision of the config repository loaded yet", ErrStale)
	}
	if age := r.now().Sub(at); age > r.maxStaleness {
		return fmt.Errorf("%w: revision %s was last confirmed current %s ago, more than the maximum staleness %s",
			ErrStale, short(d.Revision), age.Round(time.Millisecond), r.maxStaleness)
	}
	return nil
}

// Policy returns the runtime's PolicyView now; lastSyncErr is the last
// sync's error, if any.
func (r *Runtime) Policy(lastSyncErr error) PolicyView {
	d, at := r.desired()
	v := PolicyView{MaxStalenessSeconds: r.maxStaleness.Seconds(), Pools: []PoolPolicy{}, Denials: r.PolicyDenials()}
	if err := r.stale(d, at); err != nil {
		v.Stale, v.ClaimsRefused = true, err.Error()
	}
	if lastSyncErr != nil {
		v.LastSyncError = lastSyncErr.Error()
	}
	if d == nil {
		v.Verification.Source = "none loaded"
		return v
	}
	v.Revision, v.ConfirmedAt, v.AgeSeconds = d.Revision, at.UTC(), r.now().Sub(at).Seconds()
	v.Verification = VerificationView{Source: d.PolicySource, Revision: d.PolicyRevision}
	if p := d.Policy; p != nil {
		v.Verification.Name, v.Verification.Rules = p.Metadata.Name, p.Spec.Rules
		for _, k := range p.Spec.Keys {
			v.Verification.Keys = append(v.Verification.Keys, k.Name)
		}
	}
	names := make([]string, 0, len(d.Pools))
	for n := range d.Pools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		pd := d.Pools[n]
		pp := PoolPolicy{Pool: n, Network: pd.Pool.Spec.Network}
		if g, ok := pd.Active(); ok {
			pp.ActiveGeneration = g.ID
			if pin, ok := g.Pins[generation.Policy]; ok {
				pp.PolicyPin = pin.Identity()
			}
		}
		if len(pd.Refused) > 0 {
			pp.Refused = pd.Refused
		}
		v.Pools = append(v.Pools, pp)
	}
	return v
}

func (s *Server) policy(w http.ResponseWriter, _ *http.Request) {
	var err error
	if s.sync != nil {
		_, _, err = s.sync.Current()
	}
	writeJSON(w, http.StatusOK, s.rt.Policy(err))
}

// CheckBody is the body of POST /v1/credentials/check.
type CheckBody struct {
	Token string `json:"token"`
}

// CheckResult answers POST /v1/credentials/check: a provider's question
// about a token a sandbox presented. Valid, or the narrow reason (expired,
// revoked, unknown) naming the credential's fingerprint and secret
// version, never its value.
type CheckResult struct {
	Valid       bool   `json:"valid"`
	Reason      string `json:"reason,omitempty"`
	Fingerprint string `json:"fingerprint"`
	Error       string `json:"error,omitempty"`
}

func (s *Server) checkCredential(w http.ResponseWriter, r *http.Request) {
	var b CheckBody
	if !decode(w, r, &b) {
		return
	}
	res := CheckResult{Valid: true, Fingerprint: Fingerprint([]byte(b.Token))}
	if err := s.rt.CheckCredential(b.Token); err != nil {
		res = CheckResult{Fingerprint: res.Fingerprint, Reason: credentialReason(err), Error: err.Error()}
		writeJSON(w, http.StatusUnauthorized, res)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// credentialReason is the one word for a refused token.
func credentialReason(err error) string {
	switch {
	case errors.Is(err, ErrCredentialExpired):
		return "expired"
	case errors.Is(err, ErrCredentialRevoked):
		return "revoked"
	default:
		return "unknown"
	}
}
