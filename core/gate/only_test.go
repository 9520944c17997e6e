package gate_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyTheGateReadsRunners guards "none dispatches a tool any other
// way": outside core/gate (and core/tools, which declares Tool), no
// production code reads a tool's Runner — the only way to call or preview
// a tool. Building a tool (a Runner: field, an assignment to .Runner) is
// fine; a new caller that reaches for t.Runner.Run fails here and must go
// through gate.Pass.
func TestOnlyTheGateReadsRunners(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	allowed := map[string]bool{"core/gate": true, "core/tools": true}
	inGate, files := 0, 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "vendor":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		dir := filepath.ToSlash(filepath.Dir(rel))
		files++
		for _, pos := range runnerReads(t, path) {
			if allowed[dir] {
				if dir == "core/gate" {
					inGate++
				}
				continue
			}
			t.Errorf("%s:%d reads a tool's Runner: only core/gate dispatches or previews a tool (gate.Pass)", rel, pos)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The scan sees what it guards: the gate's own calls and previews.
	if files < 100 || inGate < 3 {
		t.Fatalf("scanned %d files and found %d Runner reads in core/gate: the scan is not looking at the code", files, inGate)
	}
}

// runnerReads lists the lines of path that read a .Runner field: a
// selector whose left side is not an imported package (core.Runner,
// tools.Runner name types) and that is not assigned to.
func runnerReads(t *testing.T, path string) []int {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	pkgs := map[string]bool{}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		pkgs[name] = true
	}
	assigned := map[ast.Expr]bool{}
	var lines []int
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				assigned[l] = true
			}
		case *ast.SelectorExpr:
			if n.Sel.Name != "Runner" || assigned[n] {
				return true
			}
			if id, ok := n.X.(*ast.Ident); ok && pkgs[id.Name] {
				return true
			}
			lines = append(lines, fset.Position(n.Pos()).Line)
		}
		return true
	})
	return lines
}
