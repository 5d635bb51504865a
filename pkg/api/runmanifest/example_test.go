package runmanifest_test

import (
	"errors"
	"fmt"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

func ExampleParseManifest() {
	doc := `{"run_id":"r-123","pool":"agents","warm":true,"status":"completed","exit_code":0,
	  "credential_issuances":[],
	  "lifecycle":{"request_received":"2026-03-14T09:26:53Z","claim_created":"2026-03-14T09:26:53.003Z",
	    "ready":"2026-03-14T09:26:50Z","runner_awakened":"2026-03-14T09:26:53.010Z"}}`
	m, err := runmanifest.ParseManifest([]byte(doc))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.RunID, m.Status, m.Status.Final(), m.Start())
	for _, s := range m.Lifecycle.Steps() {
		fmt.Println(s.Name, s.Took, s.Earlier)
	}

	// a token beside a receipt is refused
	_, err = runmanifest.ParseManifest([]byte(`{"run_id":"r-1","credential_issuances":[{"token":"hunter2"}]}`))
	fmt.Println(errors.Is(err, runmanifest.ErrInvalid))
	// Output:
	// r-123 completed true warm hit
	// request_received 0s false
	// claim_created 3ms false
	// ready 0s true
	// runner_awakened 7ms false
	// true
}

func ExampleParsePackage() {
	p, err := runmanifest.ParsePackage("@babel/core@7.24.0")
	fmt.Println(p.Name, p.Version, err)
	q := runmanifest.Query{Package: p.String(), Limit: 10}
	fmt.Println(q.Empty(), runmanifest.Query{Limit: 10}.Empty())
	// Output:
	// @babel/core 7.24.0 <nil>
	// false true
}
