package vram

import (
	"strings"
	"testing"
)

// TestActivationOffloading: with checkpointing, torchtune's offloading
// moves every block's input to pinned host memory but the last five (the
// forward stash backward reuses); each comes back for its block's backward.
// Without checkpointing (TRL) whole blocks' saved tensors move but the
// last block's. The timeline and the replay agree.
func TestActivationOffloading(t *testing.T) {
	for _, c := range []struct {
		framework Framework
		ckpt      Checkpointing
		stash     int // Training.OffloadStash
		stay      int
	}{
		{"torchtune", "full", 0, 5},
		{"hf_trainer", "full", 0, 5},
		{"hf_trainer", "none", 0, 1},
		{"hf_trainer", "full", 1, 1}, // Unsloth's: the last block's input stays
	} {
		tr := Training{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 2, Precision: "bf16", OffloadStash: c.stash,
			Framework: c.framework, Checkpointing: c.ckpt, Trainable: "lora", LoRA: &LoRA{Rank: 16, Alpha: 32, Targets: []string{"q_proj", "v_proj"}}}
		stash := tr.OffloadStash
		tr.OffloadStash = 0
		base := estimateOf(t, tr)
		tr.ActivationOffloading, tr.OffloadStash = true, stash
		est := estimateOf(t, tr)
		r, err := tr.resolve()
		if err != nil {
			t.Fatal(err)
		}
		acts := blockActivations(&r)
		var moved Bytes
		for l := 0; l < r.m.Layers-c.stay; l++ {
			moved += r.savedFor(acts[l], l)
		}
		if est.Host.Activations != moved || moved == 0 {
			t.Errorf("%s %s: host activations %v, want the first %d blocks' saved %v", c.framework, c.ckpt, est.Host.Activations, r.m.Layers-c.stay, moved)
		}
		if est.Peak.Total() >= base.Peak.Total() {
			t.Errorf("%s %s: offloading peaks at %v, without at %v; want lower", c.framework, c.ckpt, est.Peak.Total(), base.Peak.Total())
		}
		rp, err := tr.Replay(ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ratio := float64(rp.PeakAllocated) / float64(est.Peak.Total()); ratio < 0.98 || ratio > 1.02 {
			t.Errorf("%s %s: replay peak %v, timeline %v (ratio %.3f)", c.framework, c.ckpt, rp.PeakAllocated, est.Peak.Total(), ratio)
		}
	}
	for _, c := range []struct {
		edit func(*Training)
		want string
	}{
		{func(t *Training) { t.Framework = "torchtune"; t.Checkpointing = "none" }, "enable_activation_offloading should only be True when enable_activation_checkpointing is True"},
		{func(t *Training) { t.Framework = "torchtitan" }, "not torchtitan's"},
		{func(t *Training) { t.Parallel.PP = 2 }, "run no pipeline stages"},
		{func(t *Training) { t.OffloadStash = -1 }, "offload_stash must be in [0, 32]"},
		{func(t *Training) { t.ActivationOffloading, t.OffloadStash = false, 1 }, "offload_stash 1 applies to activation_offloading"},
	} {
		tr := Training{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 2, Precision: "bf16", Checkpointing: "full", ActivationOffloading: true}
		c.edit(&tr)
		if _, err := tr.Estimate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
}
