package gittest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/testharness/need"
)

// Server serves the bare repositories under Root over smart HTTP.
type Server struct {
	Root    string
	url     string
	urlAlso string // at ListenAlso's address, or ""
	srv     *http.Server

	mu       sync.Mutex
	token    string          // RequireToken's, or "" for none
	deny     map[string]bool // repo names refusing pushes (read-only)
	hook     func() bool     // runs before each receive-pack POST; false drops it
	after    func()          // runs after git handled a receive-pack POST, before the answer
	requests atomic.Int64
	pushes   atomic.Int64
}

// Option configures NewServer.
type Option func(*options) error

type options struct {
	also string
}

// ListenAlso makes the server listen on ip (an address of this machine
// other than 127.0.0.1, say the bridge of kubetest's node, kubetest.PodGateway)
// as well, on a port of its own: the config repository a cluster's pods
// clone over the node's network, nothing leaving the machine. URLAlso
// names its repositories there.
func ListenAlso(ip string) Option {
	return func(o *options) error {
		if a := net.ParseIP(ip); a == nil || a.IsLoopback() || a.IsUnspecified() {
			return fmt.Errorf("gittest: ListenAlso address %q: want one IP address of this machine, not loopback or unspecified", ip)
		}
		o.also = ip
		return nil
	}
}

// NewServer starts git http-backend for the repositories under a fresh
// temporary root. It is stopped when the test ends.
func NewServer(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	if _, err := backendPath(); err != nil {
		need.Missing(tb, "git http-backend not available: %v (apt-get install git)", err)
	}
	s, err := Serve(tb.TempDir(), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Serve starts git http-backend for the bare repositories under root (a
// folder of the caller's, whose repositories it may write with the git
// CLI meanwhile: a program, say make demo-kube, serves its own) until
// Close; every repository is served, none needs git-daemon-export-ok.
func Serve(root string, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	backend, err := backendPath()
	if err != nil {
		return nil, fmt.Errorf("gittest: git http-backend not available: %w (apt-get install git)", err)
	}
	s := &Server{Root: root, deny: map[string]bool{}}
	h := &cgi.Handler{
		Path:   backend,
		Root:   "/",
		Stderr: io.Discard, // refusals reach the client; keep test logs quiet
		Env: []string{
			"GIT_PROJECT_ROOT=" + s.Root,
			"GIT_HTTP_EXPORT_ALL=1",
			"HOME=" + s.Root,
			"GIT_CONFIG_NOSYSTEM=1",
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("gittest: listen on 127.0.0.1: %w", err)
	}
	s.url = "http://" + ln.Addr().String()
	s.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		s.mu.Lock()
		token := s.token
		s.mu.Unlock()
		if _, pw, _ := r.BasicAuth(); token != "" && pw != token {
			// as forges answer a missing or wrong token over HTTPS
			w.Header().Set("WWW-Authenticate", `Basic realm="gittest"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		push := strings.HasSuffix(r.URL.Path, "/git-receive-pack") || r.URL.Query().Get("service") == "git-receive-pack"
		if push {
			repo := strings.TrimPrefix(r.URL.Path, "/")
			repo = repo[:strings.Index(repo+"/info", "/info")]
			repo = strings.TrimSuffix(repo, "/git-receive-pack")
			s.mu.Lock()
			denied := s.deny[repo]
			s.mu.Unlock()
			if denied {
				http.Error(w, "read-only repository", http.StatusForbidden)
				return
			}
			if strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
				s.pushes.Add(1)
				s.mu.Lock()
				hook := s.hook
				s.mu.Unlock()
				if hook != nil && (!hook() || r.Context().Err() != nil) {
					// Dropped, or the client went away while held: git
					// never sees this push.
					http.Error(w, "push dropped", http.StatusBadGateway)
					return
				}
				s.mu.Lock()
				after := s.after
				s.mu.Unlock()
				if after != nil {
					// Let git do the push, then hold its answer.
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, r)
					after()
					for k, v := range rec.Header() {
						w.Header()[k] = v
					}
					w.WriteHeader(rec.Code)
					w.Write(rec.Body.Bytes())
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	})}
	go s.srv.Serve(ln)
	if o.also != "" {
		ln, err := net.Listen("tcp", net.JoinHostPort(o.also, "0"))
		if err != nil {
			s.srv.Close()
			return nil, fmt.Errorf("gittest: listen on %s: %w", o.also, err)
		}
		s.urlAlso = "http://" + ln.Addr().String()
		go s.srv.Serve(ln)
	}
	return s, nil
}

// Close stops serving (every address); the repositories stay.
func (s *Server) Close() { s.srv.Close() }

func backendPath() (string, error) {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return "", err
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

// URL returns the clone URL of repository name.
func (s *Server) URL(name string) string { return s.url + "/" + name }

// URLAlso returns the clone URL of repository name at ListenAlso's
// address, as a cluster's pods reach it ("" without ListenAlso).
func (s *Server) URLAlso(name string) string {
	if s.urlAlso == "" {
		return ""
	}
	return s.urlAlso + "/" + name
}

// Dir returns the path of repository name on disk.
func (s *Server) Dir(name string) string { return filepath.Join(s.Root, name) }

// Requests counts the HTTP requests served.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Pushes counts the receive-pack POSTs (push attempts that sent data).
func (s *Server) Pushes() int64 { return s.pushes.Load() }

// RequireToken makes the server refuse every request (HTTP 401) whose
// basic auth does not carry token as its password, whatever the user, as
// forges take a token over HTTPS; "" serves everyone again.
func (s *Server) RequireToken(token string) {
	s.mu.Lock()
	s.token = token
	s.mu.Unlock()
}

// ReadOnly makes repository name refuse pushes (HTTP 403), or accept them again.
func (s *Server) ReadOnly(name string, ro bool) {
	s.mu.Lock()
	s.deny[name] = ro
	s.mu.Unlock()
}

// BeforeReceivePack runs f before each push's data is handed to git (nil
// removes it); when f returns false the push is dropped and git never sees
// it. A test can hold a push there, kill its client, and drop it.
func (s *Server) BeforeReceivePack(f func() bool) {
	s.mu.Lock()
	s.hook = f
	s.mu.Unlock()
}

// AfterReceivePack runs f after git has handled a push and before its
// answer goes back (nil removes it): the push has landed, the client does
// not know yet. A test can kill the client there.
func (s *Server) AfterReceivePack(f func()) {
	s.mu.Lock()
	s.after = f
	s.mu.Unlock()
}

// InitBare creates an empty bare repository name whose HEAD is branch and
// which accepts pushes over HTTP; it returns its clone URL.
func (s *Server) InitBare(tb testing.TB, name, branch string) string {
	tb.Helper()
	dir := s.Dir(name)
	Git(tb, "", "init", "--quiet", "--bare", "--initial-branch="+branch, dir)
	Git(tb, dir, "config", "http.receivepack", "true")
	return s.URL(name)
}

// Seed creates repository name with one commit holding files (path to
// content) on branch, made by the git CLI, and returns its clone URL.
func (s *Server) Seed(tb testing.TB, name, branch string, files map[string]string) string {
	tb.Helper()
	url := s.InitBare(tb, name, branch)
	work := tb.TempDir()
	Git(tb, "", "init", "--quiet", "--initial-branch="+branch, work)
	for p, body := range files {
		full := filepath.Join(work, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	Git(tb, work, "add", "-A")
	Git(tb, work, "commit", "--quiet", "-m", "seed")
	Git(tb, work, "push", "--quiet", s.Dir(name), branch)
	return url
}

// Git runs the git CLI in dir (with a fixed identity and no user or
// system configuration) and returns its trimmed standard output.
func Git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	out, err := Run(dir, args...)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	return out
}

// Run is Git returning the error instead of failing the test.
func Run(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=gittest", "GIT_AUTHOR_EMAIL=gittest@example.invalid",
		"GIT_COMMITTER_NAME=gittest", "GIT_COMMITTER_EMAIL=gittest@example.invalid",
		"GIT_TERMINAL_PROMPT=0")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}
