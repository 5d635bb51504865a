package startup_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/internal/startup"
)

// A server behind a Gate while its database does not answer: the probes
// say so, the API says "starting", and the Gate opens when it comes.
func ExampleWait() {
	gate := startup.NewGate("control plane", nil)
	srv := httptest.NewServer(gate)
	defer srv.Close()
	get := func(path string) string {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if path != "/healthz" {
			b = nil // the others say more: see /readyz's parts below
		}
		return strings.TrimSpace(fmt.Sprintf("%s %d %s", path, resp.StatusCode, b))
	}
	tries := 0
	checked := make(chan struct{})
	db, err := startup.Wait(context.Background(), gate, "database", "does not answer", startup.Backoff{Min: time.Millisecond, Max: 10 * time.Millisecond},
		func(ctx context.Context) (string, error) {
			tries++
			if tries == 3 { // while waiting: what a probe and a client see
				fmt.Println(get("/healthz"))
				fmt.Println(get("/readyz"), gate.Failing()[0].Part)
				fmt.Println(get("/v1/jobs"))
				close(checked)
			}
			if tries < 5 {
				return "", errors.New("dial tcp 10.0.0.7:5432: connect: connection refused")
			}
			return "postgres", nil
		})
	<-checked
	gate.Open(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	fmt.Println(db, err, tries, len(gate.Failing()))
	fmt.Println(get("/v1/jobs"))
	// Output:
	// /healthz 200 {"status":"starting"}
	// /readyz 503 database
	// /v1/jobs 503
	// postgres <nil> 5 0
	// /v1/jobs 418
}
