package policy_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/policy"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

const (
	builder   = "https://slipway.dev/builders/ci"
	buildType = attest.BuildTypeTemplate
)

type fixture struct {
	t       *testing.T
	host    string
	dir     string
	release signature.SignerVerifier
	rogue   signature.SignerVerifier
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, host: registrytest.NewInProcess(t), dir: t.TempDir()}
	_, priv := writeKey(t, f.dir, "release")
	_, roguePriv := writeKey(t, t.TempDir(), "rogue")
	var err error
	if f.release, err = sign.LoadSigner(priv, []byte("pw")); err != nil {
		t.Fatal(err)
	}
	if f.rogue, err = sign.LoadSigner(roguePriv, []byte("pw")); err != nil {
		t.Fatal(err)
	}
	return f
}

// policy writes and loads a policy with the head above and rules.
func (f *fixture) policy(rules string, mutable bool) *policy.Policy {
	f.t.Helper()
	body := head
	if mutable {
		body = strings.Replace(body, "  transparencyLog: none\n", "  transparencyLog: none\n  allowMutableReferences: true\n", 1)
	}
	file := filepath.Join(f.dir, "policy.yaml")
	if err := os.WriteFile(file, []byte(body+rules), 0o644); err != nil {
		f.t.Fatal(err)
	}
	p, err := policy.Load(file)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) push(repo string) name.Digest {
	f.t.Helper()
	img, err := random.Image(128, 1)
	if err != nil {
		f.t.Fatal(err)
	}
	return registrytest.Push(f.t, f.host+"/"+repo+":latest", img)
}

// publish signs d and attaches provenance (builder id b, build type bt) and,
// if sbom, an SPDX SBOM, all with key sv.
func (f *fixture) publish(d name.Digest, sv signature.SignerVerifier, b, bt string, sbom bool) {
	f.t.Helper()
	ctx := context.Background()
	off := sign.WithOfflineNoTlog()
	if _, err := sign.Sign(ctx, d, sv, off); err != nil {
		f.t.Fatal(err)
	}
	st, err := attest.Provenance(attest.TemplateBuild{
		Name: d.Context().Name(), TemplateID: d.DigestStr(), SpecDigest: "sha256:" + strings.Repeat("b", 64),
		BaseRef: "registry.example/base:1", BaseDigest: "sha256:" + strings.Repeat("c", 64),
		BuilderID: b, Started: time.Unix(1700000000, 0), Finished: time.Unix(1700000001, 0), Epoch: 1700000000,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	pb, err := attest.Marshal(st)
	if err != nil {
		f.t.Fatal(err)
	}
	// Another build type: rewrite the statement before it is signed.
	pb = bytes.Replace(pb, []byte(buildType), []byte(bt), 1)
	attach := func(b []byte) {
		if _, err := sign.Attest(ctx, d, sv, b, off); err != nil {
			f.t.Fatal(err)
		}
	}
	attach(pb)
	if sbom {
		s, err := attest.SBOM(d.Context().Name(), d.DigestStr(), attest.PredicateSPDX, []byte(`{"spdxVersion":"SPDX-2.3"}`))
		if err != nil {
			f.t.Fatal(err)
		}
		sb, err := attest.Marshal(s)
		if err != nil {
			f.t.Fatal(err)
		}
		attach(sb)
	}
}

const templateRules = `  rules:
    - name: templates
      match:
        kinds: [workspace-template]
      signatures:
        keys: [release]
      attestations:
        - type: slsaprovenance
          builderID: ` + builder + `
          buildType: ` + buildType + `
        - type: sbom
`

func verify(t *testing.T, p *policy.Policy, ref, kind string) *policy.Result {
	t.Helper()
	res, err := p.Verify(context.Background(), policy.Target{Ref: ref, Kind: kind})
	if err != nil {
		t.Fatalf("Verify(%s): %v", ref, err)
	}
	return res
}

// wantFailed checks that res is refused, that the check named check failed
// and that its reason contains each of words.
func wantFailed(t *testing.T, res *policy.Result, check string, words ...string) {
	t.Helper()
	if res.Verified {
		t.Fatalf("verified, want refused: %+v", res.Checks)
	}
	for _, c := range res.Failed() {
		if c.Name != check {
			continue
		}
		for _, w := range words {
			if !strings.Contains(c.Reason, w) {
				t.Errorf("check %s reason %q lacks %q", check, c.Reason, w)
			}
		}
		return
	}
	t.Fatalf("no failed check %q in %+v", check, res.Checks)
}

func TestVerifyPasses(t *testing.T) {
	f := newFixture(t)
	p := f.policy(templateRules, false)
	d := f.push("templates/python")
	f.publish(d, f.release, builder, buildType, true)

	res := verify(t, p, d.String(), "workspace-template")
	if !res.Verified || res.Digest != d.DigestStr() {
		t.Fatalf("refused: %+v", res.Failed())
	}
	names := []string{}
	for _, c := range res.Checks {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "reference,rules,signature,attestation/slsaprovenance,attestation/sbom" {
		t.Errorf("checks = %s", got)
	}
}

func TestVerifyRefusals(t *testing.T) {
	f := newFixture(t)
	p := f.policy(templateRules, false)

	t.Run("wrong key", func(t *testing.T) {
		d := f.push("templates/a")
		f.publish(d, f.rogue, builder, buildType, true)
		res := verify(t, p, d.String(), "workspace-template")
		wantFailed(t, res, "signature", d.DigestStr(), "key release")
		wantFailed(t, res, "attestation/slsaprovenance", d.DigestStr())
	})
	t.Run("missing sbom", func(t *testing.T) {
		d := f.push("templates/b")
		f.publish(d, f.release, builder, buildType, false)
		res := verify(t, p, d.String(), "workspace-template")
		wantFailed(t, res, "attestation/sbom", d.DigestStr(), "no verified attestation of type https://spdx.dev/Document or https://cyclonedx.org/bom")
		if len(res.Failed()) != 1 {
			t.Errorf("failed = %+v, want only the SBOM", res.Failed())
		}
	})
	t.Run("wrong builder", func(t *testing.T) {
		d := f.push("templates/c")
		f.publish(d, f.release, "https://evil.example/builder", buildType, true)
		res := verify(t, p, d.String(), "workspace-template")
		wantFailed(t, res, "attestation/slsaprovenance", d.DigestStr(), `builder.id is "https://evil.example/builder", policy requires "`+builder+`"`)
	})
	t.Run("wrong build type", func(t *testing.T) {
		d := f.push("templates/d")
		f.publish(d, f.release, builder, "https://example/other-build/v1", true)
		res := verify(t, p, d.String(), "workspace-template")
		wantFailed(t, res, "attestation/slsaprovenance", `buildType is "https://example/other-build/v1"`)
	})
	t.Run("unsigned", func(t *testing.T) {
		d := f.push("templates/e")
		res := verify(t, p, d.String(), "workspace-template")
		wantFailed(t, res, "signature", d.DigestStr(), "no signatures")
		wantFailed(t, res, "attestation/sbom", "no attestations")
	})
	t.Run("tag refused", func(t *testing.T) {
		d := f.push("templates/f")
		f.publish(d, f.release, builder, buildType, true)
		res := verify(t, p, d.Context().Tag("latest").String(), "workspace-template")
		wantFailed(t, res, "reference", "mutable reference", `"latest"`)
		if len(res.Checks) != 1 {
			t.Errorf("checks after a refused reference: %+v", res.Checks)
		}
	})
	t.Run("no rule covers", func(t *testing.T) {
		d := f.push("runners/x")
		res := verify(t, p, d.String(), "runner")
		wantFailed(t, res, "rules", "no rule of policy test covers", "kind runner")
	})
}

// TestVerifyMovedTag: with mutable references allowed, a tag is resolved
// once and its digest verified; a tag moved to an unsigned image is refused
// although the image it used to name is signed.
func TestVerifyMovedTag(t *testing.T) {
	f := newFixture(t)
	p := f.policy(templateRules, true)
	signed := f.push("templates/moving")
	f.publish(signed, f.release, builder, buildType, true)
	tag := signed.Context().Tag("latest")
	if res := verify(t, p, tag.String(), "workspace-template"); !res.Verified {
		t.Fatalf("tag naming the signed digest refused: %+v", res.Failed())
	}
	moved := f.push("templates/moving") // re-tags :latest
	if moved.DigestStr() == signed.DigestStr() {
		t.Fatal("random image collided")
	}
	res := verify(t, p, tag.String(), "workspace-template")
	if res.Digest != moved.DigestStr() {
		t.Errorf("verified digest %s, want the tag's new digest %s", res.Digest, moved.DigestStr())
	}
	wantFailed(t, res, "signature", moved.DigestStr())
}

func TestVerifyTamperedAttestation(t *testing.T) {
	f := newFixture(t)
	p := f.policy(templateRules, false)
	d := f.push("templates/t")
	f.publish(d, f.release, builder, buildType, true)
	// Replace the .att image with one whose first envelope payload is
	// altered (signature kept).
	attTag := d.Context().Tag("sha256-" + strings.TrimPrefix(d.DigestStr(), "sha256:") + ".att")
	img, err := remote.Image(attTag)
	if err != nil {
		t.Fatal(err)
	}
	tampered := tamperFirstLayer(t, img)
	if err := remote.Write(attTag, tampered); err != nil {
		t.Fatal(err)
	}
	res := verify(t, p, d.String(), "workspace-template")
	wantFailed(t, res, "attestation/slsaprovenance", d.DigestStr())
}

func TestAllowUnverifiedRule(t *testing.T) {
	f := newFixture(t)
	p := f.policy(`  rules:
    - name: scratch
      match:
        repositories: ["`+f.host+`/scratch/*"]
      allowUnverified: true
`, false)
	d := f.push("scratch/x")
	res := verify(t, p, d.String(), "")
	if !res.Verified || res.Checks[len(res.Checks)-1].Name != "unverified" {
		t.Fatalf("result %+v", res)
	}
	other := f.push("elsewhere/x")
	wantFailed(t, verify(t, p, other.String(), ""), "rules", other.Context().Name())
}

func TestVerifyErrors(t *testing.T) {
	f := newFixture(t)
	p := f.policy(templateRules, false)
	ctx := context.Background()
	if _, err := p.Verify(ctx, policy.Target{Ref: "NOT a ref"}); err == nil {
		t.Error("bad reference: no error")
	}
	if _, err := p.Verify(ctx, policy.Target{Ref: f.host + "/a@sha256:" + strings.Repeat("a", 64), Kind: "widget"}); err == nil || !strings.Contains(err.Error(), "widget") {
		t.Errorf("unknown kind: err = %v", err)
	}
	// A registry that does not answer is an error, not a refusal.
	_, err := p.Verify(ctx, policy.Target{Ref: "127.0.0.1:1/templates/x@sha256:" + strings.Repeat("a", 64), Kind: "workspace-template"})
	if err == nil {
		t.Error("unreachable registry: no error")
	}
}

// tamperFirstLayer returns img with its first layer's DSSE payload altered
// and its signature kept.
func tamperFirstLayer(t *testing.T, img v1.Image) v1.Image {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	env, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	payload, _ := base64.StdEncoding.DecodeString(e["payload"].(string))
	e["payload"] = base64.StdEncoding.EncodeToString(bytes.Replace(payload, []byte(builder), []byte("https://evil.example/b"), 1))
	changed, _ := json.Marshal(e)
	out := empty.Image
	for i, l := range layers {
		if i == 0 {
			l = static.NewLayer(changed, m.Layers[0].MediaType)
		}
		if out, err = mutate.Append(out, mutate.Addendum{Layer: l, Annotations: m.Layers[i].Annotations}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
