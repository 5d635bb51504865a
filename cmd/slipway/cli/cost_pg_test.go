package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the driver named "pgx", to read a writer's alive mark

	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/testharness/pgtest"
)

// TestCostFromSharedDatabase: two runtime replicas write one ledger in
// PostgreSQL. Replica a (the sampler) is killed: its Ledger is abandoned,
// never closed, and stops marking itself alive; replica b lives and marks
// itself alive every 100 ms. A third opens the ledger once a's mark is
// older than its DeadAfter (3 s): a's intervals end at an unknown time, b's stay
// open. `slipway cost --db` reads it, pool and runs, as --state reads a
// file; bad input is refused before anything is read.
func TestCostFromSharedDatabase(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.New(t)
	if r := run(t, "", "cost", "--db", dsn, "--pool", "agents"); r.code != 2 || !strings.Contains(r.stderr, "no cost ledger in 127.0.0.1:") {
		t.Errorf("a database without a ledger: %+v", r)
	}
	a, err := cost.OpenLedgerPostgres(ctx, dsn, cost.Writer("rt-a"), cost.AliveEvery(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() }) // after the test: until then, killed
	b, err := cost.OpenLedgerPostgres(ctx, dsn, cost.Writer("rt-b"), cost.AliveEvery(100*time.Millisecond), cost.DeadAfter(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	began := time.Now().Add(-time.Minute)
	a.Observe(cost.Entry{SandboxID: "sb-a", Pool: "agents", Generation: "g-1", State: cost.WarmIdle, At: began})
	a.Observe(cost.Entry{SandboxID: "sb-a2", Pool: "agents", Generation: "g-1", State: cost.Active, RunID: "r-a", At: began.Add(time.Second)})
	b.Observe(cost.Entry{SandboxID: "sb-b", Pool: "agents", Generation: "g-1", State: cost.Active, RunID: "r-b", At: began.Add(2 * time.Second)})
	for _, l := range []*cost.Ledger{a, b} {
		if err := l.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// a's last mark (its last commit) ages past the new replica's
	// DeadAfter; b's is renewed every 100 ms
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	poll(t, 60*time.Second, "a's alive mark 4 s old", func() (bool, string) {
		var age float64
		err := raw.QueryRowContext(ctx, `SELECT ($1 - alive_ns) / 1e9 FROM `+cost.Schema+`.writers WHERE writer = 'rt-a'`, time.Now().UnixNano()).Scan(&age)
		return err == nil && age > 4, fmt.Sprintf("%.1f s, %v", age, err)
	})

	c, err := cost.OpenLedgerPostgres(ctx, dsn, cost.Writer("rt-c"), cost.DeadAfter(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Recovered() != 2 {
		t.Errorf("the new replica ended %d intervals, want a's 2", c.Recovered())
	}

	r := run(t, "", "cost", "--db", dsn, "--pool", "agents", "--since", "1h", "-o", "json")
	var rep cost.PoolReport
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil {
		t.Fatalf("cost --db --pool: %+v", r)
	}
	by := map[cost.State]cost.StateTime{}
	for _, s := range rep.States {
		by[s.State] = s
	}
	if w := by[cost.WarmIdle]; w.Intervals != 1 || w.UnknownEnd != 1 || w.Open != 0 || w.UnknownSeconds <= 0 {
		t.Errorf("warm idle (a's): %+v, want one interval ended at an unknown time", w)
	}
	if act := by[cost.Active]; act.Intervals != 2 || act.UnknownEnd != 1 || act.Open != 1 {
		t.Errorf("active: %+v, want a's ended unknown and b's open", act)
	}
	text := run(t, "", "cost", "--db", dsn, "--pool", "agents", "--since", "1h")
	if text.code != 0 || !strings.Contains(text.stdout, "1 ended at an unknown time") || !strings.Contains(text.stdout, "1 open") {
		t.Errorf("cost --db --pool (text): %+v", text)
	}
	ra := run(t, "", "cost", "--db", dsn, "--run", "r-a", "-o", "json")
	var rca cost.RunCost
	if ra.code != 0 || json.Unmarshal([]byte(ra.stdout), &rca) != nil {
		t.Fatalf("cost --db --run r-a: %+v", ra)
	}
	if rca.Open || !strings.Contains(rca.Terms[0].Why, "its runtime was killed") || rca.Pool != "agents" {
		t.Errorf("r-a, its replica killed: %+v", rca)
	}
	rb := run(t, "", "cost", "--db", dsn, "--run", "r-b", "-o", "json")
	var rcb cost.RunCost
	if rb.code != 0 || json.Unmarshal([]byte(rb.stdout), &rcb) != nil {
		t.Fatalf("cost --db --run r-b: %+v", rb)
	}
	if !rcb.Open || rcb.Attempts != 1 || strings.Contains(rcb.Terms[0].Why, "killed") {
		t.Errorf("r-b, its replica alive: %+v", rcb)
	}
	if r := run(t, "", "cost", "--db", dsn, "--run", "r-nope"); r.code != 1 || !strings.Contains(r.stderr, "no interval of run r-nope") {
		t.Errorf("unknown run: %+v", r)
	}

	for _, args := range [][]string{
		{"cost", "--db", dsn, "--state", t.TempDir(), "--pool", "agents"},
		{"cost", "--db", "mysql://db/cost", "--pool", "agents"},
		{"cost", "--db", "postgres://u:s3cret@127.0.0.1/db", "--pool", "agents"},
		{"cost", "--db", dsn},
	} {
		r := run(t, "", args...)
		if r.code != 2 || strings.Contains(r.stderr, "s3cret") {
			t.Errorf("%q: %+v, want exit 2 without the password", args, r)
		}
	}
}
