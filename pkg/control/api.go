package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/internal/apierror"
	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// MaxBody bounds a request body; larger is 413.
const MaxBody = 1 << 20

// Server is the control plane's HTTP API:
//
//	POST /v1/jobs                 submit (Idempotency-Key header or idempotencyKey)
//	GET  /v1/jobs?state=&limit=   list
//	GET  /v1/jobs/{id}            the job's whole story
//	GET  /v1/jobs/{id}/profile    its profile as it was at its revision
//	GET  /v1/jobs/{id}/trace      its trace's spans this replica holds
//	POST /v1/jobs/{id}/cancel     cancel (optional body: {"reason": "..."}, recorded)
//	GET  /v1/jobs/{id}/events     its event stream (Server-Sent Events; sse.go)
//	GET  /v1/jobs/{id}/artifacts/{name}  an artifact a delivered message links to
//	GET  /v1/whoami               the token's id, tenant and scope
//	GET  /v1/usage                the tenants' counters (operators)
//	GET  /v1/audit                the audit log (operators)
//	GET  /v1/incidents            incidents by kind, from the store (operators; when served)
//	GET  /metrics                 Prometheus text (operators, audited)
//	GET  /healthz                 the process serves (no token; a liveness probe)
//	GET  /readyz                  it can take work: database and config repository (no token; ready.go)
//
// Every request carries a bearer token; a tenant's token sees its own jobs
// only (another tenant's job is 404), an operator's sees all and each of
// its requests is audited.
type Server struct {
	p   *Plane
	mux *http.ServeMux
}

// NewServer serves p.
func NewServer(p *Plane) *Server {
	s := &Server{p: p, mux: http.NewServeMux()}
	s.mux.Handle("POST /v1/jobs", s.authWith(s.p.st.AuthenticateSubmit, s.submit))
	s.mux.Handle("GET /v1/jobs", s.auth(s.list))
	s.mux.Handle("GET /v1/jobs/{id}", s.auth(s.get))
	s.mux.Handle("GET /v1/jobs/{id}/profile", s.auth(s.profile))
	s.mux.Handle("GET /v1/jobs/{id}/trace", s.auth(s.trace))
	s.mux.Handle("POST /v1/jobs/{id}/cancel", s.auth(s.cancel))
	s.mux.Handle("GET /v1/jobs/{id}/events", s.auth(s.events)) // sse.go
	s.mux.Handle("GET /v1/jobs/{id}/artifacts/{name}", s.auth(s.artifact))
	s.mux.Handle("GET /v1/whoami", s.auth(s.whoami))
	s.mux.Handle("GET /v1/usage", s.auth(s.operator(s.usage)))
	s.mux.Handle("GET /v1/audit", s.auth(s.operator(s.audit)))
	if inc := p.c.Incidents; inc != nil {
		s.mux.Handle("GET /v1/incidents", s.auth(s.operator(func(w http.ResponseWriter, r *http.Request) {
			v, err := inc(r.Context())
			if err != nil {
				s.writeFailure(w, r, err)
				return
			}
			writeJSON(w, http.StatusOK, v)
		})))
	}
	s.mux.Handle("GET /metrics", s.auth(s.operator(p.c.Metrics.Handler().ServeHTTP)))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

type tokenKey struct{}

func tokenOf(r *http.Request) *Token { return r.Context().Value(tokenKey{}).(*Token) }

// tenantOf is the tenant whose jobs the request may see ("" : all).
func tenantOf(r *http.Request) string {
	t := tokenOf(r)
	if t.Scope == controlapi.ScopeOperator {
		return ""
	}
	return t.Tenant
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }

// Unwrap lets http.ResponseController reach the connection (Flush, write
// deadlines): without it an operator's event stream (audited, so wrapped)
// ended after its first write.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) auth(h http.HandlerFunc) http.Handler {
	return s.authWith(s.p.st.Authenticate, h)
}

// authWith is auth with authenticate.
func (s *Server) authWith(authenticate func(context.Context, string) (*Token, error), h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		text, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			writeError(w, http.StatusUnauthorized, errors.New("unauthenticated"))
			return
		}
		t, err := authenticate(r.Context(), text)
		switch {
		case errors.Is(err, ErrUnauthenticated):
			writeError(w, http.StatusUnauthorized, errors.New("unauthenticated"))
			return
		case err != nil:
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, errors.New("the control plane's database is unavailable; retry"))
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), tokenKey{}, t))
		if t.Scope != controlapi.ScopeOperator {
			h(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h(sw, r)
		if err := s.p.st.Audit(context.WithoutCancel(r.Context()), controlapi.AuditEntry{At: time.Now().UTC(), TokenID: t.ID, Tenant: t.Tenant,
			Scope: t.Scope, Method: r.Method, Path: r.URL.Path, Status: sw.status}); err != nil {
			s.p.c.Logger.Error("audit", "err", err)
		}
	})
}

func (s *Server) operator(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if tokenOf(r).Scope != controlapi.ScopeOperator {
			writeError(w, http.StatusForbidden, errors.New("an operator token is required"))
			return
		}
		h(w, r)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, controlapi.ErrorBody{Code: controlapi.CodeFor(code), Error: err.Error()})
}

// writeFailure maps an error of the plane to its status. A refusal the
// caller can fix is told whole; an unavailable database or a failure
// inside the plane is told as a reason and an error id, and its detail
// (addresses, paths, what a dependency said) goes to the plane's log
// under the id.
func (s *Server) writeFailure(w http.ResponseWriter, r *http.Request, err error) {
	var le *LimitError
	switch {
	case errors.As(err, &le):
		secs := int(le.RetryAfter.Seconds() + 0.5)
		w.Header().Set("Retry-After", strconv.Itoa(max(1, secs)))
		writeJSON(w, http.StatusTooManyRequests, controlapi.ErrorBody{Code: controlapi.CodeLimitExceeded, Error: le.Detail, Reason: le.Reason, RetryAfterSeconds: max(1, secs)})
	case errors.Is(err, ErrBadRequest):
		writeError(w, http.StatusBadRequest, err)
	case errors.Is(err, ErrForbidden):
		writeError(w, http.StatusForbidden, err)
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, err)
	case errors.Is(err, ErrConflict):
		writeError(w, http.StatusConflict, err)
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "1")
		s.writeInternal(w, r, http.StatusServiceUnavailable, apierror.Public("the control plane cannot serve this now; retry", err))
	default:
		s.writeInternal(w, r, http.StatusInternalServerError, err)
	}
}

// writeInternal answers status with a reason and an error id, and logs
// err under the id.
func (s *Server) writeInternal(w http.ResponseWriter, r *http.Request, status int, err error) {
	a := apierror.Decide(err, false)
	if a.Hidden() && s.p.c.Logger != nil {
		s.p.c.Logger.Error("api error", "id", a.ID, "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	writeJSON(w, status, controlapi.ErrorBody{Code: controlapi.CodeFor(status), Error: a.Reason, ID: a.ID})
}

// decode reads a JSON body: at most MaxBody (413), no unknown fields, no
// field twice, nothing after it.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("body over %d bytes", MaxBody))
		return false
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return false
	}
	if err := checkDuplicateKeys(body); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return false
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("body: %v", err))
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, errors.New("body: data after the JSON object"))
		return false
	}
	return true
}

// checkDuplicateKeys refuses an object that names a field twice (Go's
// decoder would keep the last silently).
func checkDuplicateKeys(b []byte) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("body: %v", err)
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return fmt.Errorf("body: %v", err)
				}
				key := k.(string)
				if seen[key] {
					return fmt.Errorf("body: field %s%s appears twice", path, key)
				}
				seen[key] = true
				if err := walk(path + key + "."); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(fmt.Sprintf("%s%d.", path, i)); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	return walk("")
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	var spec controlapi.Spec
	if !decode(w, r, &spec) {
		return
	}
	if h := r.Header.Get("Idempotency-Key"); h != "" {
		if spec.IdempotencyKey != "" && spec.IdempotencyKey != h {
			writeError(w, http.StatusBadRequest, errors.New("the Idempotency-Key header and idempotencyKey differ"))
			return
		}
		spec.IdempotencyKey = h
	}
	t := tokenOf(r)
	if t.Scope == controlapi.ScopeOperator {
		writeError(w, http.StatusForbidden, errors.New("an operator token cannot submit jobs; use a tenant's token"))
		return
	}
	token := ""
	if t.Unchecked() {
		token = t.ID
	}
	j, created, err := s.p.jobs.Submit(r.Context(), t.Tenant, token, spec)
	if errors.Is(err, ErrUnauthenticated) { // revoked since this store read it live
		s.p.st.ForgetToken(t.ID)
		writeError(w, http.StatusUnauthorized, errors.New("unauthenticated"))
		return
	}
	if err != nil {
		s.writeFailure(w, r, err)
		return
	}
	code := http.StatusCreated
	if !created {
		code = http.StatusOK
	}
	w.Header().Set("Location", "/v1/jobs/"+j.ID)
	writeJSON(w, code, j)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	f := ListFilter{Tenant: tenantOf(r)}
	for k, v := range r.URL.Query() {
		switch k {
		case "state":
			f.State = controlapi.State(v[0])
		case "limit":
			n, err := strconv.Atoi(v[0])
			if err != nil || n <= 0 {
				writeError(w, http.StatusBadRequest, fmt.Errorf("limit %q: want a positive number", v[0]))
				return
			}
			f.Limit = n
		case "tenant":
			if tenantOf(r) != "" && v[0] != tenantOf(r) {
				writeJSON(w, http.StatusOK, map[string]any{"jobs": []*controlapi.Job{}})
				return
			}
			f.Tenant = v[0]
		default:
			writeError(w, http.StatusBadRequest, fmt.Errorf("unknown query parameter %q (want state, limit, tenant)", k))
			return
		}
	}
	js, err := s.p.List(r.Context(), f)
	if err != nil {
		s.writeFailure(w, r, err)
		return
	}
	if js == nil {
		js = []*controlapi.Job{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": js})
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	j, err := s.p.Get(r.Context(), tenantOf(r), r.PathValue("id"))
	if err != nil {
		s.writeFailure(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

func (s *Server) profile(w http.ResponseWriter, r *http.Request) {
	j, err := s.p.Get(r.Context(), tenantOf(r), r.PathValue("id"))
	if err != nil {
		s.writeFailure(w, r, err)
		return
	}
	jp, err := s.p.Profile(r.Context(), j)
	if err != nil {
		s.writeFailure(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, jp)
}

func (s *Server) trace(w http.ResponseWriter, r *http.Request) {
	j, err := s.p.Get(r.Context(), tenantOf(r), r.PathValue("id"))
	if err != nil {
		s.writeFailure(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.p.Trace(r.Context(), j))
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	var req controlapi.CancelRequest
	if r.ContentLength != 0 && !decode(w, r, &req) {
		return
	}
	if len(req.Reason) > controlapi.MaxCancelReason {
		writeError(w, http.StatusBadRequest, fmt.Errorf("reason: %d bytes, over the limit of %d", len(req.Reason), controlapi.MaxCancelReason))
		return
	}
	j, err := s.p.CancelBecause(r.Context(), tenantOf(r), r.PathValue("id"), req.Reason, tokenOf(r).ID)
	if err != nil {
		s.writeFailure(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	t := tokenOf(r)
	writeJSON(w, http.StatusOK, controlapi.WhoAmI{TokenID: t.ID, Tenant: t.Tenant, Scope: t.Scope})
}

func (s *Server) usage(w http.ResponseWriter, r *http.Request) {
	u, err := s.p.st.Usage(r.Context())
	if err != nil {
		s.writeFailure(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"tenants": u})
}

func (s *Server) audit(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	a, err := s.p.st.AuditLog(r.Context(), n)
	if err != nil {
		s.writeFailure(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": a})
}

// artifact serves an artifact of a job, under the job's tenancy.
func (s *Server) artifact(w http.ResponseWriter, r *http.Request) {
	b, err := s.p.st.Artifact(r.Context(), tenantOf(r), r.PathValue("id"), r.PathValue("name"))
	if err != nil {
		s.writeFailure(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", "attachment")
	_, _ = w.Write(b)
}
