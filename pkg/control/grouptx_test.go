package control

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Write transactions that queue behind a commit on SQLite commit together,
// each in a savepoint: one that fails (its own error, a failing statement,
// its caller's context ended) loses its own writes and the wake-ups it
// noted, and the others commit.
func TestGroupedTransactions(t *testing.T) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.w.ExecContext(ctx, `CREATE TABLE grouped_test (k TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	insert := func(ctx context.Context, tx *sql.Tx, k string) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO grouped_test (k) VALUES (?)`, k)
		return err
	}
	// A follower of each key's "stream": a failed part's wake-up must not
	// reach it.
	woken := map[string]<-chan struct{}{}
	for _, k := range []string{"ok-0", "refused", "dup"} {
		ch, stop := s.subscribe(k)
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
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		queued := s.txs.Waiting()
		if queued == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d transactions queued", queued, n)
		}
	}
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
