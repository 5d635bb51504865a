package runtime

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/slipway-dev/slipway/internal/apierror"
	"github.com/slipway-dev/slipway/pkg/api/incidentreport"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// maxBody bounds a request body.
const maxBody = 1 << 20

// Server is the runtime's HTTP API (JSON, bearer-token auth; the types
// are package runtimeapi's, and so is the Client):
//
//	POST /v1/pools/{pool}/claims      claim a sandbox        -> Grant (201; 200 adopted)
//	POST /v1/claims/{run}/exec        run a command           -> ExecResult
//	POST /v1/claims/{run}/release     end the claim           -> ReleaseResult
//	POST /v1/claims/{run}/identity    the claim's runner says who it is -> ClaimIdentity
//	GET  /v1/runs/{run}               the run manifest
//	GET  /v1/runs?…                   run ids by artifact     -> RunsResult
//	GET  /v1/traces/{id}              the spans of a trace the runtime holds -> TraceResult
//	GET  /v1/pools/{pool}             per generation: warm ready, claimed
//	GET  /v1/info                     observed revision, protocols, limits
//	GET  /v1/policy                   revision in effect, its age, the rules
//	POST /v1/credentials/check        a provider's check of a token
//	POST /v1/sync                     read the config repository now
//	GET  /v1/cleanup                  cleanup remaining and recent (reconciler records)
//	GET  /v1/incidents                the incidents its runs and cleanup records show (WithIncidents)
//	GET  /metrics                     Prometheus (bounded labels only)
//	GET  /healthz                     no token needed (liveness)
//	GET  /readyz                      backend and config repository (no token; readiness: ready.go)
type Server struct {
	rt      *Runtime
	sync    *Syncer
	backend sandbox.Backend
	token   []byte
	mux     *http.ServeMux

	metrics   *telemetry.Metrics
	poolsWhen func() bool // nil: always (WithPoolSamplesWhen)

	syncErrMu sync.Mutex
	syncErr   string // the last sync error told, and its id
	syncErrID string
	ready     apierror.Repeats // readiness errors logged once
	checks    []ReadyCheck     // more parts /readyz checks (WithReadyCheck)
}

// syncError is what an API answer says of the last sync's error: a reason
// and an error id, never the error itself (it names the repository's path
// or URL and the cache directory); the detail goes to the runtime's log
// once per distinct error, under the same id.
func (s *Server) syncError(err error) string {
	if err == nil {
		return ""
	}
	if id := s.sync.errID(err.Error()); id != "" { // the syncer's line has it
		return fmt.Sprintf("the config repository could not be read at the last sync (error id %s; the runtime's log has the detail)", id)
	}
	s.syncErrMu.Lock()
	defer s.syncErrMu.Unlock()
	if msg := err.Error(); msg != s.syncErr {
		s.syncErr, s.syncErrID = msg, apierror.NewID()
		s.logf("runtime: error %s: config repository sync: %v", s.syncErrID, err)
	}
	return fmt.Sprintf("the config repository could not be read at the last sync (error id %s; the runtime's log has the detail)", s.syncErrID)
}

// ServerOption configures NewServer.
type ServerOption func(*serverOptions)

type serverOptions struct {
	poolsWhen func() bool
	metrics   *telemetry.Metrics
	cleanup   func(ctx context.Context) (any, error)
	cost      CostReport
	checks    []ReadyCheck

	// incidents serves GET /v1/incidents (WithIncidents, incidents.go).
	incidents func(ctx context.Context) (*incidentreport.Report, error)
}

// WithCleanup serves GET /v1/cleanup from view: what cleanup remains and
// what was done lately (the runtime's cleanup reconciler's records).
func WithCleanup(view func(ctx context.Context) (any, error)) ServerOption {
	return func(o *serverOptions) { o.cleanup = view }
}

// WithPoolSamplesWhen reads the cluster's pool counts for GET /metrics
// (pool_sandboxes, unused_warm_minutes, warm_shortage_time) only while
// leading says so: of replicas that share a cluster, the one holding the
// Lease reports them once, the others not at all (each still reports the
// warm hits of its own claims).
func WithPoolSamplesWhen(leading func() bool) ServerOption {
	return func(o *serverOptions) { o.poolsWhen = leading }
}

// WithMetrics serves m on GET /metrics (default: a private set with no
// environment label). m must not serve another Server.
func WithMetrics(m *telemetry.Metrics) ServerOption {
	return func(o *serverOptions) { o.metrics = m }
}

// NewServer serves rt to clients presenting token; sync (nil for a runtime
// that does not follow a config repository) serves /v1/sync.
func NewServer(rt *Runtime, sync *Syncer, backend sandbox.Backend, token string, opts ...ServerOption) (*Server, error) {
	if len(token) < 16 {
		return nil, errors.New("runtime: the API token must have at least 16 characters")
	}
	var o serverOptions
	for _, opt := range opts {
		opt(&o)
	}
	m := o.metrics
	if m == nil {
		var err error
		if m, err = telemetry.NewMetrics(); err != nil {
			return nil, err
		}
	}
	s := &Server{rt: rt, sync: sync, backend: backend, token: []byte(token), mux: http.NewServeMux(), metrics: m, checks: o.checks, poolsWhen: o.poolsWhen}
	if err := m.ObservePools(s.samplePools); err != nil {
		return nil, err
	}
	if rt != nil {
		if err := m.ObservePolicyDenials(rt.PolicyDenials); err != nil {
			return nil, err
		}
	}

	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := backend.Health(r.Context()); err != nil {
			s.writeError(w, r, http.StatusServiceUnavailable, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.Handle("GET /metrics", s.auth(m.Handler().ServeHTTP))
	if view := o.cleanup; view != nil {
		s.mux.Handle("GET /v1/cleanup", s.auth(func(w http.ResponseWriter, r *http.Request) {
			v, err := view(r.Context())
			if err != nil {
				s.writeError(w, r, http.StatusInternalServerError, err)
				return
			}
			writeJSON(w, http.StatusOK, v)
		}))
	}
	if o.cost != nil {
		s.mux.Handle("GET /v1/pools/{pool}/cost", s.auth(s.poolCost(o.cost))) // costapi.go
	}
	s.mux.Handle("POST /v1/pools/{pool}/claims", s.auth(s.claim))
	s.mux.Handle("POST /v1/claims/{run}/exec", s.auth(s.exec))
	s.mux.Handle("POST /v1/claims/{run}/release", s.auth(s.release))
	s.mux.Handle("POST /v1/claims/{run}/identity", s.auth(s.identity)) // identity.go
	s.checkpointRoutes()                                               // checkpointapi.go
	s.drainRoutes()                                                    // drain.go
	s.incidentRoutes(o.incidents)                                      // incidents.go
	s.sweepRoutes()                                                    // sweepapi.go
	s.mux.Handle("GET /v1/runs/{run}", s.auth(s.run))
	s.mux.Handle("GET /v1/runs/{run}/packages", s.auth(s.runPackages)) // packages.go
	s.mux.Handle("GET /v1/traces/{id}", s.auth(s.traces))              // tracing.go
	s.mux.Handle("GET /v1/runs", s.auth(s.queryRuns))
	s.mux.Handle("GET /v1/pools/{pool}", s.auth(s.poolStatus))
	s.mux.Handle("GET /v1/info", s.auth(s.info))
	s.mux.Handle("GET /v1/policy", s.auth(s.policy))
	s.mux.Handle("POST /v1/credentials/check", s.auth(s.checkCredential))
	s.mux.Handle("POST /v1/pools/{pool}/proofs", s.auth(s.prove))
	s.mux.Handle("POST /v1/pools/{pool}/generations/{generation}/stop", s.auth(func(w http.ResponseWriter, r *http.Request) {
		stopped, err := s.rt.Stop(r.Context(), r.PathValue("pool"), r.PathValue("generation"))
		if stopped == nil {
			stopped = []string{}
		}
		if err != nil {
			s.writeError(w, r, http.StatusInternalServerError, err)
			return
		}
		writeJSON(w, http.StatusOK, runtimeapi.StopResult{Stopped: stopped})
	}))
	s.mux.Handle("POST /v1/sync", s.auth(func(w http.ResponseWriter, r *http.Request) {
		if s.sync == nil {
			s.writeError(w, r, http.StatusNotImplemented, apierror.Public("this runtime does not follow a config repository", nil))
			return
		}
		d, err := s.sync.Sync(r.Context())
		if err != nil {
			s.writeError(w, r, http.StatusBadGateway, err)
			return
		}
		writeJSON(w, http.StatusOK, runtimeapi.SyncResult{ObservedRevision: d.Revision})
	}))
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.forward(w, r) { // a claim another replica holds (forward.go)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// auth refuses requests without the bearer token: 401 and nothing else.
func (s *Server) auth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="slipway"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h(w, withTraceContext(r))
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers status with the code of the sentinel err wraps
// (runtimeapi.ErrorBody) and what the client may be told of err: a
// refusal with a code of its own (stale, no pool, fenced, invalid, ...)
// or a pool's unenforceable limit whole; anything else (code internal) as
// a reason and an error id, the detail (host paths, command lines) going
// to the runtime's log under the id.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, status int, err error) {
	writeJSON(w, status, s.errorBody(r, status, err))
}

// errorBody is writeError's body, logging what it keeps back.
func (s *Server) errorBody(r *http.Request, status int, err error) runtimeapi.ErrorBody {
	code := errorCode(status, err)
	// A pool refused for a limit this host cannot enforce is the pool
	// author's to fix: told whole, naming the pool file and the limit.
	a := apierror.Decide(err, code != runtimeapi.CodeInternal || errors.Is(err, ErrUnenforceable))
	if a.Hidden() {
		s.logf("runtime: error %s: %s %s: %d: %v", a.ID, r.Method, r.URL.Path, status, err)
	}
	return runtimeapi.ErrorBody{Error: a.Reason, Code: code, ID: a.ID}
}

// logf writes to the runtime's log (standard error without a runtime).
func (s *Server) logf(format string, args ...any) {
	if s.rt != nil {
		s.rt.logf(format, args...)
		return
	}
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// errorCode is the runtimeapi code of an error answer: the sentinel err
// wraps says it, else the status does.
func errorCode(status int, err error) string {
	for _, c := range []struct {
		err  error
		code string
	}{
		{ErrStale, runtimeapi.CodeStale}, {sandbox.ErrGenerationGone, runtimeapi.CodeStale}, {ErrNoActive, runtimeapi.CodeNoActiveGeneration},
		{ErrRequestKeyUsed, runtimeapi.CodeRequestKeyUsed}, {ErrNoPool, runtimeapi.CodeNoPool},
		{ErrNoClaim, runtimeapi.CodeNoClaim}, {ErrFenced, runtimeapi.CodeFenced},
		{ErrProofRefused, runtimeapi.CodeProofRefused}, {runs.ErrNotFound, runtimeapi.CodeNotFound},
		{ErrSuspended, runtimeapi.CodeSuspended}, {checkpoint.ErrRefused, runtimeapi.CodeCheckpointRefused},
		{ErrNoCheckpoints, runtimeapi.CodeNoCheckpoints}, {ErrNotSuspended, runtimeapi.CodeNotSuspended},
		{ErrDraining, runtimeapi.CodeDraining},
	} {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	switch status {
	case http.StatusBadRequest:
		return runtimeapi.CodeInvalid
	case http.StatusUnauthorized:
		return runtimeapi.CodeUnauthorized
	case http.StatusNotFound:
		return runtimeapi.CodeNotFound
	}
	return runtimeapi.CodeInternal
}

// decode reads a JSON body strictly: 400 with a reason otherwise.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		s.writeError(w, r, http.StatusBadRequest, fmt.Errorf("request body: %w", err))
		return false
	}
	if dec.More() {
		s.writeError(w, r, http.StatusBadRequest, errors.New("request body: one JSON object expected"))
		return false
	}
	return true
}

func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	var b runtimeapi.ClaimBody
	if !s.decode(w, r, &b) {
		return
	}
	if b.DeadlineSeconds < 0 {
		s.writeError(w, r, http.StatusBadRequest, errors.New("deadlineSeconds < 0"))
		return
	}
	if b.RequestKey != "" {
		if err := CheckRequestKey(b.RequestKey); err != nil {
			s.writeError(w, r, http.StatusBadRequest, err)
			return
		}
	}
	req := ClaimRequest{Pool: r.PathValue("pool"), Tenant: b.Tenant, SessionID: b.SessionID, RequestKey: b.RequestKey, ControlPlane: b.ControlPlane}
	if b.DeadlineSeconds > 0 {
		req.Deadline = time.Now().Add(time.Duration(b.DeadlineSeconds * float64(time.Second)))
	}
	start := time.Now()
	g, err := s.rt.Claim(r.Context(), req)
	switch {
	case errors.Is(err, ErrDraining):
		s.refuseDraining(w, r, err)
		return
	case errors.Is(err, ErrStale):
		s.writeError(w, r, http.StatusServiceUnavailable, err)
		return
	case errors.Is(err, sandbox.ErrGenerationGone):
		// Routed by a view older than the cluster (a rollout drained the
		// generation since): read the config repository now, and the
		// claimant asks again (503 stale, Retry-After).
		if s.sync != nil {
			s.sync.Kick()
		}
		w.Header().Set("Retry-After", "1")
		s.writeError(w, r, http.StatusServiceUnavailable, err)
		return
	case s.passOnClaim(w, r, b, err): // the key's claim is open on another replica
		return
	case errors.Is(err, ErrNoActive), errors.Is(err, ErrRequestKeyUsed):
		s.writeError(w, r, http.StatusConflict, err)
		return
	case errors.Is(err, ErrRequestKeyInvalid):
		s.writeError(w, r, http.StatusBadRequest, err)
		return
	case errors.Is(err, ErrNoPool):
		s.writeError(w, r, http.StatusNotFound, err)
		return
	case err != nil:
		s.writeError(w, r, http.StatusInternalServerError, err)
		return
	}
	if g.Adopted {
		writeJSON(w, http.StatusOK, g)
		return
	}
	// Pools come from the config repository, not the client: a bounded set.
	s.metrics.SandboxCreated(r.Context(), req.Pool, g.Generation, g.Warm, time.Since(start))
	writeJSON(w, http.StatusCreated, g)
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var b runtimeapi.ExecBody
	if !s.decode(w, r, &b) {
		return
	}
	if len(b.Argv) == 0 {
		s.writeError(w, r, http.StatusBadRequest, errors.New("argv: required"))
		return
	}
	if b.TimeoutSeconds < 0 || b.GraceSeconds < 0 || b.GraceSeconds*1000 > runner.MaxGraceMs || b.MaxOutput < 0 || b.MaxOutput > runner.MaxOutputLimit {
		s.writeError(w, r, http.StatusBadRequest, fmt.Errorf("timeoutSeconds %g, graceSeconds %g or maxOutput %d out of range (graceSeconds 0 to %d, maxOutput 0 to %d)",
			b.TimeoutSeconds, b.GraceSeconds, b.MaxOutput, runner.MaxGraceMs/1000, runner.MaxOutputLimit))
		return
	}
	req := runner.ExecRequest{Argv: b.Argv, Env: b.Env, Dir: b.Dir, MaxOutput: b.MaxOutput,
		TimeoutMs: int64(b.TimeoutSeconds * 1000), GraceMs: int64(b.GraceSeconds * 1000)}
	if b.Stream {
		s.execStream(w, r, b, req) // execstream.go
		return
	}
	var out, errb interface {
		io.Writer
		String() string
	}
	var kept func() int64
	if b.KeepTail {
		limit := cmp.Or(b.MaxOutput, runner.DefaultMaxOutput)
		o, e := newHeadTail(limit), newHeadTail(limit)
		out, errb = o, e
		kept = func() int64 { return int64(o.kept() + e.kept()) }
		req.MaxOutput = runner.MaxOutputLimit // the runtime bounds it
	} else {
		o, e := &bytes.Buffer{}, &bytes.Buffer{}
		out, errb = o, e
		kept = func() int64 { return int64(o.Len() + e.Len()) }
	}
	st, err := s.rt.Exec(r.Context(), r.PathValue("run"), b.Token, req, out, errb)
	if err != nil {
		s.writeError(w, r, claimStatus(err), err)
		return
	}
	dropped := max(st.OutputBytes-kept(), 0)
	writeJSON(w, http.StatusOK, runtimeapi.ExecResult{ExitCode: st.ExitCode, Stdout: out.String(), Stderr: errb.String(),
		Truncated: st.Truncated || dropped > 0, DroppedBytes: dropped, TimedOut: st.TimedOut, Stop: st.Stop, Outcome: st.Outcome,
		EventsRejected: st.EventsRejected})
}

func claimStatus(err error) int {
	switch {
	case errors.Is(err, ErrNoClaim):
		return http.StatusNotFound
	case errors.Is(err, ErrFenced), errors.Is(err, ErrSuspended):
		return http.StatusConflict
	default:
		return http.StatusInternalServerError
	}
}

func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	var b runtimeapi.ReleaseBody
	if !s.decode(w, r, &b) {
		return
	}
	start := time.Now()
	pool := s.rt.poolOf(r.PathValue("run"))
	if err := s.rt.ReleaseAfter(r.Context(), r.PathValue("run"), b.Token, b.ExitCode, b.PostHookComplete); err != nil {
		s.writeError(w, r, claimStatus(err), err)
		return
	}
	s.metrics.Released(r.Context(), pool, time.Since(start))
	writeJSON(w, http.StatusOK, runtimeapi.ReleaseResult{Released: r.PathValue("run")})
}

// poolOf is the pool of an open claim ("" when there is none).
func (r *Runtime) poolOf(runID string) string {
	c, err := r.lookup(runID)
	if err != nil {
		return ""
	}
	return c.pool
}

func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	m, err := s.rt.store.Get(r.Context(), r.PathValue("run"))
	if errors.Is(err, runs.ErrNotFound) {
		s.writeError(w, r, http.StatusNotFound, err)
		return
	}
	if err != nil {
		s.writeError(w, r, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

// queryRuns lists the runs matching the query parameters (at least one
// artifact criterion): {"runs": [ids]}.
func (s *Server) queryRuns(w http.ResponseWriter, r *http.Request) {
	q, err := runtimeapi.ParseQuery(r.URL.Query())
	if err != nil {
		s.writeError(w, r, http.StatusBadRequest, err)
		return
	}
	ids, err := s.rt.store.Query(r.Context(), q)
	if errors.Is(err, runs.ErrInvalid) {
		s.writeError(w, r, http.StatusBadRequest, err)
		return
	}
	if err != nil {
		s.writeError(w, r, http.StatusInternalServerError, err)
		return
	}
	if ids == nil {
		ids = []string{}
	}
	writeJSON(w, http.StatusOK, runtimeapi.RunsResult{Runs: ids})
}

func (s *Server) poolStatus(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("pool")
	d, _ := s.rt.desired()
	if d == nil || d.Pools[name] == nil {
		s.writeError(w, r, http.StatusNotFound, fmt.Errorf("%w: %q", ErrNoPool, name))
		return
	}
	all, err := s.backend.List(r.Context(), sandbox.Filter{Pool: name})
	if err != nil {
		s.writeError(w, r, http.StatusInternalServerError, err)
		return
	}
	st := poolStatusOf(name, d, all)
	if cp, ok := s.backend.(sandbox.ClusterPools); ok {
		counts, err := cp.WarmCounts(r.Context(), name)
		if err != nil {
			s.writeError(w, r, http.StatusInternalServerError, err)
			return
		}
		addWarmCounts(st, counts)
	}
	writeJSON(w, http.StatusOK, st)
}

// addWarmCounts counts the warm members a cluster keeps (its List shows
// claimed sandboxes only) in pool status st.
func addWarmCounts(st *runtimeapi.PoolStatus, counts map[string]sandbox.WarmCount) {
	for i := range st.Generations {
		c := counts[st.Generations[i].ID]
		st.Generations[i].Ready += c.Ready
		st.Generations[i].Warming += c.Warming
	}
}

// poolStatusOf counts the pool's sandboxes per generation: those the
// desired state names, in its order, then any other that still has
// sandboxes (State "").
func poolStatusOf(name string, d *Desired, all []*sandbox.Sandbox) *runtimeapi.PoolStatus {
	out := &runtimeapi.PoolStatus{Pool: name, ObservedRevision: d.Revision, Generations: []runtimeapi.GenerationStatus{}}
	index := map[string]int{}
	for _, e := range d.Pools[name].State.Generations {
		index[e.ID] = len(out.Generations)
		out.Generations = append(out.Generations, runtimeapi.GenerationStatus{ID: e.ID, State: e.State, Runs: []string{}, Sandboxes: []runtimeapi.SandboxStatus{}})
	}
	for _, sb := range all {
		if sb.State == sandbox.StateDead {
			continue
		}
		i, ok := index[sb.Generation]
		if !ok {
			i = len(out.Generations)
			index[sb.Generation] = i
			out.Generations = append(out.Generations, runtimeapi.GenerationStatus{ID: sb.Generation, Runs: []string{}, Sandboxes: []runtimeapi.SandboxStatus{}})
		}
		gs := &out.Generations[i]
		image := ""
		if g := d.Pools[name].Generations[sb.Generation]; g != nil {
			image = g.Pins[generation.Runner].Identity()
		}
		gs.Sandboxes = append(gs.Sandboxes, runtimeapi.SandboxStatus{ID: sb.ID, Owner: sb.Owner, State: string(sb.State),
			RunnerImageDigest: image, RunnerBinarySHA256: sb.RunnerBinarySHA256, TemplateID: sb.TemplateID})
		switch {
		case sb.Owner != sandbox.OwnerWarm:
			gs.Claimed++
			gs.Runs = append(gs.Runs, sb.Owner)
		case sb.State == sandbox.StateRunning:
			gs.Ready++
		default:
			gs.Warming++
		}
	}
	for i := range out.Generations {
		slices.Sort(out.Generations[i].Runs)
	}
	return out
}

// samplePools is what the metrics read at each scrape: per pool, its
// sandboxes by class, and the active generation's ready warm members
// against its warm size.
func (s *Server) samplePools(ctx context.Context) ([]telemetry.PoolSample, error) {
	if s.poolsWhen != nil && !s.poolsWhen() {
		return nil, nil // another replica reports the cluster's counts
	}
	all, err := s.backend.List(ctx, sandbox.Filter{})
	if err != nil {
		return nil, err
	}
	d, _ := s.rt.desired()
	byPool := map[string]*telemetry.PoolSample{}
	sample := func(pool string) *telemetry.PoolSample {
		if byPool[pool] == nil {
			byPool[pool] = &telemetry.PoolSample{Pool: pool}
		}
		return byPool[pool]
	}
	active := map[string]string{}
	if d != nil {
		for name, p := range d.Pools {
			ps := sample(name)
			ps.Generations = []string{}
			for _, e := range p.State.Generations {
				if e.State == "active" || e.State == "draining" {
					ps.Generations = append(ps.Generations, e.ID)
				}
				if e.State == "active" {
					active[name] = e.ID
					ps.WarmTarget = p.Pool.Spec.WarmSize
					if n := stateWarmSize(p, e.ID); n > 0 {
						ps.WarmTarget = n
					}
				}
			}
		}
	}
	for _, sb := range all {
		ps := sample(sb.Pool)
		switch {
		case sb.State == sandbox.StateDead:
			ps.Dead++
		case sb.Owner == sandbox.OwnerWarm:
			ps.Warm++
			if sb.State == sandbox.StateRunning && sb.Generation == active[sb.Pool] {
				ps.Ready++
			}
		default:
			ps.Claimed++
		}
	}
	// A cluster keeps its warm members out of List: it counts them.
	if cp, ok := s.backend.(sandbox.ClusterPools); ok && d != nil {
		for name := range d.Pools {
			counts, err := cp.WarmCounts(ctx, name)
			if err != nil {
				return nil, err
			}
			for gen, c := range counts {
				byPool[name].Warm += c.Ready + c.Warming
				if gen == active[name] {
					byPool[name].Ready += c.Ready
				}
			}
		}
	}
	out := make([]telemetry.PoolSample, 0, len(byPool))
	for _, ps := range byPool {
		out = append(out, *ps)
	}
	return out, nil
}

// Confinement is what a backend says about how its sandboxes are confined,
// for GET /v1/info, when it is not the local backend's (setrlimit and a
// deadline, a network namespace of their own).
type Confinement interface {
	Confinement() (limits, network string)
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	d, at := s.rt.desired()
	out := runtimeapi.Info{
		ControlPlaneProtocol: runtimeapi.ProtocolRange{Min: MinControlPlaneProtocol, Max: ControlPlaneProtocol},
		RunnerProtocol:       runtimeapi.ProtocolRange{Min: runner.MinProtocolVersion, Max: runner.ProtocolVersion},
		Limits:               runtimeapi.LimitsInfo{Cgroup: "none", Enforced: []string{}, Description: "setrlimit and a wall-clock deadline per command"},
		Network:              "deny (own network namespace, loopback only)",
	}
	if e := enforcement(s.backend); e != nil {
		out.Limits = runtimeapi.LimitsInfo{Cgroup: e.Cgroup, Enforced: e.Enforced, How: e.How, Max: e.Max, Unavailable: e.Unavailable,
			Description: "setrlimit and a wall-clock deadline per command; the pool's limits as Enforced says, each proved at the runtime's start on a probe (set and read back)"}
	}
	if c, ok := s.backend.(Confinement); ok {
		out.Limits.Description, out.Network = c.Confinement()
	}
	if d != nil {
		out.ObservedRevision, out.ObservedAt = d.Revision, at.UTC()
	}
	if s.sync != nil {
		if _, _, err := s.sync.Current(); err != nil {
			out.LastSyncError = s.syncError(err)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// prove runs a rollout's proof checks (POST /v1/pools/{pool}/proofs).
func (s *Server) prove(w http.ResponseWriter, r *http.Request) {
	var req runtimeapi.ProofRequest
	if !s.decode(w, r, &req) {
		return
	}
	res, err := s.rt.Prove(r.Context(), r.PathValue("pool"), req)
	switch {
	case errors.Is(err, ErrDraining):
		s.refuseDraining(w, r, err)
	case errors.Is(err, ErrNoPool):
		s.writeError(w, r, http.StatusNotFound, err)
	case errors.Is(err, ErrStale):
		s.writeError(w, r, http.StatusServiceUnavailable, err)
	case errors.Is(err, ErrProofRefused):
		s.writeError(w, r, http.StatusConflict, err)
	case err != nil:
		s.writeError(w, r, http.StatusInternalServerError, err)
	default:
		writeJSON(w, http.StatusOK, res)
	}
}
