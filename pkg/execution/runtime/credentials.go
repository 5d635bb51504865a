package runtime

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// Named defaults of the credential broker.
const (
	// LocalIssuer names the runtime's own broker in receipts.
	LocalIssuer = "slipway-local-broker"
	// DefaultCredentialTTL is how long a token is valid unless it is
	// revoked first (on release, move or renewal). The runtime renews an
	// open claim's token at RenewAt of its lifetime (renew.go).
	DefaultCredentialTTL = time.Hour
	// CredentialFile is the token's file name in sandbox.CredentialDir: a
	// claim reads its token at /run/slipway/credentials/token.
	CredentialFile = "token"
	// credentialMemory is how long the broker remembers a token after it
	// expired or was revoked, to answer with the narrow reason.
	credentialMemory = time.Hour
)

// Errors of credentials. The messages name the credential by fingerprint
// and secret version, never by value.
var (
	// ErrCredentials: a claim's credential could not be issued or placed
	// in its sandbox, or a token presented is not valid.
	ErrCredentials = errors.New("runtime: credentials")
	// ErrCredentialExpired: the token presented was issued by the broker
	// and expired (it was not renewed in time).
	ErrCredentialExpired = fmt.Errorf("%w: expired", ErrCredentials)
	// ErrCredentialRevoked: the token presented was revoked (its claim was
	// released or moved, or the token renewed).
	ErrCredentialRevoked = fmt.Errorf("%w: revoked", ErrCredentials)
	// ErrCredentialUnknown: the broker never issued the token presented
	// (or forgot it long ago).
	ErrCredentialUnknown = fmt.Errorf("%w: unknown", ErrCredentials)
)

// Broker is the local credential broker. For a claim whose generation pins
// a secretVersion it issues a random token (one per allocation attempt,
// and one per renewal), which the runtime writes into the sandbox's
// credential tmpfs; it keeps only the token's SHA-256 fingerprint, answers
// whether a token is valid (Check: with the narrow reason when it is not),
// and refuses a token once it is revoked (the claim is released or moved,
// or the token renewed) or expires. The token itself is in no field, log
// line, error, manifest or metric: a receipt (issuer, secret version,
// fingerprint, issued and expiry times) is what the run manifest records.
//
// It issues tokens of its own making, standing for the pinned secret
// version; it does not fetch the secret's value from a secret store.
type Broker struct {
	issuer string
	ttl    time.Duration
	now    func() time.Time

	mu   sync.Mutex
	live map[string]*issued // by fingerprint: live, and recently expired or revoked
}

// issued is what the broker remembers of a token.
type issued struct {
	runID, secretVersion string
	expires              time.Time
	revoked              time.Time // zero while not revoked
}

// LiveCredential is a token the broker honours now, by fingerprint.
type LiveCredential struct {
	Fingerprint string
	RunID       string
	ExpiresAt   time.Time
}

// NewBroker makes a broker that names itself issuer in receipts and whose
// tokens expire after ttl.
func NewBroker(issuer string, ttl time.Duration) (*Broker, error) {
	if issuer == "" {
		return nil, fmt.Errorf("%w: the broker needs an issuer name", ErrCredentials)
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("%w: token lifetime %s must be positive", ErrCredentials, ttl)
	}
	return &Broker{issuer: issuer, ttl: ttl, now: time.Now, live: map[string]*issued{}}, nil
}

// TTL is the lifetime of the tokens b issues.
func (b *Broker) TTL() time.Duration { return b.ttl }

// Issue makes a new token for run runID's use of secretVersion and returns
// it with its receipt. The caller hands the token to the sandbox and keeps
// nothing of it but the receipt.
func (b *Broker) Issue(runID, secretVersion string) ([]byte, runmanifest.Receipt, error) {
	if secretVersion == "" {
		return nil, runmanifest.Receipt{}, fmt.Errorf("%w: run %s: no secret version", ErrCredentials, runID)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, runmanifest.Receipt{}, fmt.Errorf("%w: %w", ErrCredentials, err)
	}
	token := []byte("swt_" + hex.EncodeToString(raw))
	now := b.now().UTC().Truncate(time.Millisecond)
	rc := runmanifest.Receipt{
		Issuer: b.issuer, SecretVersion: secretVersion, SHA256Fingerprint: Fingerprint(token),
		IssuedAt: now, ExpiresAt: now.Add(b.ttl),
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for fp, is := range b.live {
		end := is.expires
		if !is.revoked.IsZero() && is.revoked.Before(end) {
			end = is.revoked
		}
		if now.Sub(end) > credentialMemory {
			delete(b.live, fp)
		}
	}
	b.live[rc.SHA256Fingerprint] = &issued{runID: runID, secretVersion: secretVersion, expires: rc.ExpiresAt}
	return token, rc, nil
}

// Valid reports whether token was issued by b and is neither revoked nor
// expired.
func (b *Broker) Valid(token string) bool { return b.Check(token) == nil }

// Check is what a provider asks before it honours a token: nil when b
// issued it and it is neither revoked nor expired, else an error naming
// the credential's fingerprint, secret version and run and saying why
// (ErrCredentialExpired, ErrCredentialRevoked, ErrCredentialUnknown). The
// token's value is in no error.
func (b *Broker) Check(token string) error {
	fp := Fingerprint([]byte(token))
	b.mu.Lock()
	defer b.mu.Unlock()
	is, ok := b.live[fp]
	now := b.now()
	switch {
	case !ok:
		return fmt.Errorf("%w: credential %s was not issued by %s", ErrCredentialUnknown, fp, b.issuer)
	case !is.revoked.IsZero():
		return fmt.Errorf("%w: credential %s (secret version %s, run %s) was revoked at %s",
			ErrCredentialRevoked, fp, is.secretVersion, is.runID, is.revoked.UTC().Format(time.RFC3339Nano))
	case !now.Before(is.expires):
		return fmt.Errorf("%w: credential %s (secret version %s, run %s) expired at %s, %s ago",
			ErrCredentialExpired, fp, is.secretVersion, is.runID, is.expires.UTC().Format(time.RFC3339Nano), now.Sub(is.expires).Round(time.Millisecond))
	}
	return nil
}

// Live lists the tokens the broker honours now (neither revoked nor
// expired), with the run each was issued to: what a cleanup reconciler
// compares with the runs' records. Fingerprints only, never a token.
func (b *Broker) Live() []LiveCredential {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]LiveCredential, 0, len(b.live))
	for fp, is := range b.live {
		if is.revoked.IsZero() && now.Before(is.expires) {
			out = append(out, LiveCredential{Fingerprint: fp, RunID: is.runID, ExpiresAt: is.expires})
		}
	}
	return out
}

// Revoke makes the token with this fingerprint invalid. It is repeat-safe
// and returns when the token was revoked (the first time).
func (b *Broker) Revoke(fingerprint string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	is, ok := b.live[fingerprint]
	if !ok {
		return time.Time{}
	}
	if is.revoked.IsZero() {
		is.revoked = b.now().UTC()
	}
	return is.revoked
}

// Fingerprint is "sha256:" and the hex SHA-256 of token, as receipts
// record it.
func Fingerprint(token []byte) string {
	sum := sha256.Sum256(token)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Broker is the runtime's credential broker (WithBroker's, or its own).
func (r *Runtime) Broker() *Broker { return r.o.broker }

// secretVersion is the identity of the secret version g pins; "" when it
// pins none.
func secretVersion(g *generation.Generation) string {
	if p, ok := g.Pins[generation.SecretVersion]; ok {
		return p.Identity()
	}
	return ""
}

// issue gives sandbox s of run runID a new token of secretVersion, at
// CredentialFile in its credential tmpfs, and returns the receipt.
func (r *Runtime) issue(ctx context.Context, runID, secretVersion string, s *sandbox.Sandbox) (runmanifest.Receipt, error) {
	cw, ok := r.warm.backend.(sandbox.Credentials)
	if !ok {
		return runmanifest.Receipt{}, fmt.Errorf("%w: run %s pins secret version %s, and the sandbox backend cannot place credentials", ErrCredentials, runID, secretVersion)
	}
	token, rc, err := r.o.broker.Issue(runID, secretVersion)
	if err != nil {
		return runmanifest.Receipt{}, err
	}
	if err := cw.PutCredential(ctx, s.ID, CredentialFile, token); err != nil {
		r.o.broker.Revoke(rc.SHA256Fingerprint)
		return runmanifest.Receipt{}, fmt.Errorf("%w: run %s: %w", ErrCredentials, runID, err)
	}
	clear(token)
	return rc, nil
}

// revoke revokes the credential with fingerprint fp and removes its file
// from sandbox s (a sandbox about to be killed: removing is best effort,
// the broker's word is what counts), and returns when it was revoked.
func (r *Runtime) revoke(ctx context.Context, s *sandbox.Sandbox, fp string) time.Time {
	if fp == "" {
		return time.Time{}
	}
	at := r.o.broker.Revoke(fp)
	if cw, ok := r.warm.backend.(sandbox.Credentials); ok && s != nil {
		_ = cw.RemoveCredential(ctx, s.ID, CredentialFile)
	}
	return at
}
