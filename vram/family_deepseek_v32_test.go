package vram

import (
	"strings"
	"testing"
)

// dsaSmall is a small config both DSA families read alike.
const dsaSmall = `"vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 4, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1, "q_lora_rank": 48, "kv_lora_rank": 32, "qk_rope_head_dim": 16, "qk_nope_head_dim": 24, "v_head_dim": 20, "index_n_heads": 4, "index_head_dim": 32, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1`

// dsaOmitted leaves out the indexer's keys, n_shared_experts and
// first_k_dense_replace, which take the config class's defaults.
const dsaOmitted = `"vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4, "n_routed_experts": 8, "num_experts_per_tok": 2, "q_lora_rank": 48, "kv_lora_rank": 32, "qk_rope_head_dim": 16, "qk_nope_head_dim": 24, "v_head_dim": 20, "n_group": 1, "topk_group": 1`

// TestDeepseekV32: DeepSeek-V3.2 as transformers 5.23 builds it — the
// parameter counts of its meta-device models (small configs, keys left
// out, the class's defaults), the indexer's tensors and how the fp8
// release stores them, the rules, and a serving plan; its training step
// is modelled as traced at 5.23.0, transformers' generate refused.
func TestDeepseekV32(t *testing.T) {
	for _, c := range []struct {
		name, json string
		params     int64
	}{
		// transformers 5.23.0 on the meta device: AutoConfig.for_model(
		// "deepseek_v32", **keys), AutoModelForCausalLM.from_config under
		// torch.device("meta"), sum(p.numel()).
		{"small", `{"model_type": "deepseek_v32", ` + dsaSmall + `}`, 364144},
		{"attention_bias, two shared experts", `{"model_type": "deepseek_v32", ` + dsaSmall + `, "attention_bias": true, "n_shared_experts": 2}`, 376912},
		{"mlp_layer_types", `{"model_type": "deepseek_v32", ` + dsaSmall + `, "mlp_layer_types": ["dense", "dense", "sparse"]}`, 332912},
		// index_n_heads 64, index_head_dim 128, n_shared_experts 1,
		// first_k_dense_replace 3 from the class.
		{"keys left out", `{"model_type": "deepseek_v32", ` + dsaOmitted + `}`, 1979776},
		{"the class's defaults", `{"model_type": "deepseek_v32"}`, 671877929216},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil || m.ParamCount() != c.params {
			t.Errorf("%s: %d parameters, %v; transformers 5.23 builds %d", c.name, m.ParamCount(), err, c.params)
		}
	}
	def, _ := FromHFConfig([]byte(`{"model_type": "deepseek_v32"}`))
	if def.IndexHeads != 64 || def.IndexHeadDim != 128 || def.DenseLayers != 3 || def.QLoRARank != 1536 || def.HeadDim != 192 || def.MTPLayers != 0 {
		t.Errorf("DeepseekV32Config's defaults read as %+v", def)
	}
	ds := MustPreset("deepseek-v3.2")
	if ds.ParamCount() != 671877929216 || ds.MTPLayers != 1 {
		t.Errorf("deepseek-v3.2: %d parameters, %d MTP layers", ds.ParamCount(), ds.MTPLayers)
	}
	// The fp8 release converts wq_b and wk, not weights_proj (kept in
	// fp32 by transformers, stored bf16) nor k_norm.
	converted := map[string]bool{}
	for _, x := range ds.Tensors() {
		if strings.HasPrefix(x.Name, "model.layers.5.self_attn.indexer.") {
			converted[strings.TrimPrefix(x.Name, "model.layers.5.self_attn.indexer.")] = ds.Release.converts(x)
		}
	}
	if len(converted) != 5 || !converted["wq_b.weight"] || !converted["wk.weight"] || converted["weights_proj.weight"] || converted["k_norm.weight"] || converted["k_norm.bias"] {
		t.Errorf("indexer tensors and what the fp8 release converts: %v", converted)
	}
	stored := 0
	for _, x := range ds.storedOnly() {
		if strings.HasPrefix(x.Name, "model.layers.61.self_attn.indexer.") {
			stored++
		}
	}
	if stored != 5 {
		t.Errorf("the MTP layer stores %d indexer tensors, want wq_b, wk, k_norm's two, weights_proj", stored)
	}
	testDeepseekV32Rules(t)
	// Serving: 8 × H200, 32k tokens. vLLM pages the latent (kv_lora_rank
	// + qk_rope_head_dim, bf16) and the indexer's key (128 fp8 values and
	// one fp32 scale, 132 bytes) per token per layer, pooled in one group.
	c, err := VLLM{Version: "0.33.0", MaxModelLen: 32768, TP: 8}.Carve(Inference{Model: ds, TP: 8}, mustGPU("H200"))
	if err != nil || !c.Starts || c.KVCache.PageBytes != BF16.Size(16*(512+64))+16*132 || c.KVCache.Layers != 61 || len(c.KVCache.Groups) != 1 {
		t.Errorf("vLLM: starts %v (%s), page %v, %d layers, groups %+v, %v", c.Starts, c.Err, c.KVCache.PageBytes, c.KVCache.Layers, c.KVCache.Groups, err)
	}
	// transformers 5.23's cache: the latent and the indexer's bf16 key.
	if kv := (Inference{TP: 1, PP: 1, KVDType: BF16}).kvPerToken(ds); kv != BF16.Size(61*(512+64+128)) {
		t.Errorf("transformers: %v a token", kv)
	}
	// SGLang 0.5.23 counts the indexer keys in its cell; 0.5.3 did not.
	for _, c := range []struct {
		version string
		cell    Bytes
	}{{"0.5.23", BF16.Size(61*576) + 61*132}, {"0.5.3", BF16.Size(61 * 576)}} {
		p, err := SGLang{Version: c.version, TP: 8, MemFractionStatic: 0.9}.KVPool(ds, 140*GiB, 80*GiB)
		if err != nil || p.CellSize != c.cell {
			t.Errorf("SGLang %s: cell %v, want %v (%v)", c.version, p.CellSize, c.cell, err)
		}
	}
	// Training follows transformers 5.23, traced at 5.23.0; generate
	// stays refused.
	if est, err := (Training{Model: ds, SeqLen: 512, MicroBatch: 1}).Estimate(); err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "traced at 5.23.0") {
		t.Errorf("training: %v", err)
	}
	if _, err := (Inference{Model: ds, PromptTokens: 512, NewTokens: 16, Batch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") {
		t.Errorf("generate: %v", err)
	}
}

// testDeepseekV32Rules: what the modeling code cannot build is refused,
// naming the field.
func testDeepseekV32Rules(t *testing.T) {
	t.Helper()
	for _, c := range []struct{ name, keys, want string }{
		{"q_lora_rank null", `, "q_lora_rank": null`, "q_lora_rank"},
		{"no index heads", `, "index_n_heads": 0`, "index_heads"},
		{"indexer narrower than its rotary part", `, "index_head_dim": 8`, "index_head_dim = 8"},
		{"norm_topk_prob false", `, "norm_topk_prob": false`, "norm_topk_prob"},
		{"a dense layer after a sparse one", `, "mlp_layer_types": ["sparse", "dense", "sparse"]`, "mlp_layer_types[1]"},
	} {
		if _, err := FromHFConfig([]byte(`{"model_type": "deepseek_v32", ` + dsaSmall + c.keys + `}`)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.want)
		}
	}
	llama := MustPreset("llama-3-8b")
	llama.IndexHeads = 4
	if err := llama.Validate(); err == nil || !strings.Contains(err.Error(), "index_heads") {
		t.Errorf("index_heads on a llama: %v", err)
	}
}
