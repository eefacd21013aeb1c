package vram

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// longAllowed are the functions of the engine allowed past maxFuncLines,
// each with its reason: preset tables (a literal a line a preset). Every
// other function of the engine fits in 100 lines.
var longAllowed = map[string]string{}

// engineFiles parses the engine's own (non-test) files, by name.
func engineFiles(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset, files := token.NewFileSet(), map[string]*ast.File{}
	for _, f := range names {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[f] = file
	}
	return fset, files
}

// maxFuncLines is the most lines a function of the engine reads in.
const maxFuncLines = 100

// TestFunctionLength: every function of the engine reads top to bottom in
// one screen, but those longAllowed names; the longest are logged, and an
// allowed one that shrank under the bound must leave the list.
func TestFunctionLength(t *testing.T) {
	fset, files := engineFiles(t)
	type fn struct {
		name  string
		lines int
	}
	var all []fn
	for f, file := range files {
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				all = append(all, fn{f + ":" + fd.Name.Name, n})
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].lines > all[j].lines })
	for i := 0; i < min(8, len(all)); i++ {
		t.Logf("%4d lines  %s", all[i].lines, all[i].name)
	}
	seen := map[string]bool{}
	for _, f := range all {
		if f.lines <= maxFuncLines {
			continue
		}
		if _, ok := longAllowed[f.name]; ok {
			seen[f.name] = true
			continue
		}
		t.Errorf("%s is %d lines, over %d: split it into steps that each read in one screen", f.name, f.lines, maxFuncLines)
	}
	for name := range longAllowed {
		if !seen[name] {
			t.Errorf("%s is allowed past %d lines but is no longer: drop it from longAllowed", name, maxFuncLines)
		}
	}
}
