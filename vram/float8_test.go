package vram

import (
	"path/filepath"
	"strings"
	"testing"
)

// torchao's float8 linears save the bf16 input and weight (matmul_with_hp_or_
// float8_args): the saved set is the bf16 run's, the float8 copies only
// transient; FSDP2's float8 all-gather moves the linears' weights in one byte.
func TestFloat8(t *testing.T) {
	base := Training{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 1, Precision: "bf16",
		Parallel: Parallel{DP: 8, FSDP: "full_shard"}}
	f8 := base
	f8.Float8 = "tensorwise"
	rb, err := base.resolve()
	if err != nil {
		t.Fatal(err)
	}
	rf, err := f8.resolve()
	if err != nil {
		t.Fatal(err)
	}
	bb, bf := buildBlock(&rb, 0), buildBlock(&rf, 0)
	if bb.Saved != bf.Saved {
		t.Errorf("float8 saves %v per block, bf16 %v: torchao saves the bf16 input", bf.Saved, bb.Saved)
	}
	// The largest linear (down_proj: 14336 → 4096 over 4096 tokens) adds its
	// float8 input and weight to the forward's transient memory.
	if bf.ForwardPeak <= bb.ForwardPeak || bf.BackwardPeak <= bb.BackwardPeak {
		t.Errorf("float8 transients: forward %v vs %v, backward %v vs %v", bf.ForwardPeak, bb.ForwardPeak, bf.BackwardPeak, bb.BackwardPeak)
	}

	ag := f8
	ag.Float8AllGather = true
	ra, err := ag.resolve()
	if err != nil {
		t.Fatal(err)
	}
	blocks, _, head := rb.units()
	blocksAG, _, headAG := ra.units()
	// A Llama-3-8B block: 218,103,808 linear weights in one byte instead of
	// two; its two norms (8192 weights) stay bf16.
	if got, want := blocks[0].gathered-blocksAG[0].gathered, Bytes(218103808); got != want {
		t.Errorf("float8 all-gather saves %v per block, want %v", got, want)
	}
	if head.gathered != headAG.gathered {
		t.Errorf("the output layer stays bf16: %v vs %v", headAG.gathered, head.gathered)
	}
}

func TestFloat8Errors(t *testing.T) {
	for _, c := range []struct{ train, want string }{
		{`"precision": "bf16", "float8": "blockwise"`, "float8"},
		{`"precision": "fp32", "float8": "tensorwise"`, "casts bf16 matmuls"},
		{`"precision": "bf16", "float8_all_gather": true`, "applies to float8 training"},
		{`"precision": "bf16", "float8": "rowwise", "float8_all_gather": true, "parallel": {"dp": 2, "fsdp": "full_shard"}`, "tensorwise"},
		{`"precision": "bf16", "float8": "tensorwise", "float8_all_gather": true`, "FSDP2"},
	} {
		p, err := ParsePlan([]byte(`{"model": "gpt2", "train": {"seq_len": 64, "micro_batch": 1, `+c.train+`}}`), t.TempDir())
		if err == nil {
			_, err = p.Training.Estimate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.train, err, c.want)
		}
	}
}

// The saved set under torchao's float8 training, measured with
// saved_tensors_hooks on the CPU (examples/measure saved with "float8";
// make truth): the bf16 set, for both recipes and five families, as the
// engine says.
func TestFloat8SavedSet(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "float8", "*.json"))
	if len(files) != 12 {
		t.Fatalf("want the 12 float8 measurements, found %d", len(files))
	}
	for _, f := range files {
		ms, tr, blk := measuredBlock(t, f)
		if tr.Float8 == "" {
			t.Fatalf("%s: not a float8 measurement", f)
		}
		var eager savedMeasurement
		loadMeasurement(t, filepath.Join("testdata", "saved", strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f), "-tensorwise.json"), "-rowwise.json")+".json"), &eager, func() measuredPlan { return eager.Plan })
		if ms.PerBlock != eager.PerBlock {
			t.Errorf("%s: PyTorch saves %d per block under float8, %d in bf16", f, ms.PerBlock, eager.PerBlock)
		}
		got := int64(blk.Saved - blk.Held)
		if d := float64(got)/float64(ms.PerBlock) - 1; d < -0.002 || d > 0.002 {
			t.Errorf("%s: the engine saves %d per block, PyTorch %d (%+.2f%%)", f, got, ms.PerBlock, 100*d)
		}
	}
}

// TestFloat8GradWeightHP: torchao's "rowwise_with_gw_hp" saves what
// "rowwise" saves and computes the weight's gradient from the bf16 input
// and output gradient, so each float8 linear's backward casts one input
// fewer: a Llama-3-8B block's seven linears over 4096 tokens, the q, k,
// v, gate and up projections' and the output projection's 4096-wide
// inputs and the down projection's 14336-wide one, in one byte each.
func TestFloat8GradWeightHP(t *testing.T) {
	grads := func(recipe string) (BlockActivations, Bytes) {
		t.Helper()
		tr := Training{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 1, Precision: "bf16",
			Parallel: Parallel{DP: 8, FSDP: "full_shard"}, Float8: recipe}
		r, err := tr.resolve()
		if err != nil {
			t.Fatal(err)
		}
		b := buildBlock(&r, 0)
		var sum Bytes
		for _, op := range b.prog.ops {
			sum += op.gradWorkspace
		}
		return b, sum
	}
	row, rowGrads := grads("rowwise")
	hp, hpGrads := grads("rowwise_with_gw_hp")
	if row.Saved != hp.Saved || row.ForwardPeak != hp.ForwardPeak {
		t.Errorf("saved %v vs %v, forward peak %v vs %v: the forward is rowwise's", hp.Saved, row.Saved, hp.ForwardPeak, row.ForwardPeak)
	}
	if got, want := rowGrads-hpGrads, Bytes(4096*(6*4096+14336)); got != want {
		t.Errorf("the backward's float8 casts shrink by %d bytes, want %d", int64(got), int64(want))
	}
}
