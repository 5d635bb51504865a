package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
)

// A token is shown once; the store keeps its hash, authenticates it, and
// refuses it once revoked.
func ExampleStore_CreateToken() {
	dir, err := os.MkdirTemp("", "store-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := store.OpenSQLite(ctx, filepath.Join(dir, "control.db"))
	if err != nil {
		panic(err)
	}
	defer s.Close()

	text, t, err := s.CreateToken(ctx, "acme", controlapi.ScopeTenant, "ci")
	if err != nil {
		panic(err)
	}
	got, err := s.Authenticate(ctx, text)
	fmt.Println(got.Tenant, got.Scope, got.ID == t.ID, err)
	if err := s.RevokeToken(ctx, t.ID); err != nil {
		panic(err)
	}
	_, err = s.Authenticate(ctx, text)
	fmt.Println(err)
	// Output:
	// acme tenant true <nil>
	// control: unauthenticated
}
