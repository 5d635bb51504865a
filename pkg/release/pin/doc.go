// Package pin finds the image references in a tree of Kubernetes and
// kustomize YAML, rewrites them in place to their immutable form
// (repo:tag@sha256:…), and lints the references that can still change.
//
// Find parses every document of every file (multi-document streams included)
// with kyaml's YAML nodes and records each image site with its file, line,
// column and YAML path: the containers, initContainers and ephemeralContainers
// of every workload kind (Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet,
// ReplicationController, Job, CronJob and the items of any List), the images
// entries of a kustomization, and any field or pod spec of a custom resource
// named in a PinConfig (see LoadConfig). An image that a kustomization's
// images entry renames, in a file that kustomization includes, is a kustomize
// placeholder (Site.RenamedBy): the entry is pinned and linted, the
// placeholder is left alone and never resolved.
//
// Plan resolves every distinct reference once, through a resolve.Resolver,
// and computes the new bytes of each file by splicing each changed scalar at
// its exact byte position: comments, key order, blank lines, indentation,
// quoting and document layout are kept byte for byte, and every rewritten file
// is parsed again and checked before anything is written. Result.Write writes
// all changed files atomically, or none. Running pin twice changes nothing the
// second time.
//
// Lint reports the references that are not pinned by digest, with the reason.
//
// Pin is not a YAML formatter, a kustomize build or a Helm renderer: it never
// re-encodes a document, never evaluates templates, and edits only the values
// it found. It never talks to a registry itself; resolving (and locks,
// hermetic mode, caching) belong to package resolve.
package pin
