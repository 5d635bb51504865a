// Package rollout moves a pool from one generation to the next in the
// seed's seven steps, as a state machine whose state lives in the config
// repository, so that git log is the audit trail and a driver that dies
// resumes where it stopped.
//
// The state is the rollout record of pools/<pool>/desired.yaml (pool.Rollout):
// from, to, phase, status, reason, phase deadline, and the lease (holder,
// leaseUntil). Every transition is one commit with Slipway-Pool,
// Slipway-Generation, Slipway-Rollout and Slipway-Step trailers:
//
//	compatibility  Start: the intent (to, from, the first phase deadline)
//	lease          a driver takes (or renews) the lease; another stops with ErrHeld
//	warm           step 1 passed (the fleet's control-plane and runner protocols
//	               cover both generations): the new one is written as warming
//	prove          step 2 passed: its warm members are ready
//	route          step 3 passed: the evidence is committed and signed, and in the
//	               same commit the new generation becomes active, the old draining
//	drain          step 4 confirmed: the fleet serves from the routing commit;
//	               the old generation's open runs are listed
//	drain-wait,    the drain deadline passed: onDrainDeadline wait keeps waiting
//	drain-stop,    (runs listed), stop ends them (listed), checkpoint suspends
//	drain-checkpoint each and resumes it on the new generation (each run named
//	               with its checkpoint and new sandbox; a run not moved with why)
//	remove         step 5 done: the old generation is retained
//	retain         step 6 done (nothing of it runs); step 7: it stays retained
//	               for its rollback and restore windows; the rollout succeeded
//	rolled-back    a check failed before routing: the new generation leaves the
//	               pool, the active one never changed, the reason is recorded
//	failed         a visible, resumable failure (the fleet did not confirm a
//	               step by its deadline, or did not answer at all, warm and
//	               proofs included): unknown is never taken for success, nor
//	               for a failure of the new generation
//
// A step counts as done only when the fleet reports that it serves from
// the step's commit or a later one (Fleet.Sync, gitops.Repo.Contains).
// Proof checks run on warm members of the new generation only, through the
// Fleet (runtimeapi.Client implements it): allocate, identity, network,
// template-tests, workspace-writable and cleanup, as the pool lists them.
// The evidence is stored under pools/<pool>/evidence/<generation>/<rollout>/
// as evidence.json and an in-toto statement (predicate type
// PredicateEvidence, subject the generation) in a DSSE envelope signed by
// the driver's key; unsigned evidence must be chosen explicitly.
// VerifyEvidence checks committed evidence against the keys of the
// repository's verification policy (signature, predicate type, subject,
// folder, evidence.json) and ReadEvidence decodes it unverified.
//
// Abort stops a rollout before routing; after routing the way back is a
// rollback: a new rollout to a retained generation (Start with rollback),
// warmed and proved like any other. GC deletes, with their signatures and
// attestations, the images of retained generations past both windows that
// no other generation pins.
//
// Run drives the rollout in progress; with none (the last one ended and
// no start was committed since) it drives nothing and returns
// ErrNotInProgress naming the last one, never that one's outcome.
//
// Failpoints: binaries built with -tags failpoints kill themselves with
// SIGKILL at the transition named by $SLIPWAY_ROLLOUT_FAILPOINT
// ("before-commit:compatibility", start's own commit, "after-commit:drain",
// …), and list every transition they pass in the file named by
// $SLIPWAY_ROLLOUT_FAILPOINT_TRACE, for the tests that resume a driver
// from every transition.
package rollout
