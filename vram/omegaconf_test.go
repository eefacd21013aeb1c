package vram

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestOmegaConfInterpolation(t *testing.T) {
	tree := map[string]any{
		"a": map[string]any{"n": int64(8), "m": "${.n}", "text": "run_${a.n}_x", "env": "${oc.env:HOME,/tmp}",
			"sel": "${oc.select:a.missing,4}", "selnull": "${oc.select:.missing,null}", "present": "${oc.select:.n,1}",
			"deep": map[string]any{"up": "${..n}"}},
		"b": "${a.m}",
	}
	r := newConfigReader(KindVerl, tree, &Imported{})
	if err := r.resolveInterpolations(); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"a.m": int64(8), "a.text": "run_8_x", "a.env": "/tmp", "a.sel": int64(4), "a.selnull": nil,
		"a.present": int64(8), "a.deep.up": int64(8), "b": int64(8)} {
		if got := r.flat[k]; got != want {
			t.Errorf("%s = %#v, want %#v", k, got, want)
		}
	}
	if !r.derived["b"] || r.derived["a.text"] || r.derived["a.env"] {
		t.Errorf("derived %v: b follows a key; text around one and oc.env do not", r.derived)
	}
	for _, c := range []struct {
		tree map[string]any
		want string
	}{
		{map[string]any{"x": "${y}", "y": "${x}"}, "refers to itself"},
		{map[string]any{"x": "${nowhere.at_all}"}, "x: the interpolation names nowhere.at_all, which the config does not have"},
		{map[string]any{"x": "${oc.create:{}}"}, "the resolver oc.create is not read"},
		{map[string]any{"x": "${y"}, "an interpolation without its closing }"},
		{doubling(40), "interpolations expand past"},
	} {
		r := newConfigReader(KindVerl, c.tree, &Imported{})
		if err := r.resolveInterpolations(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.tree, err, c.want)
		}
	}
}

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
	fromScript, err := ReadConfig(script, ImportOptions{Model: "qwen2.5-7b"})
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
	fromYAML, err := ReadConfig("verl_defaults.yaml", ImportOptions{Model: "qwen2.5-7b", Overrides: overrides})
	if err != nil {
		t.Fatal(err)
	}
	// The YAML states verl's scheduler limits, which the script leaves
	// to verl's defaults (the same values): the plans differ there, and
	// their estimates not at all.
	g, _ := LookupGPU("H100-80GB")
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

// doubling is a config whose every key is the next one twice over: 2^n
// bytes if expanded, as a hostile file could write.
func doubling(n int) map[string]any {
	m := map[string]any{"k0": "xxxxxxxx"}
	for i := 1; i <= n; i++ {
		m["k"+strconv.Itoa(i)] = "${k" + strconv.Itoa(i-1) + "}${k" + strconv.Itoa(i-1) + "}"
	}
	return m
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
	imp, err := ReadConfig(script, ImportOptions{Model: "qwen2.5-1.5b"})
	if err != nil {
		t.Fatal(err)
	}
	if nm := strings.Join(imp.NotModelled, "\n"); !strings.Contains(nm, "--config-name gsm8k_multiturn_grpo: the YAML it names was not found") {
		t.Errorf("not modelled %q: the missing YAML is not said", imp.NotModelled)
	}
	copyFile(filepath.Join(src, "sglang_multiturn__gsm8k_multiturn_grpo.yaml"), filepath.Join(dir, "config", "gsm8k_multiturn_grpo.yaml"))
	imp, err = ReadConfig(script, ImportOptions{Model: "qwen2.5-1.5b"})
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
