package scan

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestAllow exempts findings by rule and path glob; the exempted ones are
// reported in Allowed with the Allow that matched, and no longer refuse.
func TestAllow(t *testing.T) {
	key := pemBlock("EC PRIVATE KEY", fake(70, base64Chars, 64))
	id := join("AK", "IA", fake(71, upperDigits, 16))
	root := plant(t, map[string]file{
		"/usr/local/go/src/crypto/tls/testdata/example-key.pem": {content: key},
		"/usr/local/go/src/net/url/url_test.go":                 {content: "// " + id + "\n"},
		"/opt/app/key.pem":                                      {content: key},
		"/usr/lib/x/helper":                                     {content: "x", mode: 0o755 | fs.ModeSetuid},
	})
	allows := []Allow{
		{Rule: RulePrivateKey, Path: "/usr/local/go/**"},
		{Rule: AnyRule, Path: "/usr/local/go/src/net/*/url_test.go"},
	}
	rep, _ := scanRoot(t, root, WithAllow(allows...), WithExtraSetuidAllowed("/usr/lib/x/*"))
	if want := []Finding{f(RulePrivateKey, "/opt/app/key.pem", 1)}; !reflect.DeepEqual(brief(rep.Findings), want) {
		t.Fatalf("findings %v, want %v", rep.Findings, want)
	}
	want := []Finding{
		{Rule: RulePrivateKey, Path: "/usr/local/go/src/crypto/tls/testdata/example-key.pem", Line: 1, AllowedBy: "private-key:/usr/local/go/**"},
		{Rule: RuleAWSAccessKeyID, Path: "/usr/local/go/src/net/url/url_test.go", Line: 1, AllowedBy: "*:/usr/local/go/src/net/*/url_test.go"},
	}
	for i := range rep.Allowed {
		rep.Allowed[i].Detail = ""
	}
	if !reflect.DeepEqual(rep.Allowed, want) {
		t.Fatalf("allowed %v, want %v", rep.Allowed, want)
	}
	js, _ := json.Marshal(rep)
	if !strings.Contains(string(js), `"allowedBy":"private-key:/usr/local/go/**"`) {
		t.Errorf("allowed findings not in the JSON: %s", js)
	}
	assertNoLeak(t, rep, key[len("-----BEGIN EC PRIVATE KEY-----\n"):][:40], id)

	// Replacing the setuid allow-list drops the defaults.
	root = plant(t, map[string]file{"/usr/bin/passwd": {content: "x", mode: 0o755 | fs.ModeSetuid}})
	if rep, _ := scanRoot(t, root); len(rep.Findings) != 0 {
		t.Errorf("default allow-list: %v", rep.Findings)
	}
	if rep, _ := scanRoot(t, root, WithSetuidAllowList()); len(rep.Findings) != 1 {
		t.Errorf("empty allow-list: %v", rep.Findings)
	}
}

func TestOptionsRefused(t *testing.T) {
	root := t.TempDir()
	for name, opt := range map[string]Option{
		"unknown rule":   WithAllow(Allow{Rule: "no-such-rule", Path: "/x"}),
		"relative glob":  WithAllow(Allow{Rule: RulePrivateKey, Path: "x/*"}),
		"unclean glob":   WithAllow(Allow{Rule: RulePrivateKey, Path: "/x/../y"}),
		"bad pattern":    WithAllow(Allow{Rule: RulePrivateKey, Path: "/x/[a"}),
		"zero size":      WithMaxFileSize(0),
		"zero workers":   WithConcurrency(0),
		"relative setid": WithExtraSetuidAllowed("usr/bin/x"),
	} {
		if _, err := Scan(context.Background(), root, opt); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
	for _, s := range []string{"private-key", "nope:/x", "private-key:rel"} {
		if _, err := ParseAllow(s); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseAllow(%q) = %v, want ErrConfig", s, err)
		}
	}
	a, err := ParseAllow("setuid-setgid:/usr/lib/*/helper")
	if err != nil || a != (Allow{Rule: RuleSetuid, Path: "/usr/lib/*/helper"}) || a.String() != "setuid-setgid:/usr/lib/*/helper" {
		t.Errorf("ParseAllow = %+v, %v", a, err)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		pat, name string
		want      bool
	}{
		{"/usr/local/go/**", "/usr/local/go/src/a.go", true},
		{"/usr/local/go/**", "/usr/local/go", true},
		{"/usr/local/go/**", "/usr/local/gopher/x", false},
		{"/**/testdata/*.pem", "/a/b/testdata/k.pem", true},
		{"/**/testdata/*.pem", "/testdata/k.pem", true},
		{"/**/testdata/*.pem", "/a/testdata/x/k.pem", false},
		{"/etc/*", "/etc/a/b", false},
		{"/**", "/anything/at/all", true},
	} {
		if got := globMatch(c.pat, c.name); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.pat, c.name, got)
		}
	}
}

func TestScanRootErrors(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "f")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{filepath.Join(dir, "missing"), plain} {
		if _, err := Scan(context.Background(), root); !errors.Is(err, ErrRootfs) {
			t.Errorf("Scan(%s) = %v, want ErrRootfs", root, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	root := plant(t, map[string]file{"/a/b": {content: "x"}})
	if _, err := Scan(ctx, root); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled scan: %v", err)
	}
}

// TestConcurrencyAgrees: one worker and many find the same.
func TestConcurrencyAgrees(t *testing.T) {
	files := map[string]file{}
	for _, tc := range ruleCases() {
		for p, f := range tc.files {
			files["/"+strings.ReplaceAll(tc.name, " ", "-")+p] = f
		}
	}
	root := plant(t, files)
	one, _ := scanRoot(t, root, WithConcurrency(1))
	many, _ := scanRoot(t, root, WithConcurrency(8))
	if !reflect.DeepEqual(one, many) {
		t.Errorf("concurrency changes the report:\n%+v\n%+v", one, many)
	}
	if len(one.Findings) < len(Rules()) {
		t.Errorf("only %d findings", len(one.Findings))
	}
}

func TestErrNil(t *testing.T) {
	rep, _ := scanRoot(t, plant(t, map[string]file{"/etc/hostname": {content: "box\n"}}))
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(rep)
	if !strings.Contains(string(js), `"findings":[]`) {
		t.Errorf("clean report JSON: %s", js)
	}
}

func TestSlots(t *testing.T) {
	if len(lineRules) > slotKey {
		t.Fatalf("%d line rules, prefilter slots for %d", len(lineRules), slotKey)
	}
}
