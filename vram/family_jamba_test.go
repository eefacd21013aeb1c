package vram

import (
	"math"
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
	if _, err := (SGLang{Version: "0.5.3"}).Carve(in, g); err == nil || !strings.Contains(err.Error(), "SGLang 0.5.3 has no class for jamba") {
		t.Errorf("sglang 0.5.3: %v", err)
	}
	if _, err := (SGLang{}).Carve(in, g); err == nil || !strings.Contains(err.Error(), "not modelled") {
		t.Errorf("sglang 0.5.23: %v", err)
	}
	if _, err := (TGI{}).Carve(in, g); err == nil || !strings.Contains(err.Error(), "state-space") {
		t.Errorf("tgi: %v", err)
	}
	if c, err := (VLLM{Version: "0.11.0", MaxModelLen: 8192, TP: 2}).Carve(in, g); err != nil || c.KVCache.StateLayers != 28 || c.KVCache.StateKind != "Mamba-1" {
		t.Errorf("vllm: %v, %d state layers of %q", err, c.KVCache.StateLayers, c.KVCache.StateKind)
	}
}

// A Jamba Mamba layer under torch.no_grad (a generate's prefill) keeps
// slow_forward's locals — exp(A·Δt), B·Δt, B·Δt·x of the whole sequence,
// the projections — until it returns, and one state at a time: a
// JambaMambaDecoderLayer of these dimensions on 4 × 256 fp32 tokens peaked
// at 119,046,144 bytes above its input (transformers 4.57.6, torch 2.15 on
// the CPU, a live-storage dispatch tracker).
func TestJambaNoGradLayer(t *testing.T) {
	m := Model{Family: "jamba", Layers: 4, Hidden: 256, Heads: 4, KVHeads: 2, FFN: 512, Vocab: 1000, MaxPosition: 512, Experts: 4, ExpertsPerToken: 2, ExpertFFN: 512, MoEEvery: 2,
		Mamba: &Mamba{Inner: 512, State: 16, ConvKernel: 4, DTRank: 16, ConvBias: true, Attention: []int{2}}}
	tr := Training{Model: m, SeqLen: 256, MicroBatch: 4, Precision: "fp32", Trainable: "frozen", Optimizer: "none", Dropout: new(float64)}
	r, err := tr.resolve()
	if err != nil {
		t.Fatal(err)
	}
	r.frozen = true
	const measured = 119046144
	if got := buildBlock(&r, 0).NoGradPeak; math.Abs(float64(got)-measured)/measured > 0.02 {
		t.Errorf("no-grad layer peak %d, measured %d (%+.2f%%)", got, measured, 100*(float64(got)-measured)/measured)
	}
}
