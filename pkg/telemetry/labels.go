package telemetry

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// LabelNames are the only label names a Slipway metric may carry:
// environment, pool, generation, runtime_class, tier, bounded_reason (the
// failure category), start (warm or cold), class (of a pool's sandboxes),
// policy_revision (policy_denial_count's, defined by the egress policy's
// code), a canary's step and result (pass or fail), and Prometheus's le of
// a histogram bucket.
var LabelNames = []string{"environment", "pool", "generation", "runtime_class", "tier", "bounded_reason", "start", "class", "policy_revision", "step", "result", "le"}

// FailureReasons are the bounded words task_failure_count's bounded_reason
// takes: the control plane's job reasons and the runtime's sandbox limit
// outcomes; any other reason is counted as "other".
var FailureReasons = []string{
	"exit_code", "command_timeout", "deadline", "canceled", "budget", "lease_lost", "exec_unconfirmed",
	"dispatch_budget", "claim_released", "owner_lost", "forbidden",
	"oom_killed", "pids_exhausted", "disk_full", "cpu_time_exceeded",
}

// FailureReason bounds a job's reason to FailureReasons or "other".
func FailureReason(r string) string {
	if slices.Contains(FailureReasons, r) {
		return r
	}
	return "other"
}

var (
	wordRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)
	// boundRE is what a pool or generation name may look like: the config
	// repository's names (pools/<pool>/, g-<sha256>).
	boundRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	// idRE is what Slipway's per-request ids look like: runs, jobs,
	// sandboxes, requests, tokens' ids.
	idRE = regexp.MustCompile(`^(r|j|sb|tok|req)-`)
	// tokenRE is a long unbroken run of token characters; generationRE, a
	// generation id, is the one such value allowed.
	tokenRE      = regexp.MustCompile(`^[A-Za-z0-9+/=_.-]{24,}$`)
	generationRE = regexp.MustCompile(`^g-[0-9a-f]{64}$`)
)

// Bound returns a pool or generation name as a label value, or "other"
// when it does not look like one (an id, a URL, text).
func Bound(v string) string {
	if badValue(v) != "" {
		return "other"
	}
	return v
}

// badValue says why v may not be a label value ("" when it may).
func badValue(v string) string {
	switch {
	case v == "":
		return ""
	case strings.Contains(v, "://") || strings.HasPrefix(v, "/"):
		return "a URL or path"
	case idRE.MatchString(v):
		return "a per-request id"
	case !boundRE.MatchString(v):
		return "not a bounded word"
	case tokenRE.MatchString(v) && !generationRE.MatchString(v):
		return "token-like"
	}
	return ""
}

// CheckExposition reads a Prometheus text exposition and fails on any
// label name outside LabelNames, any value that looks like a run, job or
// sandbox id, a URL, a token or free text, a bounded_reason outside
// FailureReasons, and a start or class outside its words.
func CheckExposition(r io.Reader) error {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return fmt.Errorf("telemetry: parse exposition: %w", err)
	}
	var bad []string
	for name, f := range fams {
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				n, v := l.GetName(), l.GetValue()
				if !slices.Contains(LabelNames, n) {
					bad = append(bad, fmt.Sprintf("%s: label %s is not one of %v", name, n, LabelNames))
					continue
				}
				why := badValue(v)
				switch n {
				case "le":
					why = ""
				case "bounded_reason":
					if !slices.Contains(FailureReasons, v) && v != "other" {
						why = "not one of FailureReasons"
					}
				case "start":
					if v != "warm" && v != "cold" {
						why = "not warm or cold"
					}
				case "class":
					if v != "warm" && v != "claimed" && v != "dead" && !validState(v) {
						why = "not warm, claimed, dead or one of StateClasses"
					}
				case "result":
					if v != "pass" && v != "fail" {
						why = "not pass or fail"
					}
				case "step":
					if !wordRE.MatchString(v) {
						why = "not a short lower-case word"
					}
				}
				if why != "" {
					bad = append(bad, fmt.Sprintf("%s: label %s=%q is %s", name, n, v, why))
				}
			}
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("telemetry: unbounded labels:\n%s", strings.Join(bad, "\n"))
	}
	return nil
}
