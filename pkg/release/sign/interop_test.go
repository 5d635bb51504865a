package sign_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/registrytest"

	"github.com/slipway-dev/slipway/testharness/need"
)

// The interop tests run the real cosign CLI ($COSIGN, built from tools/go.mod
// by make) against Debian's docker-registry, in both directions: what Slipway
// signs and attests, cosign verifies; what cosign signs and attests, Slipway
// verifies.

// interopPassword is the key password for both tools (COSIGN_PASSWORD).
const interopPassword = "interop-pass"

// cosignTimeout bounds one cosign invocation.
const cosignTimeout = 2 * time.Minute

// cosignCLI runs the cosign binary offline: a clean HOME with no docker
// config, TUF pointed at a mirror with no cached root (so cosign does not try
// to fetch a trust root), and every proxy variable pointing at a tripwire
// server, so any request cosign makes to anything but the loopback registry
// is seen (and refused) there. Go never proxies loopback addresses, so the
// registry on 127.0.0.1 is reached directly.
type cosignCLI struct {
	bin  string
	env  []string
	trip *tripwire
}

// tripwire records every request that reaches it.
type tripwire struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []string
}

func (tw *tripwire) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tw.mu.Lock()
	tw.got = append(tw.got, r.Method+" "+r.Host+r.URL.Path)
	tw.mu.Unlock()
	http.Error(w, "tripwire: no network but the registry", http.StatusForbidden)
}

func (tw *tripwire) requests() []string {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return slices.Clone(tw.got)
}

// newCosign returns the cosign CLI from $COSIGN, or skips. When the test
// ends it fails if cosign tried to reach anything but the registry.
func newCosign(tb testing.TB) *cosignCLI {
	tb.Helper()
	need.Short(tb, "the cosign CLI and Debian's docker-registry")
	bin := need.Env(tb, "COSIGN", "the cosign interop tests need the cosign CLI (make test builds bin/cosign and sets COSIGN)")
	if _, err := os.Stat(bin); err != nil {
		tb.Fatalf("COSIGN=%s: %v", bin, err)
	}
	tw := &tripwire{}
	tw.srv = httptest.NewServer(tw)
	tb.Cleanup(func() {
		tw.srv.Close()
		if got := tw.requests(); len(got) > 0 {
			tb.Errorf("cosign tried to reach the network beyond the registry: %q", got)
		}
	})
	home := tb.TempDir()
	docker := filepath.Join(home, ".docker")
	if err := os.MkdirAll(docker, 0o700); err != nil {
		tb.Fatal(err)
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"DOCKER_CONFIG=" + docker,
		"TMPDIR=" + home,
		"COSIGN_PASSWORD=" + interopPassword,
		"COSIGN_YES=true",
		// No trust root: a TUF cache with nothing in it and a mirror that
		// is not the public one, so cosign finds no root.json and does not
		// fetch one (it warns and goes on; keys need no trust root).
		"TUF_ROOT=" + filepath.Join(home, "tuf"),
		"TUF_MIRROR=" + tw.srv.URL,
		"SIGSTORE_NO_CACHE=true",
		"HTTPS_PROXY=" + tw.srv.URL, "https_proxy=" + tw.srv.URL,
		"HTTP_PROXY=" + tw.srv.URL, "http_proxy=" + tw.srv.URL,
		"NO_PROXY=", "no_proxy=",
	}
	return &cosignCLI{bin: bin, env: env, trip: tw}
}

// registryFlags let cosign talk plain HTTP to the test registry.
var registryFlags = []string{"--allow-http-registry=true", "--allow-insecure-registry=true"}

// offlineVerifyFlags verify against the key alone, as sign.WithOfflineNoTlog
// does.
var offlineVerifyFlags = []string{"--insecure-ignore-tlog=true", "--insecure-ignore-sct=true", "--offline=true"}

// run runs cosign in dir and returns its stdout, stderr and error.
func (c *cosignCLI) run(dir string, args ...string) (stdout, stderr []byte, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), cosignTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir = dir
	cmd.Env = c.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.Bytes(), errb.Bytes(), err
}

// must runs cosign and fails the test unless it exits 0.
func (c *cosignCLI) must(tb testing.TB, dir string, args ...string) []byte {
	tb.Helper()
	out, errb, err := c.run(dir, args...)
	if err != nil {
		tb.Fatalf("cosign %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errb)
	}
	return out
}

// refuses runs cosign and fails the test if it exits 0.
func (c *cosignCLI) refuses(tb testing.TB, dir string, args ...string) []byte {
	tb.Helper()
	out, errb, err := c.run(dir, args...)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		tb.Fatalf("cosign %s: want a non-zero exit, got err %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errb)
	}
	return errb
}

// args joins argument groups.
func args(groups ...[]string) []string { return slices.Concat(groups...) }

// cosignKeyPair runs "cosign generate-key-pair" in a new directory and
// returns the paths of cosign.key and cosign.pub.
func (c *cosignCLI) keyPair(tb testing.TB) (priv, pub string) {
	tb.Helper()
	dir := tb.TempDir()
	c.must(tb, dir, "generate-key-pair")
	priv, pub = filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
	for _, p := range []string{priv, pub} {
		if _, err := os.Stat(p); err != nil {
			tb.Fatalf("cosign generate-key-pair: %v", err)
		}
	}
	return priv, pub
}

// slipwayKeyFiles makes a key pair with sign.GenerateKeys, writes both PEMs
// into a new directory and returns their paths and the loaded keys.
func slipwayKeyFiles(tb testing.TB) (privPath, pubPath string, k keyPair) {
	tb.Helper()
	priv, pub, err := sign.GenerateKeys([]byte(interopPassword))
	if err != nil {
		tb.Fatal(err)
	}
	sv, err := sign.LoadSigner(priv, []byte(interopPassword))
	if err != nil {
		tb.Fatal(err)
	}
	v, err := sign.LoadVerifier(pub)
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	privPath, pubPath = filepath.Join(dir, "slipway.key"), filepath.Join(dir, "slipway.pub")
	writeFile(tb, privPath, priv)
	writeFile(tb, pubPath, pub)
	return privPath, pubPath, keyPair{priv: priv, pub: pub, sv: sv, v: v}
}

func writeFile(tb testing.TB, path string, b []byte) {
	tb.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
}

func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// pushImage pushes a small random image to host/repo:latest and returns its
// digest reference.
func pushImage(tb testing.TB, host, repo string) name.Digest {
	tb.Helper()
	img, err := random.Image(512, 1)
	if err != nil {
		tb.Fatal(err)
	}
	return registrytest.Push(tb, host+"/"+repo+":latest", img)
}

// slsaStatement returns a SLSA v1 provenance statement about ref, made with
// package attest, and its predicate alone (what "cosign attest --predicate"
// takes).
func slsaStatement(tb testing.TB, ref name.Digest) (statement, predicate []byte) {
	tb.Helper()
	st, err := attest.Provenance(attest.TemplateBuild{
		Name:       "interop",
		TemplateID: ref.DigestStr(),
		Ref:        ref.String(),
		SpecDigest: "sha256:" + strings.Repeat("5", 64),
		BaseRef:    "registry.example/base/debian:12",
		BaseDigest: "sha256:" + strings.Repeat("c", 64),
		Inputs:     []attest.Input{{Path: "setup.sh", Digest: "sha256:" + strings.Repeat("d", 64)}},
		BuilderID:  "https://slipway.dev/builders/interop@v1",
		Started:    time.Unix(1700000000, 0),
		Finished:   time.Unix(1700000060, 0),
		Epoch:      1700000000,
	})
	if err != nil {
		tb.Fatal(err)
	}
	statement, err = attest.Marshal(st)
	if err != nil {
		tb.Fatal(err)
	}
	var top struct {
		Predicate json.RawMessage `json:"predicate"`
	}
	if err := json.Unmarshal(statement, &top); err != nil || len(top.Predicate) == 0 {
		tb.Fatalf("statement has no predicate (%v): %s", err, statement)
	}
	return statement, top.Predicate
}

// simpleSigning is the part of a cosign signature payload the tests check.
type simpleSigning struct {
	Critical struct {
		Identity struct {
			DockerReference string `json:"docker-reference"`
		} `json:"identity"`
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
}

// TestInteropSlipwaySignsCosignVerifies: a signature made by the library
// with a key from sign.GenerateKeys verifies with "cosign verify --key", and
// cosign refuses it with another key.
func TestInteropSlipwaySignsCosignVerifies(t *testing.T) {
	cos := newCosign(t)
	ctx := context.Background()
	reg := registrytest.NewDistribution(t)
	ref := pushImage(t, reg.Addr(), "interop/signed")
	unsigned := pushImage(t, reg.Addr(), "interop/unsigned")
	_, pubPath, k := slipwayKeyFiles(t)
	_, otherPub, _ := slipwayKeyFiles(t)

	if _, err := sign.Sign(ctx, ref, k.sv, sign.WithOfflineNoTlog()); err != nil {
		t.Fatalf("sign.Sign: %v", err)
	}

	dir := t.TempDir()
	out := cos.must(t, dir, args([]string{"verify", "--key", pubPath, "--output", "json"}, offlineVerifyFlags, registryFlags, []string{ref.String()})...)
	var payloads []simpleSigning
	if err := json.Unmarshal(out, &payloads); err != nil {
		t.Fatalf("cosign verify output is not a JSON array of payloads: %v\n%s", err, out)
	}
	if len(payloads) != 1 {
		t.Fatalf("cosign verify: %d payloads, want 1:\n%s", len(payloads), out)
	}
	p := payloads[0].Critical
	if p.Image.DockerManifestDigest != ref.DigestStr() || p.Identity.DockerReference != ref.Context().Name() || p.Type != "cosign container image signature" {
		t.Errorf("cosign verify payload = %+v, want digest %s of %s", p, ref.DigestStr(), ref.Context().Name())
	}

	// Another key: cosign must refuse.
	stderr := cos.refuses(t, dir, args([]string{"verify", "--key", otherPub}, offlineVerifyFlags, registryFlags, []string{ref.String()})...)
	if !bytes.Contains(stderr, []byte("no matching signatures")) {
		t.Errorf("cosign verify with another key: stderr does not say no matching signatures:\n%s", stderr)
	}
	// A digest Slipway did not sign: cosign must refuse.
	cos.refuses(t, dir, args([]string{"verify", "--key", pubPath}, offlineVerifyFlags, registryFlags, []string{unsigned.String()})...)
}

// TestInteropCosignSignsSlipwayVerifies: a key pair from
// "cosign generate-key-pair" and a signature from "cosign sign --key" verify
// with sign.LoadVerifier and sign.Verify; sign.LoadSigner reads cosign's
// private key, and what the library signs with it cosign verifies.
func TestInteropCosignSignsSlipwayVerifies(t *testing.T) {
	cos := newCosign(t)
	ctx := context.Background()
	reg := registrytest.NewDistribution(t)
	ref := pushImage(t, reg.Addr(), "interop/by-cosign")
	second := pushImage(t, reg.Addr(), "interop/by-slipway")
	privPath, pubPath := cos.keyPair(t)

	dir := t.TempDir()
	cos.must(t, dir, args([]string{"sign", "--key", privPath, "--tlog-upload=false", "--yes"}, registryFlags, []string{ref.String()})...)

	v, err := sign.LoadVerifier(readFile(t, pubPath))
	if err != nil {
		t.Fatalf("sign.LoadVerifier(cosign.pub): %v", err)
	}
	ver, err := sign.Verify(ctx, ref, v, sign.WithOfflineNoTlog())
	if err != nil {
		t.Fatalf("sign.Verify of cosign's signature: %v", err)
	}
	if len(ver.Signatures) != 1 {
		t.Fatalf("sign.Verify: %d signatures, want 1", len(ver.Signatures))
	}
	var p simpleSigning
	if err := json.Unmarshal(ver.Signatures[0].Payload, &p); err != nil || p.Critical.Image.DockerManifestDigest != ref.DigestStr() {
		t.Errorf("verified payload %s (%v) does not name %s", ver.Signatures[0].Payload, err, ref.DigestStr())
	}

	// Another key: the library must refuse cosign's signature.
	other := newKeys(t, "other")
	if _, err := sign.Verify(ctx, ref, other.v, sign.WithOfflineNoTlog()); !errors.Is(err, sign.ErrVerification) {
		t.Errorf("sign.Verify with another key: err = %v, want ErrVerification", err)
	}

	// The library reads cosign's encrypted private key ...
	sv, err := sign.LoadSigner(readFile(t, privPath), []byte(interopPassword))
	if err != nil {
		t.Fatalf("sign.LoadSigner(cosign.key): %v", err)
	}
	if _, err := sign.LoadSigner(readFile(t, privPath), []byte("not-"+interopPassword)); !errors.Is(err, sign.ErrKey) {
		t.Errorf("sign.LoadSigner(cosign.key, wrong password): err = %v, want ErrKey", err)
	}
	// ... sees cosign's signature as the one it would make (same payload,
	// same key: nothing to write) ...
	res, err := sign.Sign(ctx, ref, sv, sign.WithOfflineNoTlog())
	if err != nil {
		t.Fatalf("sign.Sign with cosign's key over cosign's signature: %v", err)
	}
	if res.Status != sign.Unchanged {
		t.Errorf("sign.Sign with cosign's key over cosign's signature: status %s, want unchanged (same payload and key)", res.Status)
	}
	// ... and what it signs with that key, cosign verifies with cosign.pub.
	if _, err := sign.Sign(ctx, second, sv, sign.WithOfflineNoTlog()); err != nil {
		t.Fatalf("sign.Sign with cosign's key: %v", err)
	}
	cos.must(t, dir, args([]string{"verify", "--key", pubPath}, offlineVerifyFlags, registryFlags, []string{second.String()})...)
}

// TestInteropAttestations: a SLSA v1 provenance statement attached with
// sign.Attest passes "cosign verify-attestation --type slsaprovenance1"; one
// attached by "cosign attest --type slsaprovenance1" is returned by
// sign.VerifyAttestations.
func TestInteropAttestations(t *testing.T) {
	cos := newCosign(t)
	ctx := context.Background()
	reg := registrytest.NewDistribution(t)
	dir := t.TempDir()

	t.Run("slipway attests, cosign verifies", func(t *testing.T) {
		ref := pushImage(t, reg.Addr(), "interop/attested-by-slipway")
		_, pubPath, k := slipwayKeyFiles(t)
		_, otherPub, _ := slipwayKeyFiles(t)
		stmt, _ := slsaStatement(t, ref)
		if _, err := sign.Attest(ctx, ref, k.sv, stmt, sign.WithOfflineNoTlog()); err != nil {
			t.Fatalf("sign.Attest: %v", err)
		}

		out := cos.must(t, dir, args([]string{"verify-attestation", "--key", pubPath, "--type", "slsaprovenance1"}, offlineVerifyFlags, registryFlags, []string{ref.String()})...)
		lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
		if len(lines) != 1 {
			t.Fatalf("cosign verify-attestation printed %d envelopes, want 1:\n%s", len(lines), out)
		}
		var env struct{ PayloadType, Payload string }
		if err := json.Unmarshal(lines[0], &env); err != nil {
			t.Fatalf("cosign verify-attestation output is not a DSSE envelope: %v\n%s", err, out)
		}
		payload, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if env.PayloadType != "application/vnd.in-toto+json" || !bytes.Equal(payload, stmt) {
			t.Errorf("cosign verified envelope of type %q with payload\n%s\nwant the statement Slipway attached:\n%s", env.PayloadType, payload, stmt)
		}

		// Another key, or another predicate type: cosign must refuse.
		stderr := cos.refuses(t, dir, args([]string{"verify-attestation", "--key", otherPub, "--type", "slsaprovenance1"}, offlineVerifyFlags, registryFlags, []string{ref.String()})...)
		t.Logf("cosign verify-attestation with another key: %s", lastLine(stderr))
		stderr = cos.refuses(t, dir, args([]string{"verify-attestation", "--key", pubPath, "--type", "spdxjson"}, offlineVerifyFlags, registryFlags, []string{ref.String()})...)
		if !bytes.Contains(stderr, []byte("none of the attestations matched the predicate type")) {
			t.Errorf("cosign verify-attestation --type spdxjson: stderr does not name the predicate type mismatch:\n%s", stderr)
		}
	})

	t.Run("cosign attests, slipway verifies", func(t *testing.T) {
		ref := pushImage(t, reg.Addr(), "interop/attested-by-cosign")
		privPath, pubPath := cos.keyPair(t)
		_, pred := slsaStatement(t, ref)
		predPath := filepath.Join(t.TempDir(), "pred.json")
		writeFile(t, predPath, pred)

		cos.must(t, dir, args([]string{"attest", "--key", privPath, "--type", "slsaprovenance1", "--predicate", predPath, "--tlog-upload=false", "--yes"}, registryFlags, []string{ref.String()})...)

		v, err := sign.LoadVerifier(readFile(t, pubPath))
		if err != nil {
			t.Fatal(err)
		}
		ver, err := sign.VerifyAttestations(ctx, ref, v, sign.WithOfflineNoTlog())
		if err != nil {
			t.Fatalf("sign.VerifyAttestations of cosign's attestation: %v", err)
		}
		got := ver.Predicate(attest.PredicateSLSAProvenanceV1)
		if len(got) != 1 || len(ver.Attestations) != 1 {
			t.Fatalf("sign.VerifyAttestations = %d attestations (%d SLSA v1), rejected %q; want the one cosign attached", len(ver.Attestations), len(got), ver.Rejected)
		}
		a := got[0]
		if a.PredicateType != "https://slsa.dev/provenance/v1" {
			t.Errorf("PredicateType = %q", a.PredicateType)
		}
		hex := strings.TrimPrefix(ref.DigestStr(), "sha256:")
		if subj := a.Statement.GetSubject(); len(subj) != 1 || subj[0].GetDigest()["sha256"] != hex {
			t.Errorf("statement subject = %v, want sha256 %s", subj, hex)
		}
		if p, err := attest.ProvenanceOf(a.Statement); err != nil || p.GetRunDetails().GetBuilder().GetId() != "https://slipway.dev/builders/interop@v1" {
			t.Errorf("attest.ProvenanceOf(cosign's statement) = %v, %v; want builder https://slipway.dev/builders/interop@v1", p, err)
		}

		// Another key: the library must refuse it.
		other := newKeys(t, "other")
		if _, err := sign.VerifyAttestations(ctx, ref, other.v, sign.WithOfflineNoTlog()); !errors.Is(err, sign.ErrVerification) {
			t.Errorf("sign.VerifyAttestations with another key: err = %v, want ErrVerification", err)
		}
	})
}

// lastLine returns the last non-empty line of b, for logs.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
