package kubesandbox

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// Release is a claim this backend deleted while it was bound to a
// Sandbox: the claim and the Sandbox as the cluster said they were when
// they were read for the deletion (their creation times are the
// cluster's), and Gone, when the API server was seen to have neither (nor
// the Sandbox's pod) any more. A Sandbox deleted by itself (a warm pool's
// member the reconciler removed) is a Release with a zero Claim.
type Release struct {
	Claim, Sandbox sandbox.Object
	Gone           time.Time
}

// WithReleaseObserver calls observe with every claim the backend deletes
// while it is bound to a Sandbox it controls, once all are gone: a
// release (Delete), the cleanup of a Create that failed, and the
// reconciler's deletions (DeleteObject), and with every Sandbox
// DeleteObject removed by itself. A deletion that fails (a
// finalizer that never clears) is not reported: the claim is still there.
// observe is called on the deleting goroutine and must not block long.
// Why: a claim made and released between two reads of the cluster's
// objects is otherwise never seen (the cost ledger's sampler).
func WithReleaseObserver(observe func(Release)) Option {
	return func(o *options) error {
		o.released = observe
		return nil
	}
}

// release reports claim c's deletion with its Sandbox sb, gone now (c
// nil: sb was deleted by itself).
func (b *Backend) release(c, sb *sandbox.Object) {
	if b.o.released == nil || sb == nil || sb.Kind != sandbox.KindSandbox || (c != nil && c.Kind != sandbox.KindClaim) {
		return
	}
	r := Release{Sandbox: *sb, Gone: time.Now()}
	if c != nil {
		r.Claim = *c
	}
	b.o.released(r)
}

// claimObjectOf is what a claim says of itself as a sandbox.Object.
func (b *Backend) claimObjectOf(c *unstructured.Unstructured) sandbox.Object {
	o := objectOf(sandbox.KindClaim, c)
	ann := c.GetAnnotations()
	o.Owner, o.Proof, o.Bound = ann[AnnotationOwner], c.GetLabels()[LabelProof] == "true", boundName(c)
	o.Ready, _, _ = readyCondition(c)
	o.Ready = o.Ready && o.Bound != ""
	o.Transition = readySince(c)
	if !o.Ready {
		o.StartBy = o.Created.Add(b.o.readyTimeout)
	}
	return o
}

// sandboxObjectOf is what Sandbox u says of itself, its pool and
// generation taken from ctl (its controller: a claim or warm pool) where
// u has none.
func sandboxObjectOf(u *unstructured.Unstructured, ctl sandbox.Object) sandbox.Object {
	o := objectOf(sandbox.KindSandbox, u)
	if o.Pool == "" || o.Generation == "" {
		o.Pool, o.Generation = ctl.Pool, ctl.Generation
	}
	o.Ready, _, _ = readyCondition(u)
	o.Transition = readySince(u)
	if n, ok, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); ok && n == 0 {
		o.Suspended = true
	}
	return o
}
