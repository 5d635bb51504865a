package argocd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// GeneratorPath is the ApplicationSet plugin generator's endpoint.
const GeneratorPath = "/api/v1/getparams.execute"

// MaxRequestBody bounds a generator request's body.
const MaxRequestBody = 1 << 20

// ErrInput is a generator request that cannot be answered as asked (400).
var ErrInput = errors.New("bad generator input")

// Generator is the ApplicationSet plugin generator: one parameter set per
// pool of the config repository's head. It is an http.Handler.
type Generator struct {
	// mu serialises reads of repo (a gitops.Repo is for one goroutine at
	// a time).
	mu     sync.Mutex
	repo   *gitops.Repo
	branch string
	token  [sha256.Size]byte
}

var _ http.Handler = (*Generator)(nil)

// NewGenerator answers for branch of repo to requests bearing token.
func NewGenerator(repo *gitops.Repo, branch string, token []byte) (*Generator, error) {
	if len(bytes.TrimSpace(token)) == 0 {
		return nil, errors.New("argocd: generator: empty token")
	}
	if branch == "" {
		branch = "main"
	}
	return &Generator{repo: repo, branch: branch, token: sha256.Sum256(bytes.TrimSpace(token))}, nil
}

// Request is what the ApplicationSet controller sends.
type Request struct {
	ApplicationSetName string `json:"applicationSetName"`
	Input              struct {
		Parameters map[string]json.RawMessage `json:"parameters"`
	} `json:"input"`
}

// Response is the generator's answer.
type Response struct {
	Output struct {
		Parameters []map[string]string `json:"parameters"`
	} `json:"output"`
}

func (g *Generator) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], g.token[:]) == 1
}

// ServeHTTP answers POST GeneratorPath: 403 with an empty body for a
// missing or wrong token, 400 with the reason for malformed input (unknown
// fields, a body over MaxRequestBody, an unknown pool), 500 when the
// repository cannot be read.
func (g *Generator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.authorized(r) {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	if r.URL.Path != GeneratorPath {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	filter, err := decodeRequest(http.MaxBytesReader(w, r.Body, MaxRequestBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	params, err := g.Parameters(r.Context(), filter)
	switch {
	case errors.Is(err, ErrInput):
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var resp Response
	resp.Output.Parameters = params
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// decodeRequest reads a request strictly and returns the pools it asks
// for (none: all).
func decodeRequest(body io.Reader) ([]string, error) {
	var req Request
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fmt.Errorf("argocd: generator: %w: the body is over %d bytes", ErrInput, MaxRequestBody)
		}
		return nil, fmt.Errorf("argocd: generator: %w: %v", ErrInput, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("argocd: generator: %w: data after the request object", ErrInput)
	}
	var filter []string
	for k, v := range req.Input.Parameters {
		switch k {
		case "pool":
			var p string
			if err := json.Unmarshal(v, &p); err != nil {
				return nil, fmt.Errorf("argocd: generator: %w: input.parameters.pool: want a string", ErrInput)
			}
			filter = append(filter, p)
		case "pools":
			var ps []string
			if err := json.Unmarshal(v, &ps); err != nil {
				return nil, fmt.Errorf("argocd: generator: %w: input.parameters.pools: want a list of strings", ErrInput)
			}
			filter = append(filter, ps...)
		default:
			return nil, fmt.Errorf("argocd: generator: %w: unknown input parameter %q (want pool or pools)", ErrInput, k)
		}
	}
	for _, p := range filter {
		if !pool.ValidName(p) {
			return nil, fmt.Errorf("argocd: generator: %w: %q is not a pool name", ErrInput, p)
		}
	}
	if filter != nil {
		slices.Sort(filter)
		filter = slices.Compact(filter)
	}
	return filter, nil
}

// Parameters returns one parameter set per pool at the branch head (only
// the pools of filter when it is not empty; an unknown one is ErrInput),
// sorted by pool: pool, generation and sequence (the active generation),
// target, warming, draining and retained (generation ids, comma
// separated), configRevision (the head commit), and pins.<kind> (the
// active generation's pinned identities: digests, commits, provider ids).
func (g *Generator) Parameters(ctx context.Context, filter []string) ([]map[string]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, head, err := g.repo.Snapshot(ctx, g.branch)
	if err != nil {
		return nil, fmt.Errorf("argocd: generator: %w", err)
	}
	names, err := t.List("pools")
	if err != nil {
		return nil, fmt.Errorf("argocd: generator: %w", err)
	}
	var pools []string
	for _, n := range names {
		if pool.ValidName(n) && t.Exists(pool.PoolFile(n)) && (len(filter) == 0 || slices.Contains(filter, n)) {
			pools = append(pools, n)
		}
	}
	for _, p := range filter {
		if !slices.Contains(pools, p) {
			return nil, fmt.Errorf("argocd: generator: %w: the config repository has no pool %s at %s", ErrInput, p, head)
		}
	}
	out := []map[string]string{}
	for _, name := range pools {
		st, err := pool.ReadState(name, t.ReadFile)
		if err != nil {
			return nil, fmt.Errorf("argocd: generator: %w", err)
		}
		set := map[string]string{"pool": name, "configRevision": head, "target": st.Target,
			"generation": "", "sequence": "", "warming": "", "draining": "", "retained": ""}
		byState := map[string][]string{}
		for _, e := range st.Generations {
			byState[e.State] = append(byState[e.State], e.ID)
		}
		for _, s := range []string{pool.Warming, pool.Draining, pool.Retained} {
			set[s] = strings.Join(byState[s], ",")
		}
		if a, ok := st.Active(); ok {
			file := pool.GenerationFile(name, a.ID)
			b, err := t.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("argocd: generator: %w", err)
			}
			gen, err := generation.ParseNamed(b, file)
			if err != nil {
				return nil, fmt.Errorf("argocd: generator: %w", err)
			}
			if gen.ID != a.ID {
				return nil, fmt.Errorf("argocd: generator: %s holds %s", file, gen.ID)
			}
			set["generation"], set["sequence"] = a.ID, strconv.FormatInt(a.Sequence, 10)
			for k, p := range gen.Pins {
				set["pins."+string(k)] = p.Identity()
			}
		}
		out = append(out, set)
	}
	return out, nil
}
