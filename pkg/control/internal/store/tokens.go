package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// ErrUnauthenticated is a token that is not one, unknown or revoked; the
// API says 401 and nothing else.
var ErrUnauthenticated = errors.New("control: unauthenticated")

// Token is a stored API token: never its secret, only its hash.
type Token struct {
	ID        string     `json:"id"`
	Tenant    string     `json:"tenant"`
	Scope     string     `json:"scope"`
	Label     string     `json:"label,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
	// unchecked: authenticated from the cache of live tokens, its
	// revocation not read (authenticateSubmit): the submission's
	// transaction reads it.
	unchecked bool
}

var tenantName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// tokenPrefix makes a leaked token recognisable to secret scanners.
const tokenPrefix = "swt_"

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

func hashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// CreateToken makes a token for tenant (for ScopeOperator the tenant names
// who holds it) and returns its text, shown this once: only its hash is
// stored.
func (s *Store) CreateToken(ctx context.Context, tenant, scope, label string) (string, *Token, error) {
	if scope != controlapi.ScopeTenant && scope != controlapi.ScopeOperator {
		return "", nil, fmt.Errorf("control: token scope %q: want %s or %s", scope, controlapi.ScopeTenant, controlapi.ScopeOperator)
	}
	if !tenantName.MatchString(tenant) {
		return "", nil, fmt.Errorf("control: tenant name %q: want lower-case letters, digits and dashes", tenant)
	}
	idb := make([]byte, 5)
	sec := make([]byte, 20)
	if _, err := rand.Read(idb); err != nil {
		return "", nil, err
	}
	if _, err := rand.Read(sec); err != nil {
		return "", nil, err
	}
	id := strings.ToLower(b32.EncodeToString(idb))
	secret := strings.ToLower(b32.EncodeToString(sec))
	t := &Token{ID: id, Tenant: tenant, Scope: scope, Label: label, CreatedAt: time.Now().UTC()}
	if _, err := s.w.ExecContext(ctx, s.d.q(`INSERT INTO cp_tokens (id, tenant, scope, hash, label, created_ns) VALUES (?, ?, ?, ?, ?, ?)`),
		id, tenant, scope, hashSecret(secret), label, t.CreatedAt.UnixNano()); err != nil {
		return "", nil, Unavailable(err)
	}
	return tokenPrefix + id + "_" + secret, t, nil
}

// Authenticate returns the live token whose text this is. The secret is
// compared by hash in constant time; an unknown, malformed or revoked token
// is ErrUnauthenticated.
func (s *Store) Authenticate(ctx context.Context, text string) (*Token, error) {
	rest, ok := strings.CutPrefix(text, tokenPrefix)
	id, secret, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || len(id) != 8 || len(secret) != 32 {
		return nil, ErrUnauthenticated
	}
	var t Token
	var hash string
	var created, revoked int64
	var row *sql.Row
	if s.authStmt != nil {
		row = s.authStmt.QueryRowContext(ctx, id)
	} else {
		row = s.r.QueryRowContext(ctx, s.d.q(`SELECT tenant, scope, hash, label, created_ns, revoked_ns FROM cp_tokens WHERE id = ?`), id)
	}
	err := row.
		Scan(&t.Tenant, &t.Scope, &hash, &t.Label, &created, &revoked)
	want := hashSecret(secret)
	if errors.Is(err, sql.ErrNoRows) {
		subtle.ConstantTimeCompare([]byte(want), []byte(want)) // the same work as a found token
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, Unavailable(err)
	}
	if subtle.ConstantTimeCompare([]byte(hash), []byte(want)) != 1 || revoked != 0 {
		return nil, ErrUnauthenticated
	}
	t.ID, t.CreatedAt = id, time.Unix(0, created).UTC()
	s.liveTokens.Store(id, liveToken{t: t, hash: hash})
	return &t, nil
}

// Unchecked says the token was authenticated from the cache of live
// tokens, its revocation not read: the submission's transaction reads it.
func (t *Token) Unchecked() bool { return t.unchecked }

// liveToken is what never changes of a token read live once: its tenant,
// scope and hash (a revocation only sets revoked_ns).
type liveToken struct {
	t    Token
	hash string
}

// AuthenticateSubmit is Authenticate for a submission: a token this store
// has read live before is checked against its kept hash (in constant
// time) without a read, and returned unchecked: the transaction that
// stores the job reads its revocation (tokenRevoked) and refuses it, so a
// revocation anywhere (another replica, the CLI) still takes effect at
// once. The other requests read the token each time (Authenticate).
func (s *Store) AuthenticateSubmit(ctx context.Context, text string) (*Token, error) {
	rest, ok := strings.CutPrefix(text, tokenPrefix)
	id, secret, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || len(id) != 8 || len(secret) != 32 {
		return nil, ErrUnauthenticated
	}
	v, ok := s.liveTokens.Load(id)
	if !ok || v.(liveToken).t.Scope != controlapi.ScopeTenant { // an operator's request is read live and audited
		return s.Authenticate(ctx, text)
	}
	lt := v.(liveToken)
	if subtle.ConstantTimeCompare([]byte(lt.hash), []byte(hashSecret(secret))) != 1 {
		return nil, ErrUnauthenticated
	}
	t := lt.t
	t.unchecked = true
	return &t, nil
}

// TokenLive reads whether token id is live (not revoked).
func (s *Store) TokenLive(ctx context.Context, id string) (bool, error) {
	var revoked int64
	err := s.r.QueryRowContext(ctx, s.d.q(`SELECT revoked_ns FROM cp_tokens WHERE id = ?`), id).Scan(&revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil && revoked == 0, Unavailable(err)
}

// liveOf returns which of ids name a token not revoked, read in tx (on
// PostgreSQL locked FOR SHARE: a revocation waits for tx's commit, so the
// submission comes before it).
func (s *Store) liveOf(ctx context.Context, tx *sql.Tx, ids []string) (map[string]bool, error) {
	live := map[string]bool{}
	if len(ids) == 0 {
		return live, nil
	}
	lock := ""
	if s.d.name == "postgres" {
		lock = " FOR SHARE"
	}
	ph := strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")
	rows, err := tx.QueryContext(ctx, s.d.q(`SELECT id FROM cp_tokens WHERE revoked_ns = 0 AND id IN (`+ph+`)`+lock), anys(ids)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		live[id] = true
	}
	return live, rows.Err()
}

// ListTokens lists the tokens of a tenant ("" : all), never their secrets.
func (s *Store) ListTokens(ctx context.Context, tenant string) ([]Token, error) {
	q, args := `SELECT id, tenant, scope, label, created_ns, revoked_ns FROM cp_tokens`, []any{}
	if tenant != "" {
		q += ` WHERE tenant = ?`
		args = append(args, tenant)
	}
	rows, err := s.r.QueryContext(ctx, s.d.q(q+` ORDER BY created_ns, id`), args...)
	if err != nil {
		return nil, Unavailable(err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		var t Token
		var created, revoked int64
		if err := rows.Scan(&t.ID, &t.Tenant, &t.Scope, &t.Label, &created, &revoked); err != nil {
			return nil, err
		}
		t.CreatedAt = time.Unix(0, created).UTC()
		if revoked != 0 {
			t.RevokedAt = tp(time.Unix(0, revoked))
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// RevokeToken revokes a token at once: the next request with it is 401.
func (s *Store) RevokeToken(ctx context.Context, id string) error {
	s.liveTokens.Delete(id)
	res, err := s.w.ExecContext(ctx, s.d.q(`UPDATE cp_tokens SET revoked_ns = ? WHERE id = ? AND revoked_ns = 0`), time.Now().UnixNano(), id)
	if err != nil {
		return Unavailable(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("token %s: %w (or already revoked)", id, ErrNotFound)
	}
	return nil
}

// Audit records an entry.
func (s *Store) Audit(ctx context.Context, e controlapi.AuditEntry) error {
	_, err := s.w.ExecContext(ctx, s.d.q(`INSERT INTO cp_audit (at_ns, token_id, tenant, scope, method, path, status) VALUES (?, ?, ?, ?, ?, ?, ?)`),
		e.At.UnixNano(), e.TokenID, e.Tenant, e.Scope, e.Method, e.Path, e.Status)
	return Unavailable(err)
}

// AuditLog returns the newest entries, newest first.
func (s *Store) AuditLog(ctx context.Context, limit int) ([]controlapi.AuditEntry, error) {
	if limit <= 0 || limit > 10000 {
		limit = 100
	}
	rows, err := s.r.QueryContext(ctx, fmt.Sprintf(`SELECT at_ns, token_id, tenant, scope, method, path, status FROM cp_audit ORDER BY id DESC LIMIT %d`, limit))
	if err != nil {
		return nil, Unavailable(err)
	}
	defer rows.Close()
	var out []controlapi.AuditEntry
	for rows.Next() {
		var e controlapi.AuditEntry
		var at int64
		if err := rows.Scan(&at, &e.TokenID, &e.Tenant, &e.Scope, &e.Method, &e.Path, &e.Status); err != nil {
			return nil, err
		}
		e.At = time.Unix(0, at).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}

// ForgetToken drops token id from the cache of live tokens: it was found
// revoked since.
func (s *Store) ForgetToken(id string) { s.liveTokens.Delete(id) }
