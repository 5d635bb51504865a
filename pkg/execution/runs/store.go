package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// Errors. Every refusal of input wraps ErrInvalid; the others say what the
// store holds. Messages name the run, template or package at fault.
var (
	// ErrInvalid marks a manifest, receipt, query or package the store
	// refuses (a missing run_id, a receipt without a fingerprint, ...). It
	// is runmanifest.ErrInvalid, so that one errors.Is covers a store's
	// refusal and runmanifest.ParseManifest's.
	ErrInvalid = runmanifest.ErrInvalid
	// ErrNotFound: no manifest has that run id.
	ErrNotFound = errors.New("runs: run not found")
	// ErrExists: a manifest with that run id was created before. Run ids
	// name one run each; Create never overwrites.
	ErrExists = errors.New("runs: run exists")
	// ErrCompleted: the manifest is final (completed, failed or released)
	// and is a record now; Update refuses to change it.
	ErrCompleted = errors.New("runs: run is final")
	// ErrSchema: the database was written by a newer Slipway (its schema
	// version is above the one this build knows).
	ErrSchema = errors.New("runs: unknown schema version")
)

// Store keeps run manifests and the package index of workspace templates,
// and answers the operator's questions: what did run r use, and which runs
// used this artifact or a template containing this package.
//
// Implementations are safe for concurrent use. SQLite is the store of a
// single runtime; another database (PostgreSQL) implements the same
// interface.
type Store interface {
	// Create records a new manifest (normally as granted, when the claim is
	// granted). It returns ErrExists if the run id was created before, and
	// ErrInvalid if the manifest fails validation. An empty Status is stored
	// as granted. When Create returns nil the manifest is durable.
	Create(ctx context.Context, m *runmanifest.Manifest) error
	// Update reads the manifest of runID, calls fn on a copy and stores what
	// fn left, all in one transaction: concurrent Updates of one run do not
	// lose each other's changes. An error from fn aborts the update and is
	// returned (wrapped). It returns ErrNotFound for an unknown run, and
	// ErrCompleted if the stored manifest is already final: finalise a run
	// once, when its claim ends, with everything it recorded. fn must not
	// change run_id or lower allocation_attempt (ErrInvalid).
	Update(ctx context.Context, runID string, fn func(*runmanifest.Manifest) error) error
	// Get returns the manifest of runID, or ErrNotFound.
	Get(ctx context.Context, runID string) (*runmanifest.Manifest, error)
	// Query returns the ids of the runs matching every criterion set in q,
	// sorted, at most q.Limit of them when q.Limit > 0. A query with no
	// criterion is refused (ErrInvalid): it would list every run.
	Query(ctx context.Context, q runmanifest.Query) ([]string, error)
	// Open returns the ids of the runs that are not final yet (granted or
	// running), sorted: the claims a runtime still holds, or held when it
	// stopped without finalising them.
	Open(ctx context.Context) ([]string, error)
	// RecordPackages sets the package index of an artifact a run is made
	// of, by its identity: a workspace template's id, or a runner or
	// control-plane image's digest (from the SBOM attestation verified at
	// build or pull time). Recording the
	// same set again changes nothing (Unchanged); a different set replaces
	// the old one (Updated). Runs whose template has no recorded packages
	// are never found by a package query.
	RecordPackages(ctx context.Context, templateID string, pkgs []runmanifest.Package) (runmanifest.Change, error)
	// Packages reads back the package index of an artifact (the identity
	// RecordPackages was given), sorted by name then version; recorded is
	// false when none was ever recorded for it (an artifact whose SBOM
	// was not indexed), true for a recorded set, even an empty one.
	Packages(ctx context.Context, templateID string) (pkgs []runmanifest.Package, recorded bool, err error)
	// RecordBuilders sets the builders of an artifact a run is made of
	// (by the identity RecordPackages takes): those its verified SLSA
	// provenance attestations name, none when it has no such attestation.
	// The same set again changes nothing (Unchanged); a different set
	// replaces the old one (Updated).
	RecordBuilders(ctx context.Context, artifactID string, bs []runmanifest.Builder) (runmanifest.Change, error)
	// Builders reads back an artifact's builders, sorted by id then
	// attestation; recorded is false when none was ever recorded for it
	// (its provenance was never read), true for a recorded set, even an
	// empty one (it has no verified provenance).
	Builders(ctx context.Context, artifactID string) (bs []runmanifest.Builder, recorded bool, err error)
	// Close releases the store. It does not lose anything Create or Update
	// returned nil for.
	Close() error
}

// StateFile is where a runtime's state directory keeps its run manifests.
const StateFile = "runs.db"

// change applies fn to m, the stored manifest of run runID, with the rules
// every store keeps: fn may not change the run id, lower the allocation
// attempt or clear the status, and the result is normalized and valid. It
// returns the query columns' values from before fn and the manifest's new
// encoding.
func change(runID string, m *runmanifest.Manifest, fn func(*runmanifest.Manifest) error) (oldColumns []string, next []byte, err error) {
	attempt, oldColumns := m.AllocationAttempt, manifestColumns(m)
	if err := fn(m); err != nil {
		return nil, nil, fmt.Errorf("runs: update %s: %w", runID, err)
	}
	if m.RunID != runID {
		return nil, nil, fmt.Errorf("%w: update %s: run_id changed", ErrInvalid, runID)
	}
	if m.AllocationAttempt < attempt {
		return nil, nil, fmt.Errorf("%w: update %s: allocation_attempt lowered from %d to %d", ErrInvalid, runID, attempt, m.AllocationAttempt)
	}
	if m.Status == "" {
		return nil, nil, fmt.Errorf("%w: update %s: status: required", ErrInvalid, runID)
	}
	m.Normalize()
	if err := m.Validate(); err != nil {
		return nil, nil, err
	}
	next, err = json.Marshal(m)
	if err != nil {
		return nil, nil, fmt.Errorf("runs: update %s: %w", runID, err)
	}
	return oldColumns, next, nil
}

// stored is Get's answer from a store's read of run runID's manifest: doc
// as read, err the read's error, and missing whether that error says the
// row does not exist.
func stored(runID string, doc []byte, err error, missing bool) (*runmanifest.Manifest, error) {
	if missing {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, runmanifest.SafeID(runID))
	}
	if err != nil {
		return nil, fmt.Errorf("runs: get %s: %w", runmanifest.SafeID(runID), err)
	}
	m, err := runmanifest.DecodeManifest(doc)
	if err != nil {
		return nil, fmt.Errorf("runs: get %s: stored manifest: %w", runID, err)
	}
	return m, nil
}
