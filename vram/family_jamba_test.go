package vram

import (
	"strings"
	"testing"
)

// Jamba-v0.1's config.json reads to the preset; "auto" Δt ranks and the
// layer patterns the engine does not model are handled by name.
func TestJambaConfig(t *testing.T) {
	const released = `{"architectures": ["JambaForCausalLM"], "attn_layer_offset": 4, "attn_layer_period": 8, "expert_layer_offset": 1,
		"expert_layer_period": 2, "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336, "mamba_conv_bias": true,
		"mamba_d_conv": 4, "mamba_d_state": 16, "mamba_dt_rank": 256, "mamba_expand": 2, "mamba_proj_bias": false,
		"max_position_embeddings": 262144, "model_type": "jamba", "num_attention_heads": 32, "num_experts": 16,
		"num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
		"tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_mamba_kernels": true, "vocab_size": 65536}`
	m, err := FromHFConfig([]byte(released))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.ParamCount(), MustPreset("jamba-v0.1").ParamCount(); got != want || got != 51570323328 {
		t.Errorf("config.json: %d parameters, the preset %d; PyTorch's JambaForCausalLM has 51,570,323,328", got, want)
	}
	if a := m.Mamba.Attention; len(a) != 4 || a[0] != 4 || a[3] != 28 || m.MoEEvery != 2 || !m.IsMoELayer(1) || m.IsMoELayer(0) {
		t.Errorf("attention layers %v, experts every %d", a, m.MoEEvery)
	}
	auto, err := FromHFConfig([]byte(strings.Replace(released, `"mamba_dt_rank": 256`, `"mamba_dt_rank": "auto"`, 1)))
	if err != nil || auto.Mamba.DTRank != 256 {
		t.Errorf("mamba_dt_rank auto: %v, %v; want ceil(4096 / 16) = 256", auto.Mamba, err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"expert_layer_offset": 1`, `"expert_layer_offset": 0`, "expert_layer_offset 0"},
		{`"attn_layer_offset": 4`, `"attn_layer_offset": 9`, "attn_layer_offset 9 must be in [0, attn_layer_period 8)"},
		{`"hidden_act": "silu"`, `"hidden_act": "gelu"`, `hidden_act "gelu"`},
	} {
		if _, err := FromHFConfig([]byte(strings.Replace(released, tc.from, tc.to, 1))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.to, err, tc.want)
		}
	}
	// A shape whose discretized tensors cannot be represented is refused
	// by name, not overflowed.
	huge := m.clone()
	huge.Mamba.Inner, huge.Mamba.State = 1<<20, 1<<20
	if _, err := (Training{Model: huge, SeqLen: 1 << 16, MicroBatch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "mamba.inner × mamba.state") {
		t.Errorf("huge mixer: %v", err)
	}
	// The mixers are refused where they are not modelled.
	tr := Training{Model: m, SeqLen: 512, MicroBatch: 1, Precision: "bf16", Parallel: Parallel{TP: 2}}
	if _, err := tr.Estimate(); err == nil || !strings.Contains(err.Error(), "Mamba-1") {
		t.Errorf("TP over Mamba-1 mixers: %v", err)
	}
	g, _ := LookupGPU("h100")
	in := Inference{Model: m, Weights: Quant{DType: BF16}, Batch: 1, PromptTokens: 128, NewTokens: 16}
	if _, err := (SGLang{}).Carve(in, g); err == nil || !strings.Contains(err.Error(), "SGLang 0.5.3 pools only") {
		t.Errorf("sglang: %v", err)
	}
	if _, err := (TGI{}).Carve(in, g); err == nil || !strings.Contains(err.Error(), "state-space") {
		t.Errorf("tgi: %v", err)
	}
	if c, err := (VLLM{MaxModelLen: 8192, TP: 2}).Carve(in, g); err != nil || c.KVCache.StateLayers != 28 || c.KVCache.StateKind != "Mamba-1" {
		t.Errorf("vllm: %v, %d state layers of %q", err, c.KVCache.StateLayers, c.KVCache.StateKind)
	}
}
