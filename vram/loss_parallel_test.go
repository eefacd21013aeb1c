package vram

import "testing"

// Without loss parallelism every TP rank holds the whole vocabulary's
// logits (and their fp32 upcast for the loss); with it, 1/tp of them.
func TestLossParallel(t *testing.T) {
	off := false
	base := Training{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 1, Precision: "bf16",
		Parallel: Parallel{TP: 4, SP: true}}
	full := base
	full.Parallel.LossParallel = &off
	a, err := base.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	b, err := full.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	// The head's saved activations grow by the logits of the three other
	// shards at least: 4096 tokens × 128,256 × 3/4 in bf16.
	grew := b.Static.Activations + b.Static.Temporaries - a.Static.Activations - a.Static.Temporaries
	if min := BF16.Size(4096 * 128256 * 3 / 4); grew < min {
		t.Errorf("full logits on each rank add %v, want at least %v", grew, min)
	}
	// Without TP the field changes nothing.
	one := base
	one.Parallel = Parallel{LossParallel: &off}
	c, _ := one.Estimate()
	base.Parallel = Parallel{}
	d, _ := base.Estimate()
	if c.Peak.Total() != d.Peak.Total() {
		t.Errorf("loss_parallel without TP changed the peak: %v vs %v", c.Peak.Total(), d.Peak.Total())
	}
}
