package vram

import (
	"strings"
	"testing"
)

// TestMiniMaxServedByVLLM: MiniMax-Text-01 served as vLLM 0.14.1 and 0.11.0
// run it: each lightning layer keeps (64 heads / 8) × 128 × 128 bf16 =
// 262,144 B a request (linear_attention_state_shape and _dtype), which
// raises the attention block to 512 tokens (one KV head a rank: 512 B a
// token); 0.33 no longer runs it, SGLang never did (its training is
// TestMiniMaxText01's), and an fp32 state is refused in vLLM's words.
func TestMiniMaxServedByVLLM(t *testing.T) {
	m := MustPreset("minimax-text-01")
	in := Inference{Model: m, Batch: 1, PromptTokens: 4096}
	h200 := mustGPU("H200")
	for _, rel := range []string{"0.11.0", "0.14.1"} {
		c, err := VLLM{TP: 8, MaxModelLen: 32768, Version: rel}.Carve(in, h200)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		kv := c.KVCache
		if !c.Starts || kv.StatePageBytes != 262144 || kv.BlockSize != 512 || kv.StateLayers != 70 || kv.StateKind != "lightning attention" {
			t.Errorf("%s: starts %v, state page %v, block %d, state layers %d (%s)", rel, c.Starts, kv.StatePageBytes, kv.BlockSize, kv.StateLayers, kv.StateKind)
		}
	}
	if _, err := (VLLM{TP: 8, MaxModelLen: 32768, Version: "0.33.0"}).Carve(in, h200); err == nil || !strings.Contains(err.Error(), "0.23.0") {
		t.Errorf("vLLM 0.33: %v", err)
	}
	if _, err := (VLLM{TP: 8, MaxModelLen: 32768, Version: "0.14.1", MambaCacheDType: FP32}).Carve(in, h200); err == nil || !strings.Contains(err.Error(), "fp32 state for minimax is not yet supported") {
		t.Errorf("an fp32 state: %v", err)
	}
	if p, err := (SGLang{TP: 8}).Carve(in, h200); err == nil && p.Err == "" {
		t.Errorf("SGLang served MiniMax-Text-01: %+v", p)
	}
}
