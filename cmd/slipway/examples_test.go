package main

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryPackageHasDocAndExample holds the library to its docs: every
// package under pkg/, internal/ and testharness/ has a doc.go and at least
// one Example whose output go test checks (an Example without an
// "// Output:" comment is compiled, never run).
func TestEveryPackageHasDocAndExample(t *testing.T) {
	// Commands (package main, such as a benchmark's program under
	// testharness/) document themselves in their usage and doc.go.
	out, err := exec.Command("go", "list", "-f", "{{if ne .Name \"main\"}}{{.ImportPath}}\t{{.Dir}}{{end}}", "../../pkg/...", "../../internal/...", "../../testharness/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) < 40 {
		t.Fatalf("listed only %d packages: is go list reading the module?", len(lines))
	}
	for _, line := range lines {
		path, dir, _ := strings.Cut(line, "\t")
		rel := strings.TrimPrefix(path, mod)
		if _, err := os.Stat(filepath.Join(dir, "doc.go")); err != nil {
			t.Errorf("%s has no doc.go saying what it is for and what it is not", rel)
		}
		n, err := runnableExamples(dir)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if n == 0 {
			t.Errorf("%s has no Example with a checked // Output: (add one to example_test.go)", rel)
		}
	}
}

// runnableExamples counts the Examples with a checked output in the test
// files of dir (go/doc finds them as go test does).
func runnableExamples(dir string) (int, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return 0, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return 0, err
		}
		files = append(files, f)
	}
	n := 0
	for _, ex := range doc.Examples(files...) {
		if ex.Output != "" || ex.EmptyOutput {
			n++
		}
	}
	return n, nil
}

// runnableExamples tells an Example with output from one without.
func TestRunnableExamplesCounts(t *testing.T) {
	dir := t.TempDir()
	src := `package x_test

import "fmt"

func ExampleRun() {
	fmt.Println("ran")
	// Output: ran
}

func ExampleCompiled() {
	fmt.Println("never run")
}
`
	if err := os.WriteFile(filepath.Join(dir, "example_test.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := runnableExamples(dir); err != nil || n != 1 {
		t.Fatalf("runnableExamples = %d, %v; want 1 (ExampleCompiled has no output)", n, err)
	}
}
