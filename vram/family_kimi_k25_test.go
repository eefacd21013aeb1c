package vram

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// k25Text and k25Vision are a small DeepseekV3Config and
// Kimi_K25VisionConfig as config.json fragments.
const (
	k25Text   = `"vocab_size": 1000, "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 24, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 4, "n_routed_experts": 6, "num_experts_per_tok": 2, "first_k_dense_replace": 1, "q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8, "n_group": 1, "topk_group": 1`
	k25Vision = `"hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 2, "patch_size": 4, "pos_emb_height": 8, "pos_emb_width": 8`
)

// k25Config is a small Kimi_K25Config: text and vision keys extra, then
// top-level keys extra.
func k25Config(text, vision, top string) string {
	return `{"model_type": "kimi_k25", "text_config": {` + k25Text + text + `}, "vision_config": {` + k25Vision + vision + `}, "projection_hidden_size": 32` + top + `}`
}

// TestKimiK25: Kimi-K2.5 as transformers 5.23 builds it — the parameter
// and buffer counts of its meta-device models (small configs; the
// classes' defaults), the release's kimi_k2 text model_type, the
// top-level tie, and what is refused.
func TestKimiK25(t *testing.T) {
	for _, c := range []struct {
		name, json      string
		params, buffers int64
		tied            bool
	}{
		// transformers 5.23.0: AutoConfig.for_model("kimi_k25", **json),
		// AutoModelForImageTextToText.from_config under
		// torch.device("meta"), sum(p.numel() for p in
		// model.parameters()) and the same over model.buffers().
		{"small, tied as the class defaults", k25Config("", "", ""), 214592, 184, true},
		{"kimi_k2 text, untied, pos_emb_time 2, merge 3 × 3, 2 shared experts, q_lora_rank null",
			k25Config(`, "model_type": "kimi_k2", "n_shared_experts": 2, "q_lora_rank": null`, `, "pos_emb_time": 2, "merge_kernel_size": [3, 3], "image_size": 48`, `, "tie_word_embeddings": false`), 363136, 120, false},
		{"the classes' defaults", `{"model_type": "kimi_k25"}`, 670570869232, 20708, true},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil || m.ParamCount() != c.params {
			t.Errorf("%s: %d parameters, %v; transformers 5.23 builds %d", c.name, m.ParamCount(), err, c.params)
			continue
		}
		var buf int64
		for _, b := range m.Buffers() {
			n := int64(1)
			for _, d := range b.Shape {
				n *= d
			}
			buf += n
		}
		if buf != c.buffers || m.TiedEmbeddings != c.tied || m.Family != "deepseek_v3" || m.Vision.Family != "kimi_k25" {
			t.Errorf("%s: %d buffer elements, tied %v, %s / %s; transformers: %d, %v", c.name, buf, m.TiedEmbeddings, m.Family, m.Vision.Family, c.buffers, c.tied)
		}
	}
	// A key config.json leaves out takes the classes' defaults
	// (configuration_kimi_k25.py:44-53, 75, 81; the text config's,
	// configuration_deepseek_v3.py).
	m, _ := FromHFConfig([]byte(`{"model_type": "kimi_k25"}`))
	tw := m.Vision.Tower
	if m.Layers != 61 || m.Hidden != 7168 || m.Heads != 128 || m.Experts != 256 || !m.TiedEmbeddings ||
		tw.Layers != 27 || tw.Hidden != 1152 || tw.Heads != 16 || tw.FFN != 4304 ||
		*tw.Image != (Image{Size: 1792, Patch: 14, Channels: 3, Merge: 2, PositionTable: 4096, TimeTable: 4}) {
		t.Errorf("class defaults: %+v, tower %+v %+v", m, tw, *tw.Image)
	}
	for _, c := range []struct{ json, want string }{
		{strings.Replace(k25Config("", "", ""), `"projection_hidden_size": 32`, `"projection_hidden_size": 48`, 1), "projection_hidden_size = 48"},
		{k25Config(`, "model_type": "llama"`, "", ""), `text_config.model_type "llama"`},
		{k25Config("", `, "pos_emb_width": 4`, ""), "pos_emb_width = 4"},
		{k25Config("", `, "merge_kernel_size": [2, 1]`, ""), "merge_kernel_size"},
		{k25Config("", `, "hidden_act": "quick_gelu"`, ""), "hidden_act"},
		{k25Config("", `, "head_dim": 8`, ""), "head_dim = 8"},
		{strings.Replace(k25Config("", "", ""), `"num_attention_heads": 2, "patch_size"`, `"num_attention_heads": 3, "patch_size"`, 1), "multiple of heads = 3"},
		{k25Config("", `, "image_size": 30`, ""), "multiple of patch × merge = 8"},
	} {
		if _, err := FromHFConfig([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error naming %q", c.json, err, c.want)
		}
	}
}

// TestKimiK25Preset: Kimi-K2.5 (Kimi-K2's language model with MoonViT):
// its parameters and tokens an image as transformers 5.23 builds it, the
// HFConfig round trip, its stored bytes, and the plans refused in words.
func TestKimiK25Preset(t *testing.T) {
	m := MustPreset("kimi-k2.5")
	if m.ParamCount() != 1026879353328 || m.Vision.ImageTokens() != 4096 {
		t.Errorf("%d parameters, %d tokens an image; transformers 5.23: 1,026,879,353,328, (1792/14)² / 2² = 4,096", m.ParamCount(), m.Vision.ImageTokens())
	}
	b, _ := json.Marshal(m.HFConfig())
	back, err := FromHFConfig(b)
	if err != nil || back.ParamCount() != m.ParamCount() || fmt.Sprint(*back.Vision.Tower.Image) != fmt.Sprint(*m.Vision.Tower.Image) || back.TiedEmbeddings {
		t.Errorf("HFConfig round trip: %v, %d parameters", err, back.ParamCount())
	}
	// No release format: every parameter in bf16, plus what the text
	// family stores beside them (60 routers' fp32 e_score_correction_bias
	// of 384; no multi-token-prediction layer).
	if got, want := m.StoredBytes(), BF16.Size(1026879353328)+FP32.Size(60*384); got != want {
		t.Errorf("stored bytes %d, want %d", got, want)
	}
	// Training: the tower's forward is modelled, and 12 of the 13 traces
	// at 5.23 hold; the trainable tower under bf16 autocast does not
	// (+2.54 %), so the family is refused with what was measured.
	if _, err := (Training{Model: m, SeqLen: 8192, MicroBatch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") || !strings.Contains(err.Error(), "kimi-k25-tiny-tower-amp_bf16-eager-none-adamw") {
		t.Errorf("training: %v", err)
	}
	// vLLM's profile runs the tower (its forward modelled as
	// family_kimi_k25_vision_forward.go has it); with limit_mm_per_prompt
	// {"vision_chunk": 0} vLLM 0.33 builds no tower or projector
	// (kimi_k25.py:349-373 under _mark_tower_model) and profiles no image:
	// the carve is the language model's alone.
	text := VLLM{MaxModelLen: 32768, TP: 16, LimitMMPerPrompt: map[string]int{"vision_chunk": 0}}
	c, err := text.Carve(Inference{Model: m, TP: 16}, mustGPU("H200"))
	if err != nil {
		t.Fatal(err)
	}
	if mm, err := (VLLM{MaxModelLen: 32768, TP: 16}).Carve(Inference{Model: m, TP: 16}, mustGPU("H200")); err != nil || mm.Weights <= c.Weights {
		t.Errorf("vLLM with images: weights %v (text only %v), %v", mm.Weights, c.Weights, err)
	}
	lm := m
	lm.Vision = nil
	full, err := (VLLM{MaxModelLen: 32768, TP: 16}).Carve(Inference{Model: MustPreset("kimi-k2-instruct"), TP: 16}, mustGPU("H200"))
	if err != nil {
		t.Fatal(err)
	}
	if c.MMProfile != nil || !c.Starts || c.Weights <= 0 || c.Weights >= BF16.Size(1026879353328)/16 {
		t.Errorf("text-only Kimi-K2.5 on 16 H200s: starts %v, weights %v, mm profile %+v (Kimi-K2 beside it: %v)", c.Starts, c.Weights, c.MMProfile, full.Weights)
	}
	if _, err := (VLLM{MaxModelLen: 32768, TP: 16, LimitMMPerPrompt: map[string]int{"image": 0}}).Carve(Inference{Model: m, TP: 16}, mustGPU("H200")); err == nil || !strings.Contains(err.Error(), "this model's modalities are vision_chunk") {
		t.Errorf("an image limit for Kimi-K2.5: %v", err)
	}
}
