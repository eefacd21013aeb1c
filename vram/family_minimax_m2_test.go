package vram

import (
	"strings"
	"testing"
)

// TestMiniMaxM2: MiniMax-M2 as transformers 5.23 builds it (its meta-device
// counts: a small config, the class's defaults), rotary_dim read as the
// partial factor, the fp8 release as its config spells it, and a serving
// plan; training as traced at 5.23, generate refused in words.
func TestMiniMaxM2(t *testing.T) {
	for _, c := range []struct {
		name, json string
		params     int64
		rotary     float64
	}{
		{"small", `{"model_type": "minimax_m2", "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "num_local_experts": 8, "num_experts_per_tok": 2, "rotary_dim": 16}`, 301760, 0.5},
		{"the class's defaults", `{"model_type": "minimax_m2"}`, 228689748992, 1},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil || m.ParamCount() != c.params || m.RotaryPct != c.rotary {
			t.Errorf("%s: %d parameters, rotary %v, %v; transformers 5.23 builds %d, %v", c.name, m.ParamCount(), m.RotaryPct, err, c.params, c.rotary)
		}
	}
	fp8, err := FromHFConfig([]byte(`{"model_type": "minimax_m2", "quantization_config": {"quant_method": "fp8", "fmt": "float8_e4m3fn", "weight_block_size": [128, 128], "activation_scheme": "dynamic"}}`))
	if err != nil || !fp8.Release.Quantized() || fp8.Release.Format.DType != FP8E4M3 {
		t.Errorf("fmt float8_e4m3fn: %+v, %v", fp8.Release, err)
	}
	m := MustPreset("minimax-m2")
	// Training follows transformers 5.23 (its traces, testdata/trace5);
	// transformers' generate is not modelled.
	if est, err := (Training{Model: m, SeqLen: 512, MicroBatch: 1}).Estimate(); err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "traced at 5.23.0") {
		t.Errorf("training: %v, notes %q", err, est.Notes)
	}
	if _, err := (Inference{Model: m, PromptTokens: 512, NewTokens: 16, Batch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") {
		t.Errorf("generate: %v", err)
	}
	c, err := VLLM{Version: "0.33.0", TP: 4, MaxModelLen: 65536}.Carve(Inference{Model: m}, mustGPU("H100-80GB"))
	if err != nil || !c.Starts || c.KVCache.PageBytes != BF16.Size(2*16*2*128) {
		t.Errorf("vLLM at TP 4: starts %v (%s), page %v, %v", c.Starts, c.Err, c.KVCache.PageBytes, err)
	}
}
