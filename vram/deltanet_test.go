package vram

import (
	"strings"
	"testing"
)

// Qwen3-Next's DeltaNet layers keep a conv and an fp32 recurrent state per
// sequence that do not grow with the context; its twelve attention layers
// cache K and V.
func TestDeltaNetState(t *testing.T) {
	m := MustPreset("qwen3-next-80b-a3b")
	d := m.DeltaNet
	attn := len(d.Attention)
	// conv_states [batch, conv_dim, kernel] in the model's dtype and
	// recurrent_states [batch, value heads, key dim, value dim] in fp32.
	perSeq := BF16.Size(int64(2*d.KeyHeads*d.KeyDim+d.ValueHeads*d.ValueDim)*int64(d.ConvKernel)) + FP32.Size(int64(d.ValueHeads*d.KeyDim*d.ValueDim))
	want := mulBytes(int64(2*(m.Layers-attn)), perSeq)
	var kvs []Bytes
	for _, prompt := range []int{1024, 32768} {
		est, err := Inference{Model: m, Weights: Quant{DType: BF16}, Batch: 2, PromptTokens: prompt, NewTokens: 16}.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		if est.State != want {
			t.Errorf("at %d tokens: state %v, want %v", prompt, est.State, want)
		}
		if perToken := BF16.Size(int64(attn) * 2 * int64(m.KVHeads) * int64(m.HeadDim)); est.KVPerToken != perToken {
			t.Errorf("KV per token %v, want %v (%d attention layers)", est.KVPerToken, perToken, attn)
		}
		if !strings.Contains(strings.Join(est.Notes, "\n"), "delta_net: the Gated DeltaNet layers keep") {
			t.Errorf("the estimate does not say what the DeltaNet layers keep: %q", est.Notes)
		}
		kvs = append(kvs, est.KVCache)
	}
	if kvs[1] <= kvs[0] {
		t.Errorf("the attention layers' KV cache %v at 1k, %v at 32k: it should grow", kvs[0], kvs[1])
	}
}

// Qwen3-Next's config keys, and what the engine refuses of DeltaNet layers.
func TestQwen3NextConfig(t *testing.T) {
	const base = `{"model_type": "qwen3_next", "num_hidden_layers": 8, "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512, "vocab_size": 100,
		"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 96, "norm_topk_prob": true,
		"linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 32, "linear_value_head_dim": 32`
	m, err := FromHFConfig([]byte(base + `}`))
	if err != nil {
		t.Fatal(err)
	}
	m = m.Normalize()
	if m.attentionLayers(0, 8) != 2 || !m.DeltaNetLayer(0) || m.DeltaNetLayer(3) || m.DeltaNetLayer(7) || m.RotaryPct != 0.25 ||
		m.SharedExpertFFN != 96 || m.Router != "softmax_topk_norm" || m.DeltaNet.ConvKernel != 4 {
		t.Errorf("read %+v %+v", m, *m.DeltaNet)
	}
	if err := m.Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
	for _, tc := range []struct{ json, want string }{
		{base + `, "layer_types": ["linear_attention", "sliding_attention", "linear_attention", "full_attention", "linear_attention", "linear_attention", "linear_attention", "full_attention"]}`, `layer_types[1] = the string "sliding_attention"`},
		{base + `, "full_attention_interval": 0}`, "full_attention_interval must be ≥ 1"},
		{base + `, "attention_bias": true}`, "attention_bias"},
		{base[:len(base)-len(`"linear_value_head_dim": 32`)] + `"linear_value_head_dim": 32, "linear_num_value_heads": 3}`, "value_heads = 3 must be a multiple of key_heads = 2"},
	} {
		m, err := FromHFConfig([]byte(tc.json))
		if err == nil {
			err = m.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.json, err, tc.want)
		}
	}
	tr := Training{Model: MustPreset("qwen3-next-80b-a3b"), SeqLen: 512, MicroBatch: 1, Precision: "bf16", Parallel: Parallel{TP: 2}}
	if _, err := tr.Estimate(); err == nil || !strings.Contains(err.Error(), "parallelism of Gated DeltaNet layers") {
		t.Errorf("TP over DeltaNet layers: %v", err)
	}
	tr.Parallel = Parallel{}
	est, err := tr.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(est.Notes, "\n"), "torch_chunk_gated_delta_rule") {
		t.Errorf("the estimate does not say which DeltaNet path it models: %q", est.Notes)
	}
	in := Inference{Model: MustPreset("qwen3-next-80b-a3b"), Weights: Quant{DType: BF16}, Batch: 1, PromptTokens: 128, NewTokens: 16}
	g, _ := LookupGPU("h100")
	if c, err := (VLLM{Version: "0.11.0", MaxModelLen: 4096}).Carve(in, g); err != nil || c.KVCache.StateLayers != 36 || !c.KVCache.hybrid() {
		t.Errorf("vllm: %v, %d state layers (want 36, hybrid)", err, c.KVCache.StateLayers)
	}
}
