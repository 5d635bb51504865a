package reconcile_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
)

// GET /v1/cleanup serves reconcile.Remaining; clients (the console) read it
// as runtimeapi.Cleanup. Every field of a record, set, survives the
// contract type unchanged.
func TestCleanupViewMatchesTheContract(t *testing.T) {
	at := time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC)
	rec := reconcile.Record{ID: 7, Kind: "sandbox", Resource: "sb-1", Pool: "agents", RunID: "r-1", LeaseVersion: "r-1@2",
		Action: "delete", State: "pending", Outcome: "deleted", LastError: "busy", Owner: "runtime-a", Deadline: at.Add(time.Minute),
		Attempts: 3, First: at, Updated: at.Add(time.Second)}
	want, err := json.Marshal(reconcile.Remaining{Remaining: []reconcile.Record{rec}, Recent: []reconcile.Record{rec}})
	if err != nil {
		t.Fatal(err)
	}
	var c runtimeapi.Cleanup
	if err := json.Unmarshal(want, &c); err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("the contract loses or changes fields:\nserved %s\nread   %s", want, got)
	}
}
