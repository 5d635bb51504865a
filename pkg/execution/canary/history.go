package canary

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/slipway-dev/slipway/internal/atomicfile"
)

// DefaultMaxRounds is how many rounds a history keeps when not told.
const DefaultMaxRounds = 2000

// History is a durable record of rounds: a JSONL file, one round a line,
// oldest first, holding at most its maximum of rounds (the oldest go).
//
// An append takes an exclusive lock (a .lock file beside it, flock), so
// canaries of several pools may share one file; the line goes in with one
// O_APPEND write and an fsync, and when the file would hold more than the
// maximum, it is rewritten with the newest rounds all at once
// (atomicfile): readers see the old file or the new one. A line left
// half-written by a writer that crashed is cut off by the next append.
type History struct {
	path string
	max  int
}

// NewHistory keeps rounds in path, at most max of them (DefaultMaxRounds
// when max is 0).
func NewHistory(path string, max int) (*History, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: no history file", ErrInvalid)
	}
	if max == 0 {
		max = DefaultMaxRounds
	}
	if max < 1 {
		return nil, fmt.Errorf("%w: history of at most %d rounds: want 1 or more", ErrInvalid, max)
	}
	return &History{path: path, max: max}, nil
}

// Path is the history's file.
func (h *History) Path() string { return h.path }

// Append adds r as the newest round.
func (h *History) Append(r *Round) error {
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("canary: history %s: %w", h.path, err)
	}
	line = append(line, '\n')
	unlock, err := h.lock()
	if err != nil {
		return err
	}
	defer unlock()
	data, err := os.ReadFile(h.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("canary: history: %w", err)
	}
	whole := data[:bytes.LastIndexByte(data, '\n')+1] // without a torn last line
	if n := bytes.Count(whole, []byte{'\n'}); n+1 > h.max {
		keep := whole
		for i := 0; i < n+1-h.max; i++ {
			keep = keep[bytes.IndexByte(keep, '\n')+1:]
		}
		if err := atomicfile.Write(h.path, append(bytes.Clone(keep), line...), 0o644); err != nil {
			return fmt.Errorf("canary: history: %w", err)
		}
		return nil
	}
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("canary: history: %w", err)
	}
	if len(whole) < len(data) {
		if err := f.Truncate(int64(len(whole))); err != nil {
			f.Close()
			return fmt.Errorf("canary: history %s: cutting a torn line: %w", h.path, err)
		}
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return fmt.Errorf("canary: history: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("canary: history: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("canary: history: %w", err)
	}
	return nil
}

// lock takes the history's exclusive lock.
func (h *History) lock() (func(), error) {
	f, err := os.OpenFile(h.path+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("canary: history lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("canary: history lock %s: %w", f.Name(), err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// BadLine is a line of a history that is not a round.
type BadLine struct {
	Line int
	Err  error
}

// ReadHistory returns the last n rounds of the history in path (all of
// them when n is 0), oldest first, and the lines that are not rounds,
// each by its number. A last line without its newline is a write in
// progress: it is left out.
func ReadHistory(path string, n int) ([]Round, []BadLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("canary: history: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, fmt.Errorf("canary: history %s: %w", path, err)
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	lines := bytes.SplitAfter(data, []byte{'\n'})
	lines = lines[:len(lines)-1] // the empty rest after the last newline
	first := 0
	if n > 0 && len(lines) > n {
		first = len(lines) - n
	}
	var out []Round
	var bad []BadLine
	for i := first; i < len(lines); i++ {
		var r Round // fields it does not know (a newer canary's) are left out
		if err := json.Unmarshal(lines[i], &r); err != nil {
			bad = append(bad, BadLine{Line: i + 1, Err: err})
			continue
		}
		if r.Pool == "" || r.Started.IsZero() {
			bad = append(bad, BadLine{Line: i + 1, Err: errors.New("not a round: no pool or start time")})
			continue
		}
		out = append(out, r)
	}
	return out, bad, nil
}
