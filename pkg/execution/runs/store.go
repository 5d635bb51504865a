package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Errors. Every refusal of input wraps ErrInvalid; the others say what the
// store holds. Messages name the run, template or package at fault.
var (
	// ErrInvalid marks a manifest, receipt, query or package the store
	// refuses (a missing run_id, a receipt without a fingerprint, ...).
	ErrInvalid = errors.New("runs: invalid input")
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
	Create(ctx context.Context, m *Manifest) error
	// Update reads the manifest of runID, calls fn on a copy and stores what
	// fn left, all in one transaction: concurrent Updates of one run do not
	// lose each other's changes. An error from fn aborts the update and is
	// returned (wrapped). It returns ErrNotFound for an unknown run, and
	// ErrCompleted if the stored manifest is already final: finalise a run
	// once, when its claim ends, with everything it recorded. fn must not
	// change run_id or lower allocation_attempt (ErrInvalid).
	Update(ctx context.Context, runID string, fn func(*Manifest) error) error
	// Get returns the manifest of runID, or ErrNotFound.
	Get(ctx context.Context, runID string) (*Manifest, error)
	// Query returns the ids of the runs matching every criterion set in q,
	// sorted, at most q.Limit of them when q.Limit > 0. A query with no
	// criterion is refused (ErrInvalid): it would list every run.
	Query(ctx context.Context, q Query) ([]string, error)
	// Open returns the ids of the runs that are not final yet (granted or
	// running), sorted: the claims a runtime still holds, or held when it
	// stopped without finalising them.
	Open(ctx context.Context) ([]string, error)
	// RecordPackages sets the package index of a workspace template (from
	// the SBOM attestation verified at build or pull time). Recording the
	// same set again changes nothing (Unchanged); a different set replaces
	// the old one (Updated). Runs whose template has no recorded packages
	// are never found by a package query.
	RecordPackages(ctx context.Context, templateID string, pkgs []Package) (Change, error)
	// Close releases the store. It does not lose anything Create or Update
	// returned nil for.
	Close() error
}

// Query selects runs by the artifacts they used. Every non-empty field must
// match (they combine with AND). Each is an exact identity as the manifest
// records it (a digest, an id, a revision), never a tag.
type Query struct {
	// Template matches workspace_template_id.
	Template string
	// RunnerImage matches runner_image_digest: the runner IMAGE's digest
	// (the generation's runner pin).
	RunnerImage string
	// RunnerBinary matches runner_binary_sha256: the sha256 of the runner
	// BINARY, as pool status and proof evidence show it.
	RunnerBinary string
	// NodeImage matches node_image_id.
	NodeImage string
	// Policy matches policy_revision.
	Policy string
	// SecretVersion matches secret_version: the pinned secret version, its
	// version included ("vault://kv/agents/token#3").
	SecretVersion string
	// Generation matches generation.
	Generation string
	// RequestKey matches request_key: the claim request's key.
	RequestKey string
	// Node matches node_id and RuntimeClass runtime_class (read from the
	// manifest, through an index on each).
	Node, RuntimeClass string
	// Package ("name@version", as in the template SBOMs) matches runs whose
	// workspace template contains that package.
	Package string
	// Limit caps the number of run ids returned; 0 means all.
	Limit int
}

func (q Query) empty() bool {
	return q.Package == "" && q.Node == "" && q.RuntimeClass == "" && !slices.ContainsFunc(q.columnValues(), func(v string) bool { return v != "" })
}

// Package is one package of a workspace template's SBOM, as the package
// query names it.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// String is "name@version".
func (p Package) String() string { return p.Name + "@" + p.Version }

// ParsePackage parses "name@version". The version is what follows the last
// '@', so scoped npm names work: "@babel/core@7.24.0" is @babel/core at 7.24.0.
// Errors wrap ErrInvalid.
func ParsePackage(s string) (Package, error) {
	i := strings.LastIndexByte(s, '@')
	if i <= 0 || i == len(s)-1 {
		return Package{}, fmt.Errorf("%w: package %q: want name@version", ErrInvalid, safeID(s))
	}
	p := Package{Name: s[:i], Version: s[i+1:]}
	if err := p.validate(); err != nil {
		return Package{}, err
	}
	return p, nil
}

func (p Package) validate() error {
	if p.Name == "" || p.Version == "" {
		return fmt.Errorf("%w: package %q: name and version are required", ErrInvalid, safeID(p.String()))
	}
	if strings.ContainsRune(p.Version, '@') {
		return fmt.Errorf("%w: package %q: the version holds '@'", ErrInvalid, safeID(p.String()))
	}
	// names may hold spaces (some SBOM catalogers make such names), never
	// control characters
	for _, v := range []string{p.Name, p.Version} {
		if len(v) > maxField || !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) {
			return fmt.Errorf("%w: package %q: not a printable name or version of at most %d bytes", ErrInvalid, safeID(p.String()), maxField)
		}
	}
	return nil
}

// Change says what a write did.
type Change string

const (
	Created   Change = "created"
	Updated   Change = "updated"
	Unchanged Change = "unchanged"
)

// StateFile is where a runtime's state directory keeps its run manifests.
const StateFile = "runs.db"

// change applies fn to m, the stored manifest of run runID, with the rules
// every store keeps: fn may not change the run id, lower the allocation
// attempt or clear the status, and the result is normalized and valid. It
// returns the query columns' values from before fn and the manifest's new
// encoding.
func change(runID string, m *Manifest, fn func(*Manifest) error) (oldColumns []string, next []byte, err error) {
	attempt, oldColumns := m.AllocationAttempt, m.columnValues()
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
	m.normalize()
	if err := m.validate(); err != nil {
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
func stored(runID string, doc []byte, err error, missing bool) (*Manifest, error) {
	if missing {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, safeID(runID))
	}
	if err != nil {
		return nil, fmt.Errorf("runs: get %s: %w", safeID(runID), err)
	}
	m, err := decodeManifest(doc)
	if err != nil {
		return nil, fmt.Errorf("runs: get %s: stored manifest: %w", runID, err)
	}
	return m, nil
}
