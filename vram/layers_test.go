package vram

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigFormatsImportNothingOfOurs: the config formats (internal/…)
// know nothing of memory: no file of theirs imports a package of the
// project.
func TestConfigFormatsImportNothingOfOurs(t *testing.T) {
	dirs, err := filepath.Glob("internal/*")
	if err != nil || len(dirs) < 4 {
		t.Fatalf("config-format packages: %v %v", dirs, err)
	}
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				if p := strings.Trim(imp.Path.Value, `"`); strings.HasPrefix(p, "github.com/vramlab/vramlab/") && !strings.HasSuffix(f, "_test.go") {
					t.Errorf("%s imports %s", f, p)
				}
			}
		}
	}
}
