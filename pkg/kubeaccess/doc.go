// Package kubeaccess asks a Kubernetes API server whether the caller may do
// what a program needs: one SelfSubjectAccessReview per Permission (a verb
// on a resource or subresource, in a namespace or cluster-wide), answered by
// the cluster's own authorizers (RBAC and whatever else it runs), so a
// missing verb is found at start and named, rather than as a 403 in the
// middle of a claim.
//
// It is not RBAC: it never reads or writes Roles, and it says nothing of
// what the caller may do beyond the permissions it is asked about. Any
// authenticated user may create SelfSubjectAccessReviews (the
// system:basic-user ClusterRole), so the check needs no verb of its own.
package kubeaccess
