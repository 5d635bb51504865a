package scan

import (
	"context"
	"encoding/json"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The secrets the tests plant are built at run time from a fixed seed, so
// this file holds no string another secret scanner would take for a leak.

const (
	upperDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	alnum       = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	base64Chars = alnum + "+/"
	digits      = "0123456789"
)

// fake returns n characters of alphabet, deterministic for a seed. While n
// is at most the alphabet's size no character repeats, which keeps the
// entropy of test values well defined.
func fake(seed uint64, alphabet string, n int) string {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	a := []byte(alphabet)
	out := make([]byte, 0, n)
	for len(out) < n {
		rng.Shuffle(len(a), func(i, j int) { a[i], a[j] = a[j], a[i] })
		out = append(out, a[:min(len(a), n-len(out))]...)
	}
	return string(out)
}

// join concatenates parts: prefixes are split so no literal looks like a
// token prefix followed by a value.
func join(parts ...string) string { return strings.Join(parts, "") }

// pemBlock builds an armored block of kind ("RSA PRIVATE KEY", "PGP PRIVATE
// KEY BLOCK", "PUBLIC KEY"…) around body lines.
func pemBlock(kind string, body ...string) string {
	return "-----BEGIN " + kind + "-----\n" + strings.Join(body, "\n") + "\n-----END " + kind + "-----\n"
}

// file is one entry to plant in a test rootfs.
type file struct {
	content string
	mode    fs.FileMode // default 0o644; fs.ModeDir for a directory
	link    string      // a symlink to this target instead
}

// plant creates a rootfs holding files (keyed by absolute in-rootfs paths).
func plant(t testing.TB, files map[string]file) string {
	t.Helper()
	root := t.TempDir()
	for p, f := range files {
		host := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := f.mode
		if mode == 0 {
			mode = 0o644
		}
		var err error
		switch {
		case f.link != "":
			err = os.Symlink(f.link, host)
		case mode.IsDir():
			if err = os.MkdirAll(host, 0o755); err == nil {
				err = os.Chmod(host, mode)
			}
		default:
			if err = os.WriteFile(host, []byte(f.content), 0o644); err == nil {
				err = os.Chmod(host, mode)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// scanRoot scans root, failing the test on error, and returns the report
// with the matched values the content rules saw.
func scanRoot(t testing.TB, root string, opts ...Option) (*Report, [][]byte) {
	t.Helper()
	var values [][]byte
	rep, err := Scan(context.Background(), root, append(opts, withValues(&values))...)
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return rep, values
}

// assertNoLeak checks that no secret (nor its last 12 characters) is in any
// finding, the report's JSON or its error.
func assertNoLeak(t testing.TB, rep *Report, secrets ...string) {
	t.Helper()
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{"report JSON": string(js)}
	if err := rep.Err(); err != nil {
		texts["Err()"] = err.Error()
	}
	for _, f := range append(rep.Findings, rep.Allowed...) {
		texts["finding "+f.String()] = f.Detail + " " + f.String()
	}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		probes := []string{s}
		if len(s) > 12 {
			probes = append(probes, s[len(s)-12:])
		}
		for where, text := range texts {
			for _, p := range probes {
				if strings.Contains(text, p) {
					// Name the place, not the text: it holds the secret.
					t.Errorf("secret %.4s… (%d chars) leaked into %s", s, len(s), where)
				}
			}
		}
	}
}

// brief strips Detail and AllowedBy, for comparing findings.
func brief(list []Finding) []Finding {
	out := make([]Finding, len(list))
	for i, f := range list {
		out[i] = Finding{Rule: f.Rule, Path: f.Path, Line: f.Line}
	}
	return out
}
