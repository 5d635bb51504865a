package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// operatorQuestions answers the ten questions of seed 001 about one job
// (its run on the local runtime), each with one command reading durable
// records, timed (a machine too busy to answer in under a second is said
// so; the demo goes on).
func operatorQuestions(sh shell, db string, as func(string, ...string) []string, tenant, jobID string) error {
	out, err := sh.capture(as(tenant, "job", "show", jobID, "-o", "json")...)
	if err != nil {
		return err
	}
	var shown struct {
		Job struct {
			RunID string `json:"runId"`
		} `json:"job"`
	}
	if err := json.Unmarshal(out, &shown); err != nil || shown.Job.RunID == "" {
		return fmt.Errorf("job %s: no run id in its record (%v)", jobID, err)
	}
	r := shown.Job.RunID
	for _, q := range []struct {
		n     int
		ask   string
		args  []string
		lines int      // how many lines of the answer to print (0: all)
		must  []string // what the answer must hold, or the demo fails
	}{
		{1, "which artifact and policy versions produced the run?", []string{"runs", "show", r, "--state", "state"}, 22, nil},
		{2, "why did allocation take this long?", []string{"runs", "show", r, "--state", "state", "--lifecycle"}, 0, nil},
		{2, "... and where did the job's time go, span by span (the control plane's, the runtime's, the runner's)?", as(tenant, "job", "trace", jobID), 40,
			traceMust},
		{3, "warm hit, cold start or new node? (first line)", []string{"runs", "show", r, "--state", "state", "--lifecycle"}, 1, nil},
		{4, "which sandbox and allocation attempt own the run?", []string{"runs", "show", r, "--state", "state", "--fence"}, 1, nil},
		{5, "can an old sandbox still route or mint credentials?", []string{"runs", "show", r, "--state", "state", "--fence"}, 0, nil},
		{6, "what state is durable, its head, and was restore tested?", as(tenant, "job", "show", jobID), 0, nil},
		{7, "which network destinations were allowed and used?", []string{"runs", "show", r, "--state", "state", "--egress"}, 0, nil},
		{8, "did the final output reach the user and each integration?", as(tenant, "job", "show", jobID), 0, nil},
		{9, "what cleanup remains?", []string{"cleanup", "list", "--state", "state"}, 12, nil},
		{10, "which other runs share its node, template, runtime class or policy revision?", []string{"runs", "related", r, "--state", "state", "--limit", "5"}, 0, nil},
		{-1, "time by state (warm idle, active, proof) and what it cost, from the runtime's ledger at config.git's prices",
			[]string{"cost", "--state", "state", "--pool", "agents", "--since", "1h", "--repo", "config.git"}, 0, []string{"warm_idle", "active", "credits"}},
		{0, "every incident, from durable records", []string{"incidents", "--db", db, "--state", "state"}, 30, nil},
	} {
		title := fmt.Sprintf("question %d", q.n)
		switch q.n {
		case 0:
			title = "incidents"
		case -1:
			title = "cost"
		}
		section(title, "%s", q.ask)
		if err := sh.answer(q.args, q.lines, q.must); err != nil {
			return err
		}
	}
	return nil
}

// answer runs slipway args, prints its answer (its first lines lines; 0:
// all) and how long it took, and fails when the answer lacks any of must.
func (sh shell) answer(args []string, lines int, must []string) error {
	fmt.Printf("$ slipway %s\n", strings.Join(args, " "))
	cmd := exec.Command(sh.bin, args...)
	cmd.Dir = sh.dir
	start := time.Now()
	b, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("slipway %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	text := strings.TrimSuffix(string(b), "\n")
	for _, m := range must {
		if !strings.Contains(text, m) {
			return fmt.Errorf("slipway %s: the answer lacks %q:\n%s", strings.Join(args, " "), m, text)
		}
	}
	if l := strings.Split(text, "\n"); lines > 0 && len(l) > lines {
		text = strings.Join(l[:lines], "\n") + fmt.Sprintf("\n... (%d more lines)", len(l)-lines)
	}
	fmt.Printf("%s\n  (answered in %d ms)\n", indentText(text), took.Milliseconds())
	if took >= time.Second {
		fmt.Printf("  (over a second: is the machine busy?)\n")
	}
	return nil
}
