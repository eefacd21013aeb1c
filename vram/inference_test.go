package vram

import "testing"

// TestPrefillHoldsTheModelsMasks: transformers' model forward builds its
// masks, rotary tables and a wrapper's features before the decoder layers
// and keeps them while each layer runs, so a prefill's peak is a layer's
// no-grad peak plus them. With a static cache of the same length (whose
// masks the engine leaves out) the difference is exactly those tensors.
func TestPrefillHoldsTheModelsMasks(t *testing.T) {
	temps := func(in Inference) Bytes {
		t.Helper()
		est, err := in.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		if est.PeakAt != "prefill" {
			t.Fatalf("%+v: peak at %s, want prefill", in, est.PeakAt)
		}
		return est.Peak.Temporaries
	}
	const s = 2048
	llama := Inference{Model: MustPreset("llama-3.2-1b"), PromptTokens: s, NewTokens: 1, Batch: 1, Attention: "eager"}
	static := llama
	static.Cache, static.KVCacheLen = "static", s+1
	// eager_mask: batch × 1 × queries × keys in bf16; position_embeddings:
	// cos and sin, 1 × positions × head_dim (64) in bf16.
	want := BF16.Size(s*s) + BF16.Size(2*s*64)
	if got := temps(llama) - temps(static); got != want {
		t.Errorf("llama-3.2-1b, eager, %d tokens: the masks add %d bytes, want %d (mask and rotary tables)", s, got, want)
	}
	// Qwen3-VL: the three deepstack features (image tokens × hidden, bf16)
	// are among them.
	vl := Inference{Model: MustPreset("qwen3-vl-2b"), PromptTokens: 4096, NewTokens: 1, Batch: 1, Images: 1}
	vlStatic := vl
	vlStatic.Cache, vlStatic.KVCacheLen = "static", 4097
	m := vl.Model
	deepstack := BF16.Size(int64(m.Vision.Tower.Image.Deepstack.Len()) * int64(m.Vision.ImageTokens()) * int64(m.Hidden))
	if got := temps(vl) - temps(vlStatic); got < deepstack || deepstack == 0 {
		t.Errorf("qwen3-vl-2b: the masks add %d bytes, want the %d of the deepstack features at least", got, deepstack)
	}
}
