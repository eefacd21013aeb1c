package vram

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadPlanModel: plan -hf-config reads a plan's model alone, also of
// a family whose training is refused, with the top level read as
// ParsePlan reads it: a duplicate key is the last one's, and unknown keys,
// a missing model, hostile nesting and a file past its budget are refused
// by name, never a panic.
func TestReadPlanModel(t *testing.T) {
	deep := `{"model": ` + strings.Repeat(`{"a": `, 20000) + `1` + strings.Repeat(`}`, 20000) + `}`
	for _, c := range []struct {
		name, plan, want string // want: the model's family, or what the error says
		ok               bool
	}{
		{"a family whose training is refused", `{"model": "kimi-linear-48b-a3b", "train": {"seq_len": 512, "micro_batch": 1}}`, "kimi_linear", true},
		{"a model object", `{"model": {"family": "minimax_m2", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "ffn": 32, "vocab": 100, "experts": 4, "experts_per_token": 2, "expert_ffn": 32}, "train": {}}`, "minimax_m2", true},
		// A duplicate key is the last one's, as ParsePlan (and Python's json) take it.
		{"duplicate model keys", `{"model": "llama-3-8b", "model": "gpt2", "train": {}}`, "gpt2", true},
		{"an unknown key", `{"model": "gpt2", "trian": {}}`, "trian", false},
		{"no model", `{"train": {"seq_len": 512}}`, `"model" is required`, false},
		{"hostile nesting", deep, "max depth", false},
		{"not JSON", "model: gpt2\n", "", false},
	} {
		path := filepath.Join(t.TempDir(), "plan.json")
		if err := os.WriteFile(path, []byte(c.plan), 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := ReadPlanModel(path)
		switch {
		case c.ok && (err != nil || m.Family != c.want):
			t.Errorf("%s: family %q, %v; want %s", c.name, m.Family, err, c.want)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v; want an error naming %q", c.name, err, c.want)
		}
	}
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, []byte(`{"model": "gpt2", "name": "`+strings.Repeat("x", int(MaxPlanFile))+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPlanModel(big); err == nil {
		t.Errorf("a plan past MaxPlanFile (%d bytes) was read", MaxPlanFile)
	}
}
