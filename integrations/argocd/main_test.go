package argocd_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

// slipwayBin is the slipway binary, built from the root module (or
// $SLIPWAY_BIN, which make sets after building it), as "slipway" in a
// folder first on PATH, beside slipway-cmp ($SLIPWAY_CMP_BIN), which
// plugin.yaml's commands name.
var slipwayBin string

// cmpBin is slipway-cmp, beside slipwayBin.
var cmpBin string

func TestMain(m *testing.M) {
	// Argo CD's servers log every call at info.
	logrus.SetLevel(logrus.WarnLevel)
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "slipway-argocd-bin-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	slipwayBin = filepath.Join(dir, "slipway")
	if src := os.Getenv("SLIPWAY_BIN"); src != "" {
		if err := os.Symlink(src, slipwayBin); err != nil {
			return 0, err
		}
	} else {
		// The root module, with its own go.mod: nothing of Argo CD in it.
		cmd := exec.Command("go", "build", "-o", slipwayBin, "./cmd/slipway")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("build slipway: %v\n%s", err, out)
		}
	}
	// plugin.yaml runs slipway-cmp: slipway argocd's two commands alone
	cmp := filepath.Join(dir, "slipway-cmp")
	cmpBin = cmp
	if src := os.Getenv("SLIPWAY_CMP_BIN"); src != "" {
		if err := os.Symlink(src, cmp); err != nil {
			return 0, err
		}
	} else {
		cmd := exec.Command("go", "build", "-o", cmp, "./cmd/slipway-cmp")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("build slipway-cmp: %v\n%s", err, out)
		}
	}
	os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return m.Run(), nil
}

// result is what a slipway command did.
type result struct {
	code           int
	stdout, stderr string
}

// slipway runs the slipway binary in dir with env added.
func slipway(t testing.TB, dir string, env []string, args ...string) result {
	t.Helper()
	return runBin(t, slipwayBin, dir, env, args...)
}

// runBin runs bin in dir with env added.
func runBin(t testing.TB, bin, dir string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %s: %v", filepath.Base(bin), strings.Join(args, " "), err)
	}
	return r
}

// must runs slipway and fails the test unless it exits 0.
func must(t testing.TB, dir string, env []string, args ...string) string {
	t.Helper()
	r := slipway(t, dir, env, args...)
	if r.code != 0 {
		t.Fatalf("slipway %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}
