package controlapi

import "time"

// StreamHead is where a job's stream stands.
type StreamHead struct {
	// Last is the last sequence appended (0: none yet).
	Last int64 `json:"last"`
	// TrimmedThrough: output events up to here were deleted by retention.
	TrimmedThrough int64 `json:"trimmedThrough"`
	// Ended: the result event was appended; Last is it.
	Ended bool `json:"ended"`
}

// JobProfile is a job's profile as it was at the job's revision
// (GET /v1/jobs/{id}/profile).
type JobProfile struct {
	Ref     ProfileRef `json:"ref"`
	Profile Profile    `json:"profile"`
	// Source says where it was read: the config repository at the job's
	// revision, or the copy the control plane stored at submission.
	Source string `json:"source"`
	// Current says how the profile stands now: "unchanged", "changed at
	// <rev> (digest ...)" or "deleted at <rev>".
	Current string `json:"current"`
}

// Profile is a capability profile as the API shows it: the wire form of
// the configuration's profile (pkg/config/tenancy), field for field.
type Profile struct {
	Name string `json:"name"`
	// Network is what the job's sandbox may reach.
	Network Network `json:"network"`
	// MaxDuration bounds a job's deadline.
	MaxDuration time.Duration `json:"maxDuration"`
	// MaxCommandDuration bounds each command; 0: only MaxDuration.
	MaxCommandDuration time.Duration `json:"maxCommandDuration,omitempty"`
	// MaxOutputBytes and MaxOutputLines cap a job's kept output.
	MaxOutputBytes int64 `json:"maxOutputBytes"`
	MaxOutputLines int64 `json:"maxOutputLines"`
	// Secrets are the secret versions a job may be issued (none: no secret).
	Secrets []string `json:"secrets,omitempty"`
	// Pools and Templates restrict where a job may run; empty: any.
	Pools     []string `json:"pools,omitempty"`
	Templates []string `json:"templates,omitempty"`
}

// Network is "deny" (nothing) or "allow-list" (only Allow).
type Network struct {
	Mode  string   `json:"mode"`
	Allow []string `json:"allow,omitempty"`
}

// JobTrace is GET /v1/jobs/{id}/trace: the spans of the job's trace the
// answering replica's ring holds, with those of the runtime that served
// the job (its claim, commands and release, and its runner's part).
type JobTrace struct {
	JobID   string `json:"jobId"`
	TraceID string `json:"traceId"`
	// Replica is the control plane that answered; spans recorded by
	// another replica (or pushed out of the ring) are not here.
	Replica string `json:"replica"`
	// Runtime names the runtime whose spans were asked for ("" when the
	// job had none); RuntimeError says why they are missing, if they are.
	Runtime      string `json:"runtime,omitempty"`
	RuntimeError string `json:"runtimeError,omitempty"`
	Spans        []Span `json:"spans"`
}

// Span is one ended span of a job's trace.
type Span struct {
	TraceID    string            `json:"traceId"`
	SpanID     string            `json:"spanId"`
	ParentID   string            `json:"parentId,omitempty"`
	Name       string            `json:"name"`
	Start      time.Time         `json:"start"`
	End        time.Time         `json:"end"`
	Seconds    float64           `json:"seconds"`
	Attributes map[string]string `json:"attributes,omitempty"`
	// Error is the span's error status description, when it has one.
	Error string `json:"error,omitempty"`
}

// Scopes of a token: a tenant's token acts on that tenant's jobs only; an
// operator's sees all, and every request it makes is in the audit log.
const (
	ScopeTenant   = "tenant"
	ScopeOperator = "operator"
)

// WhoAmI is GET /v1/whoami: what the request's token is (never the
// token itself).
type WhoAmI struct {
	TokenID string `json:"tokenId"`
	Tenant  string `json:"tenant"`
	Scope   string `json:"scope"`
}

// TenantUsage is a tenant's counters (GET /v1/usage).
type TenantUsage struct {
	Tenant      string  `json:"tenant"`
	Queued      int     `json:"queued"`
	Active      int     `json:"active"`
	Reserved    float64 `json:"reserved"`
	Spent       float64 `json:"spent"`
	UnknownCost int     `json:"unknownCost"`
}

// AuditEntry is one request made with an operator token (GET /v1/audit).
type AuditEntry struct {
	At      time.Time `json:"at"`
	TokenID string    `json:"tokenId"`
	Tenant  string    `json:"tenant"`
	Scope   string    `json:"scope"`
	Method  string    `json:"method"`
	Path    string    `json:"path"`
	Status  int       `json:"status"`
}

// ReadyPart is one part a readiness check found at fault.
type ReadyPart struct {
	Part   string `json:"part"`   // e.g. "database", "config repository", "backend"
	Reason string `json:"reason"` // what is wrong, with an error id; the detail is in the server's log
}

// Readiness is GET /readyz's answer (200 ready, 503 not): whether the
// server can take work, and the parts at fault when it cannot.
type Readiness struct {
	Ready   bool        `json:"ready"`
	Failing []ReadyPart `json:"failing,omitempty"`
}
