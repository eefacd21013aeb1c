package vram

import (
	"slices"
	"strings"
	"testing"
)

// mimoSmall is a small MiMoV2FlashConfig: 7 layers, so the class's layer
// types make layers 0 and 5 global.
const mimoSmall = `"vocab_size": 1000, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 7, "num_attention_heads": 8, "num_key_value_heads": 2,
	"head_dim": 24, "v_head_dim": 16, "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2`

// TestMiMoV2Flash: MiMo-V2-Flash as transformers 5.23 builds it. Each
// count is sum(p.numel() for p in model.parameters()) of
// AutoModelForCausalLM.from_config(AutoConfig.for_model("mimo_v2_flash",
// **keys)) built under torch.device("meta") with torch 2.15.0 and
// transformers 5.23.0, and the rotary buffers' widths are its
// named_buffers'.
func TestMiMoV2Flash(t *testing.T) {
	for _, c := range []struct {
		name, keys string
		params     int64
		rotary     int64 // each rotary buffer's length
		kinds      int   // rotary buffer pairs: one per layer kind present
	}{
		{"small", mimoSmall, 501224, 4, 2},
		{"biases, tied, layer types, two dense layers, rope_parameters", mimoSmall + `, "attention_bias": true, "tie_word_embeddings": true,
			"layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention"],
			"mlp_layer_types": ["dense", "dense", "sparse", "sparse", "sparse", "sparse", "sparse"], "sliding_window_size": 64,
			"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0, "partial_rotary_factor": 0.5},
				"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}}`, 427920, 6, 2},
		{"every layer sliding", mimoSmall + `, "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention"]`, 511480, 4, 1},
		{"the class's defaults", ``, 308778768832, 32, 2},
	} {
		js := `{"model_type": "mimo_v2_flash"}`
		if c.keys != "" {
			js = `{"model_type": "mimo_v2_flash", ` + c.keys + `}`
		}
		m, err := FromHFConfig([]byte(js))
		var rot []int64
		for _, b := range m.Buffers() {
			if strings.Contains(b.Name, "rotary_emb") {
				rot = append(rot, b.Shape[0])
			}
		}
		if err != nil || m.ParamCount() != c.params || len(rot) != 2*c.kinds || rot[0] != c.rotary {
			t.Errorf("%s: %d parameters, rotary buffers %v, %v; transformers 5.23 builds %d, %d pairs of %d", c.name, m.ParamCount(), rot, err, c.params, c.kinds, c.rotary)
		}
	}
	// A key left out takes MiMoV2FlashConfig's default (l.78-110), the
	// layer kinds __post_init__'s (l.113-121): global at 0 and every sixth,
	// one dense layer; sliding_window_size + 1 is the window (l.132-133).
	m, err := FromHFConfig([]byte(`{"model_type": "mimo_v2_flash"}`))
	var global []int
	for i := 0; i < m.Layers; i++ {
		if !m.LocalLayer(i) {
			global = append(global, i)
		}
	}
	if err != nil || m.Layers != 48 || m.Hidden != 4096 || m.Heads != 64 || m.KVHeads != 4 || m.HeadDim != 192 || m.VHeadDim != 128 || m.FFN != 16384 ||
		m.Vocab != 152576 || m.MaxPosition != 131072 || m.Experts != 256 || m.ExpertsPerToken != 8 || m.ExpertFFN != 2048 || m.DenseLayers != 1 ||
		m.SlidingWindow != 129 || m.RotaryPct != 0.334 || m.TiedEmbeddings || m.Bias != "" && m.Bias != BiasNone ||
		!slices.Equal(global, []int{0, 5, 11, 17, 23, 29, 35, 41, 47}) {
		t.Errorf("defaults: %+v (global %v), %v", m, global, err)
	}
	if w, err := FromHFConfig([]byte(`{"model_type": "mimo_v2_flash", "sliding_window_size": 128}`)); err != nil || w.SlidingWindow != 129 {
		t.Errorf("sliding_window_size 128: window %d, %v", w.SlidingWindow, err)
	}
	p := MustPreset("mimo-v2-flash")
	if p.ParamCount() != m.ParamCount() {
		t.Errorf("the preset has %d parameters, the class's defaults %d", p.ParamCount(), m.ParamCount())
	}
	// The three stored MTP layers, each 2h + 2h² (enorm, hnorm, eh_proj),
	// a sliding layer's attention (q 64·192, k 8·192, v 8·128, o 64·128
	// wide, 64 sinks), a dense MLP of 16,384 and three norms, at h = 4,096.
	var mtp int64
	for _, t := range p.Normalize().storedOnly() {
		mtp += t.Numel()
	}
	if h := int64(4096); mtp != 3*(2*h+2*h*h+h*(64*192+8*192+8*128)+64*128*h+64+3*16384*h+3*h) {
		t.Errorf("MTP layers: %d parameters stored", mtp)
	}
	for _, c := range []struct{ keys, want string }{
		{`"layer_types": ["full_attention", "sliding_attention"]`, "layer_types lists 2 layers for num_hidden_layers = 48"},
		{`"num_hidden_layers": 4, "layer_types": ["sliding_attention", "full_attention", "full_attention", "sliding_attention"]`, "the global layers are not every n-th layer"},
		{`"rope_parameters": {"full_attention": {"partial_rotary_factor": 0.5}, "sliding_attention": {"partial_rotary_factor": 0.25}}`, "partial_rotary_factor differ"},
		{`"hidden_act": "gelu"`, `hidden_act = "gelu": only the class's "silu" is modelled`},
		{`"num_key_value_heads": 64`, "mimo_v2_flash's sliding layers have twice as many"},
	} {
		if _, err := FromHFConfig([]byte(`{"model_type": "mimo_v2_flash", ` + c.keys + `}`)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.keys, err, c.want)
		}
	}
}

// TestMiMoV2FlashServing: vLLM's KV cache keeps the preset's nine global
// layers whole and its 39 sliding layers to their window of 129 tokens
// (the kinds and counts the engine groups; each layer's width is the
// engine's one width, see the family's comment); training as traced at
// 5.23, generate refused in words.
func TestMiMoV2FlashServing(t *testing.T) {
	m := MustPreset("mimo-v2-flash")
	// Training follows transformers 5.23 (its traces, testdata/trace5);
	// transformers' generate is not modelled.
	if est, err := (Training{Model: m, SeqLen: 512, MicroBatch: 1}).Estimate(); err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "traced at 5.23.0") {
		t.Errorf("training: %v, notes %q", err, est.Notes)
	}
	if _, err := (Inference{Model: m, PromptTokens: 512, NewTokens: 16, Batch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") {
		t.Errorf("generate: %v", err)
	}
	c, err := VLLM{TP: 8, MaxModelLen: 65536}.Carve(Inference{Model: m}, mustGPU("H200"))
	want := []VLLMGroup{{Kind: "full", Layers: 9}, {Kind: "sliding_window", Span: 129, Layers: 39}}
	if err != nil || !c.Starts || !slices.Equal(c.KVCache.kinds, want) {
		t.Errorf("vLLM at TP 8: starts %v (%s), kinds %+v, %v", c.Starts, c.Err, c.KVCache.kinds, err)
	}
}
