package runmanifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fullManifest sets every field, so that a round trip shows each one.
func fullManifest(runID string) *Manifest {
	t0 := time.Date(2026, 3, 14, 9, 26, 53, 589793238, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	exit := 0
	return &Manifest{
		RunID:              runID,
		SessionID:          "s-7f3a",
		AllocationAttempt:  2,
		SandboxID:          "sb-agents-0042",
		Cluster:            "local",
		Namespace:          "tenant-acme",
		NodeID:             "node-3",
		NodeImageID:        "ami-0abc1234def567890",
		RuntimeClass:       "bwrap",
		ControlPlaneDigest: "sha256:" + strings.Repeat("1", 64),
		RunnerImageDigest:  "sha256:" + strings.Repeat("2", 64),
		RunnerBinarySHA256: "sha256:" + strings.Repeat("7", 64),
		ServedBy: ServedBy{
			ControlPlane: &Process{Version: "v0.5.0", BinarySHA256: "sha256:" + strings.Repeat("5", 64),
				Image: "ghcr.io/slipway-dev/slipway@sha256:" + strings.Repeat("1", 64)},
			Runtime: &Process{Version: "v0.5.0", BinarySHA256: "sha256:" + strings.Repeat("6", 64)},
			Runner:  &Process{BinarySHA256: "sha256:" + strings.Repeat("7", 64)},
		},
		WorkspaceTemplateID:        "sha256:" + strings.Repeat("3", 64),
		WorkspaceCheckpointID:      "sha256:" + strings.Repeat("4", 64),
		PolicyRevision:             "9c1e2f0a7b",
		VerificationPolicyRevision: "0f5e7c2d9a1b3c4d5e6f708192a3b4c5d6e7f809",
		SecretVersion:              "github-app/7",
		ModelID:                    "model-2026-01",
		PromptBundleID:             "sha256:" + strings.Repeat("5", 64),
		CredentialIssuances: []Receipt{{
			Issuer:            "local-broker",
			SecretVersion:     "github-app/7",
			SHA256Fingerprint: "sha256:" + strings.Repeat("ab", 32),
			IssuedAt:          at(1500),
			ExpiresAt:         at(1500).Add(time.Hour),
		}},
		Generation:     "g-" + strings.Repeat("6", 64),
		Pool:           "agents",
		Tenant:         "acme",
		Warm:           true,
		ConfigRevision: "0f5e7c2d9a1b3c4d5e6f708192a3b4c5d6e7f809",
		Status:         StatusCompleted,
		ExitCode:       &exit,
		Lifecycle: Lifecycle{
			RequestReceived:   at(0),
			AdmissionAccepted: at(2),
			ClaimCreated:      at(3),
			SandboxAssigned:   at(5),
			Ready:             at(40),
			RunnerAwakened:    at(41),
			CredentialReady:   at(41),
			PayloadFetched:    at(42),
			// the workload's own: model request started, first useful output
			ModelRequestStarted: at(300),
			FirstOutput:         at(900),
			PostHookComplete:    at(59990),
			ResultPublished:     at(60000),
			ResourcesReleased:   at(60250),
		},
	}
}

// The JSON of a manifest is the seed's: snake_case names, every seed field
// present, lifecycle times in RFC 3339 with nanoseconds.
func TestManifestJSONGolden(t *testing.T) {
	m := fullManifest("r-123")
	got, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "manifest.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("manifest JSON differs from %s (go test -update rewrites it):\n%s", golden, got)
	}
	back, err := ParseManifest(want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, m) {
		t.Errorf("ParseManifest(golden) = %+v, want %+v", back, m)
	}

	var keys map[string]json.RawMessage
	if err := json.Unmarshal(want, &keys); err != nil {
		t.Fatal(err)
	}
	seed := []string{"run_id", "session_id", "allocation_attempt", "sandbox_id", "cluster", "namespace", "node_id",
		"node_image_id", "runtime_class", "control_plane_digest", "runner_image_digest", "workspace_template_id",
		"workspace_checkpoint_id", "policy_revision", "model_id", "prompt_bundle_id", "credential_issuances"}
	extra := []string{"runner_binary_sha256", "served_by", "verification_policy_revision", "secret_version", "generation", "pool", "tenant", "warm", "config_revision", "status", "exit_code", "lifecycle"}
	for _, k := range append(seed, extra...) {
		if _, ok := keys[k]; !ok {
			t.Errorf("manifest JSON lacks %q", k)
		}
	}
	if len(keys) != len(seed)+len(extra) {
		t.Errorf("manifest JSON has %d keys, want %d", len(keys), len(seed)+len(extra))
	}
	var l map[string]string
	if err := json.Unmarshal(keys["lifecycle"], &l); err != nil {
		t.Fatal(err)
	}
	// the seed's thirteen stamps
	steps := []string{"request_received", "admission_accepted", "claim_created", "sandbox_assigned", "ready",
		"credential_ready", "runner_awakened", "payload_fetched", "model_request_started", "first_output",
		"post_hook_complete", "result_published", "resources_released"}
	if len(l) != len(steps) {
		t.Errorf("lifecycle has %d times, want %d", len(l), len(steps))
	}
	for _, k := range steps {
		if _, err := time.Parse(time.RFC3339Nano, l[k]); err != nil {
			t.Errorf("lifecycle.%s: %v", k, err)
		}
	}
	if l["request_received"] != "2026-03-14T09:26:53.589793238Z" {
		t.Errorf("request_received = %q, want nanoseconds in UTC", l["request_received"])
	}
	var r []map[string]any
	if err := json.Unmarshal(keys["credential_issuances"], &r); err != nil {
		t.Fatal(err)
	}
	var rk []string
	for k := range r[0] {
		rk = append(rk, k)
	}
	slices.Sort(rk)
	if want := []string{"expires_at", "issued_at", "issuer", "secret_version", "sha256_fingerprint"}; !slices.Equal(rk, want) {
		t.Errorf("receipt keys = %v, want %v", rk, want)
	}
}

// A manifest just granted shows every seed field, an empty receipt list and
// no lifecycle time or exit code that is not known yet.
func TestManifestJSONOmitsUnknownTimes(t *testing.T) {
	m := &Manifest{RunID: "r-1", Status: StatusGranted}
	m.Lifecycle.ClaimCreated = time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	m.Normalize()
	got, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"run_id":"r-1","session_id":"","allocation_attempt":0,"sandbox_id":"","cluster":"","namespace":"",` +
		`"node_id":"","node_image_id":"","runtime_class":"","control_plane_digest":"","runner_image_digest":"",` +
		`"runner_binary_sha256":"","workspace_template_id":"","workspace_checkpoint_id":"","policy_revision":"",` +
		`"verification_policy_revision":"","model_id":"","prompt_bundle_id":"","secret_version":"","credential_issuances":[],"generation":"","pool":"","tenant":"","warm":false,` +
		`"config_revision":"","status":"granted","lifecycle":{"claim_created":"2026-01-02T02:04:05Z"}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestParseManifestIsStrict(t *testing.T) {
	good, err := json.Marshal(fullManifest("r-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseManifest(good); err != nil {
		t.Fatalf("ParseManifest(good): %v", err)
	}
	for name, doc := range map[string]string{
		"token beside a receipt":  strings.Replace(string(good), `"issuer":`, `"token":"hunter2","issuer":`, 1),
		"unknown top-level field": strings.Replace(string(good), `"run_id":`, `"secret":"x","run_id":`, 1),
		"trailing data":           string(good) + `{}`,
		"not an object":           `[]`,
		"no run id":               strings.Replace(string(good), `"run_id":"r-1"`, `"run_id":""`, 1),
		"bad status":              strings.Replace(string(good), `"status":"completed"`, `"status":"done"`, 1),
		"negative attempt":        strings.Replace(string(good), `"allocation_attempt":2`, `"allocation_attempt":-1`, 1),
		"space in an id":          strings.Replace(string(good), `"cluster":"local"`, `"cluster":"lo cal"`, 1),
	} {
		if _, err := ParseManifest([]byte(doc)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error repeats the secret: %v", name, err)
		}
	}
}

func TestReceiptValidation(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := Receipt{Issuer: "local-broker", SecretVersion: "github-app/7", SHA256Fingerprint: "sha256:" + strings.Repeat("0f", 32),
		IssuedAt: t0, ExpiresAt: t0.Add(time.Minute)}
	with := func(f func(*Receipt)) Receipt { r := ok; f(&r); return r }
	// names and versions as secret managers spell them are accepted
	for _, v := range []string{"github-app/7", "v3", "projects/MyProject123/secrets/ApiKeyForProduction/versions/17",
		"arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf", "vault:kv/data/ci#12",
		"MyVeryLongCamelCaseSecretNameForTheProduction2024", "sha256:" + strings.Repeat("ab", 32),
		"ASIA-pacific-region-db-v1", "sk-prod-v3"} {
		if err := with(func(r *Receipt) { r.SecretVersion = v }).validate(); err != nil {
			t.Errorf("secret_version %q: %v", v, err)
		}
	}
	bad := map[string]Receipt{
		"no issuer":                  with(func(r *Receipt) { r.Issuer = "" }),
		"no secret version":          with(func(r *Receipt) { r.SecretVersion = "" }),
		"fingerprint without prefix": with(func(r *Receipt) { r.SHA256Fingerprint = strings.Repeat("0f", 32) }),
		"fingerprint upper case":     with(func(r *Receipt) { r.SHA256Fingerprint = "sha256:" + strings.Repeat("0F", 32) }),
		"fingerprint short":          with(func(r *Receipt) { r.SHA256Fingerprint = "sha256:0f" }),
		"fingerprint sha512":         with(func(r *Receipt) { r.SHA256Fingerprint = "sha512:" + strings.Repeat("0f", 32) }),
		"no issue time":              with(func(r *Receipt) { r.IssuedAt = time.Time{} }),
		"no expiry":                  with(func(r *Receipt) { r.ExpiresAt = time.Time{} }),
		"expires before issued":      with(func(r *Receipt) { r.ExpiresAt = t0.Add(-time.Second) }),
		"github token":               with(func(r *Receipt) { r.SecretVersion = "ghp_" + strings.Repeat("a1B2", 9) }),
		"slack token":                with(func(r *Receipt) { r.Issuer = "xoxb-123456789012-1234567890123" }),
		"aws key id":                 with(func(r *Receipt) { r.SecretVersion = "AKIAIOSFODNN7EXAMPLE" }),
		"jwt": with(func(r *Receipt) {
			r.SecretVersion = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
		}),
		"random base62": with(func(r *Receipt) { r.SecretVersion = "v1/Xk9fQ2mZ7pL4tR8wB3nC6vD1sG5hJ0aE2uY7iO4q" }),
		"pem":           with(func(r *Receipt) { r.SecretVersion = "-----BEGIN PRIVATE KEY-----\nMIIE" }),
	}
	for name, r := range bad {
		err := r.validate()
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), r.SecretVersion) && r.SecretVersion != "" {
			t.Errorf("%s: the error repeats the value: %v", name, err)
		}
		m := fullManifest("r-1")
		m.CredentialIssuances = []Receipt{r}
		if err := m.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: manifest validate = %v, want ErrInvalid", name, err)
		}
	}
}

func TestParsePackage(t *testing.T) {
	for in, want := range map[string]Package{
		"openssl@3.0.7":            {"openssl", "3.0.7"},
		"@babel/core@7.24.0":       {"@babel/core", "7.24.0"},
		"libssl3@3.0.17-1~deb12u2": {"libssl3", "3.0.17-1~deb12u2"},
		"Java Archive@1.0":         {"Java Archive", "1.0"},
	} {
		got, err := ParsePackage(in)
		if err != nil || got != want {
			t.Errorf("ParsePackage(%q) = %v, %v; want %v", in, got, err, want)
		}
		if got.String() != in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), in)
		}
	}
	for _, in := range []string{"", "openssl", "openssl@", "@3.0.7", "@", "a@b\n", "a\x00b@1"} {
		if _, err := ParsePackage(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParsePackage(%q): err = %v, want ErrInvalid", in, err)
		}
	}
}

func FuzzParseManifest(f *testing.F) {
	good, err := json.Marshal(fullManifest("r-1"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"run_id":"r"}`))
	f.Add([]byte(`{"run_id":"r","credential_issuances":[{"issuer":"i"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		// what parses, encodes and parses again to the same manifest
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := ParseManifest(again)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", again, err)
		}
		third, err := json.Marshal(m2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, third) {
			t.Fatalf("round trip changed the manifest:\n%s\n%s", again, third)
		}
	})
}

func FuzzParsePackage(f *testing.F) {
	for _, s := range []string{"openssl@3.0.7", "@babel/core@7.24.0", "a@b@c", "@", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePackage(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if p.String() != s {
			t.Fatalf("ParsePackage(%q).String() = %q", s, p.String())
		}
	})
}

// A fenced attempt is recorded whole or refused, naming the entry.
func TestFenceValidation(t *testing.T) {
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	ok := Fence{AllocationAttempt: 1, SandboxID: "sb-1", FencedAt: at, Reason: "missed 3 heartbeats"}
	m := &Manifest{RunID: "r-1", Fences: []Fence{ok}}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []Fence{
		{AllocationAttempt: 1, FencedAt: at},
		{SandboxID: "sb-1", FencedAt: at},
		{AllocationAttempt: 1, SandboxID: "sb-1"},
		{AllocationAttempt: 1, SandboxID: "sb\n1", FencedAt: at},
	} {
		m := &Manifest{RunID: "r-1", Fences: []Fence{ok, f}}
		if err := m.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "fences[1]") {
			t.Errorf("%+v: %v, want ErrInvalid naming fences[1]", f, err)
		}
	}
	m = &Manifest{RunID: "r-1", Fences: make([]Fence, MaxFences+1)}
	if err := m.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("%d fences: %v", MaxFences+1, err)
	}
}

// Steps: each recorded stamp with the time since the latest before it; a
// warm member's ready, before the claim, is marked and takes no time.
func TestLifecycleSteps(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	l := Lifecycle{RequestReceived: t0, ClaimCreated: t0.Add(2 * time.Millisecond), SandboxAssigned: t0.Add(3 * time.Millisecond),
		Ready: t0.Add(-time.Second), RunnerAwakened: t0.Add(5 * time.Millisecond), ResourcesReleased: t0.Add(time.Second)}
	var got []string
	for _, s := range l.Steps() {
		got = append(got, fmt.Sprintf("%s %s %v", s.Name, s.Took, s.Earlier))
	}
	want := []string{"request_received 0s false", "claim_created 2ms false", "sandbox_assigned 1ms false", "ready 0s true",
		"runner_awakened 2ms false", "resources_released 995ms false"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
}
