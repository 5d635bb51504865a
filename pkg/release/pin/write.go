package pin

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Write writes every changed file of the plan, all or none: each new file is
// first written in full to a temporary file beside it (same directory, same
// mode) and synced, and only when all are written are they renamed over the
// originals. A file that changed on disk since Find read it is refused and
// nothing is written; a file that already holds the new bytes is left alone,
// so calling Write again does nothing.
func (r *Result) Write() error {
	type pending struct {
		path, real, tmp string
	}
	var todo []pending
	create := r.createTemp
	if create == nil {
		create = os.CreateTemp
	}
	removeAll := func() {
		for _, p := range todo {
			_ = os.Remove(p.tmp)
		}
	}
	type job struct {
		fr   FileResult
		f    *File
		tmp  string
		werr error
	}
	var jobs []*job
	for _, fr := range r.Files {
		if fr.Status != Changed || fr.file == nil {
			continue
		}
		f := fr.file
		if f.real == "" {
			return fmt.Errorf("%s: %w: a stream has no file to write back; print its data", fr.Path, ErrRewrite)
		}
		cur, err := os.ReadFile(f.real)
		if err != nil {
			return fmt.Errorf("%s: %w", fr.Path, unwrapPath(err))
		}
		if bytes.Equal(cur, fr.Data) {
			continue
		}
		if !bytes.Equal(cur, f.src.data) {
			return fmt.Errorf("%s: %w: the file changed since it was read; nothing written", fr.Path, ErrRewrite)
		}
		jobs = append(jobs, &job{fr: fr, f: f})
	}
	// Temporary files are written and synced concurrently: fsync dominates a
	// large tree's write time, and the renames below stay in order.
	sem := make(chan struct{}, writeConcurrency)
	var wg sync.WaitGroup
	for _, j := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			j.tmp, j.werr = writeTemp(create, j.f.real, j.fr.Data, j.f.mode)
		})
	}
	wg.Wait()
	for _, j := range jobs {
		if j.werr == nil {
			todo = append(todo, pending{path: j.fr.Path, real: j.f.real, tmp: j.tmp})
		}
	}
	for _, j := range jobs {
		if j.werr != nil {
			removeAll()
			return fmt.Errorf("%s: %w; nothing written", j.fr.Path, j.werr)
		}
	}
	dirs := map[string]bool{}
	for i, p := range todo {
		if err := os.Rename(p.tmp, p.real); err != nil {
			for _, q := range todo[i:] {
				_ = os.Remove(q.tmp)
			}
			return fmt.Errorf("%s: %w (%d of %d files were written before it)", p.path, unwrapLink(err), i, len(todo))
		}
		dirs[filepath.Dir(p.real)] = true
	}
	for dir := range dirs {
		syncDir(dir)
	}
	return nil
}

// writeConcurrency bounds the temporary files written at once.
const writeConcurrency = 16

// writeTemp writes data to a new hidden file beside path, with mode, synced.
func writeTemp(create func(dir, pattern string) (*os.File, error), path string, data []byte, mode fs.FileMode) (string, error) {
	base := filepath.Base(path)
	if len(base) > 64 { // keep the temporary name within NAME_MAX
		base = strings.ToValidUTF8(base[:64], "")
	}
	f, err := create(filepath.Dir(path), "."+base+".pin-*")
	if err != nil {
		return "", unwrapPath(err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return "", unwrapPath(err)
	}
	return tmp, nil
}

func unwrapLink(err error) error {
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// syncDir makes the renames in dir durable, where the system allows it.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	_ = d.Close()
}
