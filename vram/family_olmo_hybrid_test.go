package vram

import (
	"encoding/json"
	"strings"
	"testing"
)

// olmoHybridSmall is a small OLMo Hybrid config (pad_token_id inside the
// small vocabulary, for transformers to build it; the engine ignores it).
const olmoHybridSmall = `"model_type": "olmo_hybrid", "vocab_size": 1000, "pad_token_id": 0, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2`

// TestOlmoHybrid: OLMo Hybrid as transformers 5.23 builds it — the
// parameter counts of its meta-device models (small configs; the class's
// defaults), __post_init__'s derived keys and layer kinds, the rotary
// embedding only with a rope_theta, the rules, and a serving plan;
// training as traced at 5.23, generate refused in words.
func TestOlmoHybrid(t *testing.T) {
	for _, c := range []struct {
		name, json string
		params     int64
		rope       bool
	}{
		// transformers 5.23.0 on the meta device: AutoConfig.for_model(
		// "olmo_hybrid", **keys), AutoModelForCausalLM.from_config under
		// torch.device("meta"), sum(p.numel()); and whether it has
		// model.rotary_emb's buffers.
		{"small", `{` + olmoHybridSmall + `}`, 316928, true},
		{"linear_* keys, attention_bias, tied", `{` + olmoHybridSmall + `, "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 32, "linear_conv_kernel_dim": 3, "attention_bias": true, "tie_word_embeddings": true}`, 264856, true},
		// Three layers: no (i % 4 == 3), so the last is attention.
		{"three layers, rope_theta null", `{` + olmoHybridSmall + `, "num_hidden_layers": 3, "rope_parameters": {"rope_type": "default", "rope_theta": null}}`, 266336, false},
		{"the class's defaults", `{"model_type": "olmo_hybrid"}`, 7430870688, true},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil || m.ParamCount() != c.params || (len(m.Buffers()) == 2) != c.rope {
			t.Errorf("%s: %d parameters, %d buffers, %v; transformers 5.23 builds %d (rotary %v)", c.name, m.ParamCount(), len(m.Buffers()), err, c.params, c.rope)
		}
	}
	def, _ := FromHFConfig([]byte(`{"model_type": "olmo_hybrid"}`))
	if d := def.DeltaNet; def.HeadDim != 128 || def.KVHeads != 30 || d.KeyHeads != 30 || d.ValueHeads != 30 || d.KeyDim != 96 || d.ValueDim != 192 ||
		d.ConvKernel != 4 || len(d.Attention) != 8 || d.Attention[0] != 3 || def.Normalize().Position != "rope" {
		t.Errorf("OlmoHybridConfig's defaults read as %+v, %+v", def, def.DeltaNet)
	}
	three, _ := FromHFConfig([]byte(`{` + olmoHybridSmall + `, "num_hidden_layers": 3, "rope_theta": null}`))
	if three.DeltaNet == nil || len(three.DeltaNet.Attention) != 1 || three.DeltaNet.Attention[0] != 2 || three.Position != "none" {
		t.Errorf("three layers, legacy rope_theta null: %+v, position %q", three.DeltaNet, three.Position)
	}
	raw, _ := json.Marshal(three.HFConfig())
	if back, err := FromHFConfig(raw); err != nil || back.Position != "none" || back.ParamCount() != three.ParamCount() {
		t.Errorf("the engine's config read back: position %q, %d parameters, %v", back.Position, back.ParamCount(), err)
	}
	if _, err := FromHFConfig([]byte(`{` + olmoHybridSmall + `, "layer_types": ["full_attention", "full_attention", "full_attention", "full_attention"]}`)); err == nil || !strings.Contains(err.Error(), "attention_layers") {
		t.Errorf("no DeltaNet layer: %v", err)
	}
	o := MustPreset("olmo-hybrid-7b")
	if o.ParamCount() != 7430870688 {
		t.Errorf("olmo-hybrid-7b: %d parameters", o.ParamCount())
	}
	// Training follows transformers 5.23 (its traces, testdata/trace5);
	// transformers' generate is not modelled.
	if est, err := (Training{Model: o, SeqLen: 512, MicroBatch: 1}).Estimate(); err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "traced at 5.23.0") {
		t.Errorf("training: %v, notes %q", err, est.Notes)
	}
	if _, err := (Inference{Model: o, PromptTokens: 512, NewTokens: 16, Batch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") {
		t.Errorf("generate: %v", err)
	}
	// vLLM: 24 DeltaNet layers' state, conv 3 × (2·30·96 + 30·192) and
	// temporal 30 × 96 × 192, bf16; one token of the 8 attention layers'
	// cache 2 · 30 · 128 · 2 bytes = 15 KiB, so the block is 16 ·
	// cdiv(state, 16 · 15 KiB) tokens.
	v, err := VLLM{Version: "0.33.0", MaxModelLen: 32768}.Carve(Inference{Model: o}, mustGPU("H100-80GB"))
	k := v.KVCache
	if err != nil || !v.Starts || k.StatePageBytes != 3*11520*2+30*96*192*2 || k.BlockSize != 80 || k.PageBytes != 80*15360 || k.StateLayers != 24 {
		t.Errorf("vLLM: starts %v (%s), block %d, state page %d, page %d, %d state layers, %v", v.Starts, v.Err, k.BlockSize, k.StatePageBytes, k.PageBytes, k.StateLayers, err)
	}
}
