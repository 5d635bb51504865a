package checkpoint

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

func keys(t testing.TB) (signature.SignerVerifier, signature.Verifier) {
	t.Helper()
	priv, pub, err := sign.GenerateKeys([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := sign.LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := sign.LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sv, v
}

func testMeta() Meta {
	return Meta{Tenant: "acme", Pool: "py", RunID: "run-1", SandboxID: "sb-1", Generation: "gen-a",
		TemplateID: "sha256:" + strings.Repeat("ab", 32), EventSeq: 7}
}

// hashTree maps every path below dir to its type, mode and content hash.
func hashTree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		v := info.Mode().String()
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			v += " " + hex.EncodeToString(s[:])
		case info.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			v += " -> " + l
		}
		out[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalTrees(t testing.TB, want, got map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: restored %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: restored but not in the workspace", k)
		}
	}
}

func TestRoundTripIncremental(t *testing.T) {
	ctx := context.Background()
	sv, v := keys(t)
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "ws")
	must(t, os.MkdirAll(filepath.Join(ws, "src/pkg"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "src/pkg/a.go"), []byte("package a\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "gone.txt"), []byte("delete me"), 0o600))
	must(t, os.WriteFile(filepath.Join(ws, "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.Symlink("src/pkg/a.go", filepath.Join(ws, "link")))
	st, err := OpenStore(filepath.Join(tmp, "store"))
	must(t, err)

	cp1, base, err := Create(ctx, st, Source{Dir: ws}, testMeta(), WithSigner(sv))
	must(t, err)
	if cp1.Predicate.Layers != 1 || cp1.Predicate.Parent != "" {
		t.Fatalf("first checkpoint: %+v", cp1.Predicate)
	}
	// Nothing changed: no new layer, the same layers as the parent.
	cpSame, base2, err := Create(ctx, st, Source{Dir: ws}, testMeta(), WithSigner(sv), WithBase(base))
	must(t, err)
	if cpSame.Predicate.Layers != 1 || cpSame.Predicate.Reused != 1 || cpSame.Predicate.Entries != 0 {
		t.Fatalf("unchanged workspace: %+v", cpSame.Predicate)
	}
	must(t, os.Remove(filepath.Join(ws, "gone.txt")))
	must(t, os.WriteFile(filepath.Join(ws, "src/pkg/a.go"), []byte("package a // changed\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "new.bin"), bytes.Repeat([]byte{1, 2, 3}, 100000), 0o644))
	cp2, _, err := Create(ctx, st, Source{Dir: ws}, testMeta(), WithSigner(sv), WithBase(base2))
	must(t, err)
	if cp2.Predicate.Layers != 2 || cp2.Predicate.Reused != 1 || cp2.Predicate.Parent != cpSame.Digest {
		t.Fatalf("incremental checkpoint: %+v", cp2.Predicate)
	}
	want := hashTree(t, ws)

	to := filepath.Join(tmp, "restored")
	got, next, rep, err := Restore(ctx, st, cp2.Digest, v, Expect{Tenant: "acme", Generations: []string{"gen-a"}, RunID: "run-1"}, to)
	must(t, err)
	if got.Predicate.EventSeq != 7 || got.Predicate.SandboxID != "sb-1" || got.Predicate.TemplateID != testMeta().TemplateID {
		t.Fatalf("restored predicate: %+v", got.Predicate)
	}
	if rep.Whiteouts == 0 {
		t.Fatalf("the deletion was not carried as a whiteout: %+v", rep)
	}
	equalTrees(t, want, hashTree(t, to))

	// The restored directory continues the chain incrementally.
	must(t, os.WriteFile(filepath.Join(to, "after.txt"), []byte("after resume"), 0o644))
	cp3, _, err := Create(ctx, st, Source{Dir: to}, testMeta(), WithSigner(sv), WithBase(next))
	must(t, err)
	if cp3.Predicate.Reused != 2 || cp3.Predicate.Parent != cp2.Digest || cp3.Predicate.Entries > 3 {
		t.Fatalf("checkpoint after restore: %+v", cp3.Predicate)
	}
	list, err := st.List()
	must(t, err)
	if len(list) != 4 {
		t.Fatalf("store lists %d checkpoints, want 4", len(list))
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestFreezeHeldForTheCopyOnly(t *testing.T) {
	ctx := context.Background()
	sv, _ := keys(t)
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "ws")
	must(t, os.MkdirAll(ws, 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "f"), []byte("x"), 0o644))
	st, err := OpenStore(filepath.Join(tmp, "store"))
	must(t, err)
	var events []string
	src := Source{Dir: ws, Freeze: func(context.Context) (func() error, error) {
		events = append(events, "freeze")
		return func() error { events = append(events, "thaw"); return nil }, nil
	}}
	_, _, err = Create(ctx, st, src, testMeta(), WithSigner(sv))
	must(t, err)
	if strings.Join(events, ",") != "freeze,thaw" {
		t.Fatalf("events %v", events)
	}
	// A freeze that fails stops the checkpoint before anything is read.
	events = nil
	src.Freeze = func(context.Context) (func() error, error) { return nil, errors.New("no freezer") }
	if _, _, err := Create(ctx, st, src, testMeta(), WithSigner(sv)); err == nil || !strings.Contains(err.Error(), "freeze sandbox sb-1: no freezer") {
		t.Fatalf("err %v", err)
	}
	// A thaw that fails is an error too: the sandbox is not left frozen silently.
	src.Freeze = func(context.Context) (func() error, error) { return func() error { return errors.New("stuck") }, nil }
	if _, _, err := Create(ctx, st, src, testMeta(), WithSigner(sv)); err == nil || !strings.Contains(err.Error(), "thaw sandbox sb-1: stuck") {
		t.Fatalf("err %v", err)
	}
}

func TestRestoreRefuses(t *testing.T) {
	ctx := context.Background()
	sv, v := keys(t)
	_, otherV := keys(t)
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "ws")
	must(t, os.MkdirAll(ws, 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "f"), []byte("x"), 0o644))
	st, err := OpenStore(filepath.Join(tmp, "store"))
	must(t, err)
	cp, _, err := Create(ctx, st, Source{Dir: ws}, testMeta(), WithSigner(sv))
	must(t, err)
	ok := Expect{Tenant: "acme", Generations: []string{"gen-b", "gen-a"}}
	for _, c := range []struct {
		name string
		v    signature.Verifier
		exp  Expect
		want string
	}{
		{"another key", otherV, ok, "signature"},
		{"another tenant", v, Expect{Tenant: "globex", Generations: []string{"gen-a"}}, `tenant "acme", not of tenant "globex"`},
		{"an incompatible generation", v, Expect{Tenant: "acme", Generations: []string{"gen-c"}}, "taken on generation gen-a, which the target (generations gen-c) does not take"},
		{"another run", v, Expect{Tenant: "acme", Generations: []string{"gen-a"}, RunID: "run-2"}, "checkpoint of run run-1, not of run run-2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			to := filepath.Join(t.TempDir(), "to")
			_, _, _, err := Restore(ctx, st, cp.Digest, c.v, c.exp, to)
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want ErrRefused saying %q", err, c.want)
			}
			if _, err := os.Stat(to); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("refused restore wrote %s", to)
			}
		})
	}

	t.Run("a changed layer blob", func(t *testing.T) {
		st2, cp2 := copyStore(t, st, cp.Digest)
		m, err := st2.manifest(mustHash(t, cp2))
		must(t, err)
		p := filepath.Join(st2.dir, "blobs", "sha256", m.Layers[0].Digest.Hex)
		must(t, os.Chmod(p, 0o644))
		b, _ := os.ReadFile(p)
		b[len(b)-5] ^= 0xff
		must(t, os.WriteFile(p, b, 0o644))
		to := filepath.Join(t.TempDir(), "to")
		_, _, _, err = Restore(ctx, st2, cp2, v, ok, to)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "layer 0") {
			t.Fatalf("err %v", err)
		}
		if _, err := os.Stat(to); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("refused restore wrote %s", to)
		}
	})
	t.Run("a changed config", func(t *testing.T) {
		// A config that says another tenant, with a manifest re-pointed at
		// it: the manifest digest changes, so the old attestation names
		// another subject, and no attestation of the new one exists.
		st2, cp2 := copyStore(t, st, cp.Digest)
		m, err := st2.manifest(mustHash(t, cp2))
		must(t, err)
		cfg, _ := st2.lp.Bytes(m.Config.Digest)
		cfg = bytes.Replace(cfg, []byte(`"acme"`), []byte(`"evil"`), 1)
		h, err := st2.writeBlob(cfg)
		must(t, err)
		m.Config.Digest, m.Config.Size = h, int64(len(cfg))
		raw, _ := json.Marshal(m)
		mh, err := st2.writeBlob(raw)
		must(t, err)
		must(t, st2.append(v1.Descriptor{MediaType: types.OCIManifestSchema1, ArtifactType: ArtifactType, Digest: mh, Size: int64(len(raw))}))
		_, err = Verify(ctx, st2, mh.String(), v, Expect{Tenant: "evil", Generations: []string{"gen-a"}})
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "no signed attestation") {
			t.Fatalf("err %v", err)
		}
		// And the old attestation moved onto it does not name it.
		envs, _ := st2.envelopes(mustHash(t, cp2))
		eh, _ := st2.writeBlob(envs[0])
		must(t, st2.append(v1.Descriptor{MediaType: EnvelopeMediaType, Digest: eh, Size: int64(len(envs[0])), Annotations: map[string]string{AnnotationSubject: mh.String()}}))
		_, err = Verify(ctx, st2, mh.String(), v, Expect{Tenant: "evil", Generations: []string{"gen-a"}})
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "subject is not") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("not a checkpoint", func(t *testing.T) {
		_, err := Verify(ctx, st, "sha256:"+strings.Repeat("0", 64), v, ok)
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("err %v", err)
		}
	})
}

func mustHash(t testing.TB, s string) v1.Hash {
	h, err := v1.NewHash(s)
	must(t, err)
	return h
}

// copyStore copies st's layout into a new directory so a test can damage it.
func copyStore(t *testing.T, st *Store, digest string) (*Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	must(t, os.CopyFS(dir, os.DirFS(st.dir)))
	st2, err := OpenStore(dir)
	must(t, err)
	return st2, digest
}

// A checkpoint signed by the right key but carrying a hostile layer (a
// path out of the workspace, a device) is refused by the extraction, and
// nothing lands outside the target.
func TestRestoreHostileLayer(t *testing.T) {
	ctx := context.Background()
	sv, v := keys(t)
	tmp := t.TempDir()
	st, err := OpenStore(filepath.Join(tmp, "store"))
	must(t, err)
	for _, c := range []struct {
		name string
		hdr  tar.Header
	}{
		{"dot-dot", tar.Header{Name: "../escaped", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}},
		{"absolute", tar.Header{Name: "/etc/escaped", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}},
		{"device", tar.Header{Name: "null", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 1, Devminor: 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			tw := tar.NewWriter(zw)
			hdr := c.hdr
			must(t, tw.WriteHeader(&hdr))
			if hdr.Size > 0 {
				_, _ = tw.Write([]byte("x"))
			}
			must(t, tw.Close())
			must(t, zw.Close())
			lh, err := st.writeBlob(buf.Bytes())
			must(t, err)
			m := testMeta()
			m.RunID = "hostile-" + c.name
			pred := Predicate{Meta: m, Created: time.Now().UTC(), Layers: 1}
			cp, err := st.commit(ctx, sv, pred, []v1.Descriptor{{MediaType: types.OCILayer, Digest: lh, Size: int64(buf.Len())}})
			must(t, err)
			to := filepath.Join(tmp, "to-"+c.name)
			_, _, _, err = Restore(ctx, st, cp.Digest, v, Expect{Tenant: "acme", Generations: []string{"gen-a"}}, to)
			if !errors.Is(err, rootfs.ErrUnsafeEntry) {
				t.Fatalf("err %v, want rootfs.ErrUnsafeEntry", err)
			}
			if _, err := os.Stat(filepath.Join(tmp, "escaped")); err == nil {
				t.Fatal("an entry escaped the workspace")
			}
		})
	}
}

func TestCreateInput(t *testing.T) {
	ctx := context.Background()
	sv, _ := keys(t)
	st, err := OpenStore(t.TempDir())
	must(t, err)
	m := testMeta()
	m.TemplateID = "latest"
	if _, _, err := Create(ctx, st, Source{Dir: t.TempDir()}, m, WithSigner(sv)); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "Meta.TemplateID") {
		t.Fatalf("err %v", err)
	}
	m = testMeta()
	m.RunID = ""
	if _, _, err := Create(ctx, st, Source{Dir: t.TempDir()}, m, WithSigner(sv)); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "Meta.RunID") {
		t.Fatalf("err %v", err)
	}
	if _, _, err := Create(ctx, st, Source{Dir: t.TempDir()}, testMeta()); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "signer") {
		t.Fatalf("err %v", err)
	}
	if _, _, err := Create(ctx, st, Source{Dir: filepath.Join(t.TempDir(), "absent")}, testMeta(), WithSigner(sv)); err == nil {
		t.Fatal("a missing workspace was checkpointed")
	}
	_ = fmt.Sprint
}

// The attestation names the time of the freeze, as the clock gave it.
func TestCreatedIsTheFreezeTime(t *testing.T) {
	ctx := context.Background()
	sv, v := keys(t)
	ws := t.TempDir()
	must(t, os.WriteFile(filepath.Join(ws, "f"), []byte("x"), 0o644))
	st, err := OpenStore(t.TempDir())
	must(t, err)
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var frozenAt time.Time
	src := Source{Dir: ws, Freeze: func(context.Context) (func() error, error) {
		frozenAt = at
		return func() error { return nil }, nil
	}}
	cp, _, err := Create(ctx, st, src, testMeta(), WithSigner(sv), withClock(func() time.Time {
		if frozenAt.IsZero() {
			t.Error("the time was read before the freeze")
		}
		return at
	}))
	must(t, err)
	got, err := Verify(ctx, st, cp.Digest, v, Expect{Tenant: "acme", Generations: []string{"gen-a"}})
	must(t, err)
	if !got.Predicate.Created.Equal(at) {
		t.Fatalf("created %v, want %v", got.Predicate.Created, at)
	}
}

// Collect deletes checkpoints whose restore window has closed, never one
// inside it nor one kept (a run's head), and only blobs no remaining
// checkpoint uses: the head, incremental on deleted parents, still
// restores.
func TestCollectKeepsTheWindowAndTheHead(t *testing.T) {
	ctx := context.Background()
	sv, v := keys(t)
	ws := t.TempDir()
	st, err := OpenStore(t.TempDir())
	must(t, err)
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var cps []*Checkpoint
	var base *Base
	for i := range 3 {
		must(t, os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%d", i)), bytes.Repeat([]byte{byte(i)}, 1000), 0o644))
		at := now.Add(time.Duration(i) * time.Hour)
		cp, next, err := Create(ctx, st, Source{Dir: ws}, testMeta(), WithSigner(sv), WithBase(base), withClock(func() time.Time { return at }))
		must(t, err)
		cps, base = append(cps, cp), next
	}
	other := testMeta()
	other.RunID = "run-2"
	young, _, err := Create(ctx, st, Source{Dir: ws}, other, WithSigner(sv), withClock(func() time.Time { return now.Add(3 * time.Hour) }))
	must(t, err)
	want := hashTree(t, ws)

	// The window starts after all but the young one; the head cps[2] is kept.
	keep := map[string]bool{cps[2].Digest: true}
	dry, err := st.Collect(now.Add(150*time.Minute), keep, true)
	must(t, err)
	if len(dry.Deleted) != 2 || dry.Kept != 2 {
		t.Fatalf("dry run %+v", dry)
	}
	if l, _ := st.List(); len(l) != 4 {
		t.Fatalf("a dry run deleted: %d left", len(l))
	}
	got, err := st.Collect(now.Add(150*time.Minute), keep, false)
	must(t, err)
	if len(got.Deleted) != 2 || got.Blobs == 0 {
		t.Fatalf("collect %+v", got)
	}
	for _, d := range got.Deleted {
		if d != cps[0].Digest && d != cps[1].Digest {
			t.Fatalf("deleted %s, which is the head or inside the window", d)
		}
		if _, err := Verify(ctx, st, d, v, Expect{Tenant: "acme", Generations: []string{"gen-a"}}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a deleted checkpoint still verifies: %v", err)
		}
	}
	to := filepath.Join(t.TempDir(), "to")
	_, _, _, err = Restore(ctx, st, cps[2].Digest, v, Expect{Tenant: "acme", Generations: []string{"gen-a"}}, to)
	must(t, err)
	equalTrees(t, want, hashTree(t, to))
	if _, err := Verify(ctx, st, young.Digest, v, Expect{Tenant: "acme", Generations: []string{"gen-a"}}); err != nil {
		t.Fatalf("the checkpoint inside the window: %v", err)
	}
	// Repeat-safe: nothing more to do.
	again, err := st.Collect(now.Add(150*time.Minute), keep, false)
	must(t, err)
	if len(again.Deleted) != 0 || again.Blobs != 0 {
		t.Fatalf("second collect %+v", again)
	}
}
