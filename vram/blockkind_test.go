package vram

import (
	"reflect"
	"testing"
)

// TestBlockKindsShareInventories: the engine builds each kind of block
// once (Model.blockKind) and gives every block of the kind that
// inventory, so a block of a kind must build what the first of its kind
// builds: a rule that singles out one layer (the last layer's per-layer
// inputs' gradient) needs the layer to be a kind of its own.
func TestBlockKindsShareInventories(t *testing.T) {
	for _, c := range []struct {
		name string
		json string
	}{
		// globals at 2 and 5, then 1, 3 and 5: the last layer shares an
		// earlier global's bits (as gemma4-text-tiny-last-global in
		// trace5-grid.json).
		{"gemma4_text, per-layer inputs, two global layers", `{"model_type": "gemma4_text", ` + gemma4SmallText[:len(gemma4SmallText)-len(`"hidden_size_per_layer_input": 0`)] +
			`"hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": 500, "global_head_dim": 32, "layer_types": ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention"]}`},
		{"gemma4_text, per-layer inputs, experts", `{"model_type": "gemma4_text", ` + gemma4SmallText[:len(gemma4SmallText)-len(`"hidden_size_per_layer_input": 0`)] +
			`"hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": 500, "global_head_dim": 32, "enable_moe_block": true, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 24, "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention"]}`},
		// An encoder-decoder's stacks start their gradient at their last
		// layers (stackGradients): flan-t5-base's blocks 11 and 23.
		{"flan-t5-base", ""},
		{"whisper-tiny", ""},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if c.json == "" {
			m, err = MustPreset(c.name), nil
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, prec := range []string{"fp32", "amp_bf16"} {
			tr := Training{Model: m, SeqLen: 128, MicroBatch: 2, Precision: prec, Framework: "plain_pytorch"}
			if m.MelBins > 0 {
				tr.SeqLen = 2 * m.SourcePositions // Whisper's encoder reads exactly that many frames
			}
			r, err := tr.resolve()
			if err != nil {
				t.Fatalf("%s %s: %v", c.name, prec, err)
			}
			acts := blockActivations(&r)
			for l := range acts {
				if own := buildBlock(r.pipelineMicro(), l); !reflect.DeepEqual(acts[l], own) {
					t.Errorf("%s %s: block %d (kind %d) is given an inventory of %v saved, %v backward peak; its own is %v, %v",
						c.name, prec, l, r.kind(l), acts[l].Saved, acts[l].BackwardPeak, own.Saved, own.BackwardPeak)
				}
			}
		}
	}
}

// TestEveryPresetBlockKinds: the same for every catalog model the
// training step plans (plain PyTorch, 256 tokens; Whisper's 3,000
// frames), so that a rule singling out a layer is caught in any family.
func TestEveryPresetBlockKinds(t *testing.T) {
	oneGoroutineTable(t)
	for _, name := range Presets() {
		m := MustPreset(name)
		for _, prec := range []string{"fp32", "amp_bf16"} {
			tr := Training{Model: m, SeqLen: 256, MicroBatch: 1, Precision: prec, Framework: "plain_pytorch"}
			if m.MelBins > 0 {
				tr.SeqLen = 2 * m.SourcePositions
			}
			r, err := tr.resolve()
			if err != nil {
				continue // refused for this step: its own tests say why
			}
			acts := blockActivations(&r)
			for l := range acts {
				if own := buildBlock(r.pipelineMicro(), l); !reflect.DeepEqual(acts[l], own) {
					t.Errorf("%s %s: block %d (kind %d) is given another block's inventory (%v saved, %v backward peak; its own %v, %v)",
						name, prec, l, r.kind(l), acts[l].Saved, acts[l].BackwardPeak, own.Saved, own.BackwardPeak)
					break
				}
			}
		}
	}
}
