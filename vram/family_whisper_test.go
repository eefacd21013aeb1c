package vram

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWhisperConfig reads a released-shaped config.json
// (testdata/hf/whisper-large-v3.json: openai/whisper-large-v3's keys, written
// out here, not downloaded) and configs that leave keys to WhisperConfig's
// defaults, and checks the model each becomes.
func TestWhisperConfig(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "hf", "whisper-large-v3.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, json string
		want       Model
		params     int64
	}{
		{"whisper-large-v3's config.json", string(b), MustPreset("whisper-large-v3"), 1543490560},
		{"turbo: 4 decoder layers", `{"model_type": "whisper", "d_model": 1280, "encoder_layers": 32, "decoder_layers": 4,
			"encoder_attention_heads": 20, "decoder_attention_heads": 20, "encoder_ffn_dim": 5120, "decoder_ffn_dim": 5120,
			"vocab_size": 51866, "num_mel_bins": 128}`, MustPreset("whisper-large-v3-turbo"), 808878080},
		// WhisperConfig's defaults are whisper-tiny's shape
		// (configuration_whisper.py:199-216).
		{"defaults", `{"model_type": "whisper"}`, MustPreset("whisper-tiny"), 37760640},
	} {
		m, err := FromHFConfig([]byte(tc.json))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := m.ParamCount(); got != tc.params || got != tc.want.ParamCount() {
			t.Errorf("%s: %d parameters, want %d", tc.name, got, tc.params)
		}
		w := tc.want
		if m.Layers != w.Layers || m.DecoderLayers != w.DecoderLayers || m.Hidden != w.Hidden || m.Heads != w.Heads ||
			m.HeadDim != w.HeadDim || m.FFN != w.FFN || m.Vocab != w.Vocab || m.MelBins != w.MelBins ||
			m.SourcePositions != w.SourcePositions || m.MaxPosition != w.MaxPosition || !m.TiedEmbeddings {
			t.Errorf("%s: read %+v, want the shape of %s", tc.name, m, w.Name)
		}
	}
}

// TestWhisperConfigErrors: what the engine does not model in a config is an
// error naming the key and the rule.
func TestWhisperConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		json string
		want []string
	}{
		{`{"model_type": "whisper", "decoder_attention_heads": 8}`, []string{"decoder_attention_heads = 8", "encoder_attention_heads = 6"}},
		{`{"model_type": "whisper", "decoder_ffn_dim": 1024}`, []string{"decoder_ffn_dim = 1024", "encoder_ffn_dim = 1536"}},
		{`{"model_type": "whisper", "activation_function": "relu"}`, []string{"activation_function", "gelu"}},
		{`{"model_type": "whisper", "encoder_layerdrop": 0.1}`, []string{"encoder_layerdrop", "must be 0"}},
		{`{"model_type": "whisper", "decoder_layerdrop": 0.2}`, []string{"decoder_layerdrop", "must be 0"}},
		{`{"model_type": "whisper", "d_model": 100}`, []string{"d_model = 100", "multiple of encoder_attention_heads"}},
		{`{"model_type": "whisper", "encoder_attention_heads": 0, "decoder_attention_heads": 0}`, []string{"encoder_attention_heads = 0"}},
		{`{"model_type": "whisper", "num_mel_bins": "80"}`, []string{"num_mel_bins"}},
		{`{"model_type": "whisper", "num_mel_bins": 0}`, []string{"mel_bins = 0", "≥ 1"}},
		{`{"model_type": "whisper", "max_source_positions": -1}`, []string{"max_source_positions"}},
		{`{"model_type": "whisper", "max_target_positions": 0}`, []string{"model.max_position must be ≥ 1"}},
		{`{"model_type": "whisper", "decoder_layers": 0}`, []string{"decoder_layers = 0"}},
		{`{"model_type": "whisper", "architectures": ["WhisperForAudioClassification"]}`, []string{"WhisperForAudioClassification"}},
	} {
		_, err := FromHFConfig([]byte(tc.json))
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("FromHFConfig(%s) = %v, want an error containing %q", tc.json, err, w)
			}
		}
	}
}

// TestWhisperPlans: the encoder reads exactly 2 × source_positions frames,
// the decoder at most max_position tokens (by default that many); every
// other shape or model is an error naming the field and the rule, and
// serving engines without an encoder-decoder model refuse it.
func TestWhisperPlans(t *testing.T) {
	m := MustPreset("whisper-small")
	tr := Training{Model: m, SeqLen: 3000, MicroBatch: 1, Precision: "amp_bf16"}
	r, err := tr.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if r.DecoderSeqLen != 448 {
		t.Errorf("decoder_seq_len defaults to %d, want max_position 448", r.DecoderSeqLen)
	}
	with := func(f func(*Model)) Model { x := m; f(&x); return x }
	for _, c := range []struct {
		name string
		tr   Training
		want []string
	}{
		{"frames not 2 × positions", Training{Model: m, SeqLen: 1500, MicroBatch: 1}, []string{"seq_len = 1500", "2 × model.source_positions = 3000"}},
		{"targets beyond max_position", Training{Model: m, SeqLen: 3000, DecoderSeqLen: 449, MicroBatch: 1}, []string{"decoder_seq_len = 449", "model.max_position = 448"}},
		{"no mel bins", Training{Model: with(func(x *Model) { x.MelBins = 0 }), SeqLen: 3000, MicroBatch: 1}, []string{"model.mel_bins = 0", "≥ 1"}},
		{"no source positions", Training{Model: with(func(x *Model) { x.SourcePositions = 0 }), SeqLen: 3000, MicroBatch: 1}, []string{"model.source_positions = 0"}},
		{"mel bins on llama", Training{Model: func() Model { x := MustPreset("llama-3-8b"); x.MelBins = 80; return x }(), SeqLen: 128, MicroBatch: 1}, []string{"mel_bins and source_positions describe audio models", "whisper"}},
		{"grouped heads", Training{Model: with(func(x *Model) { x.KVHeads = 4 }), SeqLen: 3000, MicroBatch: 1}, []string{"model.kv_heads = 4"}},
		{"head width", Training{Model: with(func(x *Model) { x.HeadDim = 32 }), SeqLen: 3000, MicroBatch: 1}, []string{"model.head_dim = 32", "hidden = 768"}},
		{"relu", Training{Model: with(func(x *Model) { x.MLP = "relu" }), SeqLen: 3000, MicroBatch: 1}, []string{"model.mlp \"relu\"", "gelu"}},
		{"rmsnorm", Training{Model: with(func(x *Model) { x.Norm = "rmsnorm" }), SeqLen: 3000, MicroBatch: 1}, []string{"model.norm \"rmsnorm\""}},
		{"no biases", Training{Model: with(func(x *Model) { x.Bias = BiasNone }), SeqLen: 3000, MicroBatch: 1}, []string{"model.bias"}},
		{"rotary", Training{Model: with(func(x *Model) { x.Position = "rope" }), SeqLen: 3000, MicroBatch: 1}, []string{"model.position \"rope\""}},
		{"no decoder positions", Training{Model: with(func(x *Model) { x.MaxPosition = 0 }), SeqLen: 3000, MicroBatch: 1}, []string{"model.max_position must be ≥ 1"}},
		{"litgpt", Training{Model: m, SeqLen: 3000, MicroBatch: 1, Framework: "litgpt"}, []string{"framework \"litgpt\"", "plain_pytorch, accelerate, hf_trainer"}},
		{"context parallel", Training{Model: m, SeqLen: 3000, MicroBatch: 1, Parallel: Parallel{CP: 2}}, []string{"parallel.cp = 2", "without context parallelism"}},
		{"sequence parallel", Training{Model: m, SeqLen: 3000, MicroBatch: 1, Parallel: Parallel{TP: 2, SP: true}}, []string{"parallel.sp", "without sequence parallelism"}},
		{"huge mel bins", Training{Model: with(func(x *Model) { x.MelBins = 1 << 30 }), SeqLen: 3000, MicroBatch: 1}, []string{"model.mel_bins", "out of range"}},
	} {
		_, err := c.tr.Estimate()
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: got %v, want an error containing %q", c.name, err, w)
			}
		}
	}
	for _, c := range []struct {
		name string
		in   Inference
		want []string
	}{
		{"prompt not 2 × positions", Inference{Model: m, Batch: 1, PromptTokens: 512, NewTokens: 16}, []string{"prompt_tokens 512", "2 × model.source_positions = 3000"}},
		{"too many new tokens", Inference{Model: m, Batch: 1, PromptTokens: 3000, NewTokens: 500}, []string{"new_tokens = 500", "model.max_position = 448"}},
	} {
		_, err := c.in.Estimate()
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: got %v, want an error containing %q", c.name, err, w)
			}
		}
	}
	if _, err := (VLLM{Version: "0.11.0"}).KVCache(m, 80<<30); err == nil || !strings.Contains(err.Error(), "decoder-only") {
		t.Errorf("vLLM on whisper: got %v, want a refusal", err)
	}
}

// TestWhisperInference: generate's cross-attention cache and encoder output
// are sized by the encoder's positions (half the frames).
func TestWhisperInference(t *testing.T) {
	m := MustPreset("whisper-small")
	est, err := Inference{Model: m, Batch: 2, PromptTokens: 3000, NewTokens: 100}.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	// 12 decoder layers × (k + v) × 768 × 2 bytes a token.
	if est.KVPerToken != 12*2*768*2 {
		t.Errorf("KV per token %d, want %d", est.KVPerToken, 12*2*768*2)
	}
	// The self-attention's 100 tokens and the cross-attention's 1500
	// positions, for both sequences.
	if want := est.KVPerToken * 2 * (100 + 1500); est.KVCache != want {
		t.Errorf("KV cache %d, want %d", est.KVCache, want)
	}
}

// TestWhisperReentrant: the HF Trainer's Whisper step under reentrant
// checkpointing (transformers 4.57.6's default) is refused in transformers'
// words with what runs; non-reentrant checkpoints, transformers 5's
// default, and other frameworks are estimated.
func TestWhisperReentrant(t *testing.T) {
	m := MustPreset("whisper-tiny")
	tr := Training{Model: m, SeqLen: 2 * m.SourcePositions, MicroBatch: 1, Precision: "bf16", Checkpointing: "full", Framework: FrameworkHFTrainer}
	if _, err := tr.Estimate(); err == nil || !strings.Contains(err.Error(), "Trying to backward through the graph a second time") || !strings.Contains(err.Error(), `"use_reentrant": false`) {
		t.Errorf("reentrant: %v", err)
	}
	for name, ok := range map[string]Training{
		"use_reentrant false": func() Training { x := tr; x.UseReentrant = new(false); return x }(),
		"plain PyTorch":       func() Training { x := tr; x.Framework = FrameworkPlainPyTorch; return x }(),
		"no checkpointing":    func() Training { x := tr; x.Checkpointing = CheckpointNone; return x }(),
	} {
		if _, err := ok.Estimate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
