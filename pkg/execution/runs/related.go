package runs

import (
	"context"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// Reader is what Related reads: a Store, or the runtime's API client.
type Reader interface {
	Get(ctx context.Context, runID string) (*runmanifest.Manifest, error)
	Query(ctx context.Context, q runmanifest.Query) ([]string, error)
}

// Identity names one of the identities Related follows.
type Identity string

// The identities a run shares with others, in the order Related reports them.
const (
	SharedNode           Identity = "node"
	SharedTemplate       Identity = "template"
	SharedRuntimeClass   Identity = "runtime_class"
	SharedPolicyRevision Identity = "policy_revision"
)

// RelatedRuns is one identity a run has and the other runs that share it.
// An identity the run did not record has an empty Value and no Runs: it is
// unrecorded, never matched against other runs' empty ones.
type RelatedRuns struct {
	Shared Identity `json:"shared"`
	Value  string   `json:"value"`
	Runs   []string `json:"runs"`
	// More says Runs was cut at the limit.
	More bool `json:"more,omitempty"`
}

// Related reads run runID and, one query each on the store's indexes, the
// other runs recorded with the same node, workspace template, runtime class
// and policy revision: at most limit of them per identity (0: all). It
// returns the run's manifest beside them; ErrNotFound (or the reader's own
// error) when the run is unknown.
func Related(ctx context.Context, r Reader, runID string, limit int) (*runmanifest.Manifest, []RelatedRuns, error) {
	m, err := r.Get(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	out := []RelatedRuns{{Shared: SharedNode, Value: m.NodeID}, {Shared: SharedTemplate, Value: m.WorkspaceTemplateID},
		{Shared: SharedRuntimeClass, Value: m.RuntimeClass}, {Shared: SharedPolicyRevision, Value: m.PolicyRevision}}
	for i := range out {
		rel := &out[i]
		rel.Runs = []string{}
		if rel.Value == "" {
			continue
		}
		q := runmanifest.Query{}
		if limit > 0 {
			q.Limit = limit + 2 // the run itself, and one more to say there are more
		}
		switch rel.Shared {
		case SharedNode:
			q.Node = rel.Value
		case SharedTemplate:
			q.Template = rel.Value
		case SharedRuntimeClass:
			q.RuntimeClass = rel.Value
		case SharedPolicyRevision:
			q.Policy = rel.Value
		}
		ids, err := r.Query(ctx, q)
		if err != nil {
			return m, nil, err
		}
		for _, id := range ids {
			if id != m.RunID {
				rel.Runs = append(rel.Runs, id)
			}
		}
		if limit > 0 && len(rel.Runs) > limit {
			rel.Runs, rel.More = rel.Runs[:limit], true
		}
	}
	return m, out, nil
}
