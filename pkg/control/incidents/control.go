package incidents

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/control"
)

// maxJobs bounds the jobs a report reads: the newest, plus every job still
// unknown.
const maxJobs = 1000

// staleMark is in the reason of a claim a runtime refused because its view
// of the config repository was stale (runtime.ErrStale).
const staleMark = "view of the config repository is stale"

// FromControl reads the control plane's store: jobs stopped at their
// deadline, jobs whose worker crashed after a claim (adopted, or unknown
// with an owner), jobs whose claims were refused on a stale view, and
// deliveries that failed or are being retried. With runs (nil for none),
// the runs each crashed job's request key found are counted.
func FromControl(s *control.Store, rs RunLister) Source {
	return covering{kinds: []Kind{AgentHang, WorkerCrash, PolicyLag, ExportFailure}, SourceFunc: func(ctx context.Context) ([]Incident, error) {
		jobs, err := recentJobs(ctx, s)
		if err != nil {
			return nil, err
		}
		var byKey map[string][]*runmanifest.Manifest
		if rs != nil {
			ms, err := rs.Latest(ctx, maxRuns)
			if err != nil {
				return nil, err
			}
			byKey = map[string][]*runmanifest.Manifest{}
			for _, m := range ms {
				if m.RequestKey != "" {
					byKey[m.RequestKey] = append(byKey[m.RequestKey], m)
				}
			}
		}
		var out []Incident
		for _, j := range jobs {
			if hung(j) {
				out = append(out, agentHang(j))
			}
			if crashed(j) {
				out = append(out, workerCrash(j, byKey))
			}
			if notes := staleNotes(j); len(notes) > 0 {
				out = append(out, policyLag(j, notes))
			}
		}
		ts, err := s.ExportTroubles(ctx, maxJobs)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			out = append(out, exportFailure(t))
		}
		return out, nil
	}}
}

// recentJobs is the newest maxJobs jobs and every unknown one.
func recentJobs(ctx context.Context, s *control.Store) ([]*controlapi.Job, error) {
	recent, err := s.List(ctx, control.ListFilter{Limit: maxJobs})
	if err != nil {
		return nil, err
	}
	unknown, err := s.List(ctx, control.ListFilter{State: controlapi.Unknown, Limit: maxJobs})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []*controlapi.Job
	for _, j := range append(recent, unknown...) {
		if !seen[j.ID] {
			seen[j.ID] = true
			out = append(out, j)
		}
	}
	return out, nil
}

func jobIncident(k Kind, j *controlapi.Job) Incident {
	i := Incident{Kind: string(k), Job: j.ID, Run: j.RunID, State: string(j.State), Reason: j.Reason, Detail: j.Detail,
		Terminal: j.State.Terminal(), Owner: j.Owner, Deadline: j.OwnerDeadline, Attempts: j.Attempt, At: j.CreatedAt}
	if j.EndedAt != nil {
		i.At = *j.EndedAt
	}
	add(&i, "tenant", "%s", j.Tenant)
	return i
}

func hung(j *controlapi.Job) bool {
	if j.State == controlapi.DeadlineExceeded {
		return true
	}
	for _, r := range j.Results {
		if r.TimedOut {
			return true
		}
	}
	return false
}

func agentHang(j *controlapi.Job) Incident {
	i := jobIncident(AgentHang, j)
	add(&i, "deadline", "%s (command timeout %s)", time.Duration(j.Limits.Deadline), time.Duration(j.Limits.CommandTimeout))
	for n, r := range j.Results {
		code := "none"
		if r.ExitCode != nil {
			code = fmt.Sprint(*r.ExitCode)
		}
		add(&i, fmt.Sprintf("command %d", n+1), "%s: exit %s, timed out %v, stop %s, %.1fs", clip(strings.Join(r.Argv, " "), 60), code, r.TimedOut, orDash(r.Stop), r.Seconds)
	}
	add(&i, "stop outcome", "%s", orDash(j.StopOutcome))
	add(&i, "output kept", "%d bytes (bound %d bytes, %d lines); dropped %d bytes, %d lines", len(j.Output), j.Limits.MaxOutputBytes, j.Limits.MaxOutputLines,
		j.OutputDroppedBytes, j.OutputDroppedLines)
	if i.Terminal {
		i.Next = "none: ended " + string(j.State) + "; the bounded output: slipway job show " + j.ID
	} else {
		i.Next = "the control plane stops it at its deadline"
	}
	return i
}

func crashed(j *controlapi.Job) bool {
	return j.Adopted || j.State == controlapi.Unknown || j.Reason == "owner_lost"
}

func workerCrash(j *controlapi.Job, byKey map[string][]*runmanifest.Manifest) Incident {
	i := jobIncident(WorkerCrash, j)
	add(&i, "request key", "%s", orDash(j.RequestKey))
	add(&i, "sandbox", "%s (run %s on runtime %s, allocation attempt %d)", orDash(j.SandboxID), orDash(j.RunID), orDash(j.Runtime), j.Attempt)
	add(&i, "adopted", "%v", j.Adopted)
	add(&i, "replica", "%s", orDash(j.Replica))
	if byKey != nil && j.RequestKey != "" {
		ms := byKey[j.RequestKey]
		var ids []string
		for _, m := range ms {
			ids = append(ids, fmt.Sprintf("%s (sandbox %s, %s)", m.RunID, m.SandboxID, m.Status))
		}
		add(&i, "runs of the request key", "%d: %s", len(ms), strings.Join(ids, ", "))
		if len(ms) > 1 {
			i.Detail = fmt.Sprintf("DOUBLED: %d runs for request key %s; %s", len(ms), j.RequestKey, i.Detail)
		}
	}
	switch {
	case j.State == controlapi.Unknown:
		i.Next = fmt.Sprintf("%s confirms the outcome by %s (the run's manifest: slipway runs show %s)", orDash(j.Owner), fmtTime(j.OwnerDeadline), orDash(j.RunID))
	case i.Terminal:
		i.Next = "none: the claim made before the crash was adopted by its request key and the job ended " + string(j.State)
	default:
		i.Next = "the adopting replica runs it to its end"
	}
	return i
}

func staleNotes(j *controlapi.Job) []string {
	var out []string
	for _, n := range j.Notes {
		if strings.Contains(n.Text, staleMark) {
			out = append(out, n.At.UTC().Format(time.RFC3339)+" "+n.Text)
		}
	}
	if strings.Contains(j.Detail, staleMark) {
		out = append(out, j.Detail)
	}
	return out
}

func policyLag(j *controlapi.Job, notes []string) Incident {
	i := jobIncident(PolicyLag, j)
	add(&i, "config revision at submission", "%s", orDash(j.ConfigRevision))
	add(&i, "dispatch failures", "%d", j.DispatchFailures)
	for n, t := range notes {
		add(&i, fmt.Sprintf("refusal %d", n+1), "%s", clip(t, 300))
	}
	switch {
	case j.State == controlapi.Succeeded:
		i.Next = "none: dispatched once the runtime's view was fresh again"
	case i.Terminal:
		i.Next = "none: ended " + string(j.State) + " (" + j.Reason + "); the runtime's view: slipway runtime policy --runtime URL"
	default:
		i.Next = "the job is retried within its dispatch budget; the runtime's view: slipway runtime policy --runtime URL"
	}
	return i
}

func exportFailure(t control.ExportTrouble) Incident {
	i := Incident{Kind: string(ExportFailure), Job: t.Job, Run: t.RunID, State: t.Outcome, Reason: "delivery_" + t.Outcome, Detail: t.Detail,
		Attempts: t.Attempts, At: t.At}
	add(&i, "source", "job %s, run %s, event %d (%s), digest %s", t.Job, orDash(t.RunID), t.Seq, orDash(string(t.Kind)), orDash(t.EventDigest))
	add(&i, "job state", "%s (the result is retained in the control plane's store)", orDash(string(t.JobState)))
	add(&i, "destination", "%s of tenant %s", t.Destination, orDash(t.Tenant))
	if t.HTTPStatus != 0 {
		add(&i, "last HTTP status", "%d", t.HTTPStatus)
	}
	if t.Outcome == controlapi.ReceiptFailed {
		i.Terminal = true
		i.Owner = "tenant " + t.Tenant + " (destination " + t.Destination + ")"
		i.Receipts = append(i.Receipts, fmt.Sprintf("%s seq %d: failed after %d attempts at %s: %s", t.Destination, t.Seq, t.Attempts,
			t.At.Format(time.RFC3339), t.Detail))
		i.Next = fmt.Sprintf("the owner of destination %s fixes it; the retained result (slipway job show %s, digest %s) was not delivered and is not dropped",
			t.Destination, t.Job, orDash(t.EventDigest))
	} else {
		i.Owner, i.Deadline = "the control plane's output worker", t.NextTry
		if t.NextTry != nil {
			i.At = *t.NextTry
		}
		i.Next = fmt.Sprintf("retried at %s within the destination's budget; then delivered or failed visibly", fmtTime(t.NextTry))
	}
	return i
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
