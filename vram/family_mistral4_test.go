package vram

import (
	"strings"
	"testing"
)

// mistral4Small is a small Mistral 4 config.
const mistral4Small = `"model_type": "mistral4", "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1, "kv_lora_rank": 32, "qk_rope_head_dim": 16, "qk_nope_head_dim": 24, "v_head_dim": 20`

// TestMistral4: Mistral Small 4 as transformers 5.23 builds it — the
// parameter counts of its meta-device models (small configs; the class's
// defaults), the class's defaults for keys left out, the rules, and a
// serving plan; training as traced at 5.23, generate refused in words.
func TestMistral4(t *testing.T) {
	for _, c := range []struct {
		name, json string
		params     int64
	}{
		// transformers 5.23.0 on the meta device: Mistral4Config(**keys),
		// Mistral4ForCausalLM under torch.device("meta"),
		// sum(p.numel()).
		{"small", `{` + mistral4Small + `, "q_lora_rank": 48}`, 369840},
		{"no q_lora, attention_bias, one dense layer", `{` + mistral4Small + `, "q_lora_rank": null, "attention_bias": true, "first_k_dense_replace": 1}`, 337264},
		// q_lora_rank left out: the class's 1024.
		{"two shared experts, tied", `{` + mistral4Small + `, "n_shared_experts": 2, "tie_word_embeddings": true}`, 983072},
		{"the class's defaults", `{"model_type": "mistral4"}`, 118972826624},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil || m.ParamCount() != c.params {
			t.Errorf("%s: %d parameters, %v; transformers 5.23 builds %d", c.name, m.ParamCount(), err, c.params)
		}
	}
	def, _ := FromHFConfig([]byte(`{"model_type": "mistral4"}`))
	if def.Layers != 36 || def.Experts != 128 || def.ExpertsPerToken != 4 || def.DenseLayers != 0 || def.QLoRARank != 1024 ||
		def.KVLoRARank != 256 || def.HeadDim != 128 || def.KVHeads != 32 || def.MaxPosition != 1048576 || def.Normalize().Router != "softmax_topk_norm" {
		t.Errorf("Mistral4Config's defaults read as %+v", def)
	}
	if m, err := FromHFConfig([]byte(`{` + mistral4Small + `, "norm_topk_prob": false}`)); err != nil || m.Router != "softmax_topk" {
		t.Errorf("norm_topk_prob false: router %q, %v", m.Router, err)
	}
	small, _ := FromHFConfig([]byte(`{` + mistral4Small + `}`))
	for _, c := range []struct {
		edit func(*Model)
		want string
	}{
		{func(m *Model) { m.KVLoRARank = 0 }, "kv_lora_rank"},
		{func(m *Model) { m.Bias = BiasAll }, "attention_bias"},
		{func(m *Model) { m.Router = "sigmoid_topk_norm" }, "model.router"},
		{func(m *Model) { m.ExpertGroups = 2 }, "model.expert_groups"},
	} {
		m := small
		c.edit(&m)
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error naming %s, got %v", c.want, err)
		}
	}
	ms := MustPreset("mistral-small-4-119b")
	if ms.ParamCount() != 118972826624 {
		t.Errorf("mistral-small-4-119b: %d parameters", ms.ParamCount())
	}
	// Training follows transformers 5.23 (its traces, testdata/trace5);
	// transformers' generate is not modelled.
	if est, err := (Training{Model: ms, SeqLen: 512, MicroBatch: 1}).Estimate(); err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "traced at 5.23.0") {
		t.Errorf("training: %v, notes %q", err, est.Notes)
	}
	if _, err := (Inference{Model: ms, PromptTokens: 512, NewTokens: 16, Batch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") {
		t.Errorf("generate: %v", err)
	}
	// No vLLM registry read has Mistral4ForCausalLM (vllmArchitectures):
	// its Transformers backend would load it, which the carve does not
	// model.
	if _, err := (VLLM{MaxModelLen: 32768, TP: 4}).Carve(Inference{Model: ms, TP: 4}, mustGPU("H100-80GB")); err == nil || !strings.Contains(err.Error(), "has no Mistral4ForCausalLM") {
		t.Errorf("vLLM: %v, want the registry's refusal", err)
	}
}
