package vram

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestQwen3VL: the presets' parameter counts (those of the meta-device
// inventories, testdata/inventory), image tokens (a 512-pixel image: 32 ×
// 32 patches merged 2 × 2 into 256 tokens), the deepstack layers' hook, a
// config.json shaped as Qwen/Qwen3-VL-8B-Instruct's (nested text_config and
// vision_config, tie_word_embeddings at the top) and the engine's own read
// back.
func TestQwen3VL(t *testing.T) {
	for _, tc := range []struct {
		preset string
		params int64
	}{
		{"qwen3-vl-8b", 8767123696},
		{"qwen3-vl-4b", 4437815808},
		{"qwen3-vl-2b", 2127532032},
	} {
		if got := MustPreset(tc.preset).ParamCount(); got != tc.params {
			t.Errorf("%s: %d parameters, want %d", tc.preset, got, tc.params)
		}
	}
	m := MustPreset("qwen3-vl-8b")
	if got := m.Vision.ImageTokens(); got != 256 {
		t.Errorf("%d tokens per image, want 256", got)
	}
	for i, want := range []bool{true, true, true, false} {
		if got := m.hookedLayer(i); got != want {
			t.Errorf("layer %d: deepstack hook %v, want %v", i, got, want)
		}
	}
	for _, x := range releasedAndBack(t, m, "qwen3-vl-8b-instruct.json") {
		if x.ParamCount() != m.ParamCount() || x.Vision == nil || x.Vision.ImageTokens() != 256 || x.Vision.Tower.Image.Deepstack != "8,16,24" ||
			x.MaxPosition != 262144 || x.TiedEmbeddings {
			t.Errorf("config read back: %d parameters, %+v, vision %+v", x.ParamCount(), x, x.Vision)
		}
	}
	tower := Training{Model: m.Vision.Tower, SeqLen: 1024, MicroBatch: 1}
	if _, err := tower.Estimate(); err == nil || !strings.Contains(err.Error(), "is a vision tower only") {
		t.Errorf("the tower alone: %v", err)
	}
	tr := Training{Model: m, SeqLen: 2048, MicroBatch: 1, Precision: "bf16", Images: 2, VisionTower: "trainable", Checkpointing: "full"}
	if _, err := tr.Estimate(); err != nil {
		t.Errorf("a trainable tower, two images: %v", err)
	}
}

// TestQwenVLClassDefaults: the Qwen VL wrappers' nested configs, left out,
// take their classes' defaults (Qwen2.5-VL's text defaults its own, not
// Qwen2Config's). The classes' defaults alone are refused: the mergers'
// out_hidden_size, 3,584 by default, does not match the text width, so
// transformers builds them but cannot put image features in the
// embeddings; with out_hidden_size the text width (and the rotary
// sections, which transformers 4.57 needs) they read as transformers
// 5.23.0 builds them.
func TestQwenVLClassDefaults(t *testing.T) {
	for _, c := range []struct {
		json   string
		hidden int
		params int64
	}{
		// transformers 5.23.0: AutoConfig.for_model(model_type, **config),
		// AutoModelForImageTextToText.from_config under
		// torch.device("meta"), sum(p.numel() for p in model.parameters()).
		{`{"model_type": "qwen2_5_vl", "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}, "vision_config": {"out_hidden_size": 8192}}`, 8192, 75855293696},
		{`{"model_type": "qwen3_vl", "text_config": {"rope_scaling": {"mrope_section": [24, 20, 20]}}, "vision_config": {"out_hidden_size": 4096}}`, 4096, 12625849584},
		{`{"model_type": "qwen3_vl_moe", "text_config": {"rope_scaling": {"mrope_section": [24, 20, 20]}}, "vision_config": {"out_hidden_size": 2048}}`, 2048, 14023752944},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil || m.ParamCount() != c.params {
			t.Errorf("%s: %d parameters, %v; transformers builds %d", c.json, m.ParamCount(), err, c.params)
		}
		var cfg map[string]any
		_ = json.Unmarshal([]byte(c.json), &cfg)
		bare, _ := json.Marshal(map[string]any{"model_type": cfg["model_type"]})
		want := fmt.Sprintf("out_hidden_size = 3584 must equal the language model's hidden_size = %d", c.hidden)
		if cfg["model_type"] != "qwen2_5_vl" {
			want = fmt.Sprintf("out_hidden_size = 3584 must equal text_config.hidden_size = %d", c.hidden)
		}
		if _, err := FromHFConfig(bare); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it to say %q", bare, err, want)
		}
	}
}

// TestQwen3VLConfigErrors: each malformed config names the key and the
// rule it breaks, and nothing panics.
func TestQwen3VLConfigErrors(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "hf", "qwen3-vl-8b-instruct.json"))
	if err != nil {
		t.Fatal(err)
	}
	var base map[string]any
	if err := json.Unmarshal(b, &base); err != nil {
		t.Fatal(err)
	}
	text := func(c map[string]any) map[string]any { return c["text_config"].(map[string]any) }
	vision := func(c map[string]any) map[string]any { return c["vision_config"].(map[string]any) }
	for _, tc := range []struct {
		name  string
		edit  func(c map[string]any)
		wants []string
	}{
		{"flat", func(c map[string]any) {
			for k, v := range text(c) {
				if k != "model_type" {
					c[k] = v
				}
			}
			delete(c, "text_config")
		}, []string{"text_config", "object"}},
		{"text_config not an object", func(c map[string]any) { c["text_config"] = 3.0 }, []string{"text_config"}},
		{"vision_config not an object", func(c map[string]any) { c["vision_config"] = "x" }, []string{"vision_config", "object"}},
		{"sections", func(c map[string]any) {
			text(c)["rope_scaling"].(map[string]any)["mrope_section"] = []any{24.0, 20.0, 19.0}
		}, []string{"mrope_section", "head_dim / 2"}},
		{"no rope_scaling", func(c map[string]any) { delete(text(c), "rope_scaling") }, []string{"mrope_section"}},
		{"out_hidden_size", func(c map[string]any) { vision(c)["out_hidden_size"] = 2048.0 }, []string{"out_hidden_size", "hidden_size"}},
		{"tap past the tower", func(c map[string]any) { vision(c)["deepstack_visual_indexes"] = []any{8.0, 27.0} }, []string{"deepstack", "[0, layers = 27)"}},
		{"taps out of order", func(c map[string]any) { vision(c)["deepstack_visual_indexes"] = []any{16.0, 8.0} }, []string{"deepstack", "increasing"}},
		{"tap not an integer", func(c map[string]any) { vision(c)["deepstack_visual_indexes"] = []any{"8"} }, []string{"deepstack_visual_indexes[0]", "integer"}},
		{"table not square", func(c map[string]any) { vision(c)["num_position_embeddings"] = 2000.0 }, []string{"num_position_embeddings", "square"}},
		{"activation", func(c map[string]any) { vision(c)["hidden_act"] = "silu" }, []string{"hidden_act", "gelu_pytorch_tanh"}},
		{"depth", func(c map[string]any) { vision(c)["depth"] = "many" }, []string{"depth"}},
	} {
		var c map[string]any
		raw, _ := json.Marshal(base)
		_ = json.Unmarshal(raw, &c)
		tc.edit(c)
		data, _ := json.Marshal(c)
		m, err := FromHFConfig(data)
		if err == nil {
			err = m.Validate()
		}
		if err == nil {
			t.Errorf("%s: read without an error", tc.name)
			continue
		}
		for _, w := range tc.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to say %q", tc.name, err, w)
			}
		}
	}
	// A plan's deepstack must be a list of integers.
	var im Image
	if err := json.Unmarshal([]byte(`{"deepstack": "8,16"}`), &im); err == nil || !strings.Contains(err.Error(), "block indexes") {
		t.Errorf("a deepstack string: %v", err)
	}
}

// TestQwen3VLMoE: the 30B-A3B preset's parameter count (its meta-device
// inventory's), a config.json shaped as the release's and the engine's own
// read back, and autocast over fp32 weights refused as transformers raises
// it (the router's scatter_), while bf16 weights train.
func TestQwen3VLMoE(t *testing.T) {
	m := MustPreset("qwen3-vl-30b-a3b")
	if got, want := m.ParamCount(), int64(31070754032); got != want {
		t.Errorf("%d parameters, want %d", got, want)
	}
	for _, x := range releasedAndBack(t, m, "qwen3-vl-30b-a3b-instruct.json") {
		if x.ParamCount() != m.ParamCount() || x.Vision == nil || x.Vision.Family != "qwen3_vl_moe" || x.Router != "softmax_topk_norm_scatter" || x.Experts != 128 {
			t.Errorf("config read back: %d parameters, %+v", x.ParamCount(), x)
		}
	}
	text := m
	text.Vision = nil
	if err := text.Validate(); err == nil || !strings.Contains(err.Error(), "model.vision") {
		t.Errorf("the language model alone: %v", err)
	}
	for _, tc := range []struct {
		precision string
		err       string
	}{
		{"amp_bf16", "scatter_"},
		{"bf16", ""},
		{"fp32", ""},
	} {
		tr := Training{Model: m, SeqLen: 1024, MicroBatch: 1, Precision: tc.precision}
		_, err := tr.Estimate()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.precision, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "precision")):
			t.Errorf("%s: %v, want an error naming precision and %q", tc.precision, err, tc.err)
		}
	}
}

// releasedAndBack reads the released config.json in testdata/hf/file and
// m written as a config.json and read back: both should describe m.
func releasedAndBack(t *testing.T, m Model, file string) []Model {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "hf", file))
	if err != nil {
		t.Fatal(err)
	}
	released, err := FromHFConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := json.Marshal(m.HFConfig())
	if err != nil {
		t.Fatal(err)
	}
	back, err := FromHFConfig(ours)
	if err != nil {
		t.Fatal(err)
	}
	return []Model{released, back}
}
