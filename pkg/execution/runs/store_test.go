package runs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/testharness/pgtest"
)

// The Store conformance suite: every test here runs against each backend,
// SQLite and PostgreSQL (a real PostgreSQL 15 from pgtest; skipped, naming
// make deps, where it is not installed).

func TestMain(m *testing.M) { pgtest.Main(m) }

// opener opens a new handle on the test's one database, closed at cleanup
// (closing it first is fine).
type opener func(t *testing.T) Store

var backends = []struct {
	name string
	db   func(t *testing.T) opener // a new, empty database
}{
	{"sqlite", func(t *testing.T) opener {
		path := filepath.Join(t.TempDir(), StateFile)
		return func(t *testing.T) Store {
			t.Helper()
			s, err := OpenSQLite(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	}},
	{"postgres", func(t *testing.T) opener {
		dsn := pgtest.New(t)
		return func(t *testing.T) Store {
			t.Helper()
			s, err := OpenPostgres(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	}},
}

// forEachStore runs test once per backend, as subtests named for them.
func forEachStore(t *testing.T, test func(t *testing.T, open opener)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b.db(t)) })
	}
}

func TestCreateGetRoundTrip(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t)
		m := fullManifest("r-123")
		// times in another zone come back as the same instants in UTC
		cet := time.FixedZone("CET", 3600)
		m.Lifecycle.Ready = m.Lifecycle.Ready.In(cet)
		m.CredentialIssuances[0].IssuedAt = m.CredentialIssuances[0].IssuedAt.In(cet)
		if err := s.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		if m.Lifecycle.Ready.Location() != cet {
			t.Error("Create changed the caller's manifest")
		}
		got, err := s.Get(ctx, "r-123")
		if err != nil {
			t.Fatal(err)
		}
		if want := fullManifest("r-123"); !reflect.DeepEqual(got, want) {
			t.Errorf("Get = %+v\nwant %+v", got, want)
		}
		if _, err := s.Get(ctx, "r-404"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(unknown): err = %v, want ErrNotFound", err)
		}
	})
}

func TestCreateRefuses(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t)
		if err := s.Create(ctx, &runmanifest.Manifest{RunID: "r-1"}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "r-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != runmanifest.StatusGranted || got.CredentialIssuances == nil {
			t.Errorf("a bare manifest is stored as %q with receipts %#v; want granted and an empty list", got.Status, got.CredentialIssuances)
		}
		if err := s.Create(ctx, &runmanifest.Manifest{RunID: "r-1", Pool: "other"}); !errors.Is(err, ErrExists) {
			t.Errorf("second Create: err = %v, want ErrExists", err)
		}
		if got, _ := s.Get(ctx, "r-1"); got.Pool != "" {
			t.Error("a second Create overwrote the first")
		}
		for name, m := range map[string]*runmanifest.Manifest{
			"nil":        nil,
			"no run id":  {Pool: "agents"},
			"bad status": {RunID: "r-2", Status: "done"},
			"bad receipt": {RunID: "r-3", CredentialIssuances: []runmanifest.Receipt{{Issuer: "b", SecretVersion: "v1",
				SHA256Fingerprint: "hunter2"}}},
		} {
			if err := s.Create(ctx, m); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: err = %v, want ErrInvalid", name, err)
			}
		}
		if _, err := s.Get(ctx, "r-3"); !errors.Is(err, ErrNotFound) {
			t.Errorf("a refused manifest was stored: %v", err)
		}
	})
}

func TestUpdateLifecycle(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t)
		t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		if err := s.Create(ctx, &runmanifest.Manifest{RunID: "r-1", AllocationAttempt: 1, WorkspaceTemplateID: "tpl-a",
			Lifecycle: runmanifest.Lifecycle{ClaimCreated: t0}}); err != nil {
			t.Fatal(err)
		}
		step := func(fn func(*runmanifest.Manifest) error) {
			t.Helper()
			if err := s.Update(ctx, "r-1", fn); err != nil {
				t.Fatal(err)
			}
		}
		step(func(m *runmanifest.Manifest) error {
			m.SandboxID, m.Lifecycle.SandboxAssigned = "sb-1", t0.Add(time.Millisecond)
			return nil
		})
		// the claim moves to a new sandbox: next attempt, new sandbox
		step(func(m *runmanifest.Manifest) error {
			m.AllocationAttempt, m.SandboxID = 2, "sb-2"
			return nil
		})
		step(func(m *runmanifest.Manifest) error {
			m.Status, m.Lifecycle.RunnerAwakened = runmanifest.StatusRunning, t0.Add(time.Second)
			return nil
		})
		// refusals leave the stored manifest as it was
		boom := errors.New("boom")
		if err := s.Update(ctx, "r-1", func(m *runmanifest.Manifest) error { m.Pool = "x"; return boom }); !errors.Is(err, boom) {
			t.Errorf("fn error: got %v, want boom", err)
		}
		for name, fn := range map[string]func(*runmanifest.Manifest) error{
			"run id changed":    func(m *runmanifest.Manifest) error { m.RunID = "r-2"; return nil },
			"attempt lowered":   func(m *runmanifest.Manifest) error { m.AllocationAttempt = 1; return nil },
			"status cleared":    func(m *runmanifest.Manifest) error { m.Status = ""; return nil },
			"invalid template":  func(m *runmanifest.Manifest) error { m.WorkspaceTemplateID = "a b"; return nil },
			"bad final receipt": func(m *runmanifest.Manifest) error { m.CredentialIssuances = []runmanifest.Receipt{{}}; return nil },
		} {
			if err := s.Update(ctx, "r-1", fn); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: err = %v, want ErrInvalid", name, err)
			}
		}
		got, err := s.Get(ctx, "r-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Pool != "" || got.AllocationAttempt != 2 || got.SandboxID != "sb-2" || got.Status != runmanifest.StatusRunning ||
			got.WorkspaceTemplateID != "tpl-a" || len(got.CredentialIssuances) != 0 {
			t.Errorf("after refused updates: %+v", got)
		}
		// finalise once
		exit := 3
		step(func(m *runmanifest.Manifest) error {
			m.Status, m.ExitCode = runmanifest.StatusFailed, &exit
			m.Lifecycle.ResourcesReleased = t0.Add(time.Minute)
			return nil
		})
		if err := s.Update(ctx, "r-1", func(m *runmanifest.Manifest) error { m.Status = runmanifest.StatusRunning; return nil }); !errors.Is(err, ErrCompleted) {
			t.Errorf("Update of a final manifest: err = %v, want ErrCompleted", err)
		}
		called := false
		if err := s.Update(ctx, "r-1", func(*runmanifest.Manifest) error { called = true; return nil }); !errors.Is(err, ErrCompleted) || called {
			t.Errorf("Update of a final manifest: err = %v, fn called %v", err, called)
		}
		got, err = s.Get(ctx, "r-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != runmanifest.StatusFailed || got.ExitCode == nil || *got.ExitCode != 3 || !got.Lifecycle.ResourcesReleased.Equal(t0.Add(time.Minute)) ||
			!got.Lifecycle.SandboxAssigned.Equal(t0.Add(time.Millisecond)) {
			t.Errorf("final manifest: %+v", got)
		}
		if err := s.Update(ctx, "r-404", func(*runmanifest.Manifest) error { return nil }); !errors.Is(err, ErrNotFound) {
			t.Errorf("Update(unknown): err = %v, want ErrNotFound", err)
		}
		// a manifest created final is a record from the start
		if err := s.Create(ctx, &runmanifest.Manifest{RunID: "r-2", Status: runmanifest.StatusReleased}); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(ctx, "r-2", func(*runmanifest.Manifest) error { return nil }); !errors.Is(err, ErrCompleted) {
			t.Errorf("Update of a manifest created released: err = %v, want ErrCompleted", err)
		}
	})
}

// queryFixture: six runs over two templates, two runner images, two runner
// binaries, two node images, two policy revisions, two secret versions (of
// one secret) and two generations.
func queryFixture(t *testing.T, s Store) {
	t.Helper()
	ctx := context.Background()
	for i, c := range []struct{ tpl, runner, bin, img, pol, secret, gen string }{
		{"tpl-a", "run-1", "bin-1", "img-1", "pol-1", "vault://kv/agents/token#3", "g-1"},
		{"tpl-a", "run-1", "bin-1", "img-1", "pol-1", "vault://kv/agents/token#3", "g-1"},
		{"tpl-a", "run-2", "bin-1", "img-2", "pol-1", "vault://kv/agents/token#4", "g-2"},
		{"tpl-b", "run-2", "bin-2", "img-2", "pol-2", "vault://kv/agents/token#4", "g-2"},
		{"tpl-b", "run-2", "bin-2", "img-1", "pol-2", "vault://kv/agents/token#4", "g-2"},
		{"tpl-c", "run-1", "bin-1", "img-1", "pol-2", "", "g-1"},
	} {
		m := &runmanifest.Manifest{RunID: fmt.Sprintf("r-%d", i), WorkspaceTemplateID: c.tpl, RunnerImageDigest: c.runner,
			RunnerBinarySHA256: c.bin, NodeImageID: c.img, PolicyRevision: c.pol, SecretVersion: c.secret, Generation: c.gen,
			NodeID: fmt.Sprintf("node-%d", i%3), RuntimeClass: []string{"gvisor", "runc"}[i%2]}
		if i%2 == 0 { // the even runs carry a request key each
			m.RequestKey = fmt.Sprintf("job-%d:attempt-1", i)
		}
		if err := s.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}

func TestQuery(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t)
		queryFixture(t, s)
		for _, c := range []struct {
			q    runmanifest.Query
			want []string
		}{
			{runmanifest.Query{Template: "tpl-a"}, []string{"r-0", "r-1", "r-2"}},
			{runmanifest.Query{Template: "tpl-c"}, []string{"r-5"}},
			{runmanifest.Query{Template: "tpl-z"}, nil},
			{runmanifest.Query{RunnerImage: "run-2"}, []string{"r-2", "r-3", "r-4"}},
			{runmanifest.Query{NodeImage: "img-1"}, []string{"r-0", "r-1", "r-4", "r-5"}},
			{runmanifest.Query{Policy: "pol-2"}, []string{"r-3", "r-4", "r-5"}},
			{runmanifest.Query{Generation: "g-1"}, []string{"r-0", "r-1", "r-5"}},
			{runmanifest.Query{Template: "tpl-a", RunnerImage: "run-2"}, []string{"r-2"}},
			{runmanifest.Query{Policy: "pol-2", NodeImage: "img-1", Generation: "g-2"}, []string{"r-4"}},
			{runmanifest.Query{NodeImage: "img-1", Limit: 2}, []string{"r-0", "r-1"}},
			// the runner's image and binary are two criteria, never confused
			{runmanifest.Query{RunnerBinary: "bin-2"}, []string{"r-3", "r-4"}},
			{runmanifest.Query{RunnerBinary: "run-2"}, nil},
			{runmanifest.Query{RunnerImage: "bin-2"}, nil},
			{runmanifest.Query{RunnerImage: "run-2", RunnerBinary: "bin-1"}, []string{"r-2"}},
			// a secret version is found by its version
			{runmanifest.Query{SecretVersion: "vault://kv/agents/token#3"}, []string{"r-0", "r-1"}},
			{runmanifest.Query{SecretVersion: "vault://kv/agents/token#4"}, []string{"r-2", "r-3", "r-4"}},
			{runmanifest.Query{SecretVersion: "vault://kv/agents/token"}, nil},
			// a claim request's key finds its run
			{runmanifest.Query{RequestKey: "job-2:attempt-1"}, []string{"r-2"}},
			{runmanifest.Query{RequestKey: "job-2:attempt-1", Template: "tpl-b"}, nil},
			{runmanifest.Query{RequestKey: "job-1:attempt-1"}, nil},
			// a run id typed short
			{runmanifest.Query{RunIDPrefix: "r-"}, []string{"r-0", "r-1", "r-2", "r-3", "r-4", "r-5"}},
			{runmanifest.Query{RunIDPrefix: "r-3"}, []string{"r-3"}},
			{runmanifest.Query{RunIDPrefix: "r-3", Template: "tpl-a"}, nil},
			{runmanifest.Query{RunIDPrefix: "r-%"}, nil},
			// the node and the runtime class, from the manifest
			{runmanifest.Query{Node: "node-1"}, []string{"r-1", "r-4"}},
			{runmanifest.Query{RuntimeClass: "runc"}, []string{"r-1", "r-3", "r-5"}},
			{runmanifest.Query{Node: "node-0", RuntimeClass: "runc"}, []string{"r-3"}},
			{runmanifest.Query{Node: "node-0", Template: "tpl-a"}, []string{"r-0"}},
			{runmanifest.Query{Node: "node-9"}, nil},
		} {
			got, err := s.Query(ctx, c.q)
			if err != nil {
				t.Errorf("Query(%+v): %v", c.q, err)
				continue
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("Query(%+v) = %v, want %v", c.q, got, c.want)
			}
		}
		for _, q := range []runmanifest.Query{{}, {Limit: 3}, {Template: "tpl-a", Limit: -1}, {Package: "openssl"}} {
			if _, err := s.Query(ctx, q); !errors.Is(err, ErrInvalid) {
				t.Errorf("Query(%+v): err = %v, want ErrInvalid", q, err)
			}
		}
		// the query columns follow updates
		if err := s.Update(ctx, "r-5", func(m *runmanifest.Manifest) error { m.WorkspaceTemplateID = "tpl-a"; return nil }); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Query(ctx, runmanifest.Query{Template: "tpl-a"}); !slices.Equal(got, []string{"r-0", "r-1", "r-2", "r-5"}) {
			t.Errorf("after the update, template tpl-a has %v", got)
		}
	})
}

func TestPackageQuery(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t)
		queryFixture(t, s)
		pkgs := func(ss ...string) []runmanifest.Package {
			var ps []runmanifest.Package
			for _, x := range ss {
				p, err := runmanifest.ParsePackage(x)
				if err != nil {
					t.Fatal(err)
				}
				ps = append(ps, p)
			}
			return ps
		}
		record := func(tpl string, want runmanifest.Change, ps []runmanifest.Package) {
			t.Helper()
			got, err := s.RecordPackages(ctx, tpl, ps)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("RecordPackages(%s) = %s, want %s", tpl, got, want)
			}
		}
		record("tpl-a", runmanifest.Created, pkgs("openssl@3.0.7", "zlib@1.3", "@babel/core@7.24.0"))
		record("tpl-b", runmanifest.Created, pkgs("openssl@3.0.8", "zlib@1.3", "zlib@1.3")) // duplicates count once
		record("tpl-c", runmanifest.Created, nil)                                           // indexed, no packages
		record("tpl-a", runmanifest.Unchanged, pkgs("zlib@1.3", "@babel/core@7.24.0", "openssl@3.0.7"))
		check := func(q runmanifest.Query, want []string) {
			t.Helper()
			got, err := s.Query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("Query(%+v) = %v, want %v", q, got, want)
			}
		}
		check(runmanifest.Query{Package: "openssl@3.0.7"}, []string{"r-0", "r-1", "r-2"})
		check(runmanifest.Query{Package: "openssl@3.0.8"}, []string{"r-3", "r-4"})
		check(runmanifest.Query{Package: "zlib@1.3"}, []string{"r-0", "r-1", "r-2", "r-3", "r-4"})
		check(runmanifest.Query{Package: "@babel/core@7.24.0"}, []string{"r-0", "r-1", "r-2"})
		check(runmanifest.Query{Package: "openssl@1.1.1"}, nil)
		check(runmanifest.Query{Package: "zlib@1.3", RunnerImage: "run-2"}, []string{"r-2", "r-3", "r-4"})
		check(runmanifest.Query{Package: "zlib@1.3", RunnerImage: "run-2", NodeImage: "img-1"}, []string{"r-4"})
		check(runmanifest.Query{Package: "zlib@1.3", Template: "tpl-b"}, []string{"r-3", "r-4"})
		check(runmanifest.Query{Package: "zlib@1.3", Limit: 1}, []string{"r-0"})

		// a template rebuilt SBOM replaces the old set
		record("tpl-a", runmanifest.Updated, pkgs("openssl@3.0.8"))
		check(runmanifest.Query{Package: "openssl@3.0.7"}, nil)
		check(runmanifest.Query{Package: "openssl@3.0.8"}, []string{"r-0", "r-1", "r-2", "r-3", "r-4"})
		check(runmanifest.Query{Package: "zlib@1.3"}, []string{"r-3", "r-4"})

		// The runner and control-plane images' packages are recorded too
		// (by their digests): a run is found by any of its three
		// artifacts, once when two of them hold the package.
		if err := s.Create(ctx, &runmanifest.Manifest{RunID: "r-cp", WorkspaceTemplateID: "tpl-c", RunnerImageDigest: "run-1", ControlPlaneDigest: "cp-1"}); err != nil {
			t.Fatal(err)
		}
		record("run-2", runmanifest.Created, pkgs("golang.org/x/sys@v0.49.0", "zlib@1.3"))
		record("cp-1", runmanifest.Created, pkgs("github.com/spf13/cobra@v1.10.1", "golang.org/x/sys@v0.49.0"))
		check(runmanifest.Query{Package: "golang.org/x/sys@v0.49.0"}, []string{"r-2", "r-3", "r-4", "r-cp"})
		check(runmanifest.Query{Package: "github.com/spf13/cobra@v1.10.1"}, []string{"r-cp"})
		check(runmanifest.Query{Package: "zlib@1.3"}, []string{"r-2", "r-3", "r-4"})
		check(runmanifest.Query{Package: "zlib@1.3", Generation: "g-2", Limit: 2}, []string{"r-2", "r-3"})

		for name, c := range map[string]struct {
			tpl string
			ps  []runmanifest.Package
		}{
			"no template":     {"", nil},
			"no version":      {"tpl-d", []runmanifest.Package{{Name: "openssl"}}},
			"'@' in version":  {"tpl-d", []runmanifest.Package{{Name: "a", Version: "1@2"}}},
			"control in name": {"tpl-d", []runmanifest.Package{{Name: "a\nb", Version: "1"}}},
		} {
			if _, err := s.RecordPackages(ctx, c.tpl, c.ps); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: err = %v, want ErrInvalid", name, err)
			}
		}
	})
}

func TestConcurrentUse(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t)
		if err := s.Create(ctx, &runmanifest.Manifest{RunID: "counter", AllocationAttempt: 0, WorkspaceTemplateID: "tpl"}); err != nil {
			t.Fatal(err)
		}
		const writers, each = 8, 20
		var wg sync.WaitGroup
		errs := make(chan error, writers*each*3)
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					id := fmt.Sprintf("r-%d-%02d", w, i)
					if err := s.Create(ctx, &runmanifest.Manifest{RunID: id, WorkspaceTemplateID: "tpl", Generation: fmt.Sprintf("g-%d", w)}); err != nil {
						errs <- err
					}
					// every writer bumps one shared manifest: no update may be lost
					if err := s.Update(ctx, "counter", func(m *runmanifest.Manifest) error { m.AllocationAttempt++; return nil }); err != nil {
						errs <- err
					}
					if _, err := s.Get(ctx, id); err != nil {
						errs <- err
					}
				}
			})
			// readers alongside
			wg.Go(func() {
				for range each {
					if _, err := s.Query(ctx, runmanifest.Query{Template: "tpl"}); err != nil {
						errs <- err
					}
				}
			})
		}
		// two goroutines race to create the same run: exactly one wins
		var dup [2]error
		for i := range dup {
			wg.Go(func() { dup[i] = s.Create(ctx, &runmanifest.Manifest{RunID: "same"}) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if (dup[0] == nil) == (dup[1] == nil) || !errors.Is(errors.Join(dup[0], dup[1]), ErrExists) {
			t.Errorf("racing creates of one run: %v, %v; want one nil and one ErrExists", dup[0], dup[1])
		}
		ids, err := s.Query(ctx, runmanifest.Query{Template: "tpl"})
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != writers*each+1 {
			t.Errorf("%d runs of tpl, want %d", len(ids), writers*each+1)
		}
		m, err := s.Get(ctx, "counter")
		if err != nil {
			t.Fatal(err)
		}
		if m.AllocationAttempt != writers*each {
			t.Errorf("counter = %d after %d concurrent updates", m.AllocationAttempt, writers*each)
		}
	})
}
func TestReopenKeepsEverything(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t)
		if err := s.Create(ctx, fullManifest("r-1")); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, &runmanifest.Manifest{RunID: "r-2", WorkspaceTemplateID: fullManifest("").WorkspaceTemplateID}); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(ctx, "r-2", func(m *runmanifest.Manifest) error { m.Status = runmanifest.StatusRunning; return nil }); err != nil {
			t.Fatal(err)
		}
		tpl := fullManifest("").WorkspaceTemplateID
		if _, err := s.RecordPackages(ctx, tpl, []runmanifest.Package{{Name: "openssl", Version: "3.0.7"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		for range 2 {
			s = open(t)
			got, err := s.Get(ctx, "r-1")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, fullManifest("r-1")) {
				t.Errorf("after reopening: %+v", got)
			}
			if got, _ := s.Get(ctx, "r-2"); got == nil || got.Status != runmanifest.StatusRunning {
				t.Errorf("after reopening, r-2 is %+v", got)
			}
			if ids, err := s.Query(ctx, runmanifest.Query{Package: "openssl@3.0.7"}); err != nil || !slices.Equal(ids, []string{"r-1", "r-2"}) {
				t.Errorf("after reopening, openssl@3.0.7 runs: %v, %v", ids, err)
			}
			if c, err := s.RecordPackages(ctx, tpl, []runmanifest.Package{{Name: "openssl", Version: "3.0.7"}}); c != runmanifest.Unchanged || err != nil {
				t.Errorf("after reopening, recording the same packages: %v, %v", c, err)
			}
			if err := s.Create(ctx, &runmanifest.Manifest{RunID: "r-1"}); !errors.Is(err, ErrExists) {
				t.Errorf("after reopening, Create(r-1): %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Open lists the runs not final yet.
func TestOpenRuns(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t)
		if ids, err := s.Open(ctx); err != nil || ids != nil {
			t.Fatalf("Open of an empty store = %v, %v", ids, err)
		}
		for _, id := range []string{"r-4", "r-2", "r-3", "r-1", "r-5"} {
			if err := s.Create(ctx, &runmanifest.Manifest{RunID: id}); err != nil {
				t.Fatal(err)
			}
		}
		set := func(id string, st runmanifest.Status) {
			t.Helper()
			if err := s.Update(ctx, id, func(m *runmanifest.Manifest) error { m.Status = st; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		set("r-2", runmanifest.StatusRunning)
		set("r-3", runmanifest.StatusCompleted)
		set("r-4", runmanifest.StatusRunning)
		set("r-4", runmanifest.StatusFailed)
		set("r-5", runmanifest.StatusReleased)
		check := func(s Store, want ...string) {
			t.Helper()
			got, err := s.Open(ctx)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("Open = %v, %v; want %v", got, err, want)
			}
		}
		check(s, "r-1", "r-2")
		set("r-1", runmanifest.StatusRunning) // still open
		check(s, "r-1", "r-2")
		s.Close()
		check(open(t), "r-1", "r-2")
	})
}

// Several handles on one database (several runtimes sharing a manifest
// store; on SQLite, several processes on one file) write at once: no
// manifest is lost or stored twice, no update of a shared run is lost, a
// run id raced for by every handle is created once, and a template's
// packages recorded by every handle at once end as one set.
func TestConcurrentHandles(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		a, b := open(t), open(t)
		handles := []Store{a, b}
		if err := a.Create(ctx, &runmanifest.Manifest{RunID: "counter", WorkspaceTemplateID: "tpl-c"}); err != nil {
			t.Fatal(err)
		}
		const writers, each = 4, 25 // per handle
		var wg sync.WaitGroup
		errs := make(chan error, 2*writers*each*2+64)
		created := make(chan error, 2*8)
		for h, s := range handles {
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						id := fmt.Sprintf("r-%d-%d-%02d", h, w, i)
						if err := s.Create(ctx, &runmanifest.Manifest{RunID: id, WorkspaceTemplateID: "tpl", Generation: fmt.Sprintf("g-%d", h)}); err != nil {
							errs <- err
						}
						if err := s.Update(ctx, "counter", func(m *runmanifest.Manifest) error { m.AllocationAttempt++; return nil }); err != nil {
							errs <- err
						}
					}
				})
			}
			// every handle races to create the same runs
			for i := range 8 {
				wg.Go(func() { created <- s.Create(ctx, &runmanifest.Manifest{RunID: fmt.Sprintf("same-%d", i%4)}) })
			}
			wg.Go(func() {
				if _, err := s.RecordPackages(ctx, "tpl", []runmanifest.Package{{Name: "openssl", Version: "3.0.7"}, {Name: "zlib", Version: fmt.Sprint(h)}}); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		close(created)
		for err := range errs {
			t.Error(err)
		}
		won := 0
		for err := range created {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrExists):
				t.Errorf("racing create: %v", err)
			}
		}
		if won != 4 {
			t.Errorf("4 run ids raced for by 16 Creates: %d created, want 4", won)
		}
		for _, s := range handles {
			ids, err := s.Query(ctx, runmanifest.Query{Template: "tpl"})
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) != 2*writers*each || len(slices.Compact(slices.Clone(ids))) != len(ids) {
				t.Errorf("%d runs of tpl (%d distinct), want %d", len(ids), len(slices.Compact(slices.Clone(ids))), 2*writers*each)
			}
			for h := range handles {
				if ids, err := s.Query(ctx, runmanifest.Query{Generation: fmt.Sprintf("g-%d", h)}); err != nil || len(ids) != writers*each {
					t.Errorf("runs of handle %d: %d, %v; want %d", h, len(ids), err, writers*each)
				}
			}
			m, err := s.Get(ctx, "counter")
			if err != nil {
				t.Fatal(err)
			}
			if m.AllocationAttempt != 2*writers*each {
				t.Errorf("counter = %d after %d concurrent updates from two handles", m.AllocationAttempt, 2*writers*each)
			}
			// the packages of one of the two recordings, whole
			z0, err := s.Query(ctx, runmanifest.Query{Package: "zlib@0"})
			if err != nil {
				t.Fatal(err)
			}
			z1, err := s.Query(ctx, runmanifest.Query{Package: "zlib@1"})
			if err != nil {
				t.Fatal(err)
			}
			o, err := s.Query(ctx, runmanifest.Query{Package: "openssl@3.0.7"})
			if err != nil {
				t.Fatal(err)
			}
			if len(o) != 2*writers*each || (len(z0) == 0) == (len(z1) == 0) {
				t.Errorf("packages recorded at once: openssl %d runs, zlib@0 %d, zlib@1 %d; want %d, and one zlib", len(o), len(z0), len(z1), 2*writers*each)
			}
		}
	})
}

// Packages reads back what RecordPackages recorded, sorted by name then
// version in byte order (the same in both databases), without duplicates;
// an artifact recorded with no packages is recorded, one never recorded
// is not; a re-recorded set replaces the old one, read from another
// handle.
func TestPackagesReadBack(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t)
		ps := func(ss ...string) []runmanifest.Package {
			var out []runmanifest.Package
			for _, x := range ss {
				p, err := runmanifest.ParsePackage(x)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, p)
			}
			return out
		}
		for tpl, set := range map[string][]runmanifest.Package{
			"tpl-a":                              ps("zlib@1.3", "openssl@3.0.7", "@babel/core@7.24.0", "Zed@1", "openssl@3.0.10", "zlib@1.3"),
			"tpl-c":                              nil,
			"sha256:" + strings.Repeat("ab", 32): ps("busybox@1.36.1"),
		} {
			if _, err := s.RecordPackages(ctx, tpl, set); err != nil {
				t.Fatal(err)
			}
		}
		check := func(s Store, tpl string, wantRecorded bool, want ...string) {
			t.Helper()
			got, recorded, err := s.Packages(ctx, tpl)
			if err != nil {
				t.Fatalf("Packages(%s): %v", tpl, err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.String())
			}
			if recorded != wantRecorded || !slices.Equal(names, want) {
				t.Errorf("Packages(%s) = %q recorded %v, want %q recorded %v", tpl, names, recorded, want, wantRecorded)
			}
		}
		check(s, "tpl-a", true, "@babel/core@7.24.0", "Zed@1", "openssl@3.0.10", "openssl@3.0.7", "zlib@1.3")
		check(s, "tpl-c", true)
		check(s, "tpl-never", false)
		check(s, "sha256:"+strings.Repeat("ab", 32), true, "busybox@1.36.1")
		if _, err := s.RecordPackages(ctx, "tpl-a", ps("openssl@3.0.11")); err != nil {
			t.Fatal(err)
		}
		check(open(t), "tpl-a", true, "openssl@3.0.11")
		if _, _, err := s.Packages(ctx, "tpl\nbad"); !errors.Is(err, ErrInvalid) {
			t.Errorf("Packages of an id with a newline: %v, want ErrInvalid", err)
		}
	})
}

// An artifact's builders read back as recorded: sorted, repeats dropped;
// an empty set (read, no verified provenance) apart from none recorded;
// the same set again Unchanged, another Updated; a builder without an
// attestation refused, naming the artifact.
func TestBuildersReadBack(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t)
		att := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
		tpl := "sha256:" + strings.Repeat("ab", 32)
		set := []runmanifest.Builder{{ID: "https://slipway.dev/builders/slipway-release/v1", Attestation: att("2")},
			{ID: "https://ci.example/builder", Attestation: att("1")}, {ID: "https://ci.example/builder", Attestation: att("1")}}
		for _, c := range []struct {
			id   string
			bs   []runmanifest.Builder
			want runmanifest.Change
		}{{tpl, set, runmanifest.Created}, {"tpl-none", nil, runmanifest.Created}, {tpl, set[:2], runmanifest.Unchanged}, {"tpl-none", []runmanifest.Builder{}, runmanifest.Unchanged}} {
			if got, err := s.RecordBuilders(ctx, c.id, c.bs); err != nil || got != c.want {
				t.Fatalf("RecordBuilders(%s, %v) = %s, %v; want %s", c.id, c.bs, got, err, c.want)
			}
		}
		check := func(s Store, id string, wantRecorded bool, want ...runmanifest.Builder) {
			t.Helper()
			got, recorded, err := s.Builders(ctx, id)
			if err != nil {
				t.Fatalf("Builders(%s): %v", id, err)
			}
			if recorded != wantRecorded || len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
				t.Errorf("Builders(%s) = %v recorded %v, want %v recorded %v", id, got, recorded, want, wantRecorded)
			}
		}
		check(s, tpl, true, set[1], set[0])
		check(s, "tpl-none", true)
		check(s, "tpl-never", false)
		if got, err := s.RecordBuilders(ctx, tpl, set[:1]); err != nil || got != runmanifest.Updated {
			t.Fatalf("RecordBuilders of another set: %s, %v; want updated", got, err)
		}
		check(open(t), tpl, true, set[0])
		_, err := s.RecordBuilders(ctx, "tpl-bad", []runmanifest.Builder{{ID: "https://ci.example/builder"}})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "tpl-bad") || !strings.Contains(err.Error(), "attestation") {
			t.Errorf("a builder without its attestation: %v, want ErrInvalid naming the artifact", err)
		}
		check(s, "tpl-bad", false)
		if _, _, err := s.Builders(ctx, "tpl\nbad"); !errors.Is(err, ErrInvalid) {
			t.Errorf("Builders of an id with a newline: %v, want ErrInvalid", err)
		}
	})
}

// TestLatest: the newest runs first, as many as asked, on either store
// (a runtime on PostgreSQL serves its incidents from them too).
func TestLatest(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t)
		for _, id := range []string{"r-1", "r-2", "r-3"} {
			if err := s.Create(ctx, fullManifest(id)); err != nil {
				t.Fatal(err)
			}
		}
		l, ok := s.(interface {
			Latest(context.Context, int) ([]*runmanifest.Manifest, error)
		})
		if !ok {
			t.Fatalf("%T lists no newest runs", s)
		}
		ms, err := l.Latest(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range ms {
			got = append(got, m.RunID)
		}
		if !reflect.DeepEqual(got, []string{"r-3", "r-2"}) {
			t.Errorf("Latest(2) = %v, want r-3, r-2", got)
		}
		if ms, err := l.Latest(ctx, 0); err != nil || len(ms) != 3 {
			t.Errorf("Latest(0) = %d runs, %v; want all 3", len(ms), err)
		}
	})
}
