package runmanifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ErrInvalid marks a manifest, receipt, query or package that is refused
// (a missing run_id, a receipt without a fingerprint, ...). Stores wrap it
// for every refusal of input (pkg/execution/runs.ErrInvalid is this error).
var ErrInvalid = errors.New("runmanifest: invalid input")

// Status is where a run stands. A manifest is written as granted, may move
// between granted and running while the claim lives (a claim moved to a new
// sandbox is granted again under the next allocation attempt), and is
// finalised once, when the claim ends, as completed, failed or released.
// A final manifest is a record and never changes again.
type Status string

const (
	// StatusGranted: the claim was granted a sandbox (warm or cold); the run
	// has not started.
	StatusGranted Status = "granted"
	// StatusRunning: the runner was awakened and the workload is running.
	StatusRunning Status = "running"
	// StatusCompleted: the run ended and its result was published. Final.
	StatusCompleted Status = "completed"
	// StatusFailed: the run ended without a usable result (exit code, deadline,
	// lost sandbox). Final.
	StatusFailed Status = "failed"
	// StatusReleased: the claim was released before the run produced a result
	// (cancelled, or never started). Final.
	StatusReleased Status = "released"
	// StatusUnknown: the run's workload ran but the claim ended without a
	// confirmed exit code (released or lost mid-command): whether it
	// succeeded is not known, and it is never recorded as completed. Final.
	StatusUnknown Status = "unknown"
)

// EndStatus is the final status of a run that ends with exitCode (nil:
// none was confirmed): completed for 0, failed for another code, released
// when the workload never ran, unknown when it ran without a confirmed
// exit. Nothing unconfirmed becomes completed.
func EndStatus(m *Manifest, exitCode *int) Status {
	switch {
	case exitCode != nil && *exitCode == 0:
		return StatusCompleted
	case exitCode != nil:
		return StatusFailed
	case m.Lifecycle.RunnerAwakened.IsZero():
		return StatusReleased
	}
	return StatusUnknown
}

// Final reports whether s ends a run: a manifest with a final status is
// immutable.
func (s Status) Final() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusReleased || s == StatusUnknown
}

func (s Status) valid() bool {
	return s == StatusGranted || s == StatusRunning || s.Final()
}

// Manifest is the record of everything a run used: the identities of the
// software (by digest or immutable id, never by tag), where it ran, the
// credentials it was issued (as receipts) and when each step of its life
// happened. The JSON names are the seed's snake_case ones.
//
// Every field of the seed's example is always present in the JSON (an
// unknown value is ""), so consumers see one shape; exit_code and the
// lifecycle timestamps are left out until they are known.
type Manifest struct {
	RunID              string `json:"run_id"`
	SessionID          string `json:"session_id"`
	AllocationAttempt  int    `json:"allocation_attempt"`
	SandboxID          string `json:"sandbox_id"`
	Cluster            string `json:"cluster"`
	Namespace          string `json:"namespace"`
	NodeID             string `json:"node_id"`
	NodeImageID        string `json:"node_image_id"`
	RuntimeClass       string `json:"runtime_class"`
	ControlPlaneDigest string `json:"control_plane_digest"`
	// RunnerImageDigest is the digest of the pinned runner IMAGE (the
	// generation's runner pin); RunnerBinarySHA256 the sha256 of the runner
	// BINARY that image carries (its dev.slipway.runner.sha256 label, what
	// the sandbox's runner reports about its own executable). They are two
	// identities of one runner, never interchangeable.
	RunnerImageDigest  string `json:"runner_image_digest"`
	RunnerBinarySHA256 string `json:"runner_binary_sha256"`
	// ServedBy names the processes that served the run, as each measured
	// itself, beside the pins above: during an upgrade they may differ
	// (Mismatches says where).
	ServedBy              ServedBy `json:"served_by,omitzero"`
	WorkspaceTemplateID   string   `json:"workspace_template_id"`
	WorkspaceCheckpointID string   `json:"workspace_checkpoint_id"`
	// PolicyRevision is the policy the run is accountable to: the
	// generation's policy pin (its commit) when it pins one, else
	// VerificationPolicyRevision.
	PolicyRevision string `json:"policy_revision"`
	// VerificationPolicyRevision is the revision of the verification
	// policy the runtime verified the generation against, whether or not
	// the generation pins a policy: the config repository commit at which
	// it read policies/verification.yaml, or "sha256:<hex>" of the policy
	// file the runtime was given when the repository holds none. Empty only
	// when verification was skipped (--insecure-skip-verify).
	VerificationPolicyRevision string `json:"verification_policy_revision"`
	ModelID                    string `json:"model_id"`
	PromptBundleID             string `json:"prompt_bundle_id"`
	// SecretVersion is the pinned secret version (path and version, never a
	// value) the run's credentials are issued for; "" when the generation
	// pins none. Each receipt names it too.
	SecretVersion string `json:"secret_version"`
	// CredentialIssuances are receipts of the credentials issued to the run;
	// never the credentials themselves. Stored manifests always carry a list
	// (empty when none were issued).
	CredentialIssuances []Receipt `json:"credential_issuances"`

	// Generation is the id (g-…) of the generation the sandbox belonged to.
	Generation string `json:"generation"`
	Pool       string `json:"pool"`
	Tenant     string `json:"tenant"`
	// Warm is true when the claim got a member of the warm pool, false for a
	// cold start.
	Warm bool `json:"warm"`
	// LaunchType says how the sandbox came to be where the backend's
	// objects record it: "warm", "cold" or "new-node" (a cold start on a
	// node that joined after the claim). Left out where the backend says
	// nothing more than Warm (the local one; and manifests before it).
	LaunchType string `json:"launch_type,omitempty"`
	// ConfigRevision is the config repository commit the runtime had when it
	// granted the claim.
	ConfigRevision string `json:"config_revision"`
	// RequestKey is the key the claimant gave its claim request so that a
	// retry of the request (after a crash, say) finds this run instead of
	// starting another: the control plane derives it from the job and its
	// attempt. Left out when the claim carried none.
	RequestKey string `json:"request_key,omitempty"`
	// Status is empty only before a store's Create, which records it as
	// granted.
	Status    Status    `json:"status"`
	ExitCode  *int      `json:"exit_code,omitempty"`
	Lifecycle Lifecycle `json:"lifecycle"`
	// Limits says which of the pool's limits bound the sandbox and how;
	// left out when the pool sets none (and in manifests before them).
	Limits *Limits `json:"limits,omitempty"`
	// Outcome names the limit that ended the run's work (OutcomeOOMKilled,
	// ...), the first one a command of the run hit; "" when none did.
	Outcome string `json:"outcome,omitempty"`
	// Egress lists the connections the run's sandbox asked its egress
	// proxy for (a pool with network mode allow-list), allowed and
	// denied, oldest first: at most MaxEgress of them (AddEgress counts
	// the rest in EgressDropped). Left out when there were none.
	Egress        []EgressAttempt `json:"egress,omitempty"`
	EgressDropped int             `json:"egress_dropped,omitempty"`
	// Fences lists the allocation attempts the run moved away from, oldest
	// first (at most MaxFences): each one's sandbox was deleted and its
	// claim token and credential revoked before the next attempt began.
	// Left out when the run never moved.
	Fences []Fence `json:"fences,omitempty"`
}

// Fence is an allocation attempt a run left: its sandbox, when the run was
// fenced from it and why. From then on the attempt's claim token is
// refused (the runtime issued a new one) and its credential is revoked
// (the receipt's revoked_at); the sandbox was deleted before the next
// attempt's was created.
type Fence struct {
	AllocationAttempt int       `json:"allocation_attempt"`
	SandboxID         string    `json:"sandbox_id"`
	FencedAt          time.Time `json:"fenced_at"`
	Reason            string    `json:"reason"`
}

// MaxFences bounds a manifest's Fences (a run moves a handful of times at
// most; the runtime gives up long before).
const MaxFences = 64

// EgressAttempt is one connection a run's sandbox asked for: where to (as
// asked, and the address checked), whether the allow-list let it through
// and by which entry or why not, and the bytes each way.
type EgressAttempt struct {
	Time        time.Time `json:"time"`
	Method      string    `json:"method"` // CONNECT, or a plain HTTP method
	Destination string    `json:"destination"`
	Address     string    `json:"address,omitempty"`
	Allowed     bool      `json:"allowed"`
	Rule        string    `json:"rule,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	BytesOut    int64     `json:"bytes_out"` // sandbox to destination
	BytesIn     int64     `json:"bytes_in"`  // destination to sandbox
}

// MaxEgress bounds the attempts one manifest keeps: a sandbox looping on
// a refused destination must not grow its record without end.
const MaxEgress = 1000

// AddEgress appends attempts, keeping at most MaxEgress and counting the
// others in EgressDropped.
func (m *Manifest) AddEgress(as ...EgressAttempt) {
	for _, a := range as {
		if len(m.Egress) >= MaxEgress {
			m.EgressDropped++
			continue
		}
		m.Egress = append(m.Egress, a)
	}
}

// Limits is a run's record of its sandbox's limits.
type Limits struct {
	// Cgroup is the cgroup tree the sandbox was put in: "v2", "v1" or
	// "none".
	Cgroup string `json:"cgroup"`
	// Enforced maps each limit the pool sets (cpu, memory, pids,
	// openFiles, workspace) to how it was enforced, or to "not enforced
	// (...)" where the pool accepted that or the kernel does not hold it
	// as asked. It is read back from the kernel for the sandbox the run
	// got, never copied from the pool's settings.
	Enforced map[string]string `json:"enforced"`
	// Applied is what the kernel holds for the sandbox, by name (cpu in
	// thousandths of a core, memory, workspace and tmp, the size of its
	// /tmp, in bytes; pids; openFiles).
	Applied map[string]uint64 `json:"applied,omitempty"`
}

// Outcomes a run can record: which limit ended its work.
const (
	OutcomeOOMKilled       = "oom_killed"
	OutcomePidsExhausted   = "pids_exhausted"
	OutcomeDiskFull        = "disk_full"
	OutcomeCPUTimeExceeded = "cpu_time_exceeded"
)

// Lifecycle holds the times of a run's steps, in the order they happen.
// Unset times are zero and left out of the JSON; stored times are UTC with
// nanoseconds (RFC 3339).
type Lifecycle struct {
	RequestReceived   time.Time `json:"request_received,omitzero"`
	AdmissionAccepted time.Time `json:"admission_accepted,omitzero"`
	ClaimCreated      time.Time `json:"claim_created,omitzero"`
	SandboxAssigned   time.Time `json:"sandbox_assigned,omitzero"`
	Ready             time.Time `json:"ready,omitzero"`
	// CredentialReady: the run's credential was issued and placed in its
	// sandbox's credential tmpfs (runs that pin a secret version only).
	CredentialReady time.Time `json:"credential_ready,omitzero"`
	RunnerAwakened  time.Time `json:"runner_awakened,omitzero"`
	// PayloadFetched: the runner had the run's first command (its argv,
	// environment and stdin) in the sandbox; the runner's clock.
	PayloadFetched time.Time `json:"payload_fetched,omitzero"`
	// ModelRequestStarted: the workload reported its first model request
	// (slipway-runner event model_request); the runner's clock.
	ModelRequestStarted time.Time `json:"model_request_started,omitzero"`
	// FirstOutput: the workload reported its first useful output
	// (slipway-runner event first_output), or else the first byte a
	// command of the run wrote.
	FirstOutput time.Time `json:"first_output,omitzero"`
	// PostHookComplete: the control plane's post-run step was done: every
	// output and workload event of the job committed to its stream, ready
	// for delivery (sent with the release).
	PostHookComplete  time.Time `json:"post_hook_complete,omitzero"`
	ResultPublished   time.Time `json:"result_published,omitzero"`
	ResourcesReleased time.Time `json:"resources_released,omitzero"`
}

// Receipt records that a credential was issued, without the credential: who
// issued it, for which pinned secret version, the SHA-256 fingerprint of the
// token, and when it was issued and expires. These five fields are all a
// receipt can hold; ParseManifest refuses any other.
type Receipt struct {
	Issuer        string `json:"issuer"`
	SecretVersion string `json:"secret_version"`
	// SHA256Fingerprint is "sha256:" and 64 lower-case hex digits.
	SHA256Fingerprint string    `json:"sha256_fingerprint"`
	IssuedAt          time.Time `json:"issued_at"`
	ExpiresAt         time.Time `json:"expires_at"`
	// Renews is the fingerprint of the credential this one replaced before
	// it expired (a renewal of a long run's credential); "" for the first
	// credential of an allocation attempt.
	Renews string `json:"renews,omitempty"`
	// RevokedAt is when the broker revoked this credential (renewed,
	// released or moved), once the runtime recorded it.
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// ParseManifest decodes a manifest strictly: unknown fields (a token beside a
// receipt, a misspelt name) and trailing data are refused, and the result
// must pass the same checks a store applies when it records it. Errors wrap
// ErrInvalid.
func ParseManifest(data []byte) (*Manifest, error) {
	m, err := DecodeManifest(data)
	if err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeManifest decodes a manifest as strictly as ParseManifest (unknown
// fields and trailing data are refused, wrapping ErrInvalid) without
// validating it: for records a store validated when it wrote them.
func DecodeManifest(data []byte) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %w", ErrInvalid, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: manifest: data after the JSON object", ErrInvalid)
	}
	return &m, nil
}

// Clone returns a deep copy of m.
func (m *Manifest) Clone() *Manifest {
	c := *m
	if m.CredentialIssuances != nil {
		c.CredentialIssuances = append([]Receipt(nil), m.CredentialIssuances...)
	}
	if m.ExitCode != nil {
		e := *m.ExitCode
		c.ExitCode = &e
	}
	if m.Egress != nil {
		c.Egress = append([]EgressAttempt(nil), m.Egress...)
	}
	if m.Fences != nil {
		c.Fences = append([]Fence(nil), m.Fences...)
	}
	if m.Limits != nil {
		l := *m.Limits
		l.Enforced = maps.Clone(m.Limits.Enforced)
		c.Limits = &l
	}
	return &c
}

// Normalize puts m in its stored form: times in UTC (without a monotonic
// reading), a status (granted when none is set) and a non-nil receipt list.
func (m *Manifest) Normalize() {
	if m.Status == "" {
		m.Status = StatusGranted
	}
	if m.CredentialIssuances == nil {
		m.CredentialIssuances = []Receipt{}
	}
	for i := range m.CredentialIssuances {
		r := &m.CredentialIssuances[i]
		r.IssuedAt, r.ExpiresAt = utc(r.IssuedAt), utc(r.ExpiresAt)
		if r.RevokedAt != nil {
			t := utc(*r.RevokedAt)
			r.RevokedAt = &t
		}
	}
	l := &m.Lifecycle
	for i := range m.Egress {
		m.Egress[i].Time = utc(m.Egress[i].Time)
	}
	for i := range m.Fences {
		m.Fences[i].FencedAt = utc(m.Fences[i].FencedAt)
	}
	for _, t := range []*time.Time{&l.RequestReceived, &l.AdmissionAccepted, &l.ClaimCreated, &l.SandboxAssigned,
		&l.Ready, &l.RunnerAwakened, &l.CredentialReady, &l.PayloadFetched, &l.ModelRequestStarted, &l.FirstOutput,
		&l.PostHookComplete, &l.ResultPublished, &l.ResourcesReleased} {
		*t = utc(*t)
	}
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// maxField bounds every string of a manifest: ids and digests are short, and a
// bound keeps a runaway value (a log line, a whole document) out of the record.
const maxField = 512

// Validate checks a manifest as it would be stored. Errors wrap ErrInvalid
// and name the field at fault, never a value that might be a secret.
func (m *Manifest) Validate() error {
	if m.RunID == "" {
		return fmt.Errorf("%w: run_id: required", ErrInvalid)
	}
	for _, f := range []struct{ name, v string }{
		{"run_id", m.RunID}, {"session_id", m.SessionID}, {"sandbox_id", m.SandboxID},
		{"cluster", m.Cluster}, {"namespace", m.Namespace}, {"node_id", m.NodeID},
		{"node_image_id", m.NodeImageID}, {"runtime_class", m.RuntimeClass},
		{"control_plane_digest", m.ControlPlaneDigest}, {"runner_image_digest", m.RunnerImageDigest},
		{"runner_binary_sha256", m.RunnerBinarySHA256}, {"verification_policy_revision", m.VerificationPolicyRevision},
		{"secret_version", m.SecretVersion},
		{"workspace_template_id", m.WorkspaceTemplateID}, {"workspace_checkpoint_id", m.WorkspaceCheckpointID},
		{"policy_revision", m.PolicyRevision}, {"model_id", m.ModelID}, {"prompt_bundle_id", m.PromptBundleID},
		{"generation", m.Generation}, {"pool", m.Pool}, {"tenant", m.Tenant}, {"config_revision", m.ConfigRevision},
		{"launch_type", m.LaunchType}, {"request_key", m.RequestKey},
	} {
		if err := CheckID(f.v); err != nil {
			return fmt.Errorf("%w: %s (run %s): %s", ErrInvalid, f.name, SafeID(m.RunID), err)
		}
	}
	if why := looksLikeSecret(m.SecretVersion); m.SecretVersion != "" && why != "" {
		return fmt.Errorf("%w: secret_version (run %s): looks like a secret value (%s), not a name or version; manifests never hold secrets", ErrInvalid, SafeID(m.RunID), why)
	}
	if m.AllocationAttempt < 0 {
		return fmt.Errorf("%w: allocation_attempt (run %s): %d is negative", ErrInvalid, SafeID(m.RunID), m.AllocationAttempt)
	}
	if m.Status != "" && !m.Status.valid() {
		return fmt.Errorf("%w: status (run %s): %q is not granted, running, completed, failed or released",
			ErrInvalid, SafeID(m.RunID), SafeID(string(m.Status)))
	}
	switch m.Outcome {
	case "", OutcomeOOMKilled, OutcomePidsExhausted, OutcomeDiskFull, OutcomeCPUTimeExceeded:
	default:
		return fmt.Errorf("%w: outcome (run %s): %q is not oom_killed, pids_exhausted, disk_full or cpu_time_exceeded", ErrInvalid, SafeID(m.RunID), SafeID(m.Outcome))
	}
	if l := m.Limits; l != nil {
		if l.Cgroup != "v1" && l.Cgroup != "v2" && l.Cgroup != "none" {
			return fmt.Errorf("%w: limits.cgroup (run %s): %q is not v1, v2 or none", ErrInvalid, SafeID(m.RunID), SafeID(l.Cgroup))
		}
		for k, v := range l.Enforced {
			if err := errors.Join(CheckID(k), checkText(v)); err != nil {
				return fmt.Errorf("%w: limits.enforced (run %s): %s", ErrInvalid, SafeID(m.RunID), err)
			}
		}
	}
	if len(m.Egress) > MaxEgress || m.EgressDropped < 0 {
		return fmt.Errorf("%w: egress (run %s): %d attempts (at most %d), %d dropped", ErrInvalid, SafeID(m.RunID), len(m.Egress), MaxEgress, m.EgressDropped)
	}
	for i, a := range m.Egress {
		err := errors.Join(CheckID(a.Method), CheckID(a.Destination), CheckID(a.Address), checkText(a.Rule), checkText(a.Reason))
		if err == nil && (a.Method == "" || a.Destination == "") {
			err = errors.New("method and destination are required")
		}
		if err == nil && (a.BytesIn < 0 || a.BytesOut < 0) {
			err = errors.New("negative byte count")
		}
		if err != nil {
			return fmt.Errorf("%w: egress[%d] (run %s): %s", ErrInvalid, i, SafeID(m.RunID), err)
		}
	}
	if len(m.Fences) > MaxFences {
		return fmt.Errorf("%w: fences (run %s): %d (at most %d)", ErrInvalid, SafeID(m.RunID), len(m.Fences), MaxFences)
	}
	for i, f := range m.Fences {
		err := errors.Join(CheckID(f.SandboxID), checkText(f.Reason))
		if err == nil && (f.SandboxID == "" || f.AllocationAttempt < 1 || f.FencedAt.IsZero()) {
			err = errors.New("sandbox_id, allocation_attempt (1 or more) and fenced_at are required")
		}
		if err != nil {
			return fmt.Errorf("%w: fences[%d] (run %s): %s", ErrInvalid, i, SafeID(m.RunID), err)
		}
	}
	for i, r := range m.CredentialIssuances {
		if err := r.validate(); err != nil {
			return fmt.Errorf("%w: credential_issuances[%d] (run %s): %s", ErrInvalid, i, SafeID(m.RunID), err)
		}
	}
	return nil
}

// CheckID accepts the printable, single-line values ids and digests are
// (at most 512 bytes of UTF-8 without white space or control characters).
func CheckID(v string) error {
	if len(v) > maxField {
		return fmt.Errorf("longer than %d bytes", maxField)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("not UTF-8")
	}
	for _, r := range v {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("contains white space or a control character")
		}
	}
	return nil
}

// checkText accepts a single line of printable text (spaces allowed).
func checkText(v string) error {
	if len(v) > maxField {
		return fmt.Errorf("longer than %d bytes", maxField)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("not UTF-8")
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return fmt.Errorf("contains a control character")
		}
	}
	return nil
}

// SafeID is v for an error message if it is short and plain, else a
// placeholder: messages name the run at fault without echoing arbitrary input.
func SafeID(v string) string {
	if CheckID(v) != nil || len(v) > 128 {
		return "(unprintable)"
	}
	return v
}

func (r Receipt) validate() error {
	if r.Issuer == "" {
		return fmt.Errorf("issuer: required")
	}
	if r.SecretVersion == "" {
		return fmt.Errorf("secret_version: required")
	}
	for _, f := range []struct{ name, v string }{{"issuer", r.Issuer}, {"secret_version", r.SecretVersion}} {
		if err := CheckID(f.v); err != nil {
			return fmt.Errorf("%s: %s", f.name, err)
		}
		if len(f.v) > 256 {
			return fmt.Errorf("%s: longer than 256 bytes", f.name)
		}
		if why := looksLikeSecret(f.v); why != "" {
			return fmt.Errorf("%s: looks like a secret value (%s), not a name or version; receipts never hold secrets", f.name, why)
		}
	}
	if !isSHA256Digest(r.SHA256Fingerprint) {
		return fmt.Errorf("sha256_fingerprint: not sha256:<64 lower-case hex>")
	}
	if r.IssuedAt.IsZero() {
		return fmt.Errorf("issued_at: required")
	}
	if r.ExpiresAt.IsZero() {
		return fmt.Errorf("expires_at: required")
	}
	if !r.ExpiresAt.After(r.IssuedAt) {
		return fmt.Errorf("expires_at: not after issued_at")
	}
	if r.Renews != "" && !isSHA256Digest(r.Renews) {
		return fmt.Errorf("renews: not sha256:<64 lower-case hex>")
	}
	return nil
}

func isSHA256Digest(s string) bool {
	hex, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for i := 0; i < len(hex); i++ {
		c := hex[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// secretPrefixes are the fixed beginnings of well-known token formats; a
// value that starts with one and goes on with 16 or more token characters
// (letters, digits, '_' and '-') is taken for a token.
var secretPrefixes = []string{
	"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", // GitHub, GitLab
	"xoxb-", "xoxp-", "xoxa-", "xoxs-", // Slack
	"sk-", "sk_live_", "rk_live_", // OpenAI-style, Stripe
	"AIza",         // Google API keys
	"hvs.", "hvb.", // Vault tokens
}

// looksLikeSecret says why v looks like a credential rather than an issuer
// name or a secret version ("" when it does not): a well-known token prefix,
// an AWS access key id, a JSON Web Token, or a long random-looking word that
// no name or version has. It is a guard against a broker that hands the
// token where the receipt wants its version; it cannot prove a value is
// harmless. (PEM blocks and other multi-line values fail earlier: ids hold
// no white space.)
func looksLikeSecret(v string) string {
	for _, p := range secretPrefixes {
		if rest, ok := strings.CutPrefix(v, p); ok && len(rest) >= 16 && strings.Trim(rest, tokenChars) == "" {
			return "well-known token prefix"
		}
	}
	if len(v) == 20 && (strings.HasPrefix(v, "AKIA") || strings.HasPrefix(v, "ASIA")) &&
		strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") == "" {
		return "AWS access key id"
	}
	if parts := strings.Split(v, "."); len(parts) == 3 && strings.HasPrefix(v, "eyJ") {
		return "JSON Web Token"
	}
	// a long random-looking word: 40 or more letters and digits in a row with
	// the mix of a random base62 or base64 string (a quarter or more upper
	// case, a tenth or more digits), which names and versions do not have
	run, upper, digit := 0, 0, 0
	for i := 0; i <= len(v); i++ {
		if i < len(v) && isAlnum(v[i]) {
			run++
			switch c := v[i]; {
			case c >= 'A' && c <= 'Z':
				upper++
			case c >= '0' && c <= '9':
				digit++
			}
			continue
		}
		if run >= 40 && upper*4 >= run && digit*10 >= run && upper+digit < run {
			return "long random-looking word"
		}
		run, upper, digit = 0, 0, 0
	}
	return ""
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

const tokenChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
