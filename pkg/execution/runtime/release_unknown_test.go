package runtime_test

import (
	"context"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// A run released without a confirmed exit code never becomes completed:
// it is unknown when its workload ran, released when it never did, and
// no result is published for either.
func TestReleaseWithoutExitCode(t *testing.T) {
	a := newAPIRig(t, 1)
	ctx := context.Background()
	zero, three := 0, 3
	for _, c := range []struct {
		name string
		ran  bool
		exit *int
		want runmanifest.Status
	}{
		{"ran, no exit code", true, nil, runmanifest.StatusUnknown},
		{"never ran", false, nil, runmanifest.StatusReleased},
		{"exit 0", true, &zero, runmanifest.StatusCompleted},
		{"exit 3", true, &three, runmanifest.StatusFailed},
	} {
		g, err := a.c.Claim(ctx, "agents", runtimeapi.ClaimBody{})
		if err != nil {
			t.Fatal(err)
		}
		if c.ran {
			if _, err := a.c.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, Argv: []string{"true"}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.c.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token, ExitCode: c.exit}); err != nil {
			t.Fatal(err)
		}
		m, err := a.c.Run(ctx, g.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if m.Status != c.want || (c.exit == nil) != m.Lifecycle.ResultPublished.IsZero() || m.Lifecycle.ResourcesReleased.IsZero() {
			t.Errorf("%s: status %s, result_published %v; want %s", c.name, m.Status, m.Lifecycle.ResultPublished, c.want)
		}
	}
}
