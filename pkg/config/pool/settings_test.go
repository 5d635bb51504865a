package pool_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// A hand-written pool.yaml: comments (head and line) and a key order of
// its own, which Set must keep.
const commented = `# Pool agents: reviewed by the platform team.
apiVersion: slipway.dev/v1alpha1
kind: Pool
metadata:
  name: agents
spec:
  # warm capacity
  warmSize: 2 # two is enough for the demo
  requiredKinds: [controlPlane, runner, workspaceTemplate]
  refillPerSecond: 2
  readyTimeout: 30s
  phaseDeadlines:
    warm: 5m # the template is large
  drainDeadline: 30m
  onDrainDeadline: wait
  rollbackWindow: 24h
  restoreWindow: 168h
  network:
    mode: allow-list
    allow: [proxy.internal:3128]
  # proofs: all of them
`

func assignments(t *testing.T, args ...string) []pool.Assignment {
	t.Helper()
	var out []pool.Assignment
	for _, a := range args {
		as, err := pool.ParseAssignment(a)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, as)
	}
	return out
}

func TestSetKeepsCommentsAndOrder(t *testing.T) {
	out, changes, err := pool.Set([]byte(commented), "pools/agents/pool.yaml",
		assignments(t, "warmSize=4", "phaseDeadlines.warm=10m", "phaseDeadlines.prove=90s", "spec.onDrainDeadline=stop", "network=deny"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{
		"# Pool agents: reviewed by the platform team.\n",
		"  # warm capacity\n  warmSize: 4 # two is enough for the demo\n  requiredKinds:",
		"    warm: 10m # the template is large\n    prove: 90s\n",
		"onDrainDeadline: stop\n",
		"  network:\n    mode: deny\n",
		"# proofs: all of them",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("result lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "proxy.internal") {
		t.Errorf("network=deny kept the allow list:\n%s", s)
	}
	p, err := pool.ParsePool(out, "pool.yaml")
	if err != nil || p.Spec.WarmSize != 4 || p.Spec.OnDrainDeadline != "stop" {
		t.Fatalf("%+v %v", p, err)
	}
	got := map[string]string{}
	for _, c := range changes {
		got[c.Field] = c.From + " -> " + c.To
	}
	want := map[string]string{
		"warmSize":             "2 -> 4",
		"phaseDeadlines.warm":  "5m -> 10m",
		"phaseDeadlines.prove": "5m (default) -> 1m30s",
		"onDrainDeadline":      "wait -> stop",
		"network":              "allow-list -> deny",
		"network.allow":        "proxy.internal:3128 -> (none)",
	}
	if len(got) != len(want) {
		t.Errorf("changes %v, want %v", got, want)
	}
	for f, w := range want {
		if got[f] != w {
			t.Errorf("change of %s = %q, want %q", f, got[f], w)
		}
	}

	// A flow list stays one.
	if out, _, err := pool.Set([]byte(commented), "pool.yaml", assignments(t, "network.allow=a.internal:1, b.internal:2")); err != nil || !strings.Contains(string(out), "    allow: [") || !strings.Contains(string(out), "b.internal:2") {
		t.Errorf("network.allow: %v\n%s", err, out)
	}

	// The same values again, even spelt otherwise, change nothing: the
	// very bytes come back.
	again, changes, err := pool.Set(out, "pool.yaml", assignments(t, "warmSize=4", "phaseDeadlines.warm=600s", "onDrainDeadline=stop"))
	if err != nil || len(changes) != 0 || !bytes.Equal(again, out) {
		t.Fatalf("a repeat changed %v (%v)", changes, err)
	}

	// An empty phase deadline removes it (the default applies again); empty
	// proofs means all of them.
	out, changes, err = pool.Set(out, "pool.yaml", assignments(t, "phaseDeadlines.prove=", "proofs=allocate,identity"))
	if err != nil || strings.Contains(string(out), "prove:") || len(changes) != 2 {
		t.Fatalf("%v %v\n%s", changes, err, out)
	}
	if p, _ := pool.ParsePool(out, "pool.yaml"); len(p.Spec.Proofs) != 2 {
		t.Errorf("proofs %v", p.Spec.Proofs)
	}
}

func TestSetRefusals(t *testing.T) {
	good, _ := pool.Marshal(pool.Default("agents"))
	for _, tc := range []struct {
		set, msg string
		sentinel error
	}{
		{"warmsize=4", `warmsize=4: invalid pool setting: unknown field "warmsize" (one of requiredKinds, warmSize,`, pool.ErrSetting},
		{"warmSize=four", "warmSize=four: invalid pool setting: want a whole number, 0 or more", pool.ErrSetting},
		{"warmSize=-1", "warmSize=-1: invalid pool setting: want a whole number", pool.ErrSetting},
		{"refillPerSecond=0", "refillPerSecond=0: invalid pool setting: want a number above 0", pool.ErrSetting},
		{"phaseDeadlines.warm=5 minutes", "phaseDeadlines.warm=5 minutes: invalid pool setting: not a duration (like 30s, 5m, 24h)", pool.ErrSetting},
		{"phaseDeadlines.soon=5m", `unknown field "phaseDeadlines.soon"`, pool.ErrSetting},
		{"readyTimeout=0s", "readyTimeout=0s: invalid pool setting: must be above 0", pool.ErrSetting},
		{"rollbackWindow=-1h", "rollbackWindow=-1h: invalid pool setting: not a duration", pool.ErrSetting},
		{"onDrainDeadline=maybe", "onDrainDeadline=maybe: invalid pool setting: want wait, stop or checkpoint", pool.ErrSetting},
		{"network=open", "network=open: invalid pool setting: want deny or allow-list", pool.ErrSetting},
		{"network.allow=proxy", `network.allow=proxy: invalid pool setting: "proxy" is not host:port`, pool.ErrSetting},
		{"proofs=allocate,vibes", `unknown proof "vibes"`, pool.ErrSetting},
		{"proofs=allocate,allocate", `"allocate" listed twice`, pool.ErrSetting},
		{"requiredKinds=", "at least one kind is required", pool.ErrSetting},
		{"requiredKinds=runner,gpu", `unknown kind "gpu"`, pool.ErrSetting},
		// Each value is fine alone; the pool is not: the whole document is
		// validated, and the error says where.
		{"network.allow=proxy.internal:3128", "after network.allow=proxy.internal:3128: pools/agents/pool.yaml:", pool.ErrInvalid},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, _, err := pool.Set(good, "pools/agents/pool.yaml", assignments(t, tc.set))
			if !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %q", err, tc.msg)
			}
		})
	}
	if _, err := pool.ParseAssignment("warmSize"); !errors.Is(err, pool.ErrSetting) || !strings.Contains(err.Error(), "FIELD=VALUE") {
		t.Errorf("no '=': %v", err)
	}
	if _, _, err := pool.Set(good, "pool.yaml", nil); !errors.Is(err, pool.ErrSetting) {
		t.Errorf("nothing to set: %v", err)
	}
}

func TestSettingsListsEveryField(t *testing.T) {
	p := pool.Default("agents")
	delete(p.Spec.PhaseDeadlines, "warm")
	var fields []string
	for _, s := range p.Settings() {
		fields = append(fields, s.Field)
		if s.Field == "phaseDeadlines.warm" && (!s.Default || s.Value != "5m") {
			t.Errorf("%+v", s)
		}
		if s.Field == "restoreWindow" && s.Value != "168h" {
			t.Errorf("%+v", s)
		}
	}
	if strings.Join(fields, " ") != strings.Join(pool.Fields(), " ") {
		t.Errorf("Settings %v, Fields %v", fields, pool.Fields())
	}
}

// FuzzSet: whatever is set, the result is refused or is a pool.yaml that
// parses.
func FuzzSet(f *testing.F) {
	good, _ := pool.Marshal(pool.Default("agents"))
	for _, s := range []string{"warmSize=4", "phaseDeadlines.warm=5m", "network.allow=a:1", "proofs=", "requiredKinds=runner"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := pool.ParseAssignment(s)
		if err != nil {
			return
		}
		out, _, err := pool.Set(good, "pool.yaml", []pool.Assignment{a})
		if err != nil {
			return
		}
		if _, err := pool.ParsePool(out, "pool.yaml"); err != nil {
			t.Fatalf("%s gave a pool.yaml that does not parse: %v\n%s", s, err, out)
		}
	})
}

// TestDocsSchema: the pool.yaml docs/concepts.md documents parses, and its
// values are the defaults, as it says.
func TestDocsSchema(t *testing.T) {
	b, err := os.ReadFile("../../../docs/concepts.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "### Pool settings\n")
	if !ok {
		t.Fatal("docs/concepts.md has no Pool settings section")
	}
	_, doc, ok := strings.Cut(section, "```yaml\n")
	doc, _, ok2 := strings.Cut(doc, "```\n")
	if !ok || !ok2 {
		t.Fatal("no yaml block in the Pool settings section")
	}
	p, err := pool.ParsePool([]byte(doc), "docs/concepts.md")
	if err != nil {
		t.Fatal(err)
	}
	want := pool.Default("agents").Settings()
	for i, s := range p.Settings() {
		if s != want[i] {
			t.Errorf("docs/concepts.md says %+v, the default is %+v", s, want[i])
		}
	}
	for _, f := range pool.Fields() {
		if !strings.Contains(section, "`"+f+"`") && !strings.HasPrefix(f, "phaseDeadlines.") {
			t.Errorf("docs/concepts.md's Pool settings do not name %s", f)
		}
	}
}

// Limits and acceptUnenforced are set, shown and unset like the rest;
// a bad value is refused naming the assignment.
func TestSetLimits(t *testing.T) {
	out, changes, err := pool.Set([]byte(commented), "pools/agents/pool.yaml",
		assignments(t, "limits.cpu=500m", "limits.memory=256Mi", "limits.pids=128", "limits.openFiles=1024", "limits.workspace=1Gi", "acceptUnenforced=cpu,workspace"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.ParsePool(out, "pool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if l := p.Spec.Limits; l != (pool.Limits{CPU: "500m", Memory: "256Mi", Pids: 128, OpenFiles: 1024, Workspace: "1Gi"}) ||
		strings.Join(p.Spec.AcceptUnenforced, ",") != "cpu,workspace" || len(changes) != 6 {
		t.Fatalf("limits %+v, accept %v, changes %v\n%s", l, p.Spec.AcceptUnenforced, changes, out)
	}
	if !strings.Contains(string(out), "warmSize: 2 # two is enough for the demo") {
		t.Fatalf("comments lost:\n%s", out)
	}
	shown := map[string]string{}
	for _, s := range p.Settings() {
		shown[s.Field] = s.Value
	}
	if shown["limits.cpu"] != "500m" || shown["limits.pids"] != "128" || shown["acceptUnenforced"] != "cpu,workspace" {
		t.Fatalf("settings %v", shown)
	}
	out, changes, err = pool.Set(out, "pools/agents/pool.yaml", assignments(t, "limits.pids=", "acceptUnenforced="))
	if err != nil {
		t.Fatal(err)
	}
	if p, err = pool.ParsePool(out, "pool.yaml"); err != nil || p.Spec.Limits.Pids != 0 || p.Spec.AcceptUnenforced != nil || len(changes) != 2 {
		t.Fatalf("unset: %+v %v %v", p.Spec, changes, err)
	}
	for set, msg := range map[string]string{
		"limits.pids=many":      "limits.pids=many: invalid pool setting: want a whole number above 0",
		"limits.openFiles=0":    "limits.openFiles=0: invalid pool setting: want a whole number above 0",
		"acceptUnenforced=disk": `acceptUnenforced=disk: invalid pool setting: unknown limit "disk" (cpu, memory, pids, openFiles, workspace)`,
		"limits.memory=lots":    "after limits.memory=lots: pools/agents/pool.yaml:",
		"limits.gpu=1":          `unknown field "limits.gpu"`,
	} {
		if _, _, err := pool.Set([]byte(commented), "pools/agents/pool.yaml", assignments(t, set)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: err = %v, want %q", set, err, msg)
		}
	}
}
