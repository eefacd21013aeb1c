package vram

import (
	"strings"
	"testing"
)

// TestGLM4MoeLite: GLM-4.7-Flash as transformers 5.23 builds it — the
// parameter counts of its meta-device models (small configs; the class's
// defaults), the dense layers from mlp_layer_types, and a serving plan;
// training as traced at 5.23, generate refused in words.
func TestGLM4MoeLite(t *testing.T) {
	small := `"model_type": "glm4_moe_lite", "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1, "kv_lora_rank": 32, "qk_rope_head_dim": 16, "qk_nope_head_dim": 24, "v_head_dim": 20`
	for _, c := range []struct {
		name, json string
		params     int64
	}{
		// transformers 5.23.0 on the meta device: sum(p.numel()).
		{"small", `{` + small + `, "q_lora_rank": 48}`, 338608},
		{"attention_bias, no q_lora", `{` + small + `, "q_lora_rank": null, "attention_bias": true}`, 337264},
		{"the class's defaults", `{"model_type": "glm4_moe_lite"}`, 29943390976},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil || m.ParamCount() != c.params {
			t.Errorf("%s: %d parameters, %v; transformers 5.23 builds %d", c.name, m.ParamCount(), err, c.params)
		}
	}
	m, err := FromHFConfig([]byte(`{` + small + `, "mlp_layer_types": ["dense", "dense", "sparse"]}`))
	if err != nil || m.DenseLayers != 2 {
		t.Errorf("mlp_layer_types: %d dense layers, %v", m.DenseLayers, err)
	}
	if _, err := FromHFConfig([]byte(`{` + small + `, "mlp_layer_types": ["sparse", "dense", "sparse"]}`)); err == nil || !strings.Contains(err.Error(), "mlp_layer_types[1]") {
		t.Errorf("dense after sparse: %v", err)
	}
	flash := MustPreset("glm-4.7-flash")
	// Training follows transformers 5.23 (its traces, testdata/trace5);
	// transformers' generate is not modelled.
	if est, err := (Training{Model: flash, SeqLen: 512, MicroBatch: 1}).Estimate(); err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "traced at 5.23.0") {
		t.Errorf("training: %v, notes %q", err, est.Notes)
	}
	if _, err := (Inference{Model: flash, PromptTokens: 512, NewTokens: 16, Batch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") {
		t.Errorf("generate: %v", err)
	}
	c, err := VLLM{Version: "0.33.0", MaxModelLen: 32768}.Carve(Inference{Model: flash}, mustGPU("H100-80GB"))
	if err != nil || !c.Starts || c.KVCache.PageBytes != BF16.Size(16*(512+64)) {
		t.Errorf("vLLM: starts %v (%s), page %v, %v", c.Starts, c.Err, c.KVCache.PageBytes, err)
	}
}

// TestConfigClassDefaults: a key a released config.json leaves out takes
// the model's config class's default, not a generic one — SmolLM3's class
// ties the embeddings (its released config omits the key).
func TestConfigClassDefaults(t *testing.T) {
	base := `"model_type": "smollm3", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000`
	omitted, err := FromHFConfig([]byte(`{` + base + `}`))
	if err != nil || !omitted.TiedEmbeddings {
		t.Errorf("smollm3 without tie_word_embeddings: tied %v, %v; SmolLM3Config ties them", omitted.TiedEmbeddings, err)
	}
	untied, _ := FromHFConfig([]byte(`{` + base + `, "tie_word_embeddings": false}`))
	if untied.ParamCount()-omitted.ParamCount() != 1000*64 {
		t.Errorf("an untied head adds vocab × hidden: %d vs %d", untied.ParamCount(), omitted.ParamCount())
	}
}
