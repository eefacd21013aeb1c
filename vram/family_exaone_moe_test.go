package vram

import (
	"strings"
	"testing"
)

// exaoneMoeSmall is a small K-EXAONE config.
const exaoneMoeSmall = `"model_type": "exaone_moe", "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "num_experts": 8, "num_experts_per_tok": 2, "sliding_window": 16`

// TestExaoneMoe: K-EXAONE as transformers 5.23 builds it — the parameter
// counts of its meta-device models (small configs; the class's defaults),
// the class's defaults and its __post_init__'s layer kinds, what the
// config class refuses, and a serving plan; training as traced at 5.23,
// generate refused in words.
func TestExaoneMoe(t *testing.T) {
	for _, c := range []struct {
		name, json string
		params     int64
	}{
		// transformers 5.23.0 on the meta device: AutoConfig.for_model(
		// "exaone_moe", **keys), AutoModelForCausalLM.from_config under
		// torch.device("meta"), sum(p.numel()).
		{"small", `{` + exaoneMoeSmall + `}`, 369856},
		{"head_dim, mlp_layer_types, two shared experts, tied", `{` + exaoneMoeSmall + `, "head_dim": 24, "mlp_layer_types": ["dense", "dense", "sparse", "sparse"], "num_shared_experts": 2, "tie_word_embeddings": true}`, 311552},
		{"LLLG with layer_types, no dense layer", `{` + exaoneMoeSmall + `, "sliding_window_pattern": "LLLG", "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"], "first_k_dense_replace": 0}`, 401088},
		{"the class's defaults", `{"model_type": "exaone_moe"}`, 28550639616},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil || m.ParamCount() != c.params {
			t.Errorf("%s: %d parameters, %v; transformers 5.23 builds %d", c.name, m.ParamCount(), err, c.params)
		}
	}
	def, _ := FromHFConfig([]byte(`{"model_type": "exaone_moe"}`))
	if def.Layers != 32 || def.HeadDim != 128 || def.Experts != 64 || def.ExpertsPerToken != 8 || def.DenseLayers != 1 || def.SharedExperts != 1 ||
		def.SlidingWindow != 4096 || def.GlobalEvery != 4 || !def.NoRopeGlobal || def.MaxPosition != 2048 || def.Vocab != 102400 {
		t.Errorf("ExaoneMoeConfig's defaults read as %+v", def)
	}
	for _, c := range []struct{ json, want string }{
		{`{` + exaoneMoeSmall + `, "sliding_window_pattern": "LLLG"}`, "sliding_window_pattern is text"},
		{`{"model_type": "exaone_moe", "sliding_window": null}`, "sliding_window null"},
		{`{` + exaoneMoeSmall + `, "layer_types": ["full_attention", "full_attention", "full_attention", "full_attention"]}`, "no layer would apply"},
		{`{` + exaoneMoeSmall + `, "norm_topk_prob": false}`, "norm_topk_prob"},
		{`{` + exaoneMoeSmall + `, "mlp_layer_types": ["sparse", "dense", "sparse", "sparse"]}`, "mlp_layer_types[1]"},
	} {
		if _, err := FromHFConfig([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error naming %q, got %v", c.json, c.want, err)
		}
	}
	k := MustPreset("k-exaone-236b-a23b")
	if k.ParamCount() != 236571150336 {
		t.Errorf("k-exaone-236b-a23b: %d parameters", k.ParamCount())
	}
	// Training follows transformers 5.23 (its traces, testdata/trace5);
	// transformers' generate is not modelled.
	if est, err := (Training{Model: k, SeqLen: 512, MicroBatch: 1}).Estimate(); err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "traced at 5.23.0") {
		t.Errorf("training: %v, notes %q", err, est.Notes)
	}
	if _, err := (Inference{Model: k, PromptTokens: 512, NewTokens: 16, Batch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") {
		t.Errorf("generate: %v", err)
	}
	// Serving on 8 × H100: a page holds 16 tokens' K and V of one KV head
	// (8 over 8 ranks) of 128 in bf16; vLLM's hybrid allocator groups the
	// 36 sliding layers (128-token window) and the 12 full ones in groups
	// of 12 layers.
	c, err := VLLM{Version: "0.33.0", MaxModelLen: 32768, TP: 8}.Carve(Inference{Model: k, TP: 8}, mustGPU("H100-80GB"))
	if err != nil || !c.Starts || c.KVCache.Layers != 48 || c.KVCache.PageBytes != BF16.Size(16*2*128) || len(c.KVCache.Groups) != 4 {
		t.Fatalf("vLLM: starts %v (%s), %d layers, page %v, groups %+v, %v", c.Starts, c.Err, c.KVCache.Layers, c.KVCache.PageBytes, c.KVCache.Groups, err)
	}
	for i, g := range c.KVCache.Groups {
		if want := (i < 3); g.Layers != 12 || (g.Kind == "sliding_window") != want || want && g.Span != 128 {
			t.Errorf("vLLM group %d: %+v", i, g)
		}
	}
}
