// Package runs keeps run manifests, the immutable records of everything a
// run used, and answers the operator's two questions from them: which
// control plane, runner, node image, workspace template, policy revision and
// secret versions produced run r-123; and which runs used this template,
// runner image or runner binary (two identities, named apart), node image,
// policy revision, secret version or generation, or a template that
// contains openssl@3.0.7.
//
// The manifest type and what travels with it (Status, Receipt, Lifecycle,
// Query, Package, ParseManifest) live in pkg/api/runmanifest, which
// imports only the standard library, so that a client reads manifests
// without the stores' databases; this package keeps the Store interface
// and its SQLite and PostgreSQL implementations.
//
// The runtime creates a Manifest when it grants a claim, updates it while
// the claim lives (sandbox assigned, ready, runner awakened, a move to a new
// sandbox under the next allocation attempt) and finalises it once when the
// claim ends (completed, failed or released); a final manifest is a record
// and Update refuses it (ErrCompleted). Credentials appear only as receipts
// {issuer, secret_version, sha256_fingerprint, issued_at, expires_at}; a
// receipt cannot hold anything else, and values that look like tokens are
// refused.
//
//	s, err := runs.OpenSQLite(ctx, "/var/lib/slipway/runs.db")
//	err = s.Create(ctx, &runmanifest.Manifest{RunID: "r-123", WorkspaceTemplateID: "sha256:…", …})
//	err = s.Update(ctx, "r-123", func(m *runmanifest.Manifest) error {
//		m.Status, m.Lifecycle.ResourcesReleased = runmanifest.StatusCompleted, now
//		return nil
//	})
//	m, err := s.Get(ctx, "r-123")
//	_, err = s.RecordPackages(ctx, "sha256:…", pkgs) // from the template's SBOM attestation
//	_, err = s.RecordBuilders(ctx, "sha256:…", bs)   // from its SLSA provenance (none: an empty set)
//	ids, err := s.Query(ctx, runmanifest.Query{Package: "openssl@3.0.7"})
//	open, err := s.Open(ctx) // runs not final yet: granted or running
//
// Store is the interface, with two implementations that pass one
// conformance suite. SQLite (modernc.org/sqlite, pure Go; schema version 4:
// an older file is migrated when opened, from version 1 runner_digest
// renamed runner_image_digest, from version 2 request_key added, from
// version 3 artifact_provenance added) is the store of one runtime, durable once a call
// returns (WAL, synchronous=FULL) and safe for concurrent use. Query
// returns run ids, sorted; Get gives the manifest of each. Open lists the
// runs not final yet, from an index of those alone: a runtime that starts
// again after a crash finalises the ones whose sandboxes died with it.
//
// Postgres (OpenPostgres, pgx) keeps the same records in a PostgreSQL
// database, in schema slipway_runs (schema version 5: an older database
// is migrated when opened, its rows kept), for many runtimes sharing one manifest
// store: queries span every run of every handle. Updates of one run queue
// on its row lock and recordings of one template's packages on an advisory
// lock, across processes. Open lists every open run in the database, not
// one runtime's: a runtime's restart recovery (finalising its orphans)
// needs runs to record their runtime before it can use a shared store.
//
// It does not decide anything about a run (the runtime does), it does not
// fetch or verify SBOM or provenance attestations (the runtime verifies
// them and hands the package list to RecordPackages, the builders to
// RecordBuilders), and it keeps no secret: there is none in
// a manifest.
package runs
