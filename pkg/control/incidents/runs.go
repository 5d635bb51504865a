package incidents

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
)

// maxRuns bounds the run manifests a report reads: the newest.
const maxRuns = 1000

// RunLister lists the newest run manifests (runs.SQLite does, over a
// runtime's state directory, and runs.Postgres over the replicas' shared
// database).
type RunLister interface {
	Latest(ctx context.Context, limit int) ([]*runmanifest.Manifest, error)
}

var (
	_ RunLister = (*runs.SQLite)(nil)
	_ RunLister = (*runs.Postgres)(nil)
)

// FromRuns reads a runtime's run manifests: runs whose credential expired
// while they were open, runs whose credential was renewed before it
// expired, and request keys with more than one run (a doubled sandbox).
// now is the time an open run is judged at.
func FromRuns(rs RunLister, now func() time.Time) Source {
	if now == nil {
		now = time.Now
	}
	return covering{kinds: []Kind{CredentialExpiry, WorkerCrash}, SourceFunc: func(ctx context.Context) ([]Incident, error) {
		ms, err := rs.Latest(ctx, maxRuns)
		if err != nil {
			return nil, err
		}
		var out []Incident
		byKey := map[string][]*runmanifest.Manifest{}
		for _, m := range ms {
			if m.RequestKey != "" {
				byKey[m.RequestKey] = append(byKey[m.RequestKey], m)
			}
			if i, ok := credential(m, now()); ok {
				out = append(out, i)
			}
		}
		keys := make([]string, 0, len(byKey))
		for k, ms := range byKey {
			if len(ms) > 1 {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, doubled(k, byKey[k]))
		}
		return out, nil
	}}
}

// credential is the credential incident of m, if it shows one.
func credential(m *runmanifest.Manifest, now time.Time) (Incident, bool) {
	if len(m.CredentialIssuances) == 0 {
		return Incident{}, false
	}
	end := now
	if m.Status.Final() && !m.Lifecycle.ResourcesReleased.IsZero() {
		end = m.Lifecycle.ResourcesReleased
	}
	var expired []runmanifest.Receipt
	renewals := 0
	var receipts []string
	for _, rc := range m.CredentialIssuances {
		until := end
		if rc.RevokedAt != nil && rc.RevokedAt.Before(until) {
			until = *rc.RevokedAt
		}
		if rc.ExpiresAt.Before(until) {
			expired = append(expired, rc)
		}
		if rc.Renews != "" {
			renewals++
		}
		receipts = append(receipts, receiptText(rc))
	}
	if len(expired) == 0 && renewals == 0 {
		return Incident{}, false
	}
	i := Incident{Kind: string(CredentialExpiry), Run: m.RunID, State: string(m.Status), Terminal: m.Status.Final(), Receipts: receipts,
		Attempts: m.AllocationAttempt, At: m.Lifecycle.ClaimCreated}
	add(&i, "secret version", "%s", m.SecretVersion)
	add(&i, "sandbox", "%s (allocation attempt %d, tenant %s)", m.SandboxID, m.AllocationAttempt, orDash(m.Tenant))
	add(&i, "renewals", "%d", renewals)
	if len(expired) > 0 {
		last := expired[len(expired)-1]
		i.Reason = "expired"
		i.Detail = fmt.Sprintf("credential %s of secret version %s expired at %s while the run was open", last.SHA256Fingerprint, last.SecretVersion,
			last.ExpiresAt.Format(time.RFC3339))
		if i.Terminal {
			i.Next = "none: the run ended; providers refused its token as expired (narrow error, fingerprint only)"
		} else {
			i.Owner = "the runtime's operator"
			i.Next = "the run holds an expired credential (renewal off or failing: see the runtime's log); end or move the claim"
		}
		return i, true
	}
	i.Reason = "renewed"
	i.Detail = fmt.Sprintf("renewed %d times before expiry; each old credential revoked", renewals)
	i.Terminal = true // nothing to do: the control worked
	i.Next = "none"
	return i, true
}

func receiptText(rc runmanifest.Receipt) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s of %s, issued %s, expires %s", rc.Issuer, rc.SHA256Fingerprint, rc.SecretVersion,
		rc.IssuedAt.Format(time.RFC3339), rc.ExpiresAt.Format(time.RFC3339))
	if rc.Renews != "" {
		fmt.Fprintf(&b, ", renews %s", rc.Renews)
	}
	if rc.RevokedAt != nil {
		fmt.Fprintf(&b, ", revoked %s", rc.RevokedAt.Format(time.RFC3339))
	}
	return b.String()
}

// doubled is a request key with more than one run.
func doubled(key string, ms []*runmanifest.Manifest) Incident {
	i := Incident{Kind: string(WorkerCrash), Run: ms[0].RunID, State: "doubled", Reason: "request_key_doubled",
		Detail: fmt.Sprintf("DOUBLED: %d runs for request key %s", len(ms), key), Owner: "the runtime's operator", At: ms[0].Lifecycle.ClaimCreated}
	for _, m := range ms {
		add(&i, "run", "%s (sandbox %s, %s)", m.RunID, m.SandboxID, m.Status)
	}
	i.Next = "find which run's commands ran (slipway runs show RUN) and end the other's sandbox"
	return i
}
