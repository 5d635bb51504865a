// Package pin finds the image references in a tree of Kubernetes and
// kustomize YAML, rewrites them in place to their immutable form
// (repo:tag@sha256:…), and lints the references that can still change.
//
// Find parses every document of every file (multi-document streams included)
// with kyaml's YAML nodes and records each image site with its file, line,
// column, YAML path and the rule that found it (Site.FoundBy): the pod specs
// and image fields of the kinds known by name (KnownKinds: workloads,
// agent-sandbox, Argo, Tekton, Knative, KEDA, Ray, Kubeflow, Flink, Spark and
// others, and the items of any List), the images entries of a kustomization,
// any field or pod spec of a custom resource named in a PinConfig (see
// LoadConfig), and, in one walk of every node, the containers of any pod spec
// shape and any other string field named image that parses as a reference.
// A value with template syntax is a placeholder (Site.Placeholder) and a site
// a PinConfig excludes is left alone (Site.ExcludedBy). An image that a
// kustomization's images entry renames, in a file that kustomization
// includes, is a kustomize placeholder (Site.RenamedBy): the entry is pinned
// and linted, the placeholder is left alone and never resolved. Tree.Summary
// counts what was read, found and skipped.
//
// Plan resolves every distinct reference once, through a resolve.Resolver,
// and computes the new bytes of each file by splicing each changed scalar at
// its exact byte position: comments, key order, blank lines, indentation,
// quoting and document layout are kept byte for byte. A file is parsed again
// and checked before anything is written unless every edit in it writes a
// digest-pinned reference over a single-line, unanchored string scalar in its
// own quoting style, which by construction changes nothing else (see
// edit.inPlace; tests hold both ways to the same bytes). Result.Write writes
// all changed files atomically, or none. Running pin twice changes nothing the
// second time.
//
// Lint reports the references that are not pinned by digest, and the
// placeholders, with the reason.
//
// Pin is not a YAML formatter, a kustomize build or a Helm renderer: it never
// re-encodes a document, never evaluates templates, and edits only the values
// it found. It never talks to a registry itself; resolving (and locks,
// hermetic mode, caching) belong to package resolve.
package pin
