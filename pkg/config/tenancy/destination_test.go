package tenancy_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/config/tenancy"
)

const tenantWithDestinations = `apiVersion: slipway.dev/v1alpha1
kind: Tenant
name: acme
pools: [agents]
profiles: [standard]
concurrency: 2
queueBound: 20
destinations:
  - name: chat
    url: https://hooks.example.net/slipway
    kinds: [stdout, result]
    requiresResult: true
    secretRef: {file: /etc/slipway/chat.key}
    ratePerSecond: 2.5
    maxAttempts: 5
  - name: audit
    url: http://127.0.0.1:9/in
    kinds: [state]
    secretRef:
      env: AUDIT_HOOK_KEY
`

func TestParseDestinations(t *testing.T) {
	tn, err := tenancy.ParseTenant("tenants/acme.yaml", []byte(tenantWithDestinations))
	if err != nil {
		t.Fatal(err)
	}
	want := []tenancy.Destination{
		{Name: "chat", URL: "https://hooks.example.net/slipway", Kinds: []string{"stdout", "result"}, RequiresResult: true,
			SecretRef: tenancy.SecretRef{File: "/etc/slipway/chat.key"}, RatePerSecond: 2.5, MaxAttempts: 5},
		{Name: "audit", URL: "http://127.0.0.1:9/in", Kinds: []string{"state"},
			SecretRef: tenancy.SecretRef{Env: "AUDIT_HOOK_KEY"}, RatePerSecond: tenancy.DefaultRatePerSecond, MaxAttempts: tenancy.DefaultMaxAttempts},
	}
	if !reflect.DeepEqual(tn.Destinations, want) {
		t.Errorf("destinations = %+v\nwant %+v", tn.Destinations, want)
	}
	if !tn.Destinations[0].Wants("result") || tn.Destinations[1].Wants("stdout") {
		t.Error("Wants")
	}
}

func TestDestinationRefusals(t *testing.T) {
	parse := func(p string, b []byte) error { _, err := tenancy.ParseTenant(p, b); return err }
	checkRefusals(t, tenantWithDestinations, "tenants/acme.yaml", parse, map[string]refusal{
		"unknown field":           {"maxAttempts: 5", "maxAttempts: 5\n    headers: {}", 16, "unknown field \"headers\""},
		"bad name":                {"name: chat", "name: Chat", 9, "not a destination name"},
		"name twice":              {"name: audit", "name: chat", 16, `destinations[1].name: invalid document: "chat" listed twice`},
		"no url":                  {"    url: https://hooks.example.net/slipway\n", "", 9, "url: invalid document: required"},
		"url not http":            {"https://hooks.example.net/slipway", "ftp://hooks.example.net/x", 10, "want an http(s)://host/path URL"},
		"url with credentials":    {"https://hooks.example.net/slipway", "https://u:p@hooks.example.net/x", 10, "credentials in the URL"},
		"unknown kind":            {"[stdout, result]", "[stdout, results]", 11, `destinations[0].kinds[1]: invalid document: "results" is not a event kind`},
		"kind twice":              {"[stdout, result]", "[stdout, stdout]", 11, `"stdout" listed twice`},
		"no kinds":                {"    kinds: [state]\n", "", 16, "destinations[1].kinds: invalid document: required"},
		"requires result w/o it":  {"[stdout, result]", "[stdout]", 12, "kinds lacks result"},
		"no secret":               {"    secretRef: {file: /etc/slipway/chat.key}\n", "", 9, "secretRef: invalid document: required"},
		"both secrets":            {"{file: /etc/slipway/chat.key}", "{file: /k, env: K}", 13, "either file or env, not both"},
		"relative secret":         {"{file: /etc/slipway/chat.key}", "{file: chat.key}", 13, "want an absolute path"},
		"bad env":                 {"env: AUDIT_HOOK_KEY", "env: 9-x", 20, "not an environment variable name"},
		"zero rate":               {"ratePerSecond: 2.5", "ratePerSecond: 0", 14, "want a rate above 0"},
		"too many attempts":       {"maxAttempts: 5", "maxAttempts: 101", 15, "101: want 1 to 100"},
		"fractional attempts":     {"maxAttempts: 5", "maxAttempts: 2.5", 15, "not a whole number"},
		"secret value not a ref!": {"{file: /etc/slipway/chat.key}", "s3cr3t", 13, "got a string, want a mapping"},
	})
}

func TestSecretRefRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(p, []byte("  topsecret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := (tenancy.SecretRef{File: p}).Read(); err != nil || string(b) != "topsecret-value" {
		t.Errorf("file: %q, %v", b, err)
	}
	t.Setenv("SLIPWAY_TEST_HOOK_KEY", "from-env")
	if b, err := (tenancy.SecretRef{Env: "SLIPWAY_TEST_HOOK_KEY"}).Read(); err != nil || string(b) != "from-env" {
		t.Errorf("env: %q, %v", b, err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	_ = os.WriteFile(empty, []byte("\n"), 0o600)
	for _, r := range []tenancy.SecretRef{{File: empty}, {File: p + ".missing"}, {Env: "SLIPWAY_TEST_UNSET_KEY"}} {
		_, err := r.Read()
		if err == nil || strings.Contains(err.Error(), "topsecret") || !strings.Contains(err.Error(), r.String()) {
			t.Errorf("%s: %v", r, err)
		}
	}
}
