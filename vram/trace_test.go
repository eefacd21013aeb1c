package vram

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// traceMeasurement is a training step traced by PyTorch's MemTracker
// (examples/measure trace; CPU, dropout off): the composition of the peak of
// iteration 1 and of iteration 2.
type traceMeasurement struct {
	Plan       measuredPlan     `json:"plan"`
	Iteration1 map[string]int64 `json:"iteration1"`
	Iteration2 map[string]int64 `json:"iteration2"`
}

// measuredPlan is the plan a companion-tool measurement was taken with.
type measuredPlan struct {
	Model Model          `json:"model"`
	Train map[string]any `json:"train"`
}

// loadMeasurement decodes a companion-tool measurement file into ms and
// returns the training plan it was measured with.
func loadMeasurement(t *testing.T, f string, ms any, plan func() measuredPlan) Training {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, ms); err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	p := plan()
	tb, _ := json.Marshal(p.Train)
	var tr Training
	if err := json.Unmarshal(tb, &tr); err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	tr.Model = p.Model
	return tr
}

// phaseOf classifies a peak by what is live: no activations means the
// optimizer step; activations without gradients means the forward pass, the
// loss, or the start of backward before any weight gradient exists; both
// means the backward pass.
func phaseOf(act, grads, total int64) string {
	switch {
	case act < total/1000: // a few KiB of token ids may still be referenced
		return "optimizer"
	case grads == 0:
		return "before gradients"
	}
	return "backward"
}

// cpuOnly names traces that measure a CPU kernel where CUDA runs another:
// transformers' GPT-2 SDPA path runs the math kernel on the CPU (it saves what
// eager attention saves), while on CUDA the fused kernels keep O(s) state.
func cpuOnly(name string) (string, bool) {
	if strings.HasPrefix(name, "gpt2-") && strings.Contains(name, "-sdpa-") {
		return "GPT-2 SDPA runs the math kernel on the CPU", true
	}
	return "", false
}

// known lists the grid points the engine misses by more than 2 % or in
// phase, each with the bound it stays within and the reason:
//   - Llama-style RoPE under bf16 autocast with SDPA and no checkpointing
//     (the tiny Llama, with and without LoRA, and the tiny Mixtral): the
//     traces show transformers 4.57's rotary embedding returning cos/sin in
//     the hidden states' dtype (fp32 under autocast with fp32 weights), so the
//     rotated q and k are fp32, and the returned cache (DynamicLayer.update's
//     torch.cat) keeps fp32 copies of k and v; SDPA then saves bf16 casts. The
//     engine keeps the rotated q/k and the cache in the compute dtype: 2–3 %
//     low at the loss's backward. Eager attention is within 2 %.
//   - ViT under bf16 autocast with AdamW: the engine's backward peak and its
//     optimizer-step peak are within 1 % of each other and the step's wins by
//     that margin; the total is 0.4 % off, the phase is a near tie.
var known = map[string]float64{
	"llama-tiny-gqa-amp_bf16-sdpa-none-sgd":        0.03,
	"llama-tiny-gqa-lora-amp_bf16-sdpa-none-adamw": 0.03,
	"llama-tiny-gqa-lora-amp_bf16-sdpa-none-sgd":   0.03,
	"mixtral-tiny-amp_bf16-sdpa-none-sgd":          0.03,
	"vit-tiny-amp_bf16-eager-none-adamw":           0.01,
}

// TestTraceMatchesMemTracker replays training steps of small models (GPT-2,
// BERT, ViT, Llama with GQA, Mixtral-style MoE × fp32/bf16 autocast ×
// eager/SDPA × no or full checkpointing × AdamW/SGD, and LoRA on the Llama,
// which examples/measure traces with its live-storage tracker because
// MemTracker refuses frozen parameters) and compares the engine's peak with
// the traced one: the total within 2 %, the parameters exactly, and the phase
// of the peak.
func TestTraceMatchesMemTracker(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "trace", "*.json"))
	if len(files) < 88 {
		t.Fatalf("only %d traces in testdata/trace (make truth)", len(files))
	}
	sort.Strings(files)
	worst := 0.0
	for _, f := range files {
		var ms traceMeasurement
		tr := loadMeasurement(t, f, &ms, func() measuredPlan { return ms.Plan })
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		est, err := tr.Estimate()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		mt := ms.Iteration1
		if ms.Iteration2["Total"] > mt["Total"] {
			mt = ms.Iteration2
		}
		// The batch is created before MemTracker starts (examples/measure
		// trace), so it does not see the inputs the engine counts as Other.
		got, want := int64(est.Peak.Total()-est.Peak.Other), mt["Total"]
		diff := float64(got-want) / float64(want)
		if d := diff; d < 0 && -d > worst || d > worst {
			worst = max(diff, -diff)
		}
		if reason, ok := cpuOnly(name); ok {
			t.Logf("%s: %+.2f%% — not compared: %s", name, 100*diff, reason)
			continue
		}
		if gap, ok := known[name]; ok {
			t.Logf("%s: %+.2f%% (a known gap, see known)", name, 100*diff)
			if diff > gap || diff < -gap {
				t.Errorf("%s: the known gap grew to %+.2f%%", name, 100*diff)
			}
		} else if diff > 0.02 || diff < -0.02 {
			t.Errorf("%s: peak %d at %s, MemTracker %d (%+.2f%%) %v", name, got, est.PeakAt.Where(), want, 100*diff, mt)
		}
		if p := int64(est.Peak.Parameters); p != mt["PARAM"] {
			t.Errorf("%s: parameters %d, MemTracker %d", name, p, mt["PARAM"])
		}
		ours := phaseOf(int64(est.Peak.Activations), int64(est.Peak.Gradients), got)
		if theirs := phaseOf(mt["ACT"], mt["GRAD"], want); ours != theirs && known[name] == 0 {
			t.Errorf("%s: peak %s (%s), MemTracker's %s %v", name, ours, est.PeakAt.Where(), theirs, mt)
		}
	}
	t.Logf("%d traces; worst peak difference %.2f%%", len(files), 100*worst)
}
