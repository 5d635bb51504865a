package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
)

var funcs = template.FuncMap{
	"clean":     Clean,
	"orUnknown": orUnknown,
	"short": func(s string) string {
		if len(s) > 14 {
			return s[:14] + "…"
		}
		return s
	},
	"fmtTime": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05.000Z")
	},
}

func (s *Server) home(w http.ResponseWriter, r *http.Request, ss *session) {
	s.render(w, r, http.StatusOK, "home", s.page(ss, "Slipway console", nil))
}

type jobsData struct {
	Jobs   []*controlapi.Job
	State  controlapi.State
	States []controlapi.State
}

func (s *Server) jobs(w http.ResponseWriter, r *http.Request, ss *session) {
	st := controlapi.State(r.URL.Query().Get("state"))
	js, err := ss.api.List(r.Context(), st, 200)
	if err != nil {
		s.fail(w, r, ss, http.StatusBadGateway, "jobs", err)
		return
	}
	states := []controlapi.State{controlapi.Queued, controlapi.Admitted, controlapi.Allocating, controlapi.Running, controlapi.Canceling,
		controlapi.Succeeded, controlapi.Failed, controlapi.Canceled, controlapi.DeadlineExceeded, controlapi.Refused, controlapi.Unknown}
	s.render(w, r, http.StatusOK, "jobs", s.page(ss, "Jobs", jobsData{Jobs: js, State: st, States: states}))
}

type jobData struct {
	Job   *controlapi.Job
	Trace *controlapi.JobTrace
}

func (s *Server) job(w http.ResponseWriter, r *http.Request, ss *session) {
	id := r.PathValue("id")
	j, err := ss.api.Get(r.Context(), id)
	if err != nil {
		s.fail(w, r, ss, http.StatusBadGateway, "job "+id, err)
		return
	}
	tr, err := ss.api.Trace(r.Context(), id)
	if err != nil {
		tr = nil // the trace is what this replica's ring holds; none is not an error of the page
	}
	if tr != nil && len(tr.Spans) == 0 {
		tr = nil
	}
	s.render(w, r, http.StatusOK, "job", s.page(ss, "Job "+j.ID, jobData{Job: j, Trace: tr}))
}

// jobEvents proxies the job's event stream (the control plane's SSE,
// resumed with Last-Event-ID) as lines the page shows: output cleaned and
// redacted, states and results in words.
func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request, ss *session) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	var after int64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		fmt.Sscan(v, &after)
	}
	id := r.PathValue("id")
	if _, err := ss.api.Get(r.Context(), id); err != nil {
		var ae *controlapi.APIError
		if errors.As(err, &ae) {
			http.Error(w, ae.Error(), ae.Status)
			return
		}
		http.Error(w, "the control plane did not answer", http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	err := ss.api.Follow(r.Context(), id, controlapi.FollowOptions{After: after}, func(e controlapi.Event) error {
		if err := writeSSE(w, "line", fmt.Sprint(e.Seq), EventLine(e)); err != nil {
			return err
		}
		fl.Flush()
		return nil
	})
	switch {
	case r.Context().Err() != nil:
	case err != nil:
		s.log.Warn("console: follow", "job", id, "err", err)
		_ = writeSSE(w, "failure", "", "the control plane's stream broke off")
	default:
		_ = writeSSE(w, "end", "", "the result event arrived")
	}
	fl.Flush()
}

func writeSSE(w http.ResponseWriter, event, id, data string) error {
	var b strings.Builder
	b.WriteString("event: " + event + "\n")
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	for _, l := range strings.Split(data, "\n") {
		b.WriteString("data: " + l + "\n")
	}
	b.WriteString("\n")
	_, err := w.Write([]byte(b.String()))
	return err
}

// EventLine is one event of a job's stream as the console shows it:
// its sequence, kind and what it says, cleaned (Clean).
func EventLine(e controlapi.Event) string {
	head := fmt.Sprintf("#%d %s %s", e.Seq, e.At.UTC().Format("15:04:05.000"), e.Kind)
	if e.Kind == controlapi.KindStdout || e.Kind == controlapi.KindStderr {
		if o, err := e.Output(); err == nil {
			return head + " " + Clean(string(o.Bytes()))
		}
	}
	if len(e.Data) > 0 {
		return head + " " + Clean(string(e.Data))
	}
	return head
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request, ss *session) {
	id := r.PathValue("id")
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if reason == "" {
		s.fail(w, r, ss, http.StatusBadRequest, "cancel job "+id+": a reason is required; nothing was canceled", nil)
		return
	}
	if _, err := ss.api.CancelWithReason(r.Context(), id, reason); err != nil {
		s.fail(w, r, ss, http.StatusBadGateway, "cancel job "+id, err)
		return
	}
	http.Redirect(w, r, "/jobs/"+id, http.StatusSeeOther)
}

func (s *Server) runs(w http.ResponseWriter, r *http.Request, ss *session) {
	if id := r.URL.Query().Get("id"); id != "" {
		http.Redirect(w, r, "/runs/"+id, http.StatusSeeOther)
		return
	}
	if r.URL.Query().Has("package") {
		s.runsWithPackage(w, r, ss)
		return
	}
	var ids []string
	names, _, err := s.poolNames(r.Context())
	if err != nil {
		s.fail(w, r, ss, http.StatusBadGateway, "pools", err)
		return
	}
	for _, rt := range s.runtimes {
		for _, p := range names {
			st, err := rt.Client.PoolStatus(r.Context(), p)
			if err != nil {
				continue // the runtime may not serve this pool
			}
			for _, g := range st.Generations {
				ids = append(ids, g.Runs...)
			}
		}
	}
	s.render(w, r, http.StatusOK, "runs", s.page(ss, "Runs", runsData{Runs: ids}))
}

type runData struct {
	Manifest *runmanifest.Manifest
	SVG      template.HTML
	JSON     string
	Shared   []shared
	// PackagesErr says why the lineage shows no packages ("" when the
	// runtime served them).
	PackagesErr string
	// Durable is question 6 for the run (durable.go).
	Durable durableView
}

type shared struct {
	What string
	Runs []string
}

func (s *Server) manifest(ctx context.Context, id string) (*runmanifest.Manifest, *runtimeapi.Client, error) {
	var first error
	for _, rt := range s.runtimes {
		m, err := rt.Client.Run(ctx, id)
		if err == nil {
			return m, rt.Client, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = errors.New("no runtime is configured (--runtime)")
	}
	return nil, nil, first
}

func (s *Server) run(w http.ResponseWriter, r *http.Request, ss *session) {
	id := r.PathValue("id")
	m, rc, err := s.manifest(r.Context(), id)
	if err != nil {
		s.fail(w, r, ss, http.StatusBadGateway, "run "+id, err)
		return
	}
	b, _ := json.MarshalIndent(m, "", "  ")
	pk, err := rc.RunPackages(r.Context(), id)
	if err != nil {
		s.log.Warn("console: run packages", "run", id, "err", err)
		pk = nil // the lineage is drawn without them, and the page says why
	}
	d := runData{Manifest: m, SVG: Lineage(m, pk), JSON: Clean(string(b)), PackagesErr: packagesErr(err), Durable: s.durableOf(r.Context(), rc, m)}
	for _, q := range []struct {
		what string
		q    runmanifest.Query
	}{
		{"template " + m.WorkspaceTemplateID, runmanifest.Query{Template: m.WorkspaceTemplateID, Limit: 20}},
		{"runner image " + m.RunnerImageDigest, runmanifest.Query{RunnerImage: m.RunnerImageDigest, Limit: 20}},
		{"node image " + m.NodeImageID, runmanifest.Query{NodeImage: m.NodeImageID, Limit: 20}},
		{"policy " + m.PolicyRevision, runmanifest.Query{Policy: m.PolicyRevision, Limit: 20}},
		{"generation " + m.Generation, runmanifest.Query{Generation: m.Generation, Limit: 20}},
	} {
		if q.q.Empty() {
			continue
		}
		got, err := rc.Query(r.Context(), q.q)
		if err != nil {
			s.fail(w, r, ss, http.StatusBadGateway, "runs sharing "+q.what, err)
			return
		}
		d.Shared = append(d.Shared, shared{What: q.what, Runs: slices.DeleteFunc(got, func(x string) bool { return x == m.RunID })})
	}
	s.render(w, r, http.StatusOK, "run", s.page(ss, "Run "+m.RunID, d))
}

func (s *Server) poolNames(ctx context.Context) (names []string, rev string, err error) {
	err = s.readTree(ctx, func(tr *gitops.Tree, r string) error {
		rev = r
		names, err = pool.Names(tr.List)
		return err
	})
	return names, rev, err
}

func (s *Server) pools(w http.ResponseWriter, r *http.Request, ss *session) {
	names, rev, err := s.poolNames(r.Context())
	if err != nil {
		s.fail(w, r, ss, http.StatusBadGateway, "pools", err)
		return
	}
	s.render(w, r, http.StatusOK, "pools", s.page(ss, "Pools", struct {
		Pools    []string
		Revision string
	}{names, rev}))
}

type genRow struct {
	ID                                string
	Sequence                          int64
	State                             string
	WarmSize, Ready, Warming, Claimed int
	Shortage                          int
}

type poolData struct {
	Pool, Revision, Observed string
	Gens                     []genRow
	WarmHit                  string
	Sampled                  int
	Rollouts                 []*rollout.Record
	// Targets are the generations a rollback may go back to; NoRollback
	// why this console cannot roll back ("" when it can).
	Targets    []string
	NoRollback string
}

// PoolSample is how many of a pool's runs per generation the pool page
// reads to tell its warm-hit fraction.
const PoolSample = 50

// Serving reports whether a generation in desired state state takes
// claims or is still running them (active, draining or warming): the
// generations whose runs the pool page's warm-hit fraction reads. Retained
// generations are kept for rollback and take no claims, so their runs tell
// nothing of the pool's warm capacity today, and a pool keeps many of them
// (reading PoolSample runs of each of 50 took most of a page's time).
func Serving(state string) bool {
	return state == pool.Active || state == pool.Draining || state == pool.Warming
}

func (s *Server) pool(w http.ResponseWriter, r *http.Request, ss *session) {
	ctx := r.Context()
	name := r.PathValue("pool")
	var st *pool.State
	var rev string
	var stateErr error
	if err := s.readTree(ctx, func(tr *gitops.Tree, r string) error {
		rev = r
		st, stateErr = pool.ReadState(name, tr.ReadFile)
		return nil
	}); err != nil {
		s.fail(w, r, ss, http.StatusBadGateway, "pool "+name, err)
		return
	}
	if stateErr != nil {
		s.fail(w, r, ss, http.StatusNotFound, "pool "+name, stateErr)
		return
	}
	d := poolData{Pool: name, Revision: rev, Targets: rollbackTargets(st), NoRollback: s.rollbackRefusal()}
	var live []*runtimeapi.PoolStatus
	for _, rt := range s.runtimes {
		ps, err := rt.Client.PoolStatus(ctx, name)
		if err != nil {
			s.fail(w, r, ss, http.StatusBadGateway, "pool "+name+" on runtime "+rt.Name, err)
			return
		}
		live = append(live, ps)
		d.Observed = ps.ObservedRevision
	}
	seen := map[string]bool{}
	for _, g := range st.Generations {
		row := genRow{ID: g.ID, Sequence: g.Sequence, State: g.State, WarmSize: g.WarmSize}
		for _, ps := range live {
			gs := ps.Generation(g.ID)
			row.Ready += gs.Ready
			row.Warming += gs.Warming
			row.Claimed += gs.Claimed
		}
		row.Shortage = max(0, row.WarmSize-row.Ready)
		seen[g.ID] = true
		d.Gens = append(d.Gens, row)
	}
	for _, ps := range live {
		for _, gs := range ps.Generations {
			if !seen[gs.ID] {
				seen[gs.ID] = true
				d.Gens = append(d.Gens, genRow{ID: gs.ID, State: gs.State + " (runtime only)", Ready: gs.Ready, Warming: gs.Warming, Claimed: gs.Claimed})
			}
		}
	}
	var serving []genRow
	for _, g := range d.Gens {
		if Serving(g.State) {
			serving = append(serving, g)
		}
	}
	warm, n, err := s.warmHit(ctx, serving)
	if err != nil {
		s.fail(w, r, ss, http.StatusBadGateway, "pool "+name+": runs", err)
		return
	}
	d.Sampled = n
	d.WarmHit = "no runs yet"
	if n > 0 {
		d.WarmHit = fmt.Sprintf("%.2f (%d of %d)", float64(warm)/float64(n), warm, n)
	}
	if err := s.readRepo(ctx, func(repo *gitops.Repo) (err error) {
		d.Rollouts, err = rollout.History(ctx, repo, s.branch, name)
		return err
	}); err != nil {
		s.fail(w, r, ss, http.StatusBadGateway, "pool "+name+": rollout history", err)
		return
	}
	s.render(w, r, http.StatusOK, "pool", s.page(ss, "Pool "+name, d))
}

// warmHit reads up to PoolSample runs of each of gens from the runtimes
// and counts those that took a warm sandbox.
func (s *Server) warmHit(ctx context.Context, gens []genRow) (warm, n int, err error) {
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, rt := range s.runtimes {
		for _, g := range gens {
			ids, err := rt.Client.Query(ctx, runmanifest.Query{Generation: g.ID, Limit: PoolSample})
			if err != nil {
				return 0, 0, err
			}
			for _, id := range ids {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					m, err := rt.Client.Run(ctx, id)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						if firstErr == nil {
							firstErr = err
						}
						return
					}
					n++
					if m.Warm {
						warm++
					}
				}()
			}
		}
	}
	wg.Wait()
	return warm, n, firstErr
}

func (s *Server) readGen(ctx context.Context, poolName, id string) (*generation.Generation, error) {
	var b []byte
	var full string
	err := s.readTree(ctx, func(tr *gitops.Tree, _ string) (err error) {
		if _, full, err = pool.ResolveGeneration(tr.List, poolName, id, "the config repository"); err != nil {
			return err
		}
		b, err = tr.ReadFile(pool.GenerationFile(poolName, full))
		return err
	})
	if err != nil {
		return nil, err
	}
	return generation.ParseNamed(b, pool.GenerationFile(poolName, full))
}

// readRecord reads a pool's rollout from the config repository.
func (s *Server) readRecord(ctx context.Context, poolName, id string) (rec *rollout.Record, err error) {
	err = s.readRepo(ctx, func(repo *gitops.Repo) error {
		rec, err = rollout.ReadRecord(ctx, repo, s.branch, poolName, id)
		return err
	})
	return rec, err
}

type pinRow struct {
	Kind generation.Kind
	Pin  string
}

func (s *Server) generation(w http.ResponseWriter, r *http.Request, ss *session) {
	g, err := s.readGen(r.Context(), r.PathValue("pool"), r.PathValue("gen"))
	if err != nil {
		s.fail(w, r, ss, http.StatusNotFound, "generation "+r.PathValue("gen"), err)
		return
	}
	var pins []pinRow
	for _, k := range generation.Kinds() {
		p, ok := g.Pins[k]
		v := "(none)"
		if ok {
			v = p.String()
		}
		pins = append(pins, pinRow{Kind: k, Pin: v})
	}
	s.render(w, r, http.StatusOK, "generation", s.page(ss, "Generation "+g.ID, struct {
		Gen  *generation.Generation
		Pins []pinRow
	}{g, pins}))
}

func (s *Server) diff(w http.ResponseWriter, r *http.Request, ss *session) {
	p := r.PathValue("pool")
	a, err := s.readGen(r.Context(), p, r.URL.Query().Get("a"))
	if err != nil {
		s.fail(w, r, ss, http.StatusNotFound, "generation a="+r.URL.Query().Get("a"), err)
		return
	}
	b, err := s.readGen(r.Context(), p, r.URL.Query().Get("b"))
	if err != nil {
		s.fail(w, r, ss, http.StatusNotFound, "generation b="+r.URL.Query().Get("b"), err)
		return
	}
	s.render(w, r, http.StatusOK, "diff", s.page(ss, "Diff "+a.ID+" → "+b.ID, struct {
		Diff generation.Difference
	}{generation.Diff(a, b)}))
}

// StepView is one rollout step as the timeline shows it.
type StepView struct {
	Number int    `json:"number"`
	Result string `json:"result"`
	Class  string `json:"-"`
	Text   string `json:"text"`
}

// Timeline is a rollout's seven steps as lines: number, phase, result,
// when, how long, the commit and the evidence.
func Timeline(rec *rollout.Record, now time.Time) []StepView {
	var out []StepView
	for _, st := range rec.Steps {
		t := fmt.Sprintf("%d. %s: %s", st.Number, st.Phase, st.Result)
		if !st.Started.IsZero() {
			t += " at " + st.Started.UTC().Format("15:04:05") + fmt.Sprintf(" (%s)", st.Took(now))
		}
		if st.Commit != "" {
			c := st.Commit
			if len(c) > 12 {
				c = c[:12]
			}
			t += " commit " + c
		}
		if st.Evidence != "" {
			t += " — " + st.Evidence
		}
		out = append(out, StepView{Number: st.Number, Result: st.Result, Class: strings.ReplaceAll(st.Result, " ", "-"), Text: Clean(t)})
	}
	return out
}

func (s *Server) rollout(w http.ResponseWriter, r *http.Request, ss *session) {
	rec, err := s.readRecord(r.Context(), r.PathValue("pool"), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, ss, http.StatusNotFound, "rollout "+r.PathValue("id"), err)
		return
	}
	s.render(w, r, http.StatusOK, "rollout", s.page(ss, "Rollout "+rec.ID, struct {
		Rec       *rollout.Record
		Steps     []StepView
		Abortable bool
		ReadOnly  bool
	}{rec, Timeline(rec, s.now()), Abortable(rec), s.openRepo == nil}))
}

// RolloutPoll is how often a live timeline reads the config repository.
const RolloutPoll = 250 * time.Millisecond

// rolloutLive streams the timeline each time a commit changes it, until
// the rollout ends.
func (s *Server) rolloutLive(w http.ResponseWriter, r *http.Request, ss *session) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	last := ""
	for {
		rec, err := s.readRecord(r.Context(), r.PathValue("pool"), r.PathValue("id"))
		if err != nil {
			if r.Context().Err() == nil {
				s.log.Warn("console: rollout", "id", r.PathValue("id"), "err", err)
				_ = writeSSE(w, "end", "", "the rollout could not be read")
			}
			return
		}
		b, _ := json.Marshal(Timeline(rec, s.now()))
		if string(b) != last {
			last = string(b)
			if writeSSE(w, "timeline", "", last) != nil {
				return
			}
			fl.Flush()
		}
		if rec.Outcome != "running" {
			_ = writeSSE(w, "end", "", rec.Outcome)
			fl.Flush()
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(RolloutPoll):
		}
	}
}

// cleanupRuntime is one runtime's cleanup records, or why there are none.
type cleanupRuntime struct {
	Name   string
	Served bool
	View   *runtimeapi.Cleanup
}

// cleanup shows each runtime's cleanup records (GET /v1/cleanup): what
// still needs work, then what was done lately.
func (s *Server) cleanup(w http.ResponseWriter, r *http.Request, ss *session) {
	var out []cleanupRuntime
	for _, rt := range s.runtimes {
		v, err := rt.Client.Cleanup(r.Context())
		var re *runtimeapi.APIError
		switch {
		case errors.As(err, &re) && re.Status == http.StatusNotFound:
			out = append(out, cleanupRuntime{Name: rt.Name})
		case err != nil:
			s.fail(w, r, ss, http.StatusBadGateway, "cleanup on runtime "+rt.Name, err)
			return
		default:
			out = append(out, cleanupRuntime{Name: rt.Name, Served: true, View: v})
		}
	}
	s.render(w, r, http.StatusOK, "cleanup", s.page(ss, "Cleanup", out))
}

type question struct {
	Q, Link, LinkText string
	// Also are more pages that answer it.
	Also []link
}

type link struct{ Href, Text string }

func (s *Server) questions(w http.ResponseWriter, r *http.Request, ss *session) {
	incidents := link{"/incidents", "incidents"}
	qs := []question{
		{Q: "Which artifact and policy versions produced a run?", Link: "/runs", LinkText: "a run's page: manifest and lineage"},
		{Q: "Why did allocation take this long?", Link: "/jobs", LinkText: "a job's trace and its run's lifecycle stamps", Also: []link{incidents}},
		{Q: "Warm hit, cold start or new node?", Link: "/pools", LinkText: "a pool's warm-hit fraction; a run's manifest (warm)", Also: []link{{"/pools", "a pool's cost page: warm hits, cold starts, unused warm time"}}},
		{Q: "Which sandbox and allocation attempt own the run?", Link: "/runs", LinkText: "a run's lineage: sandbox and attempt", Also: []link{incidents}},
		{Q: "Can the old sandbox still route or mint credentials?", Link: "/runs", LinkText: "a run's manifest: fences and credential receipts", Also: []link{incidents}},
		{Q: "What state is durable, its head, and was restore tested?", Link: "/jobs", LinkText: "a job's story and event stream"},
		{Q: "Which network destinations were allowed and used?", Link: "/runs", LinkText: "a run's manifest: egress"},
		{Q: "Did the final output reach the user and each integration?", Link: "/jobs", LinkText: "a job's delivery receipts", Also: []link{incidents}},
		{Q: "What cleanup remains?", Link: "/cleanup", LinkText: "each runtime's cleanup records: remaining and recent", Also: []link{incidents}},
		{Q: "Which other runs share the node, template, runtime class or policy revision?", Link: "/runs", LinkText: "a run's page: runs sharing each artifact"},
	}
	s.render(w, r, http.StatusOK, "questions", s.page(ss, "The operator's ten questions", qs))
}
