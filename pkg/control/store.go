package control

import (
	"context"

	"github.com/slipway-dev/slipway/pkg/control/internal/store"
)

// Store keeps the control plane's durable records: jobs and their
// transitions, tenants' counters, tokens, the audit log, the event streams
// and the output worker's receipts, on SQLite or PostgreSQL
// (internal/store).
type Store = store.Store

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
	// NewEvent is an event to append.
	NewEvent = store.NewEvent
	// Delivery is what a consumer gets from Store.Consume.
	Delivery = store.Delivery
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
	ErrUnauthenticated = store.ErrUnauthenticated
	ErrEventKind       = store.ErrEventKind
	ErrStreamEnded     = store.ErrStreamEnded
)

// Open opens the store a DSN names: sqlite:PATH or postgres://...
func Open(ctx context.Context, dsn string) (*Store, error) { return store.Open(ctx, dsn) }

// OpenSQLite opens (creating) the SQLite store at path.
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	return store.OpenSQLite(ctx, path)
}

// OpenPostgres opens the PostgreSQL store at dsn.
func OpenPostgres(ctx context.Context, dsn string) (*Store, error) {
	return store.OpenPostgres(ctx, dsn)
}

// The store's names the plane uses most, unexported here.
type (
	lease      = store.Lease
	batchAdmit = store.BatchAdmit
	slots      = store.Slots
	submission = store.Submission
)

var errSkip = store.ErrSkip
