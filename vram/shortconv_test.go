package vram

import (
	"strings"
	"testing"
)

// LFM2's conv states do not grow with the context; its attention layers'
// KV cache does, and only those six layers cache K and V.
func TestShortConvStateDoesNotGrowWithContext(t *testing.T) {
	m := MustPreset("lfm2-1.2b")
	attn := len(m.ShortConv.Attention)
	// Lfm2HybridConvCache: conv_cache [batch, hidden, conv_L_cache] for
	// every one of the 16 layers, in the model's dtype.
	want := BF16.Size(3 * int64(m.Layers) * int64(m.Hidden) * int64(m.ShortConv.Kernel))
	var kvs []Bytes
	for _, prompt := range []int{1024, 32768} {
		est, err := Inference{Model: m, Weights: Quant{DType: BF16}, Batch: 3, PromptTokens: prompt, NewTokens: 16}.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		if est.State != want {
			t.Errorf("at %d tokens: state %v, want %v", prompt, est.State, want)
		}
		if perToken := BF16.Size(int64(attn) * 2 * int64(m.KVHeads) * int64(m.HeadDim)); est.KVPerToken != perToken {
			t.Errorf("KV per token %v, want %v (%d attention layers)", est.KVPerToken, perToken, attn)
		}
		if est.Peak.KVCache <= est.State {
			t.Errorf("the peak's cache %v leaves out the state %v or the attention layers' K and V", est.Peak.KVCache, est.State)
		}
		if !strings.Contains(strings.Join(est.Notes, "\n"), "short_conv: the convolution layers keep") {
			t.Errorf("the estimate does not say what the convolution layers keep: %q", est.Notes)
		}
		kvs = append(kvs, est.KVCache)
	}
	if kvs[1] <= kvs[0] {
		t.Errorf("the attention layers' KV cache %v at 1k, %v at 32k: it should grow", kvs[0], kvs[1])
	}
}

// LFM2's config keys: the original names, the MLP's auto-adjusted width,
// full_attn_idxs or layer_types; bad values are errors naming the key.
func TestLFM2Config(t *testing.T) {
	const base = `{"model_type": "lfm2", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100`
	m, err := FromHFConfig([]byte(base + `, "block_ff_dim": 1152, "full_attn_idxs": [3, 1], "theta": 10000, "conv_L_cache": 4}`))
	if err != nil {
		t.Fatal(err)
	}
	// int(2 · 1152 / 3) = 768, already a multiple of 256.
	if m.FFN != 768 || m.HeadDim != 64 || !m.TiedEmbeddings || m.ShortConv.Kernel != 4 || !m.ConvLayer(0) || m.ConvLayer(1) || m.attentionLayers(0, 4) != 2 {
		t.Errorf("read %+v %+v", m, *m.ShortConv)
	}
	m, err = FromHFConfig([]byte(base + `, "intermediate_size": 1000, "block_multiple_of": 256, "layer_types": ["conv", "full_attention", "conv", "conv"], "tie_embedding": false}`))
	if err != nil {
		t.Fatal(err)
	}
	// int(2 · 1000 / 3) = 666, rounded up to 768.
	if m.FFN != 768 || m.TiedEmbeddings || m.attentionLayers(0, 4) != 1 || m.ConvLayer(1) {
		t.Errorf("read %+v %+v", m, *m.ShortConv)
	}
	if m, err := FromHFConfig([]byte(base + `, "intermediate_size": 1000, "block_auto_adjust_ff_dim": false}`)); err != nil || m.FFN != 1000 || m.attentionLayers(0, 4) != 4 {
		t.Errorf("without auto-adjust and layer kinds: %+v, %v", m, err)
	}
	for _, tc := range []struct{ json, want string }{
		{base + `, "layer_types": ["conv", "mamba", "conv", "conv"]}`, `layer_types[1] = the string "mamba"`},
		{base + `, "layer_types": ["conv"]}`, "layer_types lists 1 layers for num_hidden_layers = 4"},
		{base + `, "full_attn_idxs": [1, 9]}`, "full_attn_idxs[1] = the number 9"},
		{base + `, "conv_L_cache": 0}`, "model.short_conv.kernel = 0"},
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

// What the engine does not model of short convolutions is refused by name.
func TestShortConvRefusals(t *testing.T) {
	m := MustPreset("lfm2-1.2b")
	base := Training{Model: m, SeqLen: 512, MicroBatch: 1, Precision: "bf16", Optimizer: "adamw"}
	for _, tc := range []struct {
		change func(*Training)
		want   string
	}{
		{func(t *Training) { t.Framework = "torchtune" }, "short-convolution layers are modelled as transformers' Lfm2ShortConv"},
		{func(t *Training) { t.Parallel.TP = 2 }, "parallelism of short-convolution layers"},
		{func(t *Training) { t.Checkpointing = "selective" }, "only none and full"},
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
	if !strings.Contains(strings.Join(est.Notes, "\n"), "slow_forward") {
		t.Errorf("the estimate does not say which convolution path it models: %q", est.Notes)
	}
	llama := MustPreset("llama-3-8b")
	llama.ShortConv = &ShortConv{Kernel: 3}
	if err := llama.Validate(); err == nil || !strings.Contains(err.Error(), "model.short_conv describes short-convolution layers (families lfm2, lfm3)") {
		t.Errorf("llama with short_conv: %v", err)
	}
	in := Inference{Model: m, Weights: Quant{DType: BF16}, Batch: 1, PromptTokens: 128, NewTokens: 16}
	g, _ := LookupGPU("h100")
	if c, err := (VLLM{Version: "0.11.0", MaxModelLen: 4096}).Carve(in, g); err != nil || c.KVCache.StateLayers == 0 || !c.KVCache.hybrid() {
		t.Errorf("vllm: %v, %d state layers (want some, hybrid)", err, c.KVCache.StateLayers)
	}
	if _, err := (SGLang{Version: "0.5.3"}).Carve(in, g); err == nil || !strings.Contains(err.Error(), "SGLang 0.5.3 has no class for lfm2") {
		t.Errorf("sglang: %v", err)
	}
	if _, err := (TGI{}).Carve(in, g); err == nil || !strings.Contains(err.Error(), "short-convolution") {
		t.Errorf("tgi: %v", err)
	}
}
