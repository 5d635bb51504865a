package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Restored records one verified restore of a checkpoint: the proof that
// it restores, for question 6 ("has restore been tested?").
type Restored struct {
	Checkpoint string    `json:"checkpoint"`
	RunID      string    `json:"runId"`
	At         time.Time `json:"at"`
	// By is what restored it: "resume", "canary", "test".
	By string `json:"by"`
	// Into names the sandbox restored into (never a host path).
	Into string `json:"into,omitempty"`
	// Actor and Reason are who asked for a resume on the runtime's
	// operator path, and why ("" when the run's holder resumed it).
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Suspended records one suspend of a run at a checkpoint: what asked for
// it, who and why.
type Suspended struct {
	Checkpoint string    `json:"checkpoint"`
	RunID      string    `json:"runId"`
	At         time.Time `json:"at"`
	// By is what suspended it: "holder" (the claim's token), "operator"
	// (the runtime's operator path), "drain" (a drain deadline).
	By string `json:"by"`
	// Actor and Reason are the operator's, as the operator path was told
	// them ("" for the others).
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// The store's records, one JSON object a line.
const (
	restoresFile = "slipway-restores.jsonl"
	suspendsFile = "slipway-suspends.jsonl"
)

// RecordRestore appends r to the store's record of restores.
func (s *Store) RecordRestore(r Restored) error {
	if err := s.appendRecord(restoresFile, r); err != nil {
		return fmt.Errorf("checkpoint: record restore: %w", err)
	}
	return nil
}

// LastRestore is the latest recorded restore of a checkpoint of runID
// (nil when none was recorded).
func (s *Store) LastRestore(runID string) (*Restored, error) {
	return lastRecord(s, restoresFile, func(r *Restored) (bool, time.Time) { return r.RunID == runID, r.At })
}

// RecordSuspend appends r to the store's record of suspends.
func (s *Store) RecordSuspend(r Suspended) error {
	if err := s.appendRecord(suspendsFile, r); err != nil {
		return fmt.Errorf("checkpoint: record suspend: %w", err)
	}
	return nil
}

// LastSuspend is the latest recorded suspend of runID (nil when none was
// recorded).
func (s *Store) LastSuspend(runID string) (*Suspended, error) {
	return lastRecord(s, suspendsFile, func(r *Suspended) (bool, time.Time) { return r.RunID == runID, r.At })
}

// appendRecord appends v as one line of the store's file name.
func (s *Store) appendRecord(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(s.dir, name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// lastRecord is the latest record of the store's file name that match
// selects (nil when none); a line that does not decode is an error naming
// the file and line.
func lastRecord[T any](s *Store, name string, match func(*T) (bool, time.Time)) (*T, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read %s: %w", name, err)
	}
	var (
		last   *T
		lastAt time.Time
	)
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		r := new(T)
		if err := json.Unmarshal([]byte(line), r); err != nil {
			return nil, fmt.Errorf("checkpoint: %s line %d: %w", name, i+1, err)
		}
		if ok, at := match(r); ok && (last == nil || !at.Before(lastAt)) {
			last, lastAt = r, at
		}
	}
	return last, nil
}
