package vram

import (
	"path/filepath"
	"strings"
	"testing"
)

// knownDeepGaps are the deep traces that stay outside 0.5 %, with the
// bound each stays within:
//   - Qwen2-MoE, both loops, +0.65 %: the engine holds about 48 KiB a block
//     more than PyTorch (a router's softmax output and top-k indices are
//     that size); which of the router's tensors autograd does not keep is
//     not found yet.
//   - LLaVA with LoRA in the HF Trainer's loop, −0.55 % at the end of the
//     forward (the same run keeping its output is exact): 1.3 MB of what
//     the forward holds with adapters on the language model is not found
//     yet.
var knownDeepGaps = map[string]float64{
	"qwen2-moe-deep-amp_bf16-sdpa-none-adamw":          0.007,
	"qwen2-moe-deep-trainer-amp_bf16-sdpa-none-adamw":  0.007,
	"llava-deep-trainer-lora-amp_bf16-sdpa-none-adamw": 0.006,
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
	if err != nil || len(fs) != 58 {
		t.Fatalf("want 29 families × 2 loops, found %d (%v)", len(fs), err)
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
		got := int64(est.Peak.Total() - est.Peak.Other)
		d := float64(got-st["Total"]) / float64(st["Total"])
		bound := 0.005
		if b, ok := knownDeepGaps[name]; ok {
			bound = b
		}
		if d > bound || d < -bound {
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
