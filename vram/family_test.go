package vram

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// TestFamilyNamesStayHome: what is particular to a family lives in its own
// file. No string literal naming a family (its model_type, or a name
// starting with it and a dot) appears in any other file of the engine.
func TestFamilyNamesStayHome(t *testing.T) {
	oneGoroutineTable(t)
	fset, files := engineFiles(t)
	checked := 0
	for f, file := range files {
		checked++
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for name := range families {
				if composes(f, name) {
					continue
				}
				if strings.HasPrefix(s, "llama.cpp") {
					continue // the program, not the family
				}
				if (s == name || strings.HasPrefix(s, name+".")) && f != "family_"+name+".go" {
					t.Errorf("%s: family name %q outside family_%s.go", fset.Position(lit.Pos()), s, name)
				}
			}
			return true
		})
	}
	if checked < 20 || len(families) < 15 {
		t.Fatalf("checked %d files for %d families", checked, len(families))
	}
}

// TestFamilyFilesKnowNoServingEngine: a family file describes its model;
// how vLLM, SGLang, TGI, Ollama or llama.cpp run it lives with the engine
// (vision_tp.go keys vLLM's towers by the model_type a family declares).
// No identifier in a family file names an engine.
func TestFamilyFilesKnowNoServingEngine(t *testing.T) {
	fset, files := engineFiles(t)
	engines := []string{"vllm", "sglang", "tgi", "ollama", "llamacpp"}
	checked := 0
	for f, file := range files {
		if !strings.HasPrefix(f, "family_") {
			continue
		}
		checked++
		ast.Inspect(file, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			for _, e := range engines {
				if strings.Contains(strings.ToLower(id.Name), e) {
					t.Errorf("%s: %s names a serving engine in a family file", fset.Position(id.Pos()), id.Name)
				}
			}
			return true
		})
	}
	if checked < 40 {
		t.Fatalf("checked %d family files", checked)
	}
}

// composes reports whether file is a vision-language wrapper's, which names
// the families it is made of (its presets' language model and tower, its
// config's default model_types) as data.
func composes(file, name string) bool {
	for _, f := range families {
		if f.vision != nil && file == "family_"+f.name+".go" {
			fam := families[name]
			return fam != nil && fam.vision == nil
		}
	}
	return false
}

// TestFamiliesDeclareTheirParts: every registered family reads and writes
// its config, lists tensors, and has at least one preset whose config round
// trip gives the same model, its own or a vision-language preset's language
// model (Qwen3.5's, which transformers also builds alone).
func TestFamiliesDeclareTheirParts(t *testing.T) {
	language := map[string]bool{}
	for _, n := range Presets() {
		language[MustPreset(n).Family] = true
	}
	for _, name := range Families() {
		f := families[name]
		if f.fromConfig == nil || f.toConfig == nil || f.tensors == nil || f.source == "" {
			t.Errorf("%s: a family declares fromConfig, toConfig, tensors and its source", name)
		}
		if len(f.presets) == 0 && !f.towerOnly && !f.wrappedText && !language[name] {
			t.Errorf("%s: no preset", name)
		}
	}
}

func TestPinnedTransformers(t *testing.T) {
	v, err := parseVersion(Transformers)
	if err != nil || v != pinned {
		t.Errorf("pinned %v, Transformers %q parses as %v (%v)", pinned, Transformers, v, err)
	}
	for _, bad := range []string{"5.0.0", "4", "4.x", "4.57.6.1", "-4.1"} {
		if _, err := parseVersion(bad); err == nil {
			t.Errorf("transformers %q accepted", bad)
		}
	}
	if v, _ := parseVersion("4.46.3"); !v.before(4, 47) || v.before(4, 46) {
		t.Errorf("4.46.3 compares wrongly: %v", v)
	}
}
