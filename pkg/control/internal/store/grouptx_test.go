package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Write transactions that queue behind a commit on SQLite commit together,
// each in a savepoint: one that fails (its own error, a failing statement,
// its caller's context ended) loses its own writes and the wake-ups it
// noted, and the others commit.
func TestGroupedTransactions(t *testing.T) {
	ctx := context.Background()
	s := groupedStore(t)
	insert := func(ctx context.Context, tx *sql.Tx, k string) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO grouped_test (k) VALUES (?)`, k)
		return err
	}
	// A follower of each key's "stream": a failed part's wake-up must not
	// reach it.
	woken := map[string]<-chan struct{}{}
	for _, k := range []string{"ok-0", "refused", "dup"} {
		ch, stop := s.Subscribe(k)
		defer stop()
		woken[k] = ch
	}

	// The first transaction holds the writer until the others queue.
	inside, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.tx(ctx, func(tx *sql.Tx) error {
			close(inside)
			<-release
			return insert(ctx, tx, "first")
		}); err != nil {
			t.Error(err)
		}
	}()
	<-inside
	errRefused := errors.New("refused by its own check")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	const n = 20
	txs := make([]*sql.Tx, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := ctx
			if i == 7 {
				c = canceled
			}
			errs[i] = s.tx(c, func(tx *sql.Tx) error {
				txs[i] = tx
				switch i {
				case 3: // writes, notes a wake-up, then refuses
					if err := insert(ctx, tx, "refused"); err != nil {
						return err
					}
					s.ev.pending(tx, "refused", nil)
					return errRefused
				case 5: // its second statement fails
					s.ev.pending(tx, "dup", nil)
					if err := insert(ctx, tx, "dup"); err != nil {
						return err
					}
					return insert(ctx, tx, "dup")
				case 7: // its caller gave up while it queued
					return insert(c, tx, "canceled")
				}
				if i == 0 {
					s.ev.pending(tx, "ok-0", nil)
				}
				return insert(ctx, tx, fmt.Sprint("ok-", i))
			})
		}()
	}
	// Let them all queue behind the first, then release it.
	waitQueued(t, s, n)
	close(release)
	wg.Wait()

	for i, err := range errs {
		switch i {
		case 3:
			if !errors.Is(err, errRefused) {
				t.Errorf("transaction 3: %v, want its own refusal", err)
			}
		case 5:
			if err == nil {
				t.Error("transaction 5 inserted a key twice without an error")
			}
		case 7:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("transaction 7: %v, want its context's error", err)
			}
		default:
			if err != nil {
				t.Errorf("transaction %d: %v", i, err)
			}
		}
		if txs[i] != txs[0] {
			t.Errorf("transaction %d did not commit in the group of the others", i)
		}
	}
	rows, err := s.r.QueryContext(ctx, `SELECT k FROM grouped_test ORDER BY k`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		got[k] = true
	}
	rows.Close()
	want := map[string]bool{"first": true}
	for i := range n {
		if i != 3 && i != 5 && i != 7 {
			want[fmt.Sprint("ok-", i)] = true
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stored keys %v, want %v", got, want)
	}
	select {
	case <-woken["ok-0"]:
	default:
		t.Error("the committed part's follower was not woken")
	}
	for _, k := range []string{"refused", "dup"} {
		select {
		case <-woken[k]:
			t.Errorf("the follower of %s was woken by a part that rolled back", k)
		default:
		}
	}
}

// A statement interrupted inside a group (its caller's context ended while
// it ran) rolls the whole SQLite transaction back: the group fails and each
// function runs again alone, so the others still commit, once.
func TestGroupFailsWholeRunsAlone(t *testing.T) {
	ctx := context.Background()
	s := groupedStore(t)
	inside, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.tx(ctx, func(tx *sql.Tx) error { close(inside); <-release; return nil }); err != nil {
			t.Error(err)
		}
	})
	<-inside
	var runsA, runsB atomic.Int32
	var errA, errLong, errB error
	long, cancel := context.WithCancel(ctx)
	wg.Go(func() {
		errA = s.tx(ctx, func(tx *sql.Tx) error {
			runsA.Add(1)
			_, err := tx.ExecContext(ctx, `INSERT INTO grouped_test (k) VALUES ('a')`)
			return err
		})
	})
	waitQueued(t, s, 1)
	wg.Go(func() {
		errLong = s.tx(long, func(tx *sql.Tx) error {
			timer := time.AfterFunc(50*time.Millisecond, cancel) // the caller gives up while its insert runs
			defer timer.Stop()
			_, err := tx.ExecContext(long, `INSERT INTO grouped_test (k) WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c LIMIT 200000000) SELECT 'n' || n FROM c`)
			return err
		})
	})
	waitQueued(t, s, 2)
	wg.Go(func() {
		errB = s.tx(ctx, func(tx *sql.Tx) error {
			runsB.Add(1)
			_, err := tx.ExecContext(ctx, `INSERT INTO grouped_test (k) VALUES ('b')`)
			return err
		})
	})
	waitQueued(t, s, 3)
	close(release)
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("the others: %v, %v", errA, errB)
	}
	if errLong == nil {
		t.Fatal("the interrupted insert reported no error")
	}
	if runsA.Load() != 2 || runsB.Load() != 1 {
		// A ran in the group and again alone; B, after the interrupted
		// one, never ran in the group.
		t.Errorf("runs: a %d, b %d; want 2 and 1 (the group failed as a whole)", runsA.Load(), runsB.Load())
	}
	var keys []string
	rows, err := s.r.QueryContext(ctx, `SELECT k FROM grouped_test ORDER BY k LIMIT 5`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		_ = rows.Scan(&k)
		keys = append(keys, k)
	}
	rows.Close()
	if fmt.Sprint(keys) != "[a b]" {
		t.Errorf("stored %v, want [a b]", keys)
	}
}

// groupedStore is a fresh SQLite store with a table grouped_test (k).
func groupedStore(t *testing.T) *Store {
	t.Helper()
	s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.w.ExecContext(context.Background(), `CREATE TABLE grouped_test (k TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return s
}

func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.txs.Waiting() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d transactions queued, want %d", s.txs.Waiting(), n)
		}
	}
}
