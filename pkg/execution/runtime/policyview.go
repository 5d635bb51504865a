package runtime

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

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

// Policy returns the runtime's PolicyView now; lastSyncErr is what to say
// of the last sync's error ("" for none).
func (r *Runtime) Policy(lastSyncErr string) runtimeapi.PolicyView {
	d, at := r.desired()
	v := runtimeapi.PolicyView{MaxStalenessSeconds: r.maxStaleness.Seconds(), Pools: []runtimeapi.PoolPolicy{}, Denials: r.PolicyDenials()}
	if err := r.stale(d, at); err != nil {
		v.Stale, v.ClaimsRefused = true, err.Error()
	}
	v.LastSyncError = lastSyncErr
	if d == nil {
		v.Verification.Source = "none loaded"
		return v
	}
	v.Revision, v.ConfirmedAt, v.AgeSeconds = d.Revision, at.UTC(), r.now().Sub(at).Seconds()
	v.Verification = runtimeapi.VerificationView{Source: d.PolicySource, Revision: d.PolicyRevision}
	if p := d.Policy; p != nil {
		v.Verification.Name, v.Verification.Rules = p.Metadata.Name, policyRules(p.Spec.Rules)
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
		pp := runtimeapi.PoolPolicy{Pool: n, Network: runtimeapi.Network(pd.Pool.Spec.Network)}
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
	writeJSON(w, http.StatusOK, s.rt.Policy(s.syncError(err)))
}

func (s *Server) checkCredential(w http.ResponseWriter, r *http.Request) {
	var b runtimeapi.CheckBody
	if !s.decode(w, r, &b) {
		return
	}
	res := runtimeapi.CheckResult{Valid: true, Fingerprint: Fingerprint([]byte(b.Token))}
	if err := s.rt.CheckCredential(b.Token); err != nil {
		res = runtimeapi.CheckResult{Fingerprint: res.Fingerprint, Reason: credentialReason(err), Error: err.Error()}
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

// policyRules are the verification policy's rules in the API's form.
func policyRules(rules []policy.Rule) []runtimeapi.PolicyRule {
	if rules == nil {
		return nil
	}
	out := make([]runtimeapi.PolicyRule, 0, len(rules))
	for _, r := range rules {
		pr := runtimeapi.PolicyRule{Name: r.Name, AllowUnverified: r.AllowUnverified,
			Match: runtimeapi.RuleMatch{Kinds: r.Match.Kinds, Repositories: r.Match.Repositories}}
		if r.Signatures != nil {
			pr.Signatures = &runtimeapi.RuleSignatures{Keys: r.Signatures.Keys}
		}
		for _, a := range r.Attestations {
			pr.Attestations = append(pr.Attestations, runtimeapi.RuleAttestation(a))
		}
		out = append(out, pr)
	}
	return out
}
