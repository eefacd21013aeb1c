package vram

import (
	"strings"
	"testing"
)

// A Mamba-2 model keeps a state per sequence that does not grow with the
// context, where an attention model's KV cache does.
func TestSSMStateDoesNotGrowWithContext(t *testing.T) {
	mamba, llama := MustPreset("mamba-codestral-7b"), MustPreset("llama-3-8b")
	s := mamba.SSM.Normalize()
	// Mamba2Cache: conv_states [layers, batch, conv_dim, conv_kernel] and
	// ssm_states [layers, batch, heads, head_dim, state] in the model dtype.
	convDim := int64(s.Heads*s.HeadDim + 2*s.Groups*s.State)
	perSeq := BF16.Size(int64(mamba.Layers) * (convDim*int64(s.ConvKernel) + int64(s.Heads*s.HeadDim*s.State)))
	var states, kvs []Bytes
	for _, prompt := range []int{1024, 32768} {
		in := Inference{Model: mamba, Weights: Quant{DType: BF16}, Batch: 2, PromptTokens: prompt, NewTokens: 16}
		est, err := in.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		if est.KVCache != 0 || est.KVPerToken != 0 {
			t.Errorf("mamba at %d tokens: a KV cache of %v (%v a token)", prompt, est.KVCache, est.KVPerToken)
		}
		if est.Peak.KVCache < est.State {
			t.Errorf("mamba at %d tokens: the peak's cache %v leaves out the state %v", prompt, est.Peak.KVCache, est.State)
		}
		states = append(states, est.State)
		ll := Inference{Model: llama, Weights: Quant{DType: BF16}, Batch: 2, PromptTokens: prompt, NewTokens: 16}
		le, err := ll.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		kvs = append(kvs, le.KVCache)
	}
	if states[0] != 2*perSeq || states[1] != states[0] {
		t.Errorf("state %v at 1k and %v at 32k tokens, want %v both times", states[0], states[1], 2*perSeq)
	}
	if kvs[1] <= kvs[0] {
		t.Errorf("llama's KV cache %v at 1k, %v at 32k: it should grow", kvs[0], kvs[1])
	}
}

// What the engine does not model of state-space layers is refused by name.
func TestSSMRefusals(t *testing.T) {
	m := MustPreset("mamba-codestral-7b")
	base := Training{Model: m, SeqLen: 512, MicroBatch: 1, Precision: "bf16", Optimizer: "adamw"}
	for _, tc := range []struct {
		change func(*Training)
		want   string
	}{
		{func(t *Training) { t.Framework = "torchtitan" }, "framework \"torchtitan\": state-space"},
		{func(t *Training) { t.Parallel.TP = 2 }, "parallelism of state-space (Mamba-2) layers"},
		{func(t *Training) { t.Checkpointing = "selective" }, "only none and full"},
		{func(t *Training) { t.Compile = true }, "compile and float8"},
	} {
		tr := base
		tc.change(&tr)
		if _, err := tr.Estimate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
	est, err := base.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(est.Notes, "\n"), "torch path") {
		t.Errorf("the estimate does not say which mixer path it models: %q", est.Notes)
	}
	hybrid := m.clone()
	hybrid.SSM.Attention = []int{3}
	if err := hybrid.Validate(); err == nil || !strings.Contains(err.Error(), "every mamba2 layer is a mixer") {
		t.Errorf("mamba2 with an attention layer: %v", err)
	}
	in := Inference{Model: m, Weights: Quant{DType: BF16}, Batch: 1, PromptTokens: 128, NewTokens: 16}
	g, _ := LookupGPU("h100")
	if c, err := (VLLM{Version: "0.11.0", MaxModelLen: 4096}).Carve(in, g); err != nil || c.KVCache.StateLayers != m.Layers || c.KVCache.hybrid() {
		t.Errorf("vllm: %v, %d state layers (want %d, not hybrid)", err, c.KVCache.StateLayers, m.Layers)
	}
	if _, err := (SGLang{Version: "0.5.3"}).Carve(in, g); err == nil || !strings.Contains(err.Error(), "SGLang 0.5.3 has no class for mamba2") {
		t.Errorf("sglang 0.5.3: %v", err)
	}
	if _, err := (SGLang{}).Carve(in, g); err == nil || !strings.Contains(err.Error(), "not modelled") {
		t.Errorf("sglang 0.5.23: %v", err)
	}
	if _, err := (TGI{}).Carve(in, g); err == nil || !strings.Contains(err.Error(), "state-space") {
		t.Errorf("tgi: %v", err)
	}
	for _, tc := range []struct{ json, want string }{
		{`{"model_type": "mamba2", "num_hidden_layers": 2, "hidden_size": 64, "vocab_size": 100, "num_heads": 4, "head_dim": 16, "expand": 2, "n_groups": 1}`, "hidden_size · expand = 128 must equal num_heads · head_dim = 64"},
		{`{"model_type": "mamba2", "num_hidden_layers": 2, "hidden_size": 64, "vocab_size": 100, "num_heads": 8, "head_dim": 16, "n_groups": 3}`, "ssm.groups = 3 must divide ssm.heads = 8"},
		{`{"model_type": "mamba2", "num_hidden_layers": 2, "hidden_size": 64, "vocab_size": 100, "num_heads": 8, "head_dim": 16, "n_groups": 1, "residual_in_fp32": false}`, "residual_in_fp32 false"},
	} {
		m, err := FromHFConfig([]byte(tc.json))
		if err == nil {
			err = m.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.json, err, tc.want)
		}
	}
}

// A hybrid caches K and V in its attention layers only, and a state in
// its mixers.
func TestHybridCache(t *testing.T) {
	m := MustPreset("granite-4.0-h-1b")
	s := m.SSM.Normalize()
	in := Inference{Model: m, Weights: Quant{DType: BF16}, Batch: 3, PromptTokens: 1000, NewTokens: 24}
	est, err := in.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	attn := len(s.Attention)
	if want := BF16.Size(int64(attn) * 2 * int64(m.KVHeads) * int64(m.Hidden/m.Heads)); est.KVPerToken != want {
		t.Errorf("KV per token %v, want %v (%d attention layers)", est.KVPerToken, want, attn)
	}
	if want := mulBytes(int64(3*(m.Layers-attn)), s.StateBytes(BF16)); est.State != want {
		t.Errorf("state %v, want %v (%d mixers, 3 sequences)", est.State, want, m.Layers-attn)
	}
	if est.KVCache != mulBytes(3*1024, est.KVPerToken) {
		t.Errorf("KV cache %v, want 3 × 1024 tokens × %v", est.KVCache, est.KVPerToken)
	}
}

// The hybrids' layer patterns and mixer keys.
func TestHybridConfigs(t *testing.T) {
	granite := `{"model_type": "granitemoehybrid", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
		"intermediate_size": 128, "shared_intermediate_size": 96, "vocab_size": 100, "num_local_experts": 0, "mamba_n_heads": 8, "mamba_d_head": "auto",
		"mamba_d_state": 16, "mamba_n_groups": 1, "layer_types": ["mamba", "attention", "mamba", "mamba"]`
	m, err := FromHFConfig([]byte(granite + `, "position_embedding_type": "nope"}`))
	if err != nil {
		t.Fatal(err)
	}
	m = m.Normalize()
	if m.FFN != 96 || m.Position != "none" || m.SSM.HeadDim != 16 || !m.SSMLayer(0) || m.SSMLayer(1) || m.attentionLayers(0, 4) != 1 {
		t.Errorf("granitemoehybrid read %+v %+v", m, *m.SSM)
	}
	moe, err := FromHFConfig([]byte(granite + `, "position_embedding_type": "rope", "num_local_experts": 8, "num_experts_per_tok": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	if moe.Experts != 8 || moe.ExpertFFN != 128 || moe.SharedExperts != 1 || moe.SharedExpertFFN != 96 || moe.Position != "rope" || !moe.IsMoELayer(0) {
		t.Errorf("granitemoehybrid with experts read %+v", moe)
	}
	bamba := `{"model_type": "bamba", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
		"intermediate_size": 128, "vocab_size": 100, "mamba_n_heads": 8, "mamba_d_head": 16, "mamba_d_state": 16`
	if m, err := FromHFConfig([]byte(bamba + `, "attn_layer_indices": [1, 3]}`)); err != nil || m.Normalize().attentionLayers(0, 4) != 2 || m.RotaryPct != 0.5 {
		t.Errorf("bamba read %+v (%v)", m, err)
	}
	for _, tc := range []struct{ json, want string }{
		{granite[:len(granite)-len(`"layer_types": ["mamba", "attention", "mamba", "mamba"]`)] + `"layer_types": ["mamba", "x", "mamba", "mamba"]}`, `layer_types[1] = the string "x"`},
		{bamba + `, "attn_layer_indices": [1, 7]}`, "attn_layer_indices[1] = the number 7"},
		{bamba + `, "mamba_d_head": 20}`, "mamba_n_heads · mamba_d_head = 160 must equal mamba_expand · hidden_size = 128"},
	} {
		if _, err := FromHFConfig([]byte(tc.json)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.json, err, tc.want)
		}
	}
}

// Falcon-H1 runs attention beside every mixer: each layer keeps K and V
// and a state; its config's mixer width is mamba_d_ssm.
func TestFalconH1(t *testing.T) {
	m := MustPreset("falcon-h1-0.5b-instruct")
	s := m.SSM.Normalize()
	est, err := Inference{Model: m, Weights: Quant{DType: BF16}, Batch: 2, PromptTokens: 1000, NewTokens: 24}.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	if want := BF16.Size(int64(m.Layers) * 2 * int64(m.KVHeads) * int64(m.HeadDim)); est.KVPerToken != want {
		t.Errorf("KV per token %v, want %v (all %d layers attend)", est.KVPerToken, want, m.Layers)
	}
	if want := mulBytes(int64(2*m.Layers), s.StateBytes(BF16)); est.State != want {
		t.Errorf("state %v, want %v (a mixer in each of %d layers, 2 sequences)", est.State, want, m.Layers)
	}
	const base = `{"model_type": "falcon_h1", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100, "mamba_n_heads": 4, "mamba_d_state": 16`
	c, err := FromHFConfig([]byte(base + `, "mamba_d_ssm": 96, "mamba_rms_norm": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.SSM.inner() != 96 || c.SSM.HeadDim != 24 || c.SSM.Norm != "before_gate" || !c.SSM.ParallelAttention || c.attentionLayers(0, 2) != 2 || !c.SSMLayer(1) {
		t.Errorf("read %+v", *c.SSM)
	}
	if c, err := FromHFConfig([]byte(base + `, "mamba_d_ssm": null}`)); err != nil || c.SSM.inner() != 128 || c.SSM.Norm != "none" {
		t.Errorf("mamba_d_ssm null (expand · hidden): %+v, %v", c.SSM, err)
	}
	for _, tc := range []struct{ json, want string }{
		{base + `, "mamba_d_ssm": 96, "mamba_d_head": 20}`, "mamba_n_heads · mamba_d_head = 80 must equal the mixer's width 96"},
		{base + `, "mamba_d_ssm": 96, "projectors_bias": true}`, "projectors_bias differing from mamba_proj_bias"},
	} {
		if _, err := FromHFConfig([]byte(tc.json)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.json, err, tc.want)
		}
	}
	bad := m.clone()
	bad.SSM.Attention = []int{1}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "with parallel_attention every layer runs attention") {
		t.Errorf("parallel attention with attention layers: %v", err)
	}
}
