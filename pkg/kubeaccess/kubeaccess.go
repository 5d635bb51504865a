package kubeaccess

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
)

// Permission is one verb on one resource a program needs: Group ("" for
// the core group), Resource and Subresource as the API names them
// ("pods", "exec"), in Namespace ("" for a cluster-scoped resource).
type Permission struct {
	Group, Resource, Subresource, Verb, Namespace string
}

// String is "VERB RESOURCE[/SUB][.GROUP] in namespace NS" (or "cluster-wide").
func (p Permission) String() string {
	var b strings.Builder
	b.WriteString(p.Verb + " " + p.Resource)
	if p.Subresource != "" {
		b.WriteString("/" + p.Subresource)
	}
	if p.Group != "" {
		b.WriteString("." + p.Group)
	}
	if p.Namespace != "" {
		b.WriteString(" in namespace " + p.Namespace)
	} else {
		b.WriteString(" cluster-wide")
	}
	return b.String()
}

// ErrDenied is matched by the error of Check when a permission is missing.
var ErrDenied = errors.New("permission missing")

// Missing is the error of Check when the caller lacks permissions: it names
// each, in the order asked.
type Missing struct{ Permissions []Permission }

func (m *Missing) Error() string {
	s := make([]string, len(m.Permissions))
	for i, p := range m.Permissions {
		s[i] = p.String()
	}
	return "may not " + strings.Join(s, "; may not ")
}

// Is makes errors.Is(err, ErrDenied) true.
func (m *Missing) Is(target error) bool { return target == ErrDenied }

// Check asks the API server of cfg, one SelfSubjectAccessReview each,
// whether cfg's user may do every permission of perms. nil when all are
// allowed; a *Missing (matching ErrDenied) naming the refused ones; another
// error when a review could not be made (the API server does not answer),
// which says nothing about the permissions.
func Check(ctx context.Context, cfg *rest.Config, perms []Permission) error {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		// a review per permission, at once: client-go's default 5 a
		// second would make a runtime's two dozen take seconds
		cfg.QPS, cfg.Burst = 100, 100
	}
	c, err := authclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubeaccess: %w", err)
	}
	var missing []Permission
	for _, p := range perms {
		r, err := c.SelfSubjectAccessReviews().Create(ctx, &authv1.SelfSubjectAccessReview{
			Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
				Namespace: p.Namespace, Verb: p.Verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("kubeaccess: review of %s: %w", p, err)
		}
		if !r.Status.Allowed || r.Status.Denied {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return &Missing{Permissions: missing}
	}
	return nil
}
