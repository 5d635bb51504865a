package render

import "sigs.k8s.io/kustomize/kyaml/filesys"

// WithInputHook lets a test see kustomize's input (the in-memory tree and
// the pool's folder in it) before the build.
func WithInputHook(f func(fsys filesys.FileSystem, dir string)) Option {
	return func(o *options) error { o.inputHook = f; return nil }
}
