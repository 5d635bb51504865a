// Package kubeapply applies a rendered pool (package render) to a
// Kubernetes cluster, for users without Argo CD, and waits for its warm
// pools.
//
// Apply sends each object with server-side apply under the field manager
// "slipway", in the render's order (namespaces first, templates before
// the warm pools that name them). It does not force conflicts unless
// WithForceConflicts is given: a field another manager owns is an error
// (a *ConflictError matching ErrConflict) naming the object, the field and
// the other manager. Each object's result is Created, Updated or Unchanged
// (from the resource version before and after), in the spirit of fluxcd's
// ssa.ChangeSet.
//
// Slipway prunes only what it owns. After the apply it records the applied
// objects (group, version, kind, namespace, name) in an inventory, the
// ConfigMap slipway-inventory-<pool> in the namespace of the pool's
// SandboxTemplates (written also when an apply fails part way, so that
// what it created stays tracked). An object listed in the previous inventory and no
// longer rendered is deleted (with the UID and resource version it was
// checked at as preconditions) only if it still carries the label
// slipway.dev/pool=<pool> and no other field manager owns a field of it
// outside metadata (a controller that only adds labels, annotations or
// finalizers, as agent-sandbox's labels templates, or writes status, does
// not make an object someone else's). Otherwise it is Kept, stays in the
// inventory and is reported with the reason; an object that carries the
// label but was never in the inventory is never looked at.
//
// Wait polls every applied SandboxWarmPool until status.readyReplicas
// reaches spec.replicas; at its deadline the error (a *NotReadyError
// matching ErrNotReady) names the pools not ready and their counts.
//
// It does not render (package render does), roll out or watch pods, and it
// never edits an object Slipway did not render.
package kubeapply
