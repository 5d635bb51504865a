package sign_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// newRegistry starts an in-process registry and returns its host.
func newRegistry(t *testing.T) string {
	t.Helper()
	return registrytest.NewInProcess(t)
}

// pushRandom pushes a random image to host/repo:tag and returns its digest
// reference.
func pushRandom(t *testing.T, host, repo string) name.Digest {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	return registrytest.Push(t, host+"/"+repo+":latest", img)
}

type keyPair struct {
	priv, pub []byte
	sv        signature.SignerVerifier
	v         signature.Verifier
}

// keyCache holds the key pairs tests made, by password: the n-th newKeys
// of a test with a password is the n-th pair made with that password, so
// a test that needs two keys gets two different ones, and tests share
// them (scrypt makes a key slow to make and to open under -race).
var keyCache struct {
	mu    sync.Mutex
	pairs map[string][]keyPair
	used  map[*testing.T]map[string]int
}

func newKeys(t *testing.T, password string) keyPair {
	t.Helper()
	keyCache.mu.Lock()
	defer keyCache.mu.Unlock()
	if keyCache.pairs == nil {
		keyCache.pairs, keyCache.used = map[string][]keyPair{}, map[*testing.T]map[string]int{}
	}
	if keyCache.used[t] == nil {
		keyCache.used[t] = map[string]int{}
		t.Cleanup(func() {
			keyCache.mu.Lock()
			defer keyCache.mu.Unlock()
			delete(keyCache.used, t)
		})
	}
	n := keyCache.used[t][password]
	keyCache.used[t][password]++
	if n < len(keyCache.pairs[password]) {
		return keyCache.pairs[password][n]
	}
	k := makeKeys(t, password)
	keyCache.pairs[password] = append(keyCache.pairs[password], k)
	return k
}

func makeKeys(t *testing.T, password string) keyPair {
	t.Helper()
	priv, pub, err := sign.GenerateKeys([]byte(password))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := sign.LoadSigner(priv, []byte(password))
	if err != nil {
		t.Fatal(err)
	}
	v, err := sign.LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{priv: priv, pub: pub, sv: sv, v: v}
}

func TestSignVerify(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	ref := pushRandom(t, host, "app")
	k := newKeys(t, "correct horse")

	if !bytes.Contains(k.priv, []byte("ENCRYPTED SIGSTORE PRIVATE KEY")) {
		t.Errorf("private key is not a cosign encrypted key:\n%s", k.priv)
	}

	res, err := sign.Sign(ctx, ref, k.sv, sign.WithOfflineNoTlog())
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	if res.Status != sign.Created || !res.Verified || res.Tlog != "offline-no-tlog" {
		t.Errorf("first Sign = %+v, want created, verified, offline-no-tlog", res)
	}
	wantTag := "sha256-" + strings.TrimPrefix(ref.DigestStr(), "sha256:") + ".sig"
	if res.SignatureTag.TagStr() != wantTag {
		t.Errorf("signature tag = %s, want %s", res.SignatureTag.TagStr(), wantTag)
	}
	if !bytes.Contains(res.Payload, []byte(ref.DigestStr())) || !bytes.Contains(res.Payload, []byte(ref.Context().Name())) {
		t.Errorf("payload does not name the image: %s", res.Payload)
	}

	ver, err := sign.Verify(ctx, ref, k.v, sign.WithOfflineNoTlog())
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if len(ver.Signatures) != 1 || !bytes.Equal(ver.Signatures[0].Payload, res.Payload) {
		t.Errorf("Verify = %+v, want the one signature just made", ver)
	}

	// Repeat-safe: the same key signing the same digest writes nothing.
	again, err := sign.Sign(ctx, ref, k.sv, sign.WithOfflineNoTlog())
	if err != nil {
		t.Fatalf("second Sign: %v", err)
	}
	if again.Status != sign.Unchanged {
		t.Errorf("second Sign status = %s, want unchanged", again.Status)
	}
	if ver, err = sign.Verify(ctx, ref, k.v, sign.WithOfflineNoTlog()); err != nil || len(ver.Signatures) != 1 {
		t.Errorf("after second Sign: %d signatures, err %v; want 1", len(ver.Signatures), err)
	}

	// A second key appends; both verify with their own key.
	k2 := newKeys(t, "another")
	if res, err := sign.Sign(ctx, ref, k2.sv, sign.WithOfflineNoTlog()); err != nil || res.Status != sign.Created {
		t.Fatalf("Sign with second key = %+v, %v", res, err)
	}
	for _, v := range []signature.Verifier{k.v, k2.v} {
		if _, err := sign.Verify(ctx, ref, v, sign.WithOfflineNoTlog()); err != nil {
			t.Errorf("Verify after second key: %v", err)
		}
	}
}

func TestVerifyRefusals(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	signed := pushRandom(t, host, "app")
	unsigned := pushRandom(t, host, "other")
	k := newKeys(t, "pw-one")
	wrong := newKeys(t, "pw-two")
	if _, err := sign.Sign(ctx, signed, k.sv, sign.WithOfflineNoTlog()); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		ref  name.Digest
		v    signature.Verifier
		opts []sign.Option
		want error
		msg  string
	}{
		{"wrong key", signed, wrong.v, []sign.Option{sign.WithOfflineNoTlog()}, sign.ErrVerification, signed.DigestStr()},
		{"unsigned digest", unsigned, k.v, []sign.Option{sign.WithOfflineNoTlog()}, sign.ErrNoSignatures, unsigned.DigestStr()},
		{"no tlog choice", signed, k.v, nil, sign.ErrTlogChoice, "WithOfflineNoTlog"},
		{"missing annotation", signed, k.v, []sign.Option{sign.WithOfflineNoTlog(), sign.WithAnnotations(map[string]string{"env": "prod"})}, sign.ErrVerification, "annotation"},
		{"zero reference", name.Digest{}, k.v, []sign.Option{sign.WithOfflineNoTlog()}, sign.ErrInput, "not a digest"},
		{"nil verifier", signed, nil, []sign.Option{sign.WithOfflineNoTlog()}, sign.ErrInput, "nil verifier"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sign.Verify(ctx, tc.ref, tc.v, tc.opts...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %q, want it to name %q", err, tc.msg)
			}
		})
	}
}

// TestCopiedSignatureRefused is the trap of issue 4 item 6: cosign's library
// does not check that the signed payload names the image unless a claim
// verifier is set. A signature made for A, copied to B's signature tag, must
// not verify B.
func TestCopiedSignatureRefused(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	a := pushRandom(t, host, "app")
	b := pushRandom(t, host, "app")
	k := newKeys(t, "pw")
	resA, err := sign.Sign(ctx, a, k.sv, sign.WithOfflineNoTlog())
	if err != nil {
		t.Fatal(err)
	}

	// Copy A's .sig image to B's .sig tag.
	sigA, err := remote.Image(resA.SignatureTag)
	if err != nil {
		t.Fatal(err)
	}
	tagB := b.Context().Tag("sha256-" + strings.TrimPrefix(b.DigestStr(), "sha256:") + ".sig")
	if err := remote.Write(tagB, sigA); err != nil {
		t.Fatal(err)
	}

	// The trap is real: without a claim verifier cosign accepts it.
	if _, _, err := cosign.VerifyImageSignatures(ctx, b, &cosign.CheckOpts{SigVerifier: k.v, IgnoreTlog: true, IgnoreSCT: true}); err != nil {
		t.Fatalf("precondition: cosign without a claim verifier refused the copy (%v); the test proves nothing", err)
	}

	_, err = sign.Verify(ctx, b, k.v, sign.WithOfflineNoTlog())
	if !errors.Is(err, sign.ErrVerification) {
		t.Fatalf("Verify(B) with A's signature: err = %v, want ErrVerification", err)
	}
	for _, s := range []string{b.DigestStr(), "claim", a.DigestStr()} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("err = %q, want it to mention %q", err, s)
		}
	}
	// A still verifies.
	if _, err := sign.Verify(ctx, a, k.v, sign.WithOfflineNoTlog()); err != nil {
		t.Errorf("Verify(A): %v", err)
	}
}

func TestSignRefusals(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	ref := pushRandom(t, host, "app")
	k := newKeys(t, "pw")

	if _, err := sign.ParseDigest(host + "/app:latest"); !errors.Is(err, sign.ErrInput) || !strings.Contains(err.Error(), "app:latest") {
		t.Errorf("ParseDigest(tag) err = %v, want ErrInput naming the reference", err)
	}
	if d, err := sign.ParseDigest(ref.String()); err != nil || d.String() != ref.String() {
		t.Errorf("ParseDigest(%s) = %s, %v", ref, d, err)
	}
	if _, err := sign.Sign(ctx, name.Digest{}, k.sv, sign.WithOfflineNoTlog()); !errors.Is(err, sign.ErrInput) {
		t.Errorf("Sign(zero) err = %v, want ErrInput", err)
	}
	if _, err := sign.Sign(ctx, ref, k.sv); !errors.Is(err, sign.ErrTlogChoice) {
		t.Errorf("Sign without a tlog choice err = %v, want ErrTlogChoice", err)
	}
	if _, err := sign.Sign(ctx, ref, nil, sign.WithOfflineNoTlog()); !errors.Is(err, sign.ErrInput) {
		t.Errorf("Sign(nil signer) err = %v, want ErrInput", err)
	}
	missing := ref.Context().Digest("sha256:" + strings.Repeat("0", 64))
	if _, err := sign.Sign(ctx, missing, k.sv, sign.WithOfflineNoTlog()); !errors.Is(err, sign.ErrRegistry) || !strings.Contains(err.Error(), missing.DigestStr()) {
		t.Errorf("Sign(absent digest) err = %v, want ErrRegistry naming the digest", err)
	}
}

func TestKeys(t *testing.T) {
	const password = "s3cret-Pa55word!"
	priv, pub, err := sign.GenerateKeys([]byte(password))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(priv, []byte(password)) {
		t.Error("private key PEM contains the password")
	}
	for _, wrong := range []string{"", "not-the-password"} {
		_, err := sign.LoadSigner(priv, []byte(wrong))
		if !errors.Is(err, sign.ErrKey) {
			t.Fatalf("LoadSigner(wrong password) err = %v, want ErrKey", err)
		}
		if strings.Contains(err.Error(), password) || (wrong != "" && strings.Contains(err.Error(), wrong)) {
			t.Errorf("error leaks a password: %q", err)
		}
		if !strings.Contains(err.Error(), "wrong password") {
			t.Errorf("err = %q, want it to say wrong password", err)
		}
	}
	if _, _, err := sign.GenerateKeys(nil); !errors.Is(err, sign.ErrKey) {
		t.Errorf("GenerateKeys(empty) err = %v, want ErrKey", err)
	}
	if _, err := sign.LoadSigner(pub, []byte(password)); !errors.Is(err, sign.ErrKey) || strings.Contains(err.Error(), password) {
		t.Errorf("LoadSigner(public key) err = %v, want ErrKey without the password", err)
	}
	if _, err := sign.LoadVerifier(priv); !errors.Is(err, sign.ErrKey) {
		t.Errorf("LoadVerifier(private key) err = %v, want ErrKey", err)
	}
	if _, err := sign.LoadVerifier([]byte("garbage")); !errors.Is(err, sign.ErrKey) {
		t.Errorf("LoadVerifier(garbage) err = %v, want ErrKey", err)
	}
}

// onlyHost fails any request that is not for host, and counts the rest.
type onlyHost struct {
	host string
	n    atomic.Int64
}

func (o *onlyHost) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != o.host {
		return nil, errors.New("unexpected request to " + r.URL.String())
	}
	o.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// TestOfflineTalksOnlyToTheRegistry checks that offline signing and
// verification make no call for a trust root or a transparency log.
func TestOfflineTalksOnlyToTheRegistry(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	ref := pushRandom(t, host, "app")
	k := newKeys(t, "pw")
	tr := &onlyHost{host: host}
	opts := []sign.Option{sign.WithOfflineNoTlog(), sign.WithTransport(tr)}
	if _, err := sign.Sign(ctx, ref, k.sv, opts...); err != nil {
		t.Fatal(err)
	}
	if _, err := sign.Verify(ctx, ref, k.v, opts...); err != nil {
		t.Fatal(err)
	}
	// Attestations too: attach, read back, verify.
	if _, err := sign.Attest(ctx, ref, k.sv, provenance(t, ref, "https://b"), opts...); err != nil {
		t.Fatal(err)
	}
	if _, err := sign.VerifyAttestations(ctx, ref, k.v, opts...); err != nil {
		t.Fatal(err)
	}
	if tr.n.Load() == 0 {
		t.Error("the transport saw no requests; WithTransport is not used")
	}
}

// TestSessionPingsOnce: verifying several repositories of one registry in a
// session pings the registry once, not once per repository.
func TestSessionPingsOnce(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	k := newKeys(t, "pw")
	var refs []name.Digest
	for _, repo := range []string{"a", "b", "c"} {
		r := pushRandom(t, host, repo)
		if _, err := sign.Sign(ctx, r, k.sv, sign.WithOfflineNoTlog()); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, r)
	}
	pings := &countPings{next: http.DefaultTransport}
	s, err := sign.NewSession(sign.WithTransport(pings))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		if _, err := sign.Verify(ctx, r, k.v, sign.WithOfflineNoTlog(), sign.WithSession(s)); err != nil {
			t.Fatal(err)
		}
	}
	// go-containerregistry tries https first on 127.0.0.1, then http: one
	// attempt of each, then the session knows.
	if n := pings.n.Load(); n != 2 {
		t.Errorf("%d pings for 3 repositories in one session, want 2 (https refused, http)", n)
	}
}

type countPings struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countPings) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/v2/" {
		c.n.Add(1)
	}
	return c.next.RoundTrip(r)
}
