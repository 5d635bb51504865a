package telemetry_test

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/telemetry"
	"github.com/slipway-dev/slipway/testharness/need"
)

var update = flag.Bool("update", false, "rewrite deploy/prometheus/prometheusrule.yaml from rules.yaml")

const rulesDir = "../../deploy/prometheus"

func readRules(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rulesDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPromtoolRules checks the rules file with Prometheus's own promtool and
// runs its unit tests (deploy/prometheus/rules_test.yaml): each alert fires
// when its condition holds and stays quiet when it does not.
func TestPromtoolRules(t *testing.T) {
	promtool := need.Binary(t, "promtool", "apt-get install prometheus (Debian's package ships promtool)")
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "rules_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = rulesDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestPrometheusRuleMatchesRulesFile holds the PrometheusRule object to the
// rules file: the same groups under spec, byte for byte.
func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	rules := readRules(t, "rules.yaml")
	i := strings.Index(rules, "\ngroups:")
	if i < 0 {
		t.Fatal("rules.yaml: no groups")
	}
	var b strings.Builder
	b.WriteString(`# The rules of rules.yaml as a prometheus-operator PrometheusRule: the same
# groups (pkg/telemetry's TestPrometheusRuleMatchesRulesFile holds them equal).
# Regenerate after editing rules.yaml: go test ./pkg/telemetry -run PrometheusRule -update
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: slipway
  labels:
    app.kubernetes.io/name: slipway
    app.kubernetes.io/component: alerting
spec:
`)
	for _, line := range strings.SplitAfter(rules[i+1:], "\n") {
		if strings.TrimSpace(line) != "" {
			b.WriteString("  ")
		}
		b.WriteString(line)
	}
	path := filepath.Join(rulesDir, "prometheusrule.yaml")
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := readRules(t, "prometheusrule.yaml"); got != b.String() {
		t.Errorf("%s differs from rules.yaml's groups: run go test ./pkg/telemetry -run PrometheusRule -update", path)
	}
}

// TestRulesNameRealMetrics finds every slipway_ metric the rules read among
// the families the metric set exports, so renaming a metric breaks the test
// rather than silently silencing an alert; and every runbook link is a
// heading of docs/operations.md.
func TestRulesNameRealMetrics(t *testing.T) {
	m, err := telemetry.NewMetrics(telemetry.WithEnvironment("test"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m.SandboxCreated(ctx, "agents", "g1", true, 3*time.Millisecond)
	m.KitSetup(ctx, "agents", true, time.Millisecond)
	m.Released(ctx, "agents", time.Millisecond)
	m.TaskEnded(ctx, "agents", false, "deadline_exceeded", time.Second)
	m.Cost(ctx, "agents", true, 1)
	m.Cost(ctx, "free", false, 0)
	m.ArtifactExported(ctx, "agents", 1)
	m.Orphans(ctx, "agents", 0)
	m.CleanupUnknown(ctx, "agents", 0)
	if err := m.ObservePools(func(context.Context) ([]telemetry.PoolSample, error) {
		return []telemetry.PoolSample{{Pool: "agents", Warm: 2, Claimed: 1, Ready: 1, WarmTarget: 2}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := m.ObservePolicyDenials(func() map[string]float64 { return map[string]float64{"r1": 1} }); err != nil {
		t.Fatal(err)
	}
	if err := m.ObserveStateSeconds(func() []telemetry.StateSample {
		return []telemetry.StateSample{{Pool: "agents", State: "warm_idle", Seconds: 1}}
	}); err != nil {
		t.Fatal(err)
	}
	m.JobArrived(ctx, "standard")
	m.JobAdmitted(ctx, "standard", time.Second)
	if err := m.ObserveQueue(func(context.Context) ([]telemetry.QueueSample, error) {
		return []telemetry.QueueSample{{Tier: "standard", Queued: 1}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	cm, err := telemetry.NewCanaryMetrics(m)
	if err != nil {
		t.Fatal(err)
	}
	cm.Round(ctx, "agents", nil, "claim", time.Now())
	cm.Round(ctx, "agents", nil, "", time.Now())
	scrape(t, m.Handler())
	text := scrape(t, m.Handler())
	exported := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if name, _, ok := strings.Cut(line, "{"); ok && !strings.HasPrefix(line, "#") {
			exported[name] = true
		} else if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(line, "#") {
			exported[f[0]] = true
		}
	}
	rules := readRules(t, "rules.yaml")
	used := regexp.MustCompile(`\bslipway_[a-z_]+`).FindAllString(rules, -1)
	if len(used) < 15 {
		t.Fatalf("rules.yaml reads %d metrics, want the metric-to-action map's", len(used))
	}
	for _, name := range used {
		if !exported[name] {
			t.Errorf("rules.yaml reads %s, which the metric set does not export", name)
		}
	}

	// Label values the rules match must be values the processes write.
	values := map[string][]string{"bounded_reason": telemetry.FailureReasons, "start": {"warm", "cold"},
		"class": telemetry.StateClasses, "result": {"pass", "fail"}}
	for _, mm := range regexp.MustCompile(`\b(bounded_reason|start|class|result)=~?"([^"]+)"`).FindAllStringSubmatch(rules, -1) {
		for _, v := range strings.Split(mm[2], "|") {
			if !slices.Contains(values[mm[1]], v) {
				t.Errorf("rules.yaml matches %s=%q, a value no process writes (want one of %v)", mm[1], v, values[mm[1]])
			}
		}
	}

	ops, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, h := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(ops), -1) {
		anchors[strings.ToLower(strings.ReplaceAll(strings.TrimSpace(h[1]), " ", "-"))] = true
	}
	alerts := regexp.MustCompile(`(?m)^\s+- alert: (\S+)$`).FindAllStringSubmatch(rules, -1)
	links := regexp.MustCompile(`runbook_url: \S+/docs/operations\.md#(\S+)`).FindAllStringSubmatch(rules, -1)
	if len(links) != len(alerts) {
		t.Errorf("%d alerts, %d runbook links: every alert needs one", len(alerts), len(links))
	}
	for _, l := range links {
		if !anchors[l[1]] {
			t.Errorf("runbook link #%s is no heading of docs/operations.md", l[1])
		}
	}
}
