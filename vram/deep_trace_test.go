package vram

import (
	"path/filepath"
	"strings"
	"testing"
)

// unrouted is what a trace did not allocate for the routed experts its
// batch sent no token to, which the engine (routing every expert its
// share) counts: at an iteration-2 peak, the autocast copies of those
// experts' weights in that iteration, and the optimizer states of those
// left out by the first step (AdamW creates a state only for a parameter
// with a gradient). Qwen2-MoE's deep traces route no token to 4 of their
// 128 experts in each iteration.
func unrouted(ms traceMeasurement, tr Training, at Event) Bytes {
	n := ms.ExpertsWithoutTokens
	m := tr.Model.Normalize()
	if len(n) != 2 || at.Iteration != 2 || m.Experts == 0 {
		return 0
	}
	weights := 3 * int64(m.Hidden) * int64(m.ExpertFFN) // gate, up and down
	var b Bytes
	if tr.Precision == "amp_bf16" {
		b = Bytes(n[1]) * BF16.Size(weights)
	}
	if tr.Optimizer == "adamw" {
		b += Bytes(n[0]) * 2 * FP32.Size(weights)
	}
	return b
}

// TestEndOfForwardTraces holds the engine to the deep traces
// (examples/measure deep): every decoder family of the trace grid with 16
// blocks and a 64-token vocabulary under bf16 autocast, where what the
// forward holds (the cache's keys and values, in fp32, the last hidden
// state) outweighs the logits. In a loop that keeps the model output
// through backward the peak is the start of backward; in the HF
// Trainer's, which keeps only the loss, it is the end of the forward,
// inside the loss, with the cache, the logits and their fp32 copy live.
// Each peak within 0.5 % of the live-storage tracker's.
func TestEndOfForwardTraces(t *testing.T) {
	fs, err := filepath.Glob("testdata/deep/*.json")
	if err != nil || len(fs) != 62 {
		t.Fatalf("want 31 models × 2 loops, found %d (%v)", len(fs), err)
	}
	endOfForward := 0
	for _, f := range fs {
		var ms traceMeasurement
		tr := loadMeasurement(t, f, &ms, func() measuredPlan { return ms.Plan })
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		est, err := tr.Estimate()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		st := peakOf(ms.Storage.Iteration1, ms.Storage.Iteration2)
		got := int64(est.Peak.Total() - est.Peak.Other - unrouted(ms, tr, est.PeakAt))
		d := float64(got-st["Total"]) / float64(st["Total"])
		if d > 0.005 || d < -0.005 {
			t.Errorf("%s: peak %d at %s, traced %d (%+.2f%%)", name, got, est.PeakAt.Where(), st["Total"], 100*d)
		}
		trainer := strings.Contains(name, "-trainer")
		if trainer && est.PeakAt.Phase == "loss" {
			endOfForward++
		}
		if !trainer && est.PeakAt.Phase == "loss" {
			t.Errorf("%s: a loop that keeps the output peaks at the end of the forward (%s)", name, est.PeakAt.Where())
		}
	}
	if endOfForward < 20 {
		t.Errorf("only %d of the HF Trainer's deep runs peak at the end of the forward", endOfForward)
	}
}
