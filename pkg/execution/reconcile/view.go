package reconcile

import "context"

// Remaining is the operator's view of the records: what cleanup remains
// (unknown, then pending) and the most recent closed records.
type Remaining struct {
	Remaining []Record `json:"remaining"`
	Recent    []Record `json:"recent"`
}

// View reads the records: every open one, and the last recent closed ones.
func View(ctx context.Context, s *Records, recent int) (*Remaining, error) {
	open, err := s.Open(ctx)
	if err != nil {
		return nil, err
	}
	rec, err := s.Recent(ctx, recent)
	if err != nil {
		return nil, err
	}
	if open == nil {
		open = []Record{}
	}
	if rec == nil {
		rec = []Record{}
	}
	return &Remaining{Remaining: open, Recent: rec}, nil
}
