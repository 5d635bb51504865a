package cioutput

import (
	"fmt"
	"os"
	"path/filepath"
)

// TektonWriter writes a Step as Tekton Task results: one file per result in
// Dir (the directory $(results.NAME.path) points into, /tekton/results in a
// TaskRun), named as the output upper-cased with - as _, the value as the
// file's bytes with nothing added. A step with an Image also writes
// IMAGE_URL and IMAGE_DIGEST, the results Tekton Chains signs and attests.
// Annotations and the summary have no Tekton form: the command's own output
// is the step's log.
type TektonWriter struct {
	Dir string
}

// Write writes the result files.
func (w *TektonWriter) Write(s Step) error {
	if err := s.check(); err != nil {
		return err
	}
	if w.Dir == "" {
		return fmt.Errorf("%w: no Tekton results directory (--tekton-results)", ErrInvalid)
	}
	if fi, err := os.Stat(w.Dir); err != nil {
		return fmt.Errorf("cioutput: Tekton results directory: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("cioutput: Tekton results directory %s is not a directory", w.Dir)
	}
	results := map[string]string{}
	var order []string
	add := func(name, value string) error {
		if _, dup := results[name]; dup {
			return fmt.Errorf("%w: Tekton result %s given twice", ErrInvalid, name)
		}
		results[name] = value
		order = append(order, name)
		return nil
	}
	for _, o := range s.Outputs {
		if err := add(envName(o.Name), o.Value); err != nil {
			return err
		}
	}
	if s.Image != nil {
		if err := add("IMAGE_URL", s.Image.URL); err != nil {
			return err
		}
		if err := add("IMAGE_DIGEST", s.Image.Digest); err != nil {
			return err
		}
	}
	for _, name := range order {
		p := filepath.Join(w.Dir, name)
		if err := os.WriteFile(p, []byte(results[name]), 0o644); err != nil {
			return fmt.Errorf("cioutput: Tekton result %s: %w", name, err)
		}
	}
	return nil
}
