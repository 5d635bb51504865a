package checkpoint

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// CollectPublished against go-containerregistry's registry (in-process):
// checkpoints taken an hour apart and pushed, signed and attested. A
// window that closes exactly at the oldest's time keeps it; one a second
// later deletes it (a dry run first only lists it), with its signature
// and attestation, while the head the caller keeps, the newer one, a
// checkpoint signed with another key (left alone, unjudged) and one the
// store never pushed stay. A checkpoint whose push stopped before it was
// signed (untagged in the registry) is found through the local store and
// deleted too. The local store is not touched; a second sweep deletes
// nothing more; the newest still pulls and restores.
func TestCollectPublished(t *testing.T) {
	ctx := context.Background()
	sv, v := keys(t)
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "ws")
	must(t, os.MkdirAll(ws, 0o755))
	st, err := OpenStore(filepath.Join(tmp, "store"))
	must(t, err)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo, err := name.NewRepository(strings.TrimPrefix(srv.URL, "http://") + "/slipway/checkpoints")
	must(t, err)

	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	take := func(st *Store, sv signature.SignerVerifier, run string, at time.Time) *Checkpoint {
		t.Helper()
		must(t, os.WriteFile(filepath.Join(ws, run+".txt"), []byte(run), 0o644))
		m := testMeta()
		m.RunID = run
		cp, _, err := Create(ctx, st, Source{Dir: ws}, m, WithSigner(sv), withClock(func() time.Time { return at }))
		must(t, err)
		return cp
	}
	old := take(st, sv, "run-old", t0)
	head := take(st, sv, "run-head", t0)
	orphan := take(st, sv, "run-orphan", t0)
	newer := take(st, sv, "run-newer", t0.Add(time.Hour))
	unpushed := take(st, sv, "run-unpushed", t0)
	for _, cp := range []*Checkpoint{old, head, newer} {
		_, err := Push(ctx, st, cp.Digest, repo, sv)
		must(t, err)
	}
	// A push that stopped after the manifest, before the signatures.
	img, err := st.lp.Image(mustHash(t, orphan.Digest))
	must(t, err)
	must(t, remote.Write(repo.Digest(orphan.Digest), img))
	// Another runtime's checkpoint (another key) in the same repository.
	otherSV, _ := keys(t)
	otherSt, err := OpenStore(filepath.Join(tmp, "other"))
	must(t, err)
	foreign := take(otherSt, otherSV, "run-foreign", t0)
	_, err = Push(ctx, otherSt, foreign.Digest, repo, otherSV)
	must(t, err)

	local, err := st.List()
	must(t, err)
	keep := map[string]bool{head.Digest: true}
	sweep := func(windowStart time.Time, dry bool) *CollectedPublished {
		t.Helper()
		got, err := CollectPublished(ctx, repo, v, local, func(p Predicate) bool { return p.Created.Before(windowStart) }, keep, dry)
		must(t, err)
		return got
	}
	deleted := func(c *CollectedPublished) []string {
		var out []string
		for _, d := range c.Deleted {
			out = append(out, d.Checkpoint)
		}
		slices.Sort(out)
		return out
	}
	inRegistry := func(digest string) bool {
		_, err := remote.Head(repo.Digest(digest))
		return err == nil
	}
	gone := []string{old.Digest, orphan.Digest}
	slices.Sort(gone)

	// The window closes exactly at their time: not yet closed.
	if got := sweep(t0, false); len(got.Deleted) != 0 || got.Kept != 4 || len(got.Unjudged) != 1 || !strings.Contains(got.Unjudged[0].Why, "signature does not verify") {
		t.Fatalf("sweep at the window's edge: %+v", got)
	}
	// A second later: a dry run lists, deletes nothing.
	if got := sweep(t0.Add(time.Second), true); !slices.Equal(deleted(got), gone) || got.Deleted[0].Manifest != "" {
		t.Fatalf("dry run: %+v, want %v listed", got, gone)
	}
	for _, d := range gone {
		if !inRegistry(d) {
			t.Fatalf("a dry run deleted %s", d)
		}
	}
	got := sweep(t0.Add(time.Second), false)
	if !slices.Equal(deleted(got), gone) || got.Kept != 2 || len(got.Unjudged) != 1 || got.Unjudged[0].Ref != repo.Digest(foreign.Digest).String() {
		t.Fatalf("sweep: %+v, want %v deleted, 2 kept, the foreign one unjudged", got, gone)
	}
	for _, u := range got.Deleted {
		if u.Manifest != u.Ref || (u.Checkpoint == old.Digest) != (u.Signature != "" && u.Attestation != "") {
			t.Errorf("deleted %+v: want its manifest, and the pushed one's signature and attestation", u)
		}
		if inRegistry(u.Checkpoint) {
			t.Errorf("%s is still in the registry", u.Checkpoint)
		}
	}
	if _, err := sign.Verify(ctx, repo.Digest(old.Digest), v, sign.WithOfflineNoTlog()); err == nil {
		t.Error("the deleted checkpoint's signature still verifies")
	}
	for _, d := range []string{head.Digest, newer.Digest, foreign.Digest} {
		if !inRegistry(d) {
			t.Errorf("%s was deleted", d)
		}
	}
	if inRegistry(unpushed.Digest) {
		t.Errorf("the unpushed checkpoint is in the registry")
	}
	if l, _ := st.List(); len(l) != len(local) {
		t.Errorf("the local store lists %d checkpoints, had %d", len(l), len(local))
	}
	if again := sweep(t0.Add(time.Second), false); len(again.Deleted) != 0 || again.Kept != 2 {
		t.Errorf("a second sweep: %+v", again)
	}

	// What is left still pulls and restores elsewhere.
	dst, err := OpenStore(filepath.Join(t.TempDir(), "store"))
	must(t, err)
	exp := Expect{Tenant: "acme", Generations: []string{"gen-a"}}
	_, err = Pull(ctx, dst, repo.Digest(newer.Digest), v, exp)
	must(t, err)
	to := filepath.Join(t.TempDir(), "restored")
	_, _, _, err = Restore(ctx, dst, newer.Digest, v, exp, to)
	must(t, err)
	if b, err := os.ReadFile(filepath.Join(to, "run-newer.txt")); err != nil || string(b) != "run-newer" {
		t.Fatalf("restored run-newer.txt: %q, %v", b, err)
	}
}
