package vram

import (
	"strings"
	"testing"
)

// TestLibraryVersions checks the behaviours that belong to transformers
// releases (the families' recipes and attention lists): each plan gets what
// its release does, and says so where that differs from what it asks.
func TestLibraryVersions(t *testing.T) {
	plan := func(preset, lib, attn string, ckpt Checkpointing) Training {
		return Training{Model: MustPreset(preset), SeqLen: 512, MicroBatch: 2, WeightsDType: BF16, ComputeDType: BF16,
			Optimizer: "adamw", Attention: attn, Checkpointing: ckpt, Transformers: lib}
	}
	est := func(t *testing.T, tr Training) TrainingEstimate {
		t.Helper()
		e, err := tr.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	t.Run("OPT clamps eager scores through 4.48", func(t *testing.T) {
		saved := func(lib string) Bytes {
			r, err := plan("opt-1.3b", lib, "eager", "none").resolve()
			if err != nil {
				t.Fatal(err)
			}
			return buildBlock(&r, 0).Saved
		}
		m := MustPreset("opt-1.3b")
		oneMap := BF16.Size(2 * int64(m.Heads) * 512 * 512) // torch.max saves its input
		if d := saved("4.48.0") - saved("4.49.0"); d != oneMap {
			t.Errorf("4.48 saves %d bytes more per block than 4.49, want one score map (%d)", d, oneMap)
		}
		if saved("") != saved("4.49.0") {
			t.Error("the pinned release should not clamp")
		}
	})
	t.Run("gpt_bigcode ignores checkpointing from 4.54", func(t *testing.T) {
		long := func(lib string, ckpt Checkpointing) TrainingEstimate {
			tr := plan("starcoderbase-1b", lib, "sdpa", ckpt)
			tr.SeqLen, tr.MicroBatch = 4096, 8 // activations dominate
			return est(t, tr)
		}
		full53, full57, none := long("4.53.0", "full"), long("", "full"), long("", "none")
		if len(full53.Notes) != 0 || full53.Peak.Total() >= none.Peak.Total() {
			t.Errorf("4.53 checkpoints: peak %v (no checkpointing %v), notes %q", full53.Peak.Total(), none.Peak.Total(), full53.Notes)
		}
		if full57.Peak.Total() != none.Peak.Total() || len(full57.Notes) != 1 || !strings.Contains(full57.Notes[0], "grad_checkpointing") {
			t.Errorf("4.57.6 should run without checkpointing and say so: peak %v vs %v, notes %q", full57.Peak.Total(), none.Peak.Total(), full57.Notes)
		}
	})
	t.Run("GPT-J: transformers picks eager, refuses SDPA by name", func(t *testing.T) {
		unset, eager := est(t, plan("gpt-j-6b", "", "", "none")), est(t, plan("gpt-j-6b", "", "eager", "none"))
		if unset.Peak.Total() != eager.Peak.Total() || len(unset.Notes) != 1 || !strings.Contains(unset.Notes[0], "eager") {
			t.Errorf("attention unset: peak %v (eager %v), notes %q", unset.Peak.Total(), eager.Peak.Total(), unset.Notes)
		}
		if _, err := plan("gpt-j-6b", "", "sdpa", "none").Estimate(); err == nil || !strings.Contains(err.Error(), "raises ValueError for gptj: it does not support an attention implementation through torch.nn.functional.scaled_dot_product_attention") {
			t.Errorf("attention sdpa by name: %v", err)
		}
		if len(eager.Notes) != 0 {
			t.Errorf("an eager plan needs no note, got %q", eager.Notes)
		}
		other := plan("gpt-j-6b", "", "sdpa", "none")
		other.Framework = "litgpt"
		if e := est(t, other); len(e.Notes) != 0 {
			t.Errorf("litgpt runs its own attention; notes %q", e.Notes)
		}
	})
	t.Run("releases", func(t *testing.T) {
		for _, bad := range []string{"5.0.0", "4", "4.x", "4.57.6.1", "-4.1"} {
			if err := plan("gpt2", bad, "sdpa", "none").Validate(); err == nil || !strings.Contains(err.Error(), "transformers") {
				t.Errorf("transformers %q: got %v, want an error naming the field", bad, err)
			}
		}
	})
}
