// Package atomicfile replaces a file's contents all at once: readers see the
// old bytes or the new ones, never a half-written file, and a crash leaves
// the old file in place. It writes a temporary file beside the target, syncs
// it, renames it over the target and syncs the folder.
//
// It is for single documents (a lock file, an SBOM). Rewriting many files all
// or nothing is package pin's own two-phase write.
package atomicfile
