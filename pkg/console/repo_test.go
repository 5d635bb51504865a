package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/console"
	"github.com/slipway-dev/slipway/testharness/gittest"
)

// seedPool is a config repository (git over HTTP) holding pool agents
// with n generations, the last active, the one before draining, the rest
// retained, as a promotion writes them; it returns the repository's URL
// and the generations.
func seedPool(t *testing.T, srv *gittest.Server, n int) (string, []*generation.Generation) {
	t.Helper()
	var gens []*generation.Generation
	var from *generation.Generation
	files := map[string]string{}
	st := pool.NewState("agents")
	for i := range n {
		pins := map[generation.Kind]generation.Pin{
			generation.ControlPlane:      {Image: fmt.Sprintf("registry.example/platform/control@sha256:%064x", i)},
			generation.Runner:            {Image: fmt.Sprintf("registry.example/platform/runner@sha256:%064x", 100+i)},
			generation.WorkspaceTemplate: {Image: fmt.Sprintf("registry.example/templates/busybox@sha256:%064x", 200+i)},
		}
		var compat *generation.Compatibility
		if from == nil {
			compat = &generation.Compatibility{ControlPlaneProtocol: generation.Range{Min: 1, Max: 1}, RunnerProtocol: generation.Range{Min: 1, Max: 1}}
		}
		g, err := generation.New("agents", from, pins, compat)
		if err != nil {
			t.Fatal(err)
		}
		gens, from = append(gens, g), g
		gb, err := generation.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		files[pool.GenerationFile("agents", g.ID)] = string(gb)
		state := pool.Retained
		switch i {
		case n - 1:
			state = pool.Active
		case n - 2:
			state = pool.Draining
		}
		st.Generations = append(st.Generations, pool.GenState{ID: g.ID, Sequence: g.Sequence, State: state, WarmSize: 1,
			Since: time.Date(2026, 11, 1, i, 0, 0, 0, time.UTC)})
	}
	pb, err := pool.Marshal(pool.Default("agents"))
	if err != nil {
		t.Fatal(err)
	}
	files[pool.PoolFile("agents")] = string(pb)
	sb, err := pool.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	files[pool.StateFile("agents")] = string(sb)
	return srv.Seed(t, "config.git", "main", files), gens
}

// The console's pages share one config repository store, which go-git
// does not make safe for concurrent use: each page's read fetches the
// branch head into it. Pages loaded at once, while another writer keeps
// moving the branch (so each read fetches new objects into the store),
// all answer with what the repository holds, and the race detector (go
// test -race) finds no unsynchronised access. Without the console's lock
// around its reads, this test fails under -race (and may crash with
// concurrent map writes without it).
func TestPagesReadTheConfigRepoConcurrently(t *testing.T) {
	ctx := context.Background()
	srv := gittest.NewServer(t)
	url, gens := seedPool(t, srv, 6)
	repo, err := gitops.Open(ctx, url, gitops.WithDepth(0))
	if err != nil {
		t.Fatal(err)
	}
	cp, ops := startControl(t)
	c, err := console.New(cp, console.WithConfigRepo(repo, "main"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	hs := httptest.NewServer(c)
	t.Cleanup(hs.Close)

	// A writer with its own store moves the branch while the pages load.
	writer, err := gitops.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	wrote := make(chan int)
	go func() {
		n := 0
		defer func() { wrote <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, err := writer.Update(ctx, gitops.Request{Branch: "main", Author: gitops.Signature{Name: "test", Email: "test@example.invalid"},
				Edit: func(tr *gitops.Tree) (*gitops.Commit, error) {
					return &gitops.Commit{Subject: fmt.Sprintf("note %d", n)}, tr.WriteFile("notes.txt", fmt.Appendf(nil, "note %d\n", n))
				}})
			if err != nil {
				t.Errorf("the writer: %v", err)
				return
			}
			n++
		}
	}()

	first, last := gens[0].ID, gens[len(gens)-1].ID
	pages := []struct{ path, want string }{
		{"/pools", `href="/pools/agents"`},
		{"/pools/agents", "/pools/agents/generations/" + last},
		{"/pools/agents/generations/" + first, first},
		{"/pools/agents/generations/" + last, last},
		{"/pools/agents/diff?a=" + first + "&b=" + last, last},
		{"/runs", "Runs"},
	}
	const loads = 8
	var wg sync.WaitGroup
	for i := range loads {
		for _, p := range pages {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+p.path, nil)
				req.AddCookie(&http.Cookie{Name: console.CookieName, Value: ops})
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Errorf("load %d of %s: %v", i, p.path, err)
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), p.want) {
					t.Errorf("load %d of %s: %d %v, want 200 showing %q\n%s", i, p.path, resp.StatusCode, err, p.want, b)
				}
			}()
		}
	}
	wg.Wait()
	close(stop)
	// The loads start on a store that has fetched nothing, so their first
	// reads fetch into it at once whatever the writer does; its commits
	// only add later fetches of new objects.
	t.Logf("the writer moved the branch %d times while %d pages loaded", <-wrote, loads*len(pages))
}
