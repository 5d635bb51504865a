package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
)

// runtime serve refuses a negative --drain-timeout, an --advertise that is
// not host:port, and one without a shared run store, naming the flag.
func TestCheckDrainFlags(t *testing.T) {
	shared := serve.Config{DB: "postgres://db.invalid/slipway", LeaderElect: true}
	for _, tc := range []struct {
		name string
		c    serve.Config
		want string // "" for none
	}{
		{"defaults", serve.Config{DrainTimeout: 25 * time.Second}, ""},
		{"negative drain", serve.Config{DrainTimeout: -time.Second}, "--drain-timeout -1s"},
		{"advertise on a shared store", func() serve.Config { c := shared; c.Advertise = "10.0.0.7:7070"; return c }(), ""},
		{"advertise on a store named by a file", serve.Config{DBFile: "/var/run/slipway/db/dsn", LeaderElect: true, Advertise: "10.0.0.7:7070"}, ""},
		{"advertise without a port", func() serve.Config { c := shared; c.Advertise = "10.0.0.7"; return c }(), `--advertise "10.0.0.7": want host:port`},
		{"advertise alone", serve.Config{Advertise: "10.0.0.7:7070"}, "--advertise is for replicas that share a run store"},
	} {
		err := checkDrainFlags(tc.c)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
}
