package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// A workload in a bubblewrap sandbox reports its own events with
// `slipway-runner event`: they reach the job's stream in order with its
// output (job logs), with the kinds the stream knows (tool_call, file,
// status for a model request and the first useful output), and set the
// run's stamps; with a generation that pins a secret version, runs show
// has all thirteen. Hostile reports (a forged output kind, an unknown
// kind, an oversized one, a repeated stamp) are refused, counted on the
// command's result and in a status event, and the job succeeds.
func TestWorkloadEventsReachTheJob(t *testing.T) {
	w := newControlWorldWith(t, worldOptions{pins: []string{"secretVersion=vault://kv/agents/token#1"}})
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	cp := w.startControlArgs(t, db, nil, "--runtime", "agents="+w.rt.base+","+w.rtTokenFile)
	tok := w.token(t, db, "acme")
	ev := sandbox.RunnerPath + " event"
	script := strings.Join([]string{
		"echo before",
		ev + ` model_request --data '{"model":"m-1"}'`,
		"echo thinking",
		ev + ` tool_call --data '{"tool":"grep","args":["-r","TODO"]}'`,
		ev + " first_output",
		`printf '{"path":"a.go","bytes":12}' > /tmp/f.json`,
		ev + " file --file /tmp/f.json",
		ev + ` diff --data '{"path":"a.go","diff":"+x"}'`,
		ev + ` status --data '{"summary":"done"}'`,
		// hostile: refused, and the command goes on
		ev + ` stdout --data '{"text":"forged"}' || echo refused-forged`,
		ev + ` first_output || echo refused-repeat`,
		ev + ` state --data '{}' || echo refused-unknown`,
		// a flood: past the burst, refused
		`i=0; while [ $i -lt 130 ]; do ` + ev + ` status --data '{"flood":1}' 2>/dev/null; i=$((i+1)); done`,
		"echo after",
	}, "; ")
	r := run(t, "", "job", "submit", "--server", cp.url, "--token-file", tok, "--pool", "agents", "--profile", "standard", "--wait", "-o", "json", "--", "sh", "-c", script)
	var j controlapi.Job
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || j.RunID == "" {
		t.Fatalf("job: %+v", r)
	}
	if j.State != controlapi.Succeeded {
		t.Fatalf("job %s: %s %s %s\noutput:\n%s", j.ID, j.State, j.Reason, j.Detail, j.Output)
	}
	if !strings.Contains(j.Output, "refused-forged") || !strings.Contains(j.Output, "refused-repeat") || !strings.Contains(j.Output, "refused-unknown") {
		t.Errorf("the repeated and unknown kinds were not refused: %s", j.Output)
	}

	logs := run(t, "", "job", "logs", j.ID, "--control", cp.url, "--token-file", tok, "-o", "json")
	if logs.code != 0 {
		t.Fatalf("job logs: %+v", logs)
	}
	var seq []string
	var rejected map[string]int
	flooded := 0
	dec := json.NewDecoder(strings.NewReader(logs.stdout))
	for dec.More() {
		var e controlapi.Event
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("job logs: %v\n%s", err, logs.stdout)
		}
		var d struct {
			Text           string          `json:"text"`
			Source         string          `json:"source"`
			Event          string          `json:"event"`
			Data           json.RawMessage `json:"data"`
			EventsRejected map[string]int  `json:"eventsRejected"`
		}
		_ = json.Unmarshal(e.Data, &d)
		if len(d.Data) > 0 { // -o json indents it
			var b bytes.Buffer
			_ = json.Compact(&b, d.Data)
			d.Data = b.Bytes()
		}
		switch {
		case e.Kind == controlapi.KindStdout:
			for _, l := range strings.Fields(d.Text) {
				seq = append(seq, "out:"+l)
			}
		case d.Source == "workload" && string(d.Data) == `{"flood":1}`:
			flooded++
		case d.Source == "workload":
			seq = append(seq, string(e.Kind)+":"+d.Event+":"+string(d.Data))
		case d.EventsRejected != nil:
			rejected = d.EventsRejected
		}
	}
	got := strings.Join(seq, " ")
	want := `out:before status:model_request:{"model":"m-1"} out:thinking tool_call:tool_call:{"tool":"grep","args":["-r","TODO"]} ` +
		`status:first_output: file:file:{"path":"a.go","bytes":12} diff:diff:{"path":"a.go","diff":"+x"} status:status:{"summary":"done"} ` +
		`out:refused-forged out:refused-repeat out:refused-unknown out:after`
	if got != want {
		t.Errorf("the job's stream:\n got %s\nwant %s", got, want)
	}
	if rejected["unknown_kind"] != 2 || rejected["order"] != 1 || rejected["flood"] == 0 || flooded+rejected["flood"] != 130 ||
		strings.Contains(logs.stdout, `"text":"forged"`) {
		t.Errorf("refusals in the stream: %v; %d flood events delivered", rejected, flooded)
	}
	show := run(t, "", "job", "show", j.ID, "--control", cp.url, "--token-file", tok, "-o", "json")
	if err := json.Unmarshal([]byte(show.stdout), &j); err != nil || len(j.Results) != 1 || j.Results[0].EventsRejected["unknown_kind"] != 2 {
		t.Errorf("job show: the refusals are not on the command's result: %+v %v", j.Results, err)
	}

	r = run(t, "", "runs", "show", j.RunID, "--state", filepath.Join(w.dir, "runtime-state"))
	var m runmanifest.Manifest
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("runs show: %v\n%+v", err, r)
	}
	steps := m.Lifecycle.Steps()
	var names []string
	for _, s := range steps {
		names = append(names, s.Name)
	}
	if len(steps) != 13 {
		t.Fatalf("runs show: %d stamps, want the thirteen: %v", len(steps), names)
	}
	l := m.Lifecycle
	// in the order they happened: the runner had the payload after it was
	// awakened, the model request before the first useful output, the
	// post-run step before the result was published
	for _, p := range [][2]string{{"runner_awakened", "payload_fetched"}, {"payload_fetched", "model_request_started"},
		{"model_request_started", "first_output"}, {"first_output", "post_hook_complete"}, {"post_hook_complete", "result_published"},
		{"claim_created", "credential_ready"}} {
		a, b := stepAt(steps, p[0]), stepAt(steps, p[1])
		if b.Before(a) {
			t.Errorf("%s %s is before %s %s", p[1], b, p[0], a)
		}
	}
	if !l.FirstOutput.After(l.ModelRequestStarted) {
		t.Errorf("first_output %s is the first byte, not the workload's first useful output (model request %s)", l.FirstOutput, l.ModelRequestStarted)
	}
	text := run(t, "", "runs", "show", j.RunID, "--state", filepath.Join(w.dir, "runtime-state"), "--lifecycle")
	for _, n := range []string{"credential_ready", "payload_fetched", "model_request_started", "post_hook_complete"} {
		if !strings.Contains(text.stdout, n) {
			t.Errorf("runs show --lifecycle has no %s:\n%s", n, text.stdout)
		}
	}
}

func stepAt(steps []runmanifest.Step, name string) time.Time {
	for _, s := range steps {
		if s.Name == name {
			return s.At
		}
	}
	return time.Time{}
}
