package control

import (
	"context"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
)

// Store is the control plane's database (SQLite or PostgreSQL) as a
// program outside the plane uses it: the tenants' API tokens, the jobs and
// their event streams read back, and the deliveries in trouble. New takes
// one to run a plane on; admission, leases, the event hub and the output
// worker's receipts stay the plane's own.
type Store struct{ inner *store.Store }

// Close closes the database.
func (s *Store) Close() error { return s.inner.Close() }

// CreateToken makes an API token for tenant with scope (controlapi's
// ScopeTenant or ScopeOperator) and a label saying what it is for. It
// returns the token's text, which is shown once: only its hash is stored.
func (s *Store) CreateToken(ctx context.Context, tenant, scope, label string) (string, *Token, error) {
	return s.inner.CreateToken(ctx, tenant, scope, label)
}

// ListTokens lists tenant's tokens ("": every tenant's), never their
// secrets.
func (s *Store) ListTokens(ctx context.Context, tenant string) ([]Token, error) {
	return s.inner.ListTokens(ctx, tenant)
}

// RevokeToken revokes a token at once: the next request with it is 401.
// A token already revoked, or none, is ErrNotFound.
func (s *Store) RevokeToken(ctx context.Context, id string) error {
	return s.inner.RevokeToken(ctx, id)
}

// List lists jobs, newest first.
func (s *Store) List(ctx context.Context, f ListFilter) ([]*controlapi.Job, error) {
	return s.inner.List(ctx, f)
}

// Events reads up to limit (1000 when not in 1..10000) of job jobID's
// retained events after sequence after, with its stream's head; tenant ""
// reads any tenant's job, another tenant's is ErrNotFound.
func (s *Store) Events(ctx context.Context, tenant, jobID string, after int64, limit int) (controlapi.StreamHead, []controlapi.Event, error) {
	return s.inner.Events(ctx, tenant, jobID, after, limit)
}

// ExportTroubles lists deliveries that failed, newest first, then those
// being retried: up to limit of each (100 when not in 1..1000).
func (s *Store) ExportTroubles(ctx context.Context, limit int) ([]ExportTrouble, error) {
	return s.inner.ExportTroubles(ctx, limit)
}

// The store's records and settings, as the plane's API and its users name
// them.
type (
	// ListFilter selects jobs for List.
	ListFilter = store.ListFilter
	// Token is a stored API token: never its secret, only its hash.
	Token = store.Token
	// LimitError refuses a submission over a bound (the API's 429).
	LimitError = store.LimitError
	// ExportTrouble is a delivery that failed or is being retried.
	ExportTrouble = store.ExportTrouble
	// EventConfig bounds the event streams.
	EventConfig = store.EventConfig
)

// OutcomeRetrying is the Outcome of an ExportTrouble whose budget is not
// spent.
const OutcomeRetrying = store.OutcomeRetrying

// Schema is the PostgreSQL schema of the control plane's tables.
const Schema = store.Schema

// The errors of the plane and its store; errors.Is matches them through
// any wrapping.
var (
	ErrBadRequest      = store.ErrBadRequest
	ErrForbidden       = store.ErrForbidden
	ErrNotFound        = store.ErrNotFound
	ErrConflict        = store.ErrConflict
	ErrUnavailable     = store.ErrUnavailable
	ErrBadDSN          = store.ErrBadDSN
	ErrUnauthenticated = store.ErrUnauthenticated
	ErrEventKind       = store.ErrEventKind
	ErrStreamEnded     = store.ErrStreamEnded
)

// CheckDSN says (ErrBadDSN) whether dsn names a database Open can open,
// without reaching it.
func CheckDSN(dsn string) error { return store.CheckDSN(dsn) }

// Open opens the store a DSN names: sqlite:PATH or postgres://...
func Open(ctx context.Context, dsn string) (*Store, error) { return wrap(store.Open(ctx, dsn)) }

// OpenSQLite opens (creating) the SQLite store at path.
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	return wrap(store.OpenSQLite(ctx, path))
}

// OpenPostgres opens the PostgreSQL store at dsn.
func OpenPostgres(ctx context.Context, dsn string) (*Store, error) {
	return wrap(store.OpenPostgres(ctx, dsn))
}

func wrap(s *store.Store, err error) (*Store, error) {
	if err != nil {
		return nil, err
	}
	return &Store{inner: s}, nil
}
