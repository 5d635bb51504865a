package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/testharness/need"
)

// A real Prometheus server (Debian's package) scrapes a running control
// plane and runtime with the operator's and the runtime's tokens, loads
// deploy/prometheus/rules.yaml as shipped, and an alert fires when its
// condition is caused for real: a job ends at its deadline, and
// SlipwayTasksHitLimits fires for the pool. The failure counter is at zero
// from the control plane's start (telemetry.StartPool), so the first
// failure is an increase the rule sees.
func TestPrometheusScrapesPlanes(t *testing.T) {
	need.Short(t, "a Prometheus server and jobs through both planes")
	prom := need.Binary(t, "prometheus", "apt-get install prometheus")
	rules, err := filepath.Abs("../../../deploy/prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := newControlWorld(t)
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	cp := w.startControl(t, db)
	tok := w.token(t, db, "acme")
	r := run(t, "", "tenant", "token", "create", "ops", "--scope", "operator", "--db", db)
	if r.code != 0 {
		t.Fatalf("operator token: %+v", r)
	}
	opTokFile := filepath.Join(w.dir, "operator-token")
	if err := os.WriteFile(opTokFile, []byte(strings.TrimSpace(r.stdout)), 0o600); err != nil {
		t.Fatal(err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	promAddr := l.Addr().String()
	l.Close()
	host := func(u string) string { p, _ := url.Parse(u); return p.Host }
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: slipway-control
    authorization: {credentials_file: %q}
    static_configs: [{targets: [%q]}]
  - job_name: slipway-runtime
    authorization: {credentials_file: %q}
    static_configs: [{targets: [%q]}]
`, rules, opTokFile, host(cp.url), w.rtTokenFile, host(w.rt.base))
	cfgFile := filepath.Join(w.dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prom, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(w.dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	log := &lineLog{t: t, addr: make(chan string, 1)}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	api := "http://" + promAddr + "/api/v1/"
	get := func(path string, v any) error {
		resp, err := http.Get(api + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: %s", path, resp.Status)
		}
		return json.NewDecoder(resp.Body).Decode(v)
	}
	type vector struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	query := func(q string) (int, string) {
		var v vector
		if err := get("query?query="+url.QueryEscape(q), &v); err != nil {
			return 0, err.Error()
		}
		return len(v.Data.Result), fmt.Sprint(v.Data.Result)
	}

	// Both planes are up as Prometheus sees them, and the control plane
	// exports the pool's deadline failures at zero before any job ran.
	poll(t, 60*time.Second, "both targets up", func() (bool, string) {
		n, s := query(`up{job=~"slipway-control|slipway-runtime"} == 1`)
		return n == 2, s + "\n" + log.text()
	})
	poll(t, 30*time.Second, "failure counter at zero", func() (bool, string) {
		n, s := query(`slipway_task_failure_count_total{job="slipway-control",pool="agents",bounded_reason="deadline"} == 0`)
		return n == 1, s
	})

	base := []string{"job", "submit", "--server", cp.url, "--token-file", tok, "--pool", "agents", "--profile", "standard", "--wait"}
	if r := run(t, "", append(base, "--", "true")...); r.code != 0 {
		t.Fatalf("job: %+v", r)
	}
	poll(t, 30*time.Second, "the first job's duration scraped", func() (bool, string) {
		n, s := query(`slipway_task_execution_duration_seconds_count{pool="agents"} >= 1`)
		return n == 1, s
	})
	if n, s := query(`ALERTS{alertname="SlipwayTasksHitLimits"}`); n != 0 {
		t.Fatalf("SlipwayTasksHitLimits before any job hit a limit: %s", s)
	}
	r = run(t, "", append(base, "--deadline", "1", "--", "sleep", "30")...)
	if !strings.Contains(r.stdout+r.stderr, "deadline") {
		t.Fatalf("job with a 1 s deadline: %+v", r)
	}
	poll(t, 60*time.Second, "SlipwayTasksHitLimits firing", func() (bool, string) {
		var a struct {
			Data struct {
				Alerts []struct {
					Labels map[string]string `json:"labels"`
					State  string            `json:"state"`
				} `json:"alerts"`
			} `json:"data"`
		}
		if err := get("alerts", &a); err != nil {
			return false, err.Error()
		}
		for _, al := range a.Data.Alerts {
			if al.Labels["alertname"] == "SlipwayTasksHitLimits" && al.Labels["pool"] == "agents" && al.State == "firing" {
				return true, ""
			}
		}
		_, s := query(`slipway:task_limit_failures:ratio_increase30m`)
		return false, fmt.Sprintf("alerts %v; ratio %s", a.Data.Alerts, s)
	})
	// A recording rule of the warm objective has a value for the pool too,
	// once it has been evaluated on two scrapes of the claim counters (a
	// rate needs two samples; on a busy machine that may be after the
	// alert fired: CI of f9e6572 read it too early once).
	poll(t, 30*time.Second, "recording rule slipway:warm_claim_errors:ratio_rate5m for pool agents", func() (bool, string) {
		n, s := query(`slipway:warm_claim_errors:ratio_rate5m{pool="agents"}`)
		return n == 1, fmt.Sprintf("%d series %s", n, s)
	})
}
