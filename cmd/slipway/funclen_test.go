package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds a function of the product code: a longer one mixes
// concerns a reader has to hold at once.
const maxFuncLines = 150

// longFuncs lists the non-test functions under root over max lines, as
// "file:line name (n lines)".
func longFuncs(t *testing.T, root string, max int) []string {
	t.Helper()
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || (strings.HasPrefix(n, ".") && n != ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
			if n := end.Line - start.Line + 1; n > max {
				name := fn.Name.Name
				if fn.Recv != nil && len(fn.Recv.List) == 1 {
					name = recvName(fn.Recv.List[0].Type) + "." + name
				}
				out = append(out, fmt.Sprintf("%s %s (%d lines)", start, name, n))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.IndexListExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}

// TestFunctionsAreShort keeps every non-test function of the library and
// the programs under maxFuncLines lines.
func TestFunctionsAreShort(t *testing.T) {
	for _, root := range []string{"../../pkg", "../../internal", "../../cmd"} {
		for _, l := range longFuncs(t, root, maxFuncLines-1) {
			t.Errorf("%s: split it by what each part does (limit: under %d lines)", strings.TrimPrefix(l, "../../"), maxFuncLines)
		}
	}
}

// TestLongFuncsFinds proves the check sees a long function.
func TestLongFuncsFinds(t *testing.T) {
	dir := t.TempDir()
	body := "package x\n\nfunc long() {\n" + strings.Repeat("\t_ = 1\n", 10) + "}\n"
	if err := writeFile(dir+"/x.go", body); err != nil {
		t.Fatal(err)
	}
	if got := longFuncs(t, dir, 5); len(got) != 1 || !strings.Contains(got[0], "long (12 lines)") {
		t.Fatalf("longFuncs = %q, want the 12-line function", got)
	}
	if got := longFuncs(t, dir, 12); len(got) != 0 {
		t.Fatalf("longFuncs with max 12 = %q, want none", got)
	}
}

func writeFile(path, body string) error { return os.WriteFile(path, []byte(body), 0o644) }
