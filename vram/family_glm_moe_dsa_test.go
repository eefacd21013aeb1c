package vram

import (
	"strings"
	"testing"
)

// TestGlmMoeDsa: GLM-5 as transformers 5.23 builds it — the parameter
// counts of its meta-device models (small configs, keys left out, the
// class's defaults), the layers whose indexer it models, and serving
// plans; its training step is modelled as traced at 5.23.0, transformers' generate refused.
func TestGlmMoeDsa(t *testing.T) {
	for _, c := range []struct {
		name, json string
		params     int64
	}{
		// transformers 5.23.0 on the meta device: AutoConfig.for_model(
		// "glm_moe_dsa", **keys), AutoModelForCausalLM.from_config under
		// torch.device("meta"), sum(p.numel()).
		{"small", `{"model_type": "glm_moe_dsa", ` + dsaSmall + `}`, 364144},
		{"a smaller indexer, tied embeddings", `{"model_type": "glm_moe_dsa", ` + dsaSmall + `, "index_n_heads": 2, "index_head_dim": 16, "tie_word_embeddings": true}`, 282768},
		// index_n_heads 32, index_head_dim 128, n_shared_experts 1,
		// first_k_dense_replace 3 from the class.
		{"keys left out", `{"model_type": "glm_moe_dsa", ` + dsaOmitted + `}`, 1185152},
		// __post_init__: num_experts overrides n_routed_experts.
		{"num_experts", `{"model_type": "glm_moe_dsa", ` + dsaOmitted + `, "num_experts": 4}`, 1160320},
		{"every layer's indexer listed", `{"model_type": "glm_moe_dsa", ` + dsaSmall + `, "indexer_types": ["full", "full", "full"]}`, 364144},
		{"the class's defaults", `{"model_type": "glm_moe_dsa"}`, 743911199232},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil || m.ParamCount() != c.params {
			t.Errorf("%s: %d parameters, %v; transformers 5.23 builds %d", c.name, m.ParamCount(), err, c.params)
		}
	}
	def, _ := FromHFConfig([]byte(`{"model_type": "glm_moe_dsa"}`))
	if def.IndexHeads != 32 || def.IndexHeadDim != 128 || def.Layers != 78 || def.QLoRARank != 2048 || def.HeadDim != 256 || def.MTPLayers != 0 {
		t.Errorf("GlmMoeDsaConfig's defaults read as %+v", def)
	}
	// A layer sharing the previous layer's top-k builds no indexer: refused.
	for _, c := range []struct{ name, keys, want string }{
		{"index_topk_freq 2", `, "index_topk_freq": 2`, "indexer_types[2]"},
		{"index_topk_pattern", `, "index_topk_pattern": "FSF"`, "indexer_types[1]"},
		{"indexer_types", `, "indexer_types": ["full", "full", "shared"]`, "indexer_types[2]"},
		{"a short list", `, "indexer_types": ["full", "full"]`, "lists 2 layers"},
		{"another letter", `, "index_topk_pattern": "FXF"`, "index_topk_pattern[1]"},
		{"q_lora_rank null", `, "q_lora_rank": null`, "q_lora_rank"},
	} {
		if _, err := FromHFConfig([]byte(`{"model_type": "glm_moe_dsa", ` + dsaSmall + c.keys + `}`)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.want)
		}
	}
	glm := MustPreset("glm-5")
	if glm.ParamCount() != 743911199232 || glm.MTPLayers != 1 || glm.Release != nil {
		t.Errorf("glm-5: %d parameters, %d MTP layers, release %v", glm.ParamCount(), glm.MTPLayers, glm.Release)
	}
	// Serving in bf16 on 8 × H200: 1.49 TB of weights need more than
	// tensor parallelism over 8; over 8 × 2 stages, the first stage's 39
	// layers page the latent (bf16) and the indexer's 132-byte key.
	c, err := VLLM{Version: "0.33.0", MaxModelLen: 32768, TP: 8}.Carve(Inference{Model: glm, TP: 8}, mustGPU("H200"))
	if err != nil || c.Starts || !strings.Contains(c.Err, "while loading the weights") {
		t.Errorf("vLLM TP 8: starts %v (%s), %v", c.Starts, c.Err, err)
	}
	c, err = VLLM{Version: "0.33.0", MaxModelLen: 32768, TP: 8, PP: 2}.Carve(Inference{Model: glm, TP: 8, PP: 2}, mustGPU("H200"))
	if err != nil || !c.Starts || c.KVCache.PageBytes != BF16.Size(16*(512+64))+16*132 || c.KVCache.Layers != 39 {
		t.Errorf("vLLM TP 8 PP 2: starts %v (%s), page %v, %d layers, %v", c.Starts, c.Err, c.KVCache.PageBytes, c.KVCache.Layers, err)
	}
	// Training follows transformers 5.23, traced at 5.23.0; generate
	// stays refused.
	if est, err := (Training{Model: glm, SeqLen: 512, MicroBatch: 1}).Estimate(); err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "traced at 5.23.0") {
		t.Errorf("training: %v", err)
	}
	if _, err := (Inference{Model: glm, PromptTokens: 512, NewTokens: 16, Batch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") {
		t.Errorf("generate: %v", err)
	}
}
