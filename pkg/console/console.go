package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
)

//go:embed assets
var assets embed.FS

// CookieName is the cookie that holds the caller's token (HttpOnly,
// SameSite=Strict).
const CookieName = "slipway_console_token"

// CSP is the Content-Security-Policy of every response: nothing but this
// origin's own script and style, no inline script, no framing.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Runtime is one runtime the console reads runs and pool status from,
// with the token it reads them with (never shown).
type Runtime struct {
	Name   string
	Client *runtimeapi.Client
}

// Server is the console's HTTP handler.
type Server struct {
	control  string
	runtimes []Runtime
	repo     *gitops.Repo
	repoLock chan struct{} // readRepo: one reader of repo at a time
	branch   string
	hc       *http.Client
	log      *slog.Logger
	key      []byte // CSRF key, random per process
	tmpl     *template.Template
	mux      *http.ServeMux
	now      func() time.Time
	secure   bool

	mu    sync.Mutex
	whoIs map[string]whoEntry // sha256(token) -> who, briefly

	// actions (actions.go)
	openRepo func(ctx context.Context) (*gitops.Repo, error)
	author   gitops.Signature
	signer   signature.SignerVerifier
	unsigned bool
	drives   drives
}

type whoEntry struct {
	who   *controlapi.WhoAmI
	until time.Time
}

// Option configures a Server.
type Option func(*options) error

type options struct {
	runtimes []Runtime
	repo     *gitops.Repo
	branch   string
	hc       *http.Client
	log      *slog.Logger
	secure   bool
	now      func() time.Time
	openRepo func(ctx context.Context) (*gitops.Repo, error)
	author   gitops.Signature
	signer   signature.SignerVerifier
	unsigned bool
}

// WithRuntime reads runs and pool status from the runtime at base with
// token (a runtime token; the console never shows it).
func WithRuntime(name, base, token string) Option {
	return func(o *options) error {
		c, err := runtimeapi.NewClient(base, token)
		if err != nil {
			return fmt.Errorf("console: runtime %s: %w", name, err)
		}
		for _, r := range o.runtimes {
			if r.Name == name {
				return fmt.Errorf("console: runtime %s named twice", name)
			}
		}
		o.runtimes = append(o.runtimes, Runtime{Name: name, Client: c})
		return nil
	}
}

// WithConfigRepo reads pools, generations and rollouts from repo's branch
// (open it WithDepth(0): rollout history reads old commits).
func WithConfigRepo(repo *gitops.Repo, branch string) Option {
	return func(o *options) error {
		if repo == nil {
			return errors.New("console: WithConfigRepo(nil)")
		}
		if branch == "" {
			branch = "main"
		}
		o.repo, o.branch = repo, branch
		return nil
	}
}

// WithHTTPClient talks to the control plane with hc.
func WithHTTPClient(hc *http.Client) Option {
	return func(o *options) error {
		if hc == nil {
			return errors.New("console: WithHTTPClient(nil)")
		}
		o.hc = hc
		return nil
	}
}

// WithLogger logs failures the pages only name by an id.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error { o.log = l; return nil }
}

// WithSecureCookie marks the token cookie Secure (serve behind TLS).
func WithSecureCookie() Option {
	return func(o *options) error { o.secure = true; return nil }
}

// New makes a console over the control plane at control
// (http(s)://host:port). Close stops the rollbacks it drives.
func New(control string, opts ...Option) (*Server, error) {
	if _, err := controlapi.NewClient(control, "probe"); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	o := options{hc: &http.Client{Timeout: time.Minute}, log: slog.New(slog.DiscardHandler), now: time.Now}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	t, err := template.New("").Funcs(funcs).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	s := &Server{control: control, runtimes: o.runtimes, repo: o.repo, repoLock: make(chan struct{}, 1), branch: o.branch, hc: o.hc, log: o.log,
		key: key, tmpl: t, mux: http.NewServeMux(), now: o.now, secure: o.secure, whoIs: map[string]whoEntry{},
		openRepo: o.openRepo, author: o.author, signer: o.signer, unsigned: o.unsigned}
	s.drives.ctx, s.drives.cancel = context.WithCancel(context.Background())
	static, _ := fs.Sub(assets, "assets")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /login", s.loginPage)
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("POST /logout", s.authed(s.logout))
	s.mux.HandleFunc("GET /{$}", s.authed(s.home))
	s.mux.HandleFunc("GET /jobs", s.authed(s.jobs))
	s.mux.HandleFunc("GET /jobs/{id}", s.authed(s.job))
	s.mux.HandleFunc("GET /jobs/{id}/events", s.authed(s.jobEvents))
	s.mux.HandleFunc("POST /jobs/{id}/cancel", s.authed(s.operator(s.cancel)))
	s.mux.HandleFunc("GET /runs", s.authed(s.operator(s.runs)))
	s.mux.HandleFunc("GET /runs/{id}", s.authed(s.operator(s.run)))
	s.mux.HandleFunc("GET /runs/{id}/packages", s.authed(s.operator(s.runPackages)))
	s.mux.HandleFunc("POST /runs/{id}/suspend", s.authed(s.operator(s.suspendRun)))
	s.mux.HandleFunc("POST /runs/{id}/resume", s.authed(s.operator(s.resumeRun)))
	s.mux.HandleFunc("GET /pools", s.authed(s.operator(s.pools)))
	s.mux.HandleFunc("GET /pools/{pool}", s.authed(s.operator(s.pool)))
	s.mux.HandleFunc("GET /pools/{pool}/generations/{gen}", s.authed(s.operator(s.generation)))
	s.mux.HandleFunc("GET /pools/{pool}/diff", s.authed(s.operator(s.diff)))
	s.mux.HandleFunc("GET /pools/{pool}/cost", s.authed(s.operator(s.cost)))
	s.mux.HandleFunc("GET /pools/{pool}/rollouts/{id}", s.authed(s.operator(s.rollout)))
	s.mux.HandleFunc("GET /pools/{pool}/rollouts/{id}/live", s.authed(s.operator(s.rolloutLive)))
	s.mux.HandleFunc("POST /pools/{pool}/rollouts/{id}/abort", s.authed(s.operator(s.abort)))
	s.mux.HandleFunc("POST /pools/{pool}/rollback", s.authed(s.operator(s.rollback)))
	s.mux.HandleFunc("GET /cleanup", s.authed(s.operator(s.cleanup)))
	s.mux.HandleFunc("GET /questions", s.authed(s.operator(s.questions)))
	s.mux.HandleFunc("GET /incidents", s.authed(s.operator(s.incidents)))
	return s, nil
}

// ServeHTTP serves the console with its security headers on every
// response.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if r.Method == http.MethodPost && !sameOrigin(r) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// sameOrigin refuses a POST whose Origin (when the browser sends one)
// names another host.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" && r.Header.Get("Sec-Fetch-Site") == "same-origin" {
		return r.Header.Get("Sec-Fetch-Site") != "cross-site"
	}
	i := strings.Index(o, "://")
	return i >= 0 && o[i+3:] == r.Host
}

// session is an authenticated request: the caller's token, what it is,
// and the CSRF token its forms carry.
type session struct {
	token string
	who   *controlapi.WhoAmI
	csrf  string
	api   *controlapi.Client
}

func (ss *session) operator() bool { return ss.who.Scope == controlapi.ScopeOperator }

type handler func(w http.ResponseWriter, r *http.Request, ss *session)

func (s *Server) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(CookieName)
		if err != nil || c.Value == "" {
			s.toLogin(w, r)
			return
		}
		ss, err := s.session(r, c.Value)
		if err != nil {
			var ae *controlapi.APIError
			if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
				s.clearCookie(w)
				s.toLogin(w, r)
				return
			}
			s.fail(w, r, nil, http.StatusBadGateway, "the control plane did not answer", err)
			return
		}
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil {
				s.fail(w, r, ss, http.StatusBadRequest, "the form could not be read", err)
				return
			}
			got := r.PostForm.Get("csrf")
			if subtle.ConstantTimeCompare([]byte(got), []byte(ss.csrf)) != 1 {
				s.fail(w, r, ss, http.StatusForbidden, "the form's CSRF token is missing or wrong: reload the page", nil)
				return
			}
		}
		h(w, r, ss)
	}
}

func (s *Server) operator(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request, ss *session) {
		if !ss.operator() {
			s.fail(w, r, ss, http.StatusForbidden, "this page and its actions need an operator token", nil)
			return
		}
		h(w, r, ss)
	}
}

func (s *Server) session(r *http.Request, token string) (*session, error) {
	api, err := controlapi.NewClient(s.control, token, controlapi.WithHTTPClient(s.hc))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(token))
	k := hex.EncodeToString(sum[:])
	s.mu.Lock()
	e, ok := s.whoIs[k]
	s.mu.Unlock()
	if !ok || s.now().After(e.until) {
		who, err := api.WhoAmI(r.Context())
		if err != nil {
			return nil, err
		}
		// a revoked token keeps the console for at most this long;
		// every API call it makes is refused at once.
		e = whoEntry{who: who, until: s.now().Add(5 * time.Second)}
		s.mu.Lock()
		if len(s.whoIs) > 10000 {
			clear(s.whoIs)
		}
		s.whoIs[k] = e
		s.mu.Unlock()
	}
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(token))
	return &session{token: token, who: e.who, csrf: hex.EncodeToString(m.Sum(nil)), api: api}, nil
}

func (s *Server) toLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, "/events") && !strings.HasSuffix(r.URL.Path, "/live") {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	http.Error(w, "log in first", http.StatusUnauthorized)
}

func (s *Server) clearCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode})
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login", &page{Title: "Log in"})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.render(w, r, http.StatusBadRequest, "login", &page{Title: "Log in", Error: "the form could not be read"})
		return
	}
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	if tok == "" {
		s.render(w, r, http.StatusBadRequest, "login", &page{Title: "Log in", Error: "a token is required"})
		return
	}
	if _, err := s.session(r, tok); err != nil {
		var ae *controlapi.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
			s.render(w, r, http.StatusUnauthorized, "login", &page{Title: "Log in", Error: "the control plane refused this token"})
			return
		}
		s.fail(w, r, nil, http.StatusBadGateway, "the control plane did not answer", err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: tok, Path: "/", HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, ss *session) {
	s.clearCookie(w)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// page is what every template gets.
type page struct {
	Title    string
	Who      *controlapi.WhoAmI
	Operator bool
	CSRF     string
	Error    string
	Data     any
}

func (s *Server) page(ss *session, title string, data any) *page {
	p := &page{Title: title, Data: data}
	if ss != nil {
		p.Who, p.Operator, p.CSRF = ss.who, ss.operator(), ss.csrf
	}
	return p
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p *page) {
	var b strings.Builder
	if err := s.tmpl.ExecuteTemplate(&b, name, p); err != nil {
		id := errorID()
		s.log.Error("console: render", "page", name, "id", id, "err", err)
		http.Error(w, "the page could not be rendered (error "+id+")", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// fail renders an error page: what the API said when it is a refusal a
// caller may read (its status and reason), else a sentence and an id, the
// detail going to the log only.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, ss *session, status int, msg string, err error) {
	var ae *controlapi.APIError
	var re *runtimeapi.APIError
	switch {
	case errors.As(err, &ae) && ae.Status < 500:
		status, msg = ae.Status, msg+": "+ae.Error()
	case errors.As(err, &re) && re.Status < 500:
		status, msg = re.Status, msg+": "+re.Error()
	case err != nil:
		id := errorID()
		s.log.Warn("console", "id", id, "status", status, "msg", msg, "err", err)
		msg += " (error " + id + ")"
	}
	s.render(w, r, status, "home", &page{Title: http.StatusText(status), Error: msg, Who: whoOf(ss), Operator: ss != nil && ss.operator(), CSRF: csrfOf(ss)})
}

func whoOf(ss *session) *controlapi.WhoAmI {
	if ss == nil {
		return nil
	}
	return ss.who
}

func csrfOf(ss *session) string {
	if ss == nil {
		return ""
	}
	return ss.csrf
}

func errorID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
