package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// RenewAt is the fraction of a credential's lifetime after which the
// runtime renews the credential of an open claim: a long run never holds
// an expired token while its runtime is alive.
const RenewAt = 2.0 / 3

// renewDue is when the credential of receipt rc is renewed.
func renewDue(rc runmanifest.Receipt) time.Time {
	life := rc.ExpiresAt.Sub(rc.IssuedAt)
	return rc.IssuedAt.Add(time.Duration(float64(life) * RenewAt))
}

// maybeRenew renews c's credential when it is due (the heartbeat calls it
// every interval). A failed renewal is logged and tried again a few
// intervals later; the old credential stays valid until it expires.
func (r *Runtime) maybeRenew(ctx context.Context, c *claim) {
	c.mu.Lock()
	fp, due, released := c.credential, c.renewDue, c.released
	c.mu.Unlock()
	if r.o.noRenew || fp == "" || released || due.IsZero() || r.now().Before(due) {
		return
	}
	if err := r.renew(ctx, c, fp); err != nil {
		r.logf("runtime: run %s: renewing credential %s: %v; tried again shortly, the credential stays valid until it expires", c.runID, fp, err)
		c.mu.Lock()
		if c.credential == fp {
			c.renewDue = r.now().Add(5 * r.o.every)
		}
		c.mu.Unlock()
	}
}

// renew replaces c's credential fp with a new one of the same secret
// version: the new token is written over the old in the sandbox's
// credential tmpfs, the old one revoked, and the manifest records the new
// receipt (renews: fp) and the old one's revocation. It does nothing when
// fp is no longer the claim's credential (moved, released or renewed
// meanwhile).
func (r *Runtime) renew(ctx context.Context, c *claim, fp string) error {
	c.op.Lock()
	defer c.op.Unlock()
	c.mu.Lock()
	s, cur, released := c.sandbox, c.credential, c.released
	c.mu.Unlock()
	if released || cur != fp || s == nil {
		return nil
	}
	rc, err := r.issue(ctx, c.runID, c.secretVersion, s)
	if err != nil {
		return err
	}
	rc.Renews = fp
	revoked := r.o.broker.Revoke(fp)
	c.mu.Lock()
	c.credential, c.renewDue = rc.SHA256Fingerprint, renewDue(rc)
	c.mu.Unlock()
	r.logf("runtime: run %s: credential %s renewed as %s (secret version %s, expires %s); the old one revoked",
		c.runID, fp, rc.SHA256Fingerprint, rc.SecretVersion, rc.ExpiresAt.Format(time.RFC3339))
	return r.store.Update(context.WithoutCancel(ctx), c.runID, func(m *runmanifest.Manifest) error {
		markRevoked(m, fp, revoked)
		m.CredentialIssuances = append(m.CredentialIssuances, rc)
		return nil
	})
}

// markRevoked records in m that the credential fp was revoked at at.
func markRevoked(m *runmanifest.Manifest, fp string, at time.Time) {
	if fp == "" || at.IsZero() {
		return
	}
	for i := range m.CredentialIssuances {
		if rc := &m.CredentialIssuances[i]; rc.SHA256Fingerprint == fp && rc.RevokedAt == nil {
			t := at.UTC()
			rc.RevokedAt = &t
		}
	}
}

// CheckCredential is what a provider asks the runtime's broker before it
// honours a token a sandbox presented (POST /v1/credentials/check): nil
// when it is valid, else the narrow reason (Broker.Check).
func (r *Runtime) CheckCredential(token string) error {
	if token == "" {
		return fmt.Errorf("%w: no token presented", ErrCredentialUnknown)
	}
	return r.o.broker.Check(token)
}
