package kubeapply

import (
	"context"

	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PollInterval is how often Wait reads the warm pools.
const PollInterval = 500 * time.Millisecond

// PoolStatus is one warm pool's readiness.
type PoolStatus struct {
	Ref      Ref   `json:"warmPool"`
	Replicas int64 `json:"replicas"`
	Ready    int64 `json:"readyReplicas"`
	// Missing is set when the warm pool does not exist.
	Missing bool `json:"missing,omitempty"`
}

func (s PoolStatus) ready() bool { return !s.Missing && s.Ready >= s.Replicas }

func (s PoolStatus) String() string {
	if s.Missing {
		return s.Ref.String() + " missing"
	}
	return fmt.Sprintf("%s %d/%d ready", s.Ref, s.Ready, s.Replicas)
}

// NotReadyError names the warm pools not ready by the deadline. It
// matches ErrNotReady.
type NotReadyError struct {
	Timeout time.Duration
	Pools   []PoolStatus
}

func (e *NotReadyError) Error() string {
	s := make([]string, len(e.Pools))
	for i, p := range e.Pools {
		s[i] = p.String()
	}
	return fmt.Sprintf("kubeapply: %d %s within %s: %s", len(e.Pools), ErrNotReady, e.Timeout, strings.Join(s, ", "))
}

// Is matches ErrNotReady.
func (e *NotReadyError) Is(target error) bool { return target == ErrNotReady }

// Wait polls the warm pools until each one's status.readyReplicas reaches
// its spec.replicas, or fails after timeout with a *NotReadyError naming
// the ones that did not. A pool is read once more at the deadline; an
// error reading one is returned as it is.
func (a *Applier) Wait(ctx context.Context, pools []Ref, timeout time.Duration) ([]PoolStatus, error) {
	end := time.Now().Add(timeout)
	for {
		st, err := a.poolStatus(ctx, pools)
		if err != nil {
			return st, err
		}
		var waiting []PoolStatus
		for _, s := range st {
			if !s.ready() {
				waiting = append(waiting, s)
			}
		}
		if len(waiting) == 0 {
			return st, nil
		}
		left := time.Until(end)
		if left <= 0 {
			return st, &NotReadyError{Timeout: timeout, Pools: waiting}
		}
		t := time.NewTimer(min(PollInterval, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return st, ctx.Err()
		case <-t.C:
		}
	}
}

func (a *Applier) poolStatus(ctx context.Context, pools []Ref) ([]PoolStatus, error) {
	st := make([]PoolStatus, 0, len(pools))
	for _, r := range pools {
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err != nil {
			return st, fmt.Errorf("kubeapply: %s: %w", r, err)
		}
		m, err := a.mapping(gv.WithKind(r.Kind))
		if err != nil {
			return st, fmt.Errorf("kubeapply: %s: %w", r, err)
		}
		u, err := a.dyn.Resource(m.Resource).Namespace(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			st = append(st, PoolStatus{Ref: r, Missing: true})
			continue
		}
		if err != nil {
			return st, fmt.Errorf("kubeapply: read %s: %w", r, err)
		}
		replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
		st = append(st, PoolStatus{Ref: r, Replicas: replicas, Ready: ready})
	}
	return st, nil
}
