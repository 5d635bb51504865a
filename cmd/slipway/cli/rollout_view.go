package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/slipway-dev/slipway/pkg/release/rollout"
)

// printSteps prints a rollout's seven steps as a table (step, result,
// started, took, commit, evidence) and a timeline of them. A step that
// runs shows its deadline; a finished one never does.
func printSteps(w io.Writer, rec *rollout.Record, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tRESULT\tSTARTED\tTOOK\tCOMMIT\tEVIDENCE")
	for _, s := range rec.Steps {
		result := s.Result
		if s.Failures > 0 {
			result += fmt.Sprintf(" (resumed after %s)", plural(s.Failures, "failure", "failures"))
		}
		if !s.Deadline.IsZero() {
			if left := s.Deadline.Sub(now).Round(time.Second); left > 0 {
				result += fmt.Sprintf(" (deadline in %s)", left)
			} else {
				result += fmt.Sprintf(" (deadline passed %s ago)", -left)
			}
		}
		started, took, commit := "-", "-", "-"
		if !s.Started.IsZero() {
			started = s.Started.UTC().Format(time.TimeOnly)
			took = s.Took(now).String()
		}
		if s.Commit != "" {
			commit = s.Commit[:min(12, len(s.Commit))]
		}
		fmt.Fprintf(tw, "%d %s\t%s\t%s\t%s\t%s\t%s\n", s.Number, s.Phase, result, started, took, commit, dash(s.Evidence))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printTimeline(w, rec, now)
}

// timelineWidth is the timeline's width in columns.
const timelineWidth = 48

// printTimeline draws when each step ran, on one scale from the
// rollout's start to its end (or now).
func printTimeline(w io.Writer, rec *rollout.Record, now time.Time) error {
	start, end := rec.Started, rec.Ended
	if end.IsZero() {
		end = now
		if rec.Outcome != "running" {
			end = rec.Started.Add(rec.Duration())
		}
	}
	total := end.Sub(start)
	if total <= 0 {
		total = time.Second
	}
	col := func(t time.Time) int {
		c := int(float64(t.Sub(start)) / float64(total) * timelineWidth)
		return max(0, min(c, timelineWidth-1))
	}
	fmt.Fprintf(w, "\ntimeline  %s %s %s (%s)\n", start.UTC().Format(time.TimeOnly), strings.Repeat("─", timelineWidth-2), end.UTC().Format(time.TimeOnly), total.Round(time.Second))
	for _, s := range rec.Steps {
		bar := strings.Repeat(" ", timelineWidth)
		if !s.Started.IsZero() {
			to := s.Ended
			if to.IsZero() {
				to = end
			}
			a, b := col(s.Started), col(to)
			mark := "█"
			switch s.Result {
			case rollout.StepFailed, rollout.StepRolledBack:
				mark = "✗"
			case rollout.StepRunning:
				mark = "▒"
			}
			bar = strings.Repeat(" ", a) + strings.Repeat(mark, b-a+1) + strings.Repeat(" ", timelineWidth-b-1)
		}
		if _, err := fmt.Fprintf(w, "  %-15s│%s│ %s\n", fmt.Sprintf("%d %s", s.Number, s.Phase), bar, s.Result); err != nil {
			return err
		}
	}
	return nil
}

// printHistory prints a pool's rollouts, newest first.
func printHistory(w io.Writer, recs []*rollout.Record) error {
	if len(recs) == 0 {
		_, err := fmt.Fprintln(w, "no rollouts")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLLOUT\tKIND\tFROM\tTO\tOUTCOME\tPHASE\tSTARTED\tTOOK\tREASON")
	for _, r := range recs {
		kind := "rollout"
		if r.Rollback {
			kind = "rollback"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", shortID(r.ID), kind, shortID(orNone(r.From)), shortID(r.To), r.Outcome, r.Phase,
			r.Started.UTC().Format(time.RFC3339), r.Duration().Round(time.Second), dash(r.Reason))
	}
	return tw.Flush()
}

// waitLine is a rollout's wait as a progress line: the step, what it
// waits for, the time left, and why the fleet does not answer.
func waitLine(w rollout.Wait, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s step %d/7 %s: waiting for %s", w.Rollout, w.Step, w.Phase, w.For)
	if left := w.Until.Sub(now).Round(time.Second); left > 0 {
		fmt.Fprintf(&b, "; deadline in %s", left)
	} else {
		b.WriteString("; the phase deadline has passed")
	}
	if !w.Asking.IsZero() {
		if waited := now.Sub(w.Asking).Round(time.Second); waited >= 2*time.Second {
			fmt.Fprintf(&b, "; the fleet has not answered for %s", waited)
		}
	}
	if w.LastError != "" {
		fmt.Fprintf(&b, "; the fleet's last error: %s", w.LastError)
	}
	return b.String()
}
