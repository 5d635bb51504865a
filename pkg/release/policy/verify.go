package policy

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/resolve"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// Target is an artifact to verify: an image reference and, optionally, its
// kind (rules that name kinds match only targets of those kinds).
type Target struct {
	Ref  string `json:"ref"`
	Kind string `json:"kind,omitempty"`
}

// Check is one thing the policy asked for, and whether the artifact has it.
type Check struct {
	// Name is the check: "reference", "rules", "signature",
	// "attestation/<label>" or "unverified".
	Name string `json:"name"`
	// Rule is the rule the check comes from ("" for reference and rules).
	Rule   string `json:"rule,omitempty"`
	Passed bool   `json:"passed"`
	// Reason says what was found or what is missing, naming the digest.
	Reason string `json:"reason"`
}

// Result is a verification's outcome. Verified is true only when every
// check passed; Failed lists the checks that did not.
type Result struct {
	Ref          string  `json:"ref"`
	Digest       string  `json:"digest,omitempty"`
	Kind         string  `json:"kind,omitempty"`
	Policy       string  `json:"policy"`
	PolicyDigest string  `json:"policyDigest,omitempty"`
	Verified     bool    `json:"verified"`
	Checks       []Check `json:"checks"`
	// Signatures and Attestations are the entries that passed checks, by
	// digest: what a generation records as verified.
	Signatures   []string   `json:"signatures,omitempty"`
	Attestations []Evidence `json:"attestations,omitempty"`
}

// Evidence is one verified attestation.
type Evidence struct {
	PredicateType string `json:"predicateType"`
	Digest        string `json:"digest"`
}

// Failed returns the checks that did not pass.
func (r *Result) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if !c.Passed {
			out = append(out, c)
		}
	}
	return out
}

func (r *Result) add(c Check) { r.Checks = append(r.Checks, c) }

// Option configures Verify.
type Option func(*verifyOptions)

type verifyOptions struct {
	resolver resolve.Resolver
	sign     []sign.Option
	cache    *Cache
}

// WithResolver sets how a tag is resolved when the policy allows mutable
// references (default: the registry, resolve.NewRegistry).
func WithResolver(r resolve.Resolver) Option { return func(o *verifyOptions) { o.resolver = r } }

// WithSignOptions passes registry options (keychain, transport) to package
// sign. The transparency-log choice comes from the policy, not from here.
func WithSignOptions(opts ...sign.Option) Option {
	return func(o *verifyOptions) { o.sign = append(o.sign, opts...) }
}

// Verify checks target against the policy, always by digest. A refusal is
// not an error: it is a Result with Verified false and the failed checks.
// The error is for what kept verification from finishing (a registry that
// cannot be reached, a reference that does not parse, a nil context).
func (p *Policy) Verify(ctx context.Context, t Target, opts ...Option) (*Result, error) {
	o := &verifyOptions{}
	for _, opt := range opts {
		opt(o)
	}
	if o.cache == nil {
		return p.verify(ctx, t, o)
	}
	if r, err := ref.Parse(t.Ref); err != nil || r.Digest() == "" {
		return p.verify(ctx, t, o) // a tag names no fixed content: never cached
	}
	key := cacheKey(p, t)
	for {
		res, wait := o.cache.lookup(key)
		if res != nil {
			return res, nil
		}
		if wait == nil {
			break // ours to verify
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("policy: verify %s: %w", t.Ref, ctx.Err())
		}
	}
	res, err := p.verify(ctx, t, o)
	o.cache.done(key, res, err)
	return res, err
}

func (p *Policy) verify(ctx context.Context, t Target, o *verifyOptions) (*Result, error) {
	if t.Kind != "" && !slices.Contains(Kinds, t.Kind) {
		return nil, fmt.Errorf("policy: unknown artifact kind %q (one of %s)", t.Kind, strings.Join(Kinds, ", "))
	}
	r, err := ref.Parse(t.Ref)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	res := &Result{Ref: t.Ref, Kind: t.Kind, Policy: p.Metadata.Name, PolicyDigest: p.Digest}
	defer func() { res.Verified = len(res.Checks) > 0 && len(res.Failed()) == 0 }()

	// Always by digest: a tag is refused, or resolved once, here, and the
	// digest it names now is what every later check looks at.
	digest := r.Digest()
	switch {
	case digest != "":
		res.add(Check{Name: "reference", Passed: true, Reason: "pinned by digest " + digest})
	case !p.Spec.AllowMutableReferences:
		res.add(Check{Name: "reference", Reason: fmt.Sprintf("%s is a mutable reference (tag %q); policy %s allows digests only: pin it (slipway pin)", t.Ref, r.TagOrDefault(), p.Metadata.Name)})
		return res, nil
	default:
		rv := o.resolver
		if rv == nil {
			reg, err := resolve.NewRegistry()
			if err != nil {
				return nil, fmt.Errorf("policy: %w", err)
			}
			rv = reg
		}
		pin, err := rv.Resolve(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("policy: resolve %s: %w", t.Ref, err)
		}
		digest = pin.Digest
		res.add(Check{Name: "reference", Passed: true, Reason: fmt.Sprintf("mutable reference %s resolved to %s (allowed by policy %s)", t.Ref, digest, p.Metadata.Name)})
	}
	res.Digest = digest
	d, err := name.NewDigest(r.Name() + "@" + digest)
	if err != nil {
		return nil, fmt.Errorf("policy: %s: %w", t.Ref, err)
	}

	rules := p.matching(r.Name(), t.Kind)
	if len(rules) == 0 {
		kind := ""
		if t.Kind != "" {
			kind = " (kind " + t.Kind + ")"
		}
		res.add(Check{Name: "rules", Reason: fmt.Sprintf("no rule of policy %s covers %s%s", p.Metadata.Name, r.Name(), kind)})
		return res, nil
	}
	names := make([]string, len(rules))
	for i, rl := range rules {
		names[i] = rl.Name
	}
	res.add(Check{Name: "rules", Passed: true, Reason: "applied: " + strings.Join(names, ", ")})

	// One registry session for every check of this target, unless the
	// caller shares one across targets (WithSignOptions(sign.WithSession)).
	session, err := sign.NewSession(o.sign...)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	sopts := append([]sign.Option{sign.WithSession(session)}, o.sign...)
	v := &verifier{p: p, ref: d, opts: append(sopts, sign.WithOfflineNoTlog()), atts: map[string]*attResult{}}
	for _, rl := range rules {
		if rl.AllowUnverified {
			res.add(Check{Name: "unverified", Rule: rl.Name, Passed: true, Reason: fmt.Sprintf("rule %s allows %s without signatures or attestations", rl.Name, digest)})
			continue
		}
		if rl.Signatures != nil {
			c, err := v.signature(ctx, rl)
			if err != nil {
				return nil, err
			}
			res.add(c)
		}
		for _, a := range rl.Attestations {
			c, err := v.attestation(ctx, rl, a)
			if err != nil {
				return nil, err
			}
			res.add(c)
		}
	}
	res.Signatures, res.Attestations = v.signatures, v.evidence
	return res, nil
}

// matching returns the rules that cover repository repo of kind kind.
func (p *Policy) matching(repo, kind string) []Rule {
	var out []Rule
	for _, r := range p.Spec.Rules {
		if len(r.Match.Kinds) > 0 && !slices.Contains(r.Match.Kinds, kind) {
			continue
		}
		if len(r.Match.Repositories) > 0 && !slices.ContainsFunc(r.Match.Repositories, func(pat string) bool {
			ok, _ := path.Match(pat, repo)
			return ok
		}) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// verifier runs one target's checks, reading each key's attestations once.
type verifier struct {
	p    *Policy
	ref  name.Digest
	opts []sign.Option

	mu   sync.Mutex
	atts map[string]*attResult

	signatures []string
	evidence   []Evidence
}

type attResult struct {
	v   *sign.AttestationVerification
	err error
}

// signature passes when one of the rule's keys verifies a signature.
func (v *verifier) signature(ctx context.Context, rl Rule) (Check, error) {
	c := Check{Name: "signature", Rule: rl.Name}
	var reasons []string
	for _, k := range rl.Signatures.Keys {
		ver, err := sign.Verify(ctx, v.ref, v.p.verifiers[k], v.opts...)
		switch {
		case err == nil:
			c.Passed, c.Reason = true, fmt.Sprintf("%s is signed by key %s", v.ref.DigestStr(), k)
			for _, s := range ver.Signatures {
				v.signatures = append(v.signatures, s.Digest.String())
			}
			return c, nil
		case isRefusal(err):
			reasons = append(reasons, fmt.Sprintf("key %s: %s", k, refusalText(err)))
		default:
			return c, fmt.Errorf("policy: %w", err)
		}
	}
	c.Reason = fmt.Sprintf("no signature of %s by key %s: %s", v.ref, strings.Join(rl.Signatures.Keys, " or "), strings.Join(reasons, "; "))
	return c, nil
}

// attestation passes when one of the keys has a verified attestation of an
// accepted predicate type that meets the SLSA constraints.
func (v *verifier) attestation(ctx context.Context, rl Rule, a Attestation) (Check, error) {
	c := Check{Name: "attestation/" + a.label(), Rule: rl.Name}
	keys := a.Keys
	if len(keys) == 0 {
		keys = rl.Signatures.Keys
	}
	types := a.predicateTypes()
	var reasons []string
	for _, k := range keys {
		got, err := v.attestations(ctx, k)
		if err != nil {
			if !isRefusal(err) {
				return c, fmt.Errorf("policy: %w", err)
			}
			reasons = append(reasons, fmt.Sprintf("key %s: %s", k, refusalText(err)))
			continue
		}
		found := false
		for _, va := range got.Attestations {
			if !slices.Contains(types, va.PredicateType) {
				continue
			}
			found = true
			if why := slsaMismatch(a, va); why != "" {
				reasons = append(reasons, fmt.Sprintf("key %s: attestation %s: %s", k, va.Digest, why))
				continue
			}
			c.Passed = true
			v.evidence = append(v.evidence, Evidence{PredicateType: va.PredicateType, Digest: va.Digest.String()})
			c.Reason = fmt.Sprintf("%s has a %s attestation (%s) by key %s", v.ref.DigestStr(), va.PredicateType, va.Digest, k)
			if a.BuilderID != "" || a.BuildType != "" {
				c.Reason += fmt.Sprintf(" with builder.id %q and buildType %q", a.BuilderID, a.BuildType)
			}
			return c, nil
		}
		if !found {
			reasons = append(reasons, fmt.Sprintf("key %s: no verified attestation of type %s", k, strings.Join(types, " or ")))
		}
	}
	c.Reason = fmt.Sprintf("%s lacks a valid %s attestation: %s", v.ref, a.label(), strings.Join(reasons, "; "))
	return c, nil
}

// slsaMismatch says why a provenance attestation fails the requirement's
// builder and build type, or "" when it meets them.
func slsaMismatch(a Attestation, va sign.VerifiedAttestation) string {
	if a.BuilderID == "" && a.BuildType == "" {
		return ""
	}
	prov, err := attest.ProvenanceOf(va.Statement)
	if err != nil {
		return fmt.Sprintf("not SLSA v1 provenance: %v", err)
	}
	var why []string
	if got := prov.GetRunDetails().GetBuilder().GetId(); a.BuilderID != "" && got != a.BuilderID {
		why = append(why, fmt.Sprintf("builder.id is %q, policy requires %q", got, a.BuilderID))
	}
	if got := prov.GetBuildDefinition().GetBuildType(); a.BuildType != "" && got != a.BuildType {
		why = append(why, fmt.Sprintf("buildType is %q, policy requires %q", got, a.BuildType))
	}
	return strings.Join(why, "; ")
}

// attestations verifies the attestations of the target with key k, once.
func (v *verifier) attestations(ctx context.Context, k string) (*sign.AttestationVerification, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if r, ok := v.atts[k]; ok {
		return r.v, r.err
	}
	got, err := sign.VerifyAttestations(ctx, v.ref, v.p.verifiers[k], v.opts...)
	v.atts[k] = &attResult{got, err}
	return got, err
}

// refusalText is a refusal's message without package sign's family
// prefixes (the check's name already says what failed).
func refusalText(err error) string {
	msg := err.Error()
	for _, e := range []error{sign.ErrNoSignatures, sign.ErrNoAttestations, sign.ErrVerification} {
		if rest, ok := strings.CutPrefix(msg, e.Error()+": "); ok {
			return rest
		}
	}
	return msg
}

// isRefusal tells a verification that failed (the artifact lacks
// something) from one that could not run (registry, input).
func isRefusal(err error) bool { return errors.Is(err, sign.ErrVerification) }
