package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/slipway-dev/slipway/internal/atomicfile"
)

// Collected says what Collect deleted and kept.
type Collected struct {
	// Deleted are the checkpoints removed, with their attestations.
	Deleted []string `json:"deleted"`
	// Kept counts the checkpoints left: inside the window or kept.
	Kept int `json:"kept"`
	// Blobs and Bytes are the blobs no remaining checkpoint needs, removed.
	Blobs int   `json:"blobs"`
	Bytes int64 `json:"bytes"`
}

// Collect deletes the checkpoints taken before windowStart (the pool's
// restore window has closed on them) that keep does not name (a run's
// head, while it is open or suspended), with their attestations, and then
// the blobs no remaining checkpoint uses: a layer a kept checkpoint
// shares with a deleted one stays. Never one inside the window. With
// dryRun nothing is removed and the answer says what would be.
func (s *Store) Collect(windowStart time.Time, keep map[string]bool, dryRun bool) (*Collected, error) {
	return s.CollectClosed(func(p Predicate) bool { return p.Created.Before(windowStart) }, keep, dryRun)
}

// CollectClosed is Collect with the window said per checkpoint: closed
// reports whether the restore window of a checkpoint (by what its config
// says: its pool, its time) has closed; only those are deleted, unless
// keep names them.
func (s *Store) CollectClosed(closed func(Predicate) bool, keep map[string]bool, dryRun bool) (*Collected, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	im, err := s.index()
	if err != nil {
		return nil, err
	}
	out := &Collected{}
	gone := map[string]bool{}
	for _, d := range im.Manifests {
		if d.ArtifactType != ArtifactType {
			continue
		}
		m, err := s.manifest(d.Digest)
		if err != nil {
			return nil, err
		}
		p, err := s.predicate(m)
		if err != nil {
			return nil, err
		}
		if closed(*p) && !keep[d.Digest.String()] {
			gone[d.Digest.String()] = true
			out.Deleted = append(out.Deleted, d.Digest.String())
		} else {
			out.Kept++
		}
	}
	// What the remaining index entries reference.
	used := map[v1.Hash]bool{}
	var remain []v1.Descriptor
	for _, d := range im.Manifests {
		if gone[d.Digest.String()] || gone[d.Annotations[AnnotationSubject]] {
			continue
		}
		remain = append(remain, d)
		used[d.Digest] = true
		if d.ArtifactType == ArtifactType {
			m, err := s.manifest(d.Digest)
			if err != nil {
				return nil, err
			}
			used[m.Config.Digest] = true
			for _, l := range m.Layers {
				used[l.Digest] = true
			}
		}
	}
	blobs, err := os.ReadDir(filepath.Join(s.dir, "blobs", "sha256"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint: collect: %w", err)
	}
	var drop []v1.Hash
	for _, b := range blobs {
		h := v1.Hash{Algorithm: "sha256", Hex: b.Name()}
		if used[h] {
			continue
		}
		if info, err := b.Info(); err == nil {
			out.Bytes += info.Size()
		}
		drop = append(drop, h)
	}
	out.Blobs = len(drop)
	if dryRun || (len(gone) == 0 && len(drop) == 0) {
		return out, nil
	}
	// The index first: a crash after it leaves unreferenced blobs, which
	// the next Collect removes; never an entry without its blobs.
	im.Manifests = remain
	raw, err := json.Marshal(im)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(filepath.Join(s.dir, "index.json"), raw, 0o644); err != nil {
		return nil, fmt.Errorf("checkpoint: collect: write index: %w", err)
	}
	for _, h := range drop {
		if err := s.lp.RemoveBlob(h); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("checkpoint: collect: remove %s: %w", h, err)
		}
	}
	return out, nil
}
