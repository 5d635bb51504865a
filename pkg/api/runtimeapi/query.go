package runtimeapi

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// QueryParams are the query parameters of GET /v1/runs, each a field of
// runmanifest.Query; any other parameter is refused.
//
// runner is a synonym of runner_image (the runner IMAGE's digest, as
// runmanifest.Query.RunnerImage); runner_binary is the runner BINARY's sha256.
var QueryParams = []string{"template", "runner_image", "runner", "runner_binary", "node_image", "node", "runtime_class", "policy",
	"secret_version", "generation", "request_key", "package", "run_id_prefix", "limit"}

// RunsResult answers GET /v1/runs: the ids of the matching runs, sorted.
type RunsResult struct {
	Runs []string `json:"runs"`
}

// queryFields maps the query parameters of GET /v1/runs (but limit and
// the runner synonym) to q's fields.
func queryFields(q *runmanifest.Query) map[string]*string {
	return map[string]*string{"template": &q.Template, "runner_image": &q.RunnerImage, "runner_binary": &q.RunnerBinary,
		"node_image": &q.NodeImage, "node": &q.Node, "runtime_class": &q.RuntimeClass, "policy": &q.Policy, "secret_version": &q.SecretVersion,
		"generation": &q.Generation, "request_key": &q.RequestKey, "package": &q.Package, "run_id_prefix": &q.RunIDPrefix}
}

// querySynonyms are the other names of query parameters: runner is the
// runner image's digest, as before the runner's binary had a criterion.
var querySynonyms = map[string]string{"runner": "runner_image"}

// QueryValues are the query parameters of GET /v1/runs for q: each
// criterion set, and limit when it is above 0.
func QueryValues(q runmanifest.Query) url.Values {
	v := url.Values{}
	for k, val := range queryFields(&q) {
		if *val != "" {
			v.Set(k, *val)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// ParseQuery reads the query parameters of GET /v1/runs: each of
// QueryParams at most once; anything else is refused.
func ParseQuery(v url.Values) (runmanifest.Query, error) {
	var q runmanifest.Query
	fields := queryFields(&q)
	for k, vals := range v {
		if len(vals) != 1 {
			return q, fmt.Errorf("query parameter %q given %d times, want once", k, len(vals))
		}
		if k == "limit" {
			n, err := strconv.Atoi(vals[0])
			if err != nil || n < 0 {
				return q, fmt.Errorf("limit %q is not a count", vals[0])
			}
			q.Limit = n
			continue
		}
		name := k
		if syn, ok := querySynonyms[k]; ok {
			if _, both := v[syn]; both {
				return q, fmt.Errorf("query parameters %q and %q name the same criterion: give one", k, syn)
			}
			name = syn
		}
		f, ok := fields[name]
		if !ok {
			return q, fmt.Errorf("unknown query parameter %q (want %s)", k, strings.Join(QueryParams, ", "))
		}
		*f = vals[0]
	}
	return q, nil
}
