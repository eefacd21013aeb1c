package vram

import (
	"slices"
	"strings"
	"testing"
)

// TestLFM3: LFM3 as transformers 5.23 builds it (meta-device counts of
// AutoModelForCausalLM.from_config(AutoConfig.for_model("lfm3", ...)),
// sum of numel: small configs and the class's defaults), its three layer
// kinds, refused configs, and a serving plan; training is refused in words.
func TestLFM3(t *testing.T) {
	const small = `"model_type": "lfm3", "num_hidden_layers": 6, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 1000, "pad_token_id": 0`
	for _, c := range []struct {
		name, json string
		params     int64
	}{
		{"small", `{` + small + `}`, 305536},
		{"no sandwich norms, conv biases, untied", `{` + small + `, "use_sandwich_norm": false, "conv_bias": true, "tie_word_embeddings": false}`, 370048},
		{"layer_types", `{` + small + `, "layer_types": ["sliding_attention", "conv", "full_attention", "sliding_attention", "conv", "conv"]}`, 301280},
		{"the class's defaults", `{"model_type": "lfm3"}`, 1728801536},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil || m.ParamCount() != c.params {
			t.Errorf("%s: %d parameters, %v; transformers 5.23 builds %d", c.name, m.ParamCount(), err, c.params)
		}
	}
	// A key omitted takes the class's value (configuration_lfm3.py:57-98).
	m, err := FromHFConfig([]byte(`{"model_type": "lfm3"}`))
	if err != nil || m.Layers != 24 || m.Hidden != 2048 || m.Heads != 16 || m.KVHeads != 4 || m.HeadDim != 128 || m.FFN != 7680 ||
		m.Vocab != 128000 || m.SlidingWindow != 256 || m.ShortConv.Kernel != 7 || m.NormPosition != "sandwich" || !m.TiedEmbeddings ||
		!slices.Equal(m.ShortConv.Attention, []int{2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22}) || !slices.Equal(m.ShortConv.Local, []int{4, 8, 12, 16, 20}) {
		t.Errorf("defaults: %+v %+v, %v", m, m.ShortConv, err)
	}
	if m.ParamCount() != MustPreset("lfm3-1.7b").ParamCount() {
		t.Errorf("the preset is not the class's defaults")
	}
	for i, want := range map[int]string{0: "conv", 2: "global", 4: "local", 22: "global", 23: "conv"} {
		got := "conv"
		if m.AttentionLayer(i) {
			got = map[bool]string{true: "local", false: "global"}[m.LocalLayer(i)]
		}
		if got != want {
			t.Errorf("layer %d: %s, want %s", i, got, want)
		}
	}
	for _, c := range []struct{ json, want string }{
		{`{"model_type": "lfm3", "use_attention_gate": false}`, "use_attention_gate"},
		{`{"model_type": "lfm3", "sliding_window": null}`, "sliding_window"},
		{`{"model_type": "lfm3", "num_hidden_layers": 2, "layer_types": ["conv", "mamba"]}`, "layer_types[1]"},
		{`{"model_type": "lfm3", "num_hidden_layers": 2, "layer_types": ["conv"]}`, "layer_types lists 1"},
		{`{"model_type": "lfm3", "attention_bias": true}`, "model.bias"},
	} {
		if _, err := FromHFConfig([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.json, err, c.want)
		}
	}
	bad := MustPreset("lfm3-1.7b")
	bad.ShortConv = &ShortConv{Kernel: 7, Attention: []int{2, 4}, Local: []int{3}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "local_layers[0] = 3") {
		t.Errorf("a local conv layer: %v", err)
	}
	p := MustPreset("lfm3-1.7b")
	// Training follows transformers 5.23 (its traces, testdata/trace5);
	// transformers' generate is not modelled.
	if est, err := (Training{Model: p, SeqLen: 512, MicroBatch: 1}).Estimate(); err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "traced at 5.23.0") {
		t.Errorf("training: %v, notes %q", err, est.Notes)
	}
	if _, err := (Inference{Model: p, PromptTokens: 512, NewTokens: 16, Batch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") {
		t.Errorf("generate: %v", err)
	}
	// vLLM 0.33.0's registry has no Lfm3ForCausalLM, and its Transformers
	// backend refuses the short convolutions; 0.34.0 registers it
	// (vllmArchitectures): 6 full-attention layers, 5 sliding ones (256
	// tokens) and 13 convolutions' state, 24 KiB a request each, which one
	// 64-token block of attention (2 KiB a token) covers.
	if _, err := (VLLM{Version: "0.33.0", MaxModelLen: 32768}).Carve(Inference{Model: p}, mustGPU("H100-80GB")); err == nil || !strings.Contains(err.Error(), "has no Lfm3ForCausalLM") {
		t.Errorf("vLLM 0.33.0 on one H100: %v, want the registry's refusal", err)
	}
	c, err := (VLLM{Version: "0.34.0", MaxModelLen: 32768}).Carve(Inference{Model: p}, mustGPU("H100-80GB"))
	want := []VLLMGroup{{Kind: "full", Layers: 6}, {Kind: "sliding_window", Span: 256, Layers: 5}, {Kind: "mamba", Layers: 13}}
	if k := c.KVCache; err != nil || !c.Starts || !slices.Equal(k.kinds, want) || k.BlockSize != 64 || k.StatePageBytes != 24*KiB {
		t.Errorf("vLLM 0.34.0 on one H100: %v, starts %v, kinds %+v, block %d, state %v", err, c.Starts, k.kinds, k.BlockSize, k.StatePageBytes)
	}
}
