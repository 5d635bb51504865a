package sign_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/sigstore/pkg/signature"
	"golang.org/x/sync/errgroup"

	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/benchtable"
	"github.com/slipway-dev/slipway/testharness/registrytest"

	"github.com/slipway-dev/slipway/testharness/need"
)

// BenchmarkB3SignAttestVerify is benchmark B3, against Debian's
// docker-registry behind a proxy adding 20 ms per request:
//
//	(a) sign one digest and attach a SLSA v1 provenance attestation, with
//	    Slipway (in-process library, and its CLI) and with the cosign CLI
//	    (sign, then attest); target: Slipway at most half of cosign's time;
//	(b) verify 100 signed digests: the library, 16 at a time, against 100
//	    sequential "cosign verify" calls and against the ideal
//	    ceil(100/16) x requests-per-verification x 20 ms; target: within 2x
//	    of the ideal.
//
// It prints every figure, ratio and request count on lines starting "B3".
// It runs the built binaries $SLIPWAY_BIN and $COSIGN (make bench sets both).
// BENCH_SMOKE=1 shrinks it to seconds (5 digests, 2 cosign verify calls).
func BenchmarkB3SignAttestVerify(b *testing.B) {
	sampler := benchtable.Start()
	slipwayBin := need.Env(b, "SLIPWAY_BIN", "make bench sets it")
	need.Env(b, "COSIGN", "make bench sets it")
	cos := newCosign(b)
	nVerify, nCosignVerify := 100, 100
	if os.Getenv("BENCH_SMOKE") != "" {
		nVerify, nCosignVerify = 5, 2
	}
	const latency = 20 * time.Millisecond
	const concurrency = 16
	ctx := context.Background()
	opts := []sign.Option{sign.WithOfflineNoTlog()}

	reg := registrytest.NewDistribution(b)
	proxy := registrytest.StartFaultProxy(b, reg.URL())
	direct, via := reg.Addr(), proxy.Addr()
	keyPath, pubPath, k := slipwayKeyFiles(b)
	// What each CLI invocation pays to decrypt the key (scrypt), for scale.
	keyStart := time.Now()
	if _, err := sign.LoadSigner(k.priv, []byte(interopPassword)); err != nil {
		b.Fatal(err)
	}
	keyLoad := time.Since(keyStart)
	viaProxy := func(d name.Digest) name.Digest {
		r, err := name.NewDigest(via + "/" + d.Context().RepositoryStr() + "@" + d.DigestStr())
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	// newTarget pushes a fresh image straight to the registry and writes its
	// statement and predicate files; the reference returned goes through
	// the proxy.
	newTarget := func(repo string) (ref name.Digest, stmt []byte, predPath string) {
		d := pushImage(b, direct, repo)
		ref = viaProxy(d)
		stmt, pred := slsaStatement(b, ref)
		predPath = filepath.Join(b.TempDir(), "predicate.json")
		writeFile(b, predPath, pred)
		return ref, stmt, predPath
	}

	// Setup for (b): nVerify digests signed directly against the registry.
	verifyRefs := make([]name.Digest, nVerify)
	{
		g := new(errgroup.Group)
		g.SetLimit(concurrency)
		for i := range verifyRefs {
			d := pushImage(b, direct, fmt.Sprintf("bench/verify-%03d", i))
			verifyRefs[i] = viaProxy(d)
			g.Go(func() error {
				_, err := sign.Sign(ctx, d, k.sv, opts...)
				return err
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatalf("setup: sign %d digests: %v", nVerify, err)
		}
	}
	// The (a) targets of the CLIs, pushed before the latency is on.
	cliRef, _, cliPred := newTarget("bench/sign-slipway-cli")
	cosRef, _, cosPred := newTarget("bench/sign-cosign")
	proxy.SetLatency(latency)

	// (a) Slipway, in process: SignAndAttest (what a release step calls:
	// signature and attestation written concurrently over one session).
	var libTime time.Duration
	var libReqs int
	var libKinds map[string]int
	for b.Loop() {
		b.StopTimer()
		ref, stmt, _ := newTarget("bench/sign-slipway-lib")
		proxy.ResetStats()
		b.StartTimer()
		start := time.Now()
		if _, _, err := sign.SignAndAttest(ctx, ref, k.sv, [][]byte{stmt}, opts...); err != nil {
			b.Fatalf("sign.SignAndAttest: %v", err)
		}
		libTime = time.Since(start)
		b.StopTimer()
		libReqs, libKinds = proxy.Requests(), requestKinds(proxy.Log())
		checkSignedAndAttested(b, ctx, ref, k.v)
		b.StartTimer()
	}
	// For comparison: Sign, then Attest, one after the other.
	seqRef, seqStmt, _ := newTarget("bench/sign-slipway-seq")
	proxy.ResetStats()
	start := time.Now()
	if _, err := sign.Sign(ctx, seqRef, k.sv, opts...); err != nil {
		b.Fatalf("sign.Sign: %v", err)
	}
	if _, err := sign.Attest(ctx, seqRef, k.sv, seqStmt, opts...); err != nil {
		b.Fatalf("sign.Attest: %v", err)
	}
	seqTime, seqReqs := time.Since(start), proxy.Requests()

	// (a) Slipway CLI: one "slipway sign --attest" run; and, for
	// comparison, "slipway sign" then "slipway attest".
	cliTime, cliReqs, cliKinds, cliErr := time.Duration(0), 0, map[string]int(nil), slipwayHasSignVerbs(slipwayBin, cos.env)
	var cli2Time time.Duration
	if cliErr == nil {
		proxy.ResetStats()
		start := time.Now()
		runTool(b, slipwayBin, cos.env, "sign", cliRef.String(), "--key", keyPath, "--offline-no-tlog", "--attest", "slsaprovenance="+cliPred)
		cliTime = time.Since(start)
		cliReqs, cliKinds = proxy.Requests(), requestKinds(proxy.Log())
		checkSignedAndAttested(b, ctx, cliRef, k.v)

		cli2Ref, _, cli2Pred := newTarget("bench/sign-slipway-cli2")
		start = time.Now()
		runTool(b, slipwayBin, cos.env, "sign", cli2Ref.String(), "--key", keyPath, "--offline-no-tlog")
		runTool(b, slipwayBin, cos.env, "attest", cli2Ref.String(), "--key", keyPath, "--type", "slsaprovenance", "--predicate", cli2Pred, "--offline-no-tlog")
		cli2Time = time.Since(start)
	}

	// (a) cosign CLI: "cosign sign", then "cosign attest", same key.
	proxy.ResetStats()
	start = time.Now()
	runTool(b, cos.bin, cos.env, args([]string{"sign", "--key", keyPath, "--tlog-upload=false", "--yes"}, registryFlags, []string{cosRef.String()})...)
	runTool(b, cos.bin, cos.env, args([]string{"attest", "--key", keyPath, "--type", "slsaprovenance1", "--predicate", cosPred, "--tlog-upload=false", "--yes"}, registryFlags, []string{cosRef.String()})...)
	cosTime := time.Since(start)
	cosReqs, cosKinds := proxy.Requests(), requestKinds(proxy.Log())
	if _, err := sign.Verify(ctx, cosRef, k.v, opts...); err != nil {
		b.Fatalf("cosign's signature does not verify: %v", err)
	}
	cos.must(b, b.TempDir(), args([]string{"verify-attestation", "--key", pubPath, "--type", "slsaprovenance1"}, offlineVerifyFlags, registryFlags, []string{cosRef.String()})...)

	// (b) Slipway library: verify nVerify digests, 16 at a time, in one
	// session (one ping for the registry).
	proxy.ResetStats()
	start = time.Now()
	session, err := sign.NewSession()
	if err != nil {
		b.Fatal(err)
	}
	vopts := append(append([]sign.Option(nil), opts...), sign.WithSession(session))
	g := new(errgroup.Group)
	g.SetLimit(concurrency)
	for _, r := range verifyRefs {
		g.Go(func() error {
			v, err := sign.Verify(ctx, r, k.v, vopts...)
			if err == nil && len(v.Signatures) != 1 {
				err = fmt.Errorf("%s: %d signatures, want 1", r, len(v.Signatures))
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("sign.Verify: %v", err)
	}
	verTime := time.Since(start)
	verReqs, verKinds, verPeak := proxy.Requests(), requestKinds(proxy.Log()), proxy.PeakInFlight()
	perVerify := float64(verReqs) / float64(nVerify)
	ideal := time.Duration(math.Ceil(float64(nVerify)/concurrency) * perVerify * float64(latency))

	// (b) The floor of this machine: the same two GETs per digest (the .sig
	// manifest, then its layer), plain net/http, no verification, through
	// the same proxy at the same concurrency. What the registry and the
	// proxy cost per request on two shared cores shows here.
	floorTime := rawSigFloor(b, ctx, verifyRefs, concurrency)

	// (b) cosign: sequential "cosign verify" calls.
	proxy.ResetStats()
	start = time.Now()
	for _, r := range verifyRefs[:min(nCosignVerify, len(verifyRefs))] {
		runTool(b, cos.bin, cos.env, args([]string{"verify", "--key", pubPath, "--output", "json"}, offlineVerifyFlags, registryFlags, []string{r.String()})...)
	}
	cosVerTime := time.Since(start)
	cosVerCalls := min(nCosignVerify, len(verifyRefs))
	cosVerReqs, cosVerKinds := proxy.Requests(), requestKinds(proxy.Log())
	cosPerCall := cosVerTime / time.Duration(cosVerCalls)
	cosVerProjected := cosPerCall * time.Duration(nVerify)

	b.ReportMetric(libTime.Seconds(), "a-slipway-lib-s")
	b.ReportMetric(cosTime.Seconds(), "a-cosign-s")
	b.ReportMetric(libTime.Seconds()/cosTime.Seconds(), "a-lib/cosign")
	b.ReportMetric(verTime.Seconds(), "b-slipway-s")
	b.ReportMetric(ideal.Seconds(), "b-ideal-s")
	b.ReportMetric(verTime.Seconds()/ideal.Seconds(), "b-x-ideal")

	fmt.Printf("B3a: sign + attest one digest (SLSA v1 provenance), %v per request\n", latency)
	fmt.Printf("B3a: slipway library   %8.3fs  %3d requests  (%.2fx cosign; target <= 0.5x) %s  [sign.SignAndAttest]\n", libTime.Seconds(), libReqs, libTime.Seconds()/cosTime.Seconds(), verdict(libTime.Seconds()/cosTime.Seconds() <= 0.5))
	fmt.Printf("B3a: slipway lib, seq  %8.3fs  %3d requests  (%.2fx cosign)  [sign.Sign, then sign.Attest]\n", seqTime.Seconds(), seqReqs, seqTime.Seconds()/cosTime.Seconds())
	if cliErr == nil {
		fmt.Printf("B3a: slipway CLI       %8.3fs  %3d requests  (%.2fx cosign; target <= 0.5x) %s  [slipway sign --attest]\n", cliTime.Seconds(), cliReqs, cliTime.Seconds()/cosTime.Seconds(), verdict(cliTime.Seconds()/cosTime.Seconds() <= 0.5))
		fmt.Printf("B3a: slipway CLI x2    %8.3fs                (%.2fx cosign)  [slipway sign, then slipway attest]\n", cli2Time.Seconds(), cli2Time.Seconds()/cosTime.Seconds())
	} else {
		fmt.Printf("B3a: slipway CLI       CLI verbs missing (%v)\n", cliErr)
	}
	fmt.Printf("B3a: cosign CLI        %8.3fs  %3d requests\n", cosTime.Seconds(), cosReqs)
	fmt.Printf("B3a: latency floor of the requests: library %.3fs, cosign %.3fs; one key decryption (each CLI call pays it) %.3fs\n",
		(time.Duration(libReqs) * latency).Seconds(), (time.Duration(cosReqs) * latency).Seconds(), keyLoad.Seconds())
	fmt.Printf("B3a: requests, slipway library: %s\n", formatKinds(libKinds))
	if cliErr == nil {
		fmt.Printf("B3a: requests, slipway CLI:     %s\n", formatKinds(cliKinds))
	}
	fmt.Printf("B3a: requests, cosign CLI:      %s\n", formatKinds(cosKinds))

	fmt.Printf("B3b: verify %d signed digests, %v per request, concurrency %d (peak in flight %d)\n", nVerify, latency, concurrency, verPeak)
	fmt.Printf("B3b: slipway library   %8.3fs  %4d requests (%.1f per verification)\n", verTime.Seconds(), verReqs, perVerify)
	fmt.Printf("B3b: ideal             %8.3fs  = ceil(%d/%d) x %.1f requests x %v  (slipway at %.2fx ideal; target <= 2x) %s\n",
		ideal.Seconds(), nVerify, concurrency, perVerify, latency, verTime.Seconds()/ideal.Seconds(), verdict(verTime.Seconds()/ideal.Seconds() <= 2))
	fmt.Printf("B3b: raw HTTP floor    %8.3fs  (2 GETs per digest, no verification, same proxy and concurrency; slipway at %.2fx of it)\n", floorTime.Seconds(), verTime.Seconds()/floorTime.Seconds())
	fmt.Printf("B3b: cosign verify x%-3d %7.3fs  %4d requests (%.1f per call), %.3fs per call\n", cosVerCalls, cosVerTime.Seconds(), cosVerReqs, float64(cosVerReqs)/float64(cosVerCalls), cosPerCall.Seconds())
	if cosVerCalls < nVerify {
		fmt.Printf("B3b: cosign verify x%-3d %7.3fs  projected from %d calls (%.1fx slipway)\n", nVerify, cosVerProjected.Seconds(), cosVerCalls, cosVerProjected.Seconds()/verTime.Seconds())
	} else {
		fmt.Printf("B3b: cosign loop / slipway: %.1fx\n", cosVerTime.Seconds()/verTime.Seconds())
	}
	fmt.Printf("B3b: requests, slipway library: %s\n", formatKinds(verKinds))
	fmt.Printf("B3b: requests, cosign CLI:      %s\n", formatKinds(cosVerKinds))
	smoke := ""
	if os.Getenv("BENCH_SMOKE") != "" {
		smoke = "smoke: "
	}
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B3a", What: smoke + "sign a digest and attach SLSA provenance, +20 ms/request",
		Slipway: fmt.Sprintf("library SignAndAttest %.2f s", libTime.Seconds()), Peer: fmt.Sprintf("cosign sign + cosign attest %.2f s", cosTime.Seconds()),
		Ratio: libTime.Seconds() / cosTime.Seconds(), Target: "<= 0.5x", Met: libTime.Seconds()/cosTime.Seconds() <= 0.5}))
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B3b", What: fmt.Sprintf("%sverify %d signed digests, concurrency %d, +20 ms/request", smoke, nVerify, concurrency),
		Slipway: fmt.Sprintf("%.2f s", verTime.Seconds()), Peer: fmt.Sprintf("ideal %.2f s; cosign verify x%d %.2f s", ideal.Seconds(), cosVerCalls, cosVerTime.Seconds()),
		Ratio: verTime.Seconds() / ideal.Seconds(), Target: "<= 2x ideal", Met: verTime.Seconds()/ideal.Seconds() <= 2}))
}

// verdict says whether a target was met.
func verdict(ok bool) string {
	if ok {
		return "MET"
	}
	return "MISSED"
}

// runTool runs a CLI with env and fails the benchmark unless it exits 0.
func runTool(b *testing.B, bin string, env []string, args ...string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cosignTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Dir = b.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
}

// slipwayHasSignVerbs reports, as an error, why the slipway binary cannot
// run the sign and attest verbs with the flags B3 uses (nil when it can).
func slipwayHasSignVerbs(bin string, env []string) error {
	need := map[string][]string{
		"sign":   {"--key", "--offline-no-tlog"},
		"attest": {"--key", "--type", "--predicate", "--offline-no-tlog"},
	}
	for _, verb := range []string{"sign", "attest"} {
		cmd := exec.Command(bin, verb, "--help")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil || bytes.Contains(out, []byte("unknown command")) {
			return fmt.Errorf("%s has no %q verb (%s %s --help: %v)", filepath.Base(bin), verb, filepath.Base(bin), verb, err)
		}
		for _, f := range need[verb] {
			if !bytes.Contains(out, []byte(f)) {
				return fmt.Errorf("%s %s has no %s flag", filepath.Base(bin), verb, f)
			}
		}
	}
	return nil
}

// checkSignedAndAttested verifies, untimed, that ref now carries a
// signature and a SLSA v1 attestation by v's key.
func checkSignedAndAttested(b *testing.B, ctx context.Context, ref name.Digest, v signature.Verifier) {
	b.Helper()
	if _, err := sign.Verify(ctx, ref, v, sign.WithOfflineNoTlog()); err != nil {
		b.Fatalf("signature of %s: %v", ref, err)
	}
	ver, err := sign.VerifyAttestations(ctx, ref, v, sign.WithOfflineNoTlog())
	if err != nil {
		b.Fatalf("attestation of %s: %v", ref, err)
	}
	if len(ver.Predicate("https://slsa.dev/provenance/v1")) != 1 {
		b.Fatalf("attestation of %s: %d SLSA v1 provenance statements, want 1", ref, len(ver.Predicate("https://slsa.dev/provenance/v1")))
	}
}

// requestKinds counts a proxy log by method, kind of path and status:
// "GET manifest .sig 200", "HEAD blob 404", "PUT upload 201", "GET ping 401".
func requestKinds(log []registrytest.Request) map[string]int {
	kinds := map[string]int{}
	for _, r := range log {
		var kind string
		switch p := r.Path; {
		case p == "/v2/" || p == "/v2":
			kind = "ping"
		case strings.Contains(p, "/manifests/"):
			ref := p[strings.LastIndex(p, "/manifests/")+len("/manifests/"):]
			switch {
			case strings.HasSuffix(ref, ".sig"):
				kind = "manifest .sig"
			case strings.HasSuffix(ref, ".att"):
				kind = "manifest .att"
			case strings.HasPrefix(ref, "sha256:"):
				kind = "manifest by digest"
			default:
				kind = "manifest by tag"
			}
		case strings.Contains(p, "/blobs/uploads/"):
			kind = "upload"
		case strings.Contains(p, "/blobs/"):
			kind = "blob"
		case strings.Contains(p, "/referrers/"):
			kind = "referrers"
		default:
			kind = p
		}
		kinds[fmt.Sprintf("%s %s %d", r.Method, kind, r.Status)]++
	}
	return kinds
}

// formatKinds prints request kinds sorted, "GET blob 200 x3, ...".
func formatKinds(kinds map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		parts = append(parts, fmt.Sprintf("%s x%d", k, kinds[k]))
	}
	return strings.Join(parts, ", ")
}

// rawSigFloor GETs each digest's .sig manifest and then its first layer
// with plain net/http, concurrency at a time, and returns the wall time.
func rawSigFloor(b *testing.B, ctx context.Context, refs []name.Digest, concurrency int) time.Duration {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	get := func(url, accept string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return body, err
	}
	start := time.Now()
	g := new(errgroup.Group)
	g.SetLimit(concurrency)
	for _, r := range refs {
		g.Go(func() error {
			base := "http://" + r.RegistryStr() + "/v2/" + r.Context().RepositoryStr()
			m, err := get(base+"/manifests/sha256-"+strings.TrimPrefix(r.DigestStr(), "sha256:")+".sig", "application/vnd.oci.image.manifest.v1+json")
			if err != nil {
				return err
			}
			var mf struct{ Layers []struct{ Digest string } }
			if err := json.Unmarshal(m, &mf); err != nil || len(mf.Layers) == 0 {
				return fmt.Errorf("%s: no layers in the .sig manifest: %v", r, err)
			}
			_, err = get(base+"/blobs/"+mf.Layers[0].Digest, "")
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("raw floor: %v", err)
	}
	return time.Since(start)
}
