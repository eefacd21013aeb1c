package yaml

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram/fileio/budget"
	"github.com/vramlab/vramlab/vram/internal/hostile"
)

func TestParseYAML(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      any
	}{
		{"axolotl", `base_model: NousResearch/Meta-Llama-3-8B  # the model
load_in_8bit: false
load_in_4bit: true
datasets:
  - path: mhenrichsen/alpaca_2k_test
    type: alpaca
sequence_len: 4096
sample_packing: true
lora_target_modules:
- q_proj
- v_proj
lora_r: 32
learning_rate: 0.0002
bf16: auto
gradient_checkpointing: true
special_tokens:
  pad_token: "<|end_of_text|>"
`, map[string]any{"base_model": "NousResearch/Meta-Llama-3-8B", "load_in_8bit": false, "load_in_4bit": true,
			"datasets":     []any{map[string]any{"path": "mhenrichsen/alpaca_2k_test", "type": "alpaca"}},
			"sequence_len": int64(4096), "sample_packing": true, "lora_target_modules": []any{"q_proj", "v_proj"},
			"lora_r": int64(32), "learning_rate": 0.0002, "bf16": "auto", "gradient_checkpointing": true,
			"special_tokens": map[string]any{"pad_token": "<|end_of_text|>"}}},
		{"torchtune", `model:
  _component_: torchtune.models.llama3_1.lora_llama3_1_8b
  lora_attn_modules: ['q_proj', 'v_proj', 'output_proj']
  lora_rank: 8
optimizer:
  _component_: torch.optim.AdamW
  fused: True
  lr: 3e-4
dtype: bf16
`, map[string]any{"model": map[string]any{"_component_": "torchtune.models.llama3_1.lora_llama3_1_8b",
			"lora_attn_modules": []any{"q_proj", "v_proj", "output_proj"}, "lora_rank": int64(8)},
			"optimizer": map[string]any{"_component_": "torch.optim.AdamW", "fused": true, "lr": 3e-4}, "dtype": "bf16"}},
		{"flow and block scalar", "a: {x: 1, y: [1, 2, {z: null}]}\nb: |\n  line one\n  line two\nc: >-\n  folded\n  text\nd: 'it''s'\ne: \"tab\\tq\"\nf: ~\ng:\n", map[string]any{
			"a": map[string]any{"x": int64(1), "y": []any{int64(1), int64(2), map[string]any{"z": nil}}},
			"b": "line one\nline two\n", "c": "folded text", "d": "it's", "e": "tab\tq", "f": nil, "g": nil}},
		{"nested sequences", "--- \nsteps:\n  - - 1\n    - 2\n  - name: x\n    run: [a,\n      b]\n", map[string]any{
			"steps": []any{[]any{int64(1), int64(2)}, map[string]any{"name": "x", "run": []any{"a", "b"}}}}},
		{"urls and colons", "url: http://x:8080/a#b\nk: a: b\n", map[string]any{"url": "http://x:8080/a#b", "k": "a: b"}},
		{"empty", "# nothing\n", map[string]any{}},
	} {
		got, err := Parse([]byte(c.src))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %#v\nwant %#v", c.name, got, c.want)
		}
	}
	for _, c := range []struct{ src, want string }{
		{"a: 1\n\tb: 2\n", "a tab"},
		{"a: &x 1\nb: *x\n", "anchors"},
		{"a: 1\na: 2\n", "given twice"},
		{"a: 1\n---\nb: 2\n", "second document"},
		{"a: [1, 2\n", "missing , or ]"},
		{"a: \"open\n", "unterminated"},
		{"a:\n  b: 1\n c: 2\n", "line 3"},
		{strings.Repeat("[", 100) + strings.Repeat("]", 100), "deeper"},
		{"<<: {a: 1}\n", "merge keys"},
	} {
		if _, err := Parse([]byte(c.src)); err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "yaml: ") {
			t.Errorf("%q: %v, want an error with %q", c.src, err, c.want)
		}
	}
}

// FuzzParseYAML: any bytes parse or fail within the readers' budget.
func FuzzParseYAML(f *testing.F) {
	f.Add([]byte("a: 1\nb:\n  - c: [1, {d: e}]\n    f: |\n      x\n"))
	f.Add([]byte(strings.Repeat("- ", 60) + "x\n"))
	f.Add([]byte(strings.Repeat("a:\n ", 30)))
	f.Add([]byte("k: [" + strings.Repeat("[", 70)))
	for _, seed := range hostile.Seeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		budget.Check(t, len(data), func() { _, _ = Parse(data) })
	})
}
