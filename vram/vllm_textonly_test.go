package vram

import "testing"

// TestVLLMTextOnlyProfile: where limit_mm_per_prompt allows no images or
// videos, vLLM builds no tower or projector (vllmTextOnlySkipsTower), and
// its profile run is the language model's text-only forward: the carve's
// profile peak is the text model's, whatever the tower.
func TestVLLMTextOnlyProfile(t *testing.T) {
	for _, name := range []string{"qwen2.5-vl-7b", "llava-1.5-7b"} {
		m := MustPreset(name)
		text := m
		text.Vision = nil
		off := VLLM{MaxModelLen: 4096, LimitMMPerPrompt: map[string]int{"image": 0, "video": 0}}
		got, err := off.Carve(Inference{Model: m}, mustGPU("H100-80GB"))
		if err != nil {
			t.Fatal(name, err)
		}
		want, err := VLLM{MaxModelLen: 4096}.Carve(Inference{Model: text}, mustGPU("H100-80GB"))
		if err != nil {
			t.Fatal(name, err)
		}
		if got.Activation != want.Activation || got.Weights != want.Weights {
			t.Errorf("%s text-only: profile %v, weights %v; the language model alone: %v, %v", name, got.Activation, got.Weights, want.Activation, want.Weights)
		}
	}
}
