// Package runtimeapi is the contract of the runtime's HTTP API: every
// request and answer type (ClaimBody and Grant, ExecBody, ExecResult and
// the streamed ExecFrame, ReleaseBody, PoolStatus, Info, ProofRequest and
// ProofResult, PolicyView, ClaimIdentity, CheckBody, ...), the error shape
// (ErrorBody on the wire, APIError to a client, with a stable Code such as
// CodeStale or CodeFenced beside the reason), the query parameters of
// GET /v1/runs, and the Client that speaks it.
//
//	c, err := runtimeapi.NewClient("http://127.0.0.1:7070", token)
//	g, err := c.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "acme", RequestKey: "job-42.1"})
//	res, err := c.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, Argv: []string{"make", "test"}})
//	err = c.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token, ExitCode: &res.ExitCode})
//	if runtimeapi.IsCode(err, runtimeapi.CodeFenced) { … the claim moved: ask for its grant again … }
//	m, err := c.Run(ctx, g.RunID) // the run manifest (pkg/api/runmanifest)
//
// The routes:
//
//	POST /v1/pools/{pool}/claims      claim a sandbox        -> Grant (201; 200 adopted)
//	POST /v1/claims/{run}/exec        run a command           -> ExecResult (or NDJSON ExecFrames)
//	POST /v1/claims/{run}/release     end the claim           -> ReleaseResult
//	POST /v1/claims/{run}/identity    the claim's runner says who it is -> ClaimIdentity
//	GET  /v1/runs/{run}               the run manifest
//	GET  /v1/runs?…                   run ids by artifact     -> RunsResult
//	GET  /v1/pools/{pool}             per generation: warm ready, claimed -> PoolStatus
//	POST /v1/pools/{pool}/proofs      a rollout's proof checks -> ProofResult
//	POST /v1/pools/{pool}/generations/{generation}/stop -> StopResult
//	POST /v1/pools/{pool}/generations/{generation}/checkpoint -> CheckpointGenerationResult
//	POST /v1/claims/{run}/checkpoint, /suspend (CheckpointBody) -> CheckpointResult; /resume (ResumeBody) -> Grant
//	POST /v1/runs/{run}/suspend       an operator's suspend (OperatorAction: reason, actor) -> CheckpointResult
//	POST /v1/runs/{run}/resume        an operator's resume (OperatorAction) -> ResumeResult
//	GET  /v1/runs/{run}/durable       question 6, with who suspended and resumed and why -> Durable
//	POST /v1/checkpoints/sweep        checkpoints past their restore window -> SweepResult
//	GET  /v1/info                     observed revision, protocols, limits -> Info
//	GET  /v1/policy                   revision in effect, its age, the rules -> PolicyView
//	POST /v1/credentials/check        a provider's check of a token -> CheckResult
//	POST /v1/sync                     read the config repository now -> SyncResult
//	GET  /v1/incidents                the runtime's own incidents -> Incidents (the control plane's shape)
//
// Every request carries the runtime's bearer token. An error answer is
// ErrorBody: {"error": reason, "code": code}, and "id" for an internal
// error: its reason names no host path, command line or other internal
// state, and the runtime's log holds the detail under that error id. A
// refusal the client can fix (a field, pool or limit at fault) is told
// whole.
//
// It is a contract package: it imports only the standard library,
// pkg/api/runmanifest and pkg/api/incidentreport (the incident report both
// servers serve), so that a program that only talks to a runtime (a
// control plane, a canary, a CLI) does not link the runtime, its stores or
// its verification. It is not the server: pkg/execution/runtime implements
// these routes and imports this package, never the reverse.
package runtimeapi
