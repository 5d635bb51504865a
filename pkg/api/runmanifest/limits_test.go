package runmanifest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestManifestLimitsAndOutcome(t *testing.T) {
	m := fullManifest("r-1")
	m.Limits = &Limits{Cgroup: "v1", Enforced: map[string]string{"memory": "cgroup v1 memory limit", "cpu": "not enforced (accepted by spec.acceptUnenforced)"}}
	m.Outcome = OutcomeOOMKilled
	doc, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), `"limits":{"cgroup":"v1","enforced":{"cpu":"not enforced (accepted by spec.acceptUnenforced)","memory":"cgroup v1 memory limit"}},"outcome":"oom_killed"`) {
		t.Fatalf("json: %s", doc)
	}
	back, err := ParseManifest(doc)
	if err != nil {
		t.Fatal(err)
	}
	c := back.Clone()
	c.Limits.Enforced["memory"] = "changed"
	if back.Limits.Enforced["memory"] != "cgroup v1 memory limit" || back.Outcome != OutcomeOOMKilled {
		t.Fatalf("clone shares its limits, or the outcome was lost: %+v", back.Limits)
	}
	for name, doc := range map[string]string{
		"bad outcome": strings.Replace(string(doc), `"oom_killed"`, `"exploded"`, 1),
		"bad cgroup":  strings.Replace(string(doc), `"cgroup":"v1"`, `"cgroup":"v3"`, 1),
		"newline":     strings.Replace(string(doc), `cgroup v1 memory limit`, `cgroup\nv1`, 1),
	} {
		if _, err := ParseManifest([]byte(doc)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}
