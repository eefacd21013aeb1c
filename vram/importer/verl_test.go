package importer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

// TestVerlDefaultsYAML: verl's own defaults read as a YAML config
// (multi-line plain scalars, OmegaConf interpolations), and with a
// launch script's overrides they make the plan the script makes.
func TestVerlDefaultsYAML(t *testing.T) {
	d := verlDefaults()
	if len(d) < 400 || d[verlKeyRollout+"gpu_memory_utilization"] != 0.5 {
		t.Fatalf("%d defaults, gpu_memory_utilization %v", len(d), d[verlKeyRollout+"gpu_memory_utilization"])
	}
	for k, v := range d {
		if s, ok := v.(string); ok && strings.Contains(s, "${") {
			t.Errorf("%s = %q left unresolved", k, s)
		}
	}
	script := filepath.Join("testdata", "configs", "verl", "grpo_trainer__run_qwen2-7b.sh")
	fromScript, err := Read(script, Options{Model: "qwen2.5-7b"})
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	var overrides []string
	for _, w := range strings.Fields(strings.ReplaceAll(string(src), "\\\n", " ")) {
		if k, _, ok := strings.Cut(w, "="); ok && strings.Contains(k, ".") && !strings.Contains(w, "$") {
			overrides = append(overrides, w)
		}
	}
	fromYAML, err := Read("verl_defaults.yaml", Options{Model: "qwen2.5-7b", Overrides: overrides})
	if err != nil {
		t.Fatal(err)
	}
	// The YAML states verl's scheduler limits, which the script leaves
	// to verl's defaults (the same values): the plans differ there, and
	// their estimates not at all.
	g, _ := vram.LookupGPU("H100-80GB")
	ea, err := fromScript.Plan.PostTraining.Estimate(g)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := fromYAML.Plan.PostTraining.Estimate(g)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(ea)
	b, _ := json.Marshal(eb)
	if string(a) != string(b) {
		t.Errorf("the script's estimate\n%s\ndiffers from verl's defaults YAML with its overrides\n%s", a, b)
	}
}

// TestVerlConfigName: a launch script that names its YAML (Hydra's
// --config-path/--config-name) is read with it beneath its overrides, the
// YAML found in the script's config folder as verl's examples keep it;
// without it, the script's own keys are read and the missing YAML said.
func TestVerlConfigName(t *testing.T) {
	src := filepath.Join("testdata", "configs", "verl")
	dir := t.TempDir()
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(dir, "run_qwen2.5-3b_gsm8k_multiturn.sh")
	copyFile(filepath.Join(src, "sglang_multiturn__run_qwen2.5-3b_gsm8k_multiturn.sh"), script)
	imp, err := Read(script, Options{Model: "qwen2.5-1.5b"})
	if err != nil {
		t.Fatal(err)
	}
	if nm := strings.Join(imp.NotModelled, "\n"); !strings.Contains(nm, "--config-name gsm8k_multiturn_grpo: the YAML it names was not found") {
		t.Errorf("not modelled %q: the missing YAML is not said", imp.NotModelled)
	}
	copyFile(filepath.Join(src, "sglang_multiturn__gsm8k_multiturn_grpo.yaml"), filepath.Join(dir, "config", "gsm8k_multiturn_grpo.yaml"))
	imp, err = Read(script, Options{Model: "qwen2.5-1.5b"})
	if err != nil {
		t.Fatal(err)
	}
	nm := strings.Join(imp.NotModelled, "\n")
	if !strings.Contains(nm, "multi_turn.enable = true") || strings.Contains(nm, "was not found") {
		t.Errorf("not modelled %q: the YAML's multi_turn settings are not read", imp.NotModelled)
	}
	if pt := imp.Plan.PostTraining; pt == nil || pt.Generations != 16 || pt.Rollout.Engine != "sglang" || pt.PromptLen != 1024 {
		t.Errorf("plan %+v: the script's overrides must win over its YAML", pt)
	}
}
