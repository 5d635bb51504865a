package sandbox

import (
	"context"
	"time"
)

// Kinds of cluster objects (Object.Kind).
const (
	KindClaim    = "SandboxClaim"
	KindSandbox  = "Sandbox"
	KindPod      = "Pod"
	KindWarmPool = "SandboxWarmPool"
	KindSecret   = "Secret"
)

// Object is one object of a cluster backend's namespace that Slipway made
// or rendered (or that one of those controls), as the cluster says it is:
// the cluster, not the runtime, is the authority on what exists.
type Object struct {
	// Kind is one of the Kind constants; Name, UID and ResourceVersion
	// are the object's. A delete is fenced by UID and ResourceVersion.
	Kind, Name, UID, ResourceVersion string
	// Pool and Generation: the object's pool and generation id (the full
	// id where the object records it, else its generation label).
	Pool, Generation string
	// Owner is the run (or proof claim) a claim or a run's Secret is for;
	// "" for others.
	Owner string
	// Proof marks a rollout's proof claim.
	Proof bool
	// Bound is the Sandbox a claim is bound to ("" while it is not).
	Bound string
	// Ready: the object's Ready condition is true (a claim: bound and
	// ready).
	Ready bool
	// Transition is when the Ready condition last changed (zero: none).
	Transition time.Time
	// Suspended: a Sandbox scaled to zero replicas, stopped with its
	// storage kept (retained).
	Suspended bool
	// StartBy is when a claim that is not ready yet gives up (its
	// creation plus the backend's ready timeout): until then its Create
	// may still be under way.
	StartBy time.Time
	// Controller is the object's controlling owner as "Kind/name" ("":
	// none), ControllerUID its UID (an owner of that name but another UID
	// is another object).
	Controller, ControllerUID string
	// Created is the object's creation time; Deleting its deletion's
	// start (zero: not being deleted); Finalizers what its deletion waits
	// for.
	Created, Deleting time.Time
	Finalizers        []string
	// Dependents are the objects it controls that go with it, as listed
	// with it (a claim's Sandbox and that Sandbox's pod).
	Dependents []Object
}

// Ref is the object's kind and name ("SandboxClaim/sw-r-1").
func (o Object) Ref() string { return o.Kind + "/" + o.Name }

// Objects is a Backend whose sandboxes are objects of a cluster: the
// cleanup reconciler reads them all and deletes one at a time, fenced by
// the version it read.
type Objects interface {
	// Objects lists the objects of the backend's namespace that Slipway
	// made or rendered, and those they control.
	Objects(ctx context.Context) ([]Object, error)
	// DeleteObject deletes o on the precondition that its UID and
	// ResourceVersion are still those of o (ErrOwnerConflict when not:
	// it changed since it was read), with what it controls (a claim's
	// Sandbox and pod), and returns once the cluster has none of them, or
	// ctx ends. force deletes a pod at once (grace period 0) rather than
	// waiting for its kubelet. An object already gone is no error.
	DeleteObject(ctx context.Context, o Object, force bool) error
}
