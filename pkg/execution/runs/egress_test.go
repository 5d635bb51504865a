package runs

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// TestEgressRoundTrip: a run's egress attempts, added over updates, come
// back from both stores as recorded, in UTC.
func TestEgressRoundTrip(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t)
		m := fullManifest("r-eg")
		m.Status = runmanifest.StatusRunning
		if err := s.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		cet := time.FixedZone("CET", 3600)
		t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, cet)
		allowed := runmanifest.EgressAttempt{Time: t0, Method: "CONNECT", Destination: "api.example.com:443", Address: "93.184.216.34",
			Allowed: true, Rule: "*.example.com:443", BytesOut: 517, BytesIn: 4096}
		denied := runmanifest.EgressAttempt{Time: t0.Add(time.Second), Method: "GET", Destination: "169.254.169.254:80", Address: "169.254.169.254",
			Reason: "169.254.169.254 is link-local (cloud metadata): never allowed"}
		for _, a := range []runmanifest.EgressAttempt{allowed, denied} {
			if err := s.Update(ctx, "r-eg", func(m *runmanifest.Manifest) error { m.AddEgress(a); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Get(ctx, "r-eg")
		if err != nil {
			t.Fatal(err)
		}
		allowed.Time, denied.Time = allowed.Time.UTC(), denied.Time.UTC()
		if want := []runmanifest.EgressAttempt{allowed, denied}; !reflect.DeepEqual(got.Egress, want) || got.EgressDropped != 0 {
			t.Fatalf("egress = %+v (%d dropped), want %+v", got.Egress, got.EgressDropped, want)
		}
		if err := s.Update(ctx, "r-eg", func(m *runmanifest.Manifest) error {
			m.AddEgress(runmanifest.EgressAttempt{Time: t0, Method: "GET", Destination: "bad host:80"})
			return nil
		}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "egress[2]") {
			t.Fatalf("a destination with a space: err = %v", err)
		}
	})
}
