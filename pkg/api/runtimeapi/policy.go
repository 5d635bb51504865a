package runtimeapi

import "time"

// PolicyView is GET /v1/policy: the config revision in effect, how old the
// runtime's view of it is, whether claims are refused for it, and the
// rules in effect (the verification policy and each pool's network and
// active generation). It answers "which policy is this runtime enforcing,
// and since when" when propagation lags.
type PolicyView struct {
	// Revision is the config repository commit in effect ("" before the
	// first sync); ConfirmedAt when it was last confirmed current, Age how
	// long ago that was.
	Revision    string    `json:"revision"`
	ConfirmedAt time.Time `json:"confirmedAt,omitzero"`
	AgeSeconds  float64   `json:"ageSeconds"`
	// MaxStalenessSeconds is the runtime's --max-staleness: claims are
	// refused (503) once Age passes it; Stale says they are now, and
	// ClaimsRefused says why.
	MaxStalenessSeconds float64 `json:"maxStalenessSeconds"`
	Stale               bool    `json:"stale"`
	ClaimsRefused       string  `json:"claimsRefused,omitempty"`
	// LastSyncError is the last read of the repository's error, if it
	// failed.
	LastSyncError string           `json:"lastSyncError,omitempty"`
	Verification  VerificationView `json:"verification"`
	Pools         []PoolPolicy     `json:"pools"`
	// Denials counts the egress attempts denied so far, by policy
	// revision.
	Denials map[string]float64 `json:"denials,omitempty"`
}

// VerificationView is the verification policy in effect.
type VerificationView struct {
	// Source is "repository" (policies/verification.yaml at Revision),
	// "file" (the runtime's --policy) or "skipped".
	Source string `json:"source"`
	// Revision is the policy's revision as run manifests record it
	// (verification_policy_revision).
	Revision string       `json:"revision,omitempty"`
	Name     string       `json:"name,omitempty"`
	Keys     []string     `json:"keys,omitempty"`
	Rules    []PolicyRule `json:"rules,omitempty"`
}

// PolicyRule is one rule of the verification policy, as
// policies/verification.yaml holds it: what it matches and what it
// requires.
type PolicyRule struct {
	Name  string    `json:"name"`
	Match RuleMatch `json:"match"`
	// Signatures, if set, requires a cosign signature by one of Keys.
	Signatures *RuleSignatures `json:"signatures,omitempty"`
	// Attestations each require a verified attestation.
	Attestations []RuleAttestation `json:"attestations,omitempty"`
	// AllowUnverified: the rule requires nothing, on purpose.
	AllowUnverified bool `json:"allowUnverified,omitempty"`
}

// RuleMatch selects artifacts by kind and by repository ("registry/path"
// patterns in path.Match syntax). An empty list matches everything.
type RuleMatch struct {
	Kinds        []string `json:"kinds,omitempty"`
	Repositories []string `json:"repositories,omitempty"`
}

// RuleSignatures names the keys one of which must have signed.
type RuleSignatures struct {
	Keys []string `json:"keys"`
}

// RuleAttestation is one required attestation.
type RuleAttestation struct {
	Name          string   `json:"name,omitempty"`
	Type          string   `json:"type,omitempty"`
	PredicateType string   `json:"predicateType,omitempty"`
	Keys          []string `json:"keys,omitempty"`
	BuilderID     string   `json:"builderID,omitempty"`
	BuildType     string   `json:"buildType,omitempty"`
}

// PoolPolicy is one pool's rules in effect.
type PoolPolicy struct {
	Pool             string  `json:"pool"`
	Network          Network `json:"network"`
	ActiveGeneration string  `json:"activeGeneration,omitempty"`
	// PolicyPin is the active generation's policy pin, if it has one.
	PolicyPin string `json:"policyPin,omitempty"`
	// Refused lists generations the state names that did not verify.
	Refused map[string]string `json:"refused,omitempty"`
}

// Network is a pool's network setting (pool.yaml's spec.network): mode
// "deny", or "allow-list" with Allow's host:port entries.
type Network struct {
	Mode  string   `json:"mode"`
	Allow []string `json:"allow,omitempty"`
}

// CheckBody is the body of POST /v1/credentials/check.
type CheckBody struct {
	Token string `json:"token"`
}

// CheckResult answers POST /v1/credentials/check: a provider's question
// about a token a sandbox presented. Valid, or the narrow reason (expired,
// revoked, unknown) naming the credential's fingerprint and secret
// version, never its value.
type CheckResult struct {
	Valid       bool   `json:"valid"`
	Reason      string `json:"reason,omitempty"`
	Fingerprint string `json:"fingerprint"`
	Error       string `json:"error,omitempty"`
}
