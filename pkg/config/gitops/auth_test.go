package gitops

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/slipway-dev/slipway/testharness/gittest"
)

// The token of $SLIPWAY_GIT_TOKEN_FILE (a mounted Secret) is read before
// each fetch: a repository that refuses the credentials names itself and
// the reason, a missing file says no token was sent, and a token fixed in
// the file is used by the same Repo without opening it again. The token
// is never in an error.
func TestTokenFile(t *testing.T) {
	srv := gittest.NewServer(t)
	srv.Seed(t, "config.git", "main", map[string]string{"pools/p/pool.yaml": "kind: Pool\n"})
	srv.RequireToken("right-token-0123")
	file := filepath.Join(t.TempDir(), "token")
	t.Setenv(EnvToken, "")
	t.Setenv(EnvTokenFile, file)
	ctx := context.Background()
	r, err := Open(ctx, srv.URL("config.git"), WithCacheDir(filepath.Join(t.TempDir(), "cache")))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = r.Snapshot(ctx, "main")
	if !errors.Is(err, transport.ErrAuthenticationRequired) || !strings.Contains(err.Error(), srv.URL("config.git")) ||
		!strings.Contains(err.Error(), "no token was sent: $SLIPWAY_GIT_TOKEN_FILE "+file+" does not exist or is empty") {
		t.Fatalf("fetch without the token file: %v", err)
	}
	if err := os.WriteFile(file, []byte("wrong-token-4567\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = r.Snapshot(ctx, "main")
	if !errors.Is(err, transport.ErrAuthenticationRequired) || strings.Contains(err.Error(), "no token was sent") || strings.Contains(err.Error(), "wrong-token") {
		t.Fatalf("fetch with a wrong token: %v", err)
	}
	if err := os.WriteFile(file, []byte("right-token-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, rev, err := r.Snapshot(ctx, "main"); err != nil || rev == "" {
		t.Fatalf("fetch with the token fixed in its file: %q %v", rev, err)
	}
	// rotated at the server and in the file: the next fetch follows
	srv.RequireToken("rotated-token-89")
	if err := os.WriteFile(file, []byte("rotated-token-89"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Snapshot(ctx, "main"); err != nil {
		t.Fatalf("fetch after a rotation: %v", err)
	}
}
