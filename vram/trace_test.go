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
	// Storage is the same run under the tool's live-storage tracker: every
	// storage an op creates, counted until it is freed, in the category of
	// the phase that created it (ACT forward, TEMP backward, OPT optimizer
	// step) or GRAD when it is a parameter's .grad.
	Storage struct {
		Iteration1 map[string]int64 `json:"iteration1"`
		Iteration2 map[string]int64 `json:"iteration2"`
	} `json:"storage"`
	// ExpertsWithoutTokens is, per iteration, how many routed experts the
	// traced batch sent no token to (measure.py unrouted_experts).
	ExpertsWithoutTokens []int `json:"experts_without_tokens"`
}

// peakOf is the higher of two iterations' peaks.
func peakOf(a, b map[string]int64) map[string]int64 {
	if b["Total"] > a["Total"] {
		return b
	}
	return a
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

// knownCategoryGaps lists the traces whose peak total is within 2 % but
// whose memory besides parameters and optimizer states (activations,
// temporaries and gradients together) is not, with the bound it stays
// within:
//   - the tiny Mixtral in fp32 with full checkpointing, 2.2–2.3 % low: the
//     peak is in the recomputed MoE block's backward at the last expert of
//     the loop, and the random router sent that expert 162 of the 512 routed
//     tokens where the engine assumes balanced routing (128). The block's
//     saved tensors outside the experts and its gradients match to the byte;
//     the expert's saved tensors and in-flight gradients are 919,552 and
//     786,432 bytes in the engine, exactly 128/162 of the traced 1,163,808
//     and 995,328. By design: the engine plans for balanced experts unless
//     the plan says otherwise (TestExpertImbalanceExplainsMixtralGap).
//   - the tiny Llama with LoRA under autocast with full checkpointing,
//     2.04 % high: at the peak, in the last block's recomputation, the
//     activations match to 1 KiB (the rotary tables included) but the
//     engine holds 131,068 bytes more temporaries, the size of one bf16
//     copy of a 256 × 256 frozen weight (autocast casts a frozen fp32
//     weight on every call); which copy PyTorch has already freed there is
//     not found yet. Before the rotary tables were counted, the missing
//     65,536 bytes of activations hid half of it.
var knownCategoryGaps = map[string]float64{
	"mixtral-tiny-fp32-eager-full-sgd":             0.03,
	"mixtral-tiny-fp32-sdpa-full-sgd":              0.03,
	"llama-tiny-gqa-lora-amp_bf16-sdpa-full-adamw": 0.025,
	"llama-tiny-gqa-lora-amp_bf16-sdpa-full-sgd":   0.025,
}

// TestTraceMatchesMemTracker replays training steps of small models (GPT-2,
// BERT, ViT, Llama with GQA, Mixtral-style MoE × fp32/bf16 autocast ×
// eager/SDPA × no or full checkpointing × AdamW/SGD, torchtitan's op-level
// selective checkpointing on a Llama, and LoRA on the Llama,
// which MemTracker refuses: frozen parameters) and compares the engine's
// peak with the traced ones: the total within 2 % of MemTracker's and of the
// live-storage tracker's, the parameters exactly, the phase of the peak, and
// each category of the live-storage tracker within 2 %.
func TestTraceMatchesMemTracker(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "trace", "*.json"))
	if len(files) < 88 {
		t.Fatalf("only %d traces in testdata/trace (make truth)", len(files))
	}
	sort.Strings(files)
	worst := 0.0
	worstCategory := 0.0
	within := func(name, what string, got, want int64) {
		t.Helper()
		d := float64(got-want) / float64(max(1, want))
		if !strings.HasPrefix(what, "peak") {
			worstCategory = max(worstCategory, d, -d)
		}
		bound := 0.02
		if gap, ok := knownCategoryGaps[name]; ok && strings.HasPrefix(what, "activations") {
			bound = gap
			t.Logf("%s: %s %+.2f%% (a known gap, see knownCategoryGaps)", name, what, 100*d)
		}
		if d > bound || d < -bound {
			t.Errorf("%s: %s %d, traced %d (%+.2f%%)", name, what, got, want, 100*d)
		}
	}
	for _, f := range files {
		var ms traceMeasurement
		tr := loadMeasurement(t, f, &ms, func() measuredPlan { return ms.Plan })
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		est, err := tr.Estimate()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		mt := peakOf(ms.Iteration1, ms.Iteration2)
		if oth := mt["OTH"]; oth > 0 {
			// The batch, which examples/measure registers with MemTracker
			// as external ("other"), like the engine's Other left out.
			mt = map[string]int64{"Total": mt["Total"] - oth, "PARAM": mt["PARAM"], "BUFFER": mt["BUFFER"]}
		}
		st := peakOf(ms.Storage.Iteration1, ms.Storage.Iteration2)
		if st == nil {
			t.Fatalf("%s: no live-storage trace (make truth)", name)
		}
		// The batch is created before the trackers start (examples/measure
		// trace), so they do not see the inputs the engine counts as Other.
		b := est.Peak
		got := int64(b.Total() - b.Other)
		wants := []int64{mt["Total"], st["Total"]}
		if unreachedGraph(tr) {
			wants = wants[1:] // see below
		}
		for _, want := range wants {
			if d := float64(got-want) / float64(want); max(d, -d) > worst {
				worst = max(d, -d)
			}
		}
		t.Logf("%-44s peak %+6.2f%% (MemTracker %+6.2f%%) at %s", name, 100*float64(got-st["Total"])/float64(st["Total"]),
			100*float64(got-mt["Total"])/float64(mt["Total"]), est.PeakAt.Where())
		if unreachedGraph(tr) {
			// MemTracker's module hooks (ModTracker's multi-grad hooks, a
			// reference cycle through the grad_fn they hook) keep alive the
			// graph of outputs no loss reaches: here the trainable tower's
			// blocks past the selected hidden state, which a plain training
			// step frees when get_image_features returns. The live-storage
			// tracker, which adds no hooks, is the reference.
			t.Logf("%s: MemTracker keeps the unreached tower blocks' graph (%+.2f%%)", name, 100*float64(got-mt["Total"])/float64(mt["Total"]))
		} else {
			within(name, "peak (MemTracker)", got, mt["Total"])
		}
		within(name, "peak (live storages)", got, st["Total"])
		// The engine counts module buffers (causal masks, position ids,
		// rotary frequencies) with the parameters.
		if p := int64(b.Parameters); p != st["PARAM"]+st["BUFFER"] || p != mt["PARAM"]+mt["BUFFER"] {
			t.Errorf("%s: parameters and buffers %d, traced %d and %d", name, p, mt["PARAM"]+mt["BUFFER"], st["PARAM"]+st["BUFFER"])
		}
		ours := phaseOf(int64(b.Activations), int64(b.Gradients), got)
		if theirs := phaseOf(st["ACT"], st["GRAD"], st["Total"]); ours != theirs {
			t.Errorf("%s: peak %s (%s), traced %s %v", name, ours, est.PeakAt.Where(), theirs, st)
			continue
		}
		// The categories. A weight's gradient is a temporary until autograd's
		// AccumulateGrad node makes it the .grad (the trackers see it so);
		// the engine counts it from the op that computes it. Recomputed
		// tensors are created in backward (the trackers' TEMP); the engine
		// counts them as activations. The optimizer step's scratch is the
		// trackers' OPT and the engine's temporaries.
		switch {
		case ours == "optimizer":
			within(name, "gradients", int64(b.Gradients), st["GRAD"])
			within(name, "optimizer states and step scratch", int64(b.OptimizerStates+b.Temporaries), st["OPT"])
		case tr.Checkpointing == "full" || tr.Checkpointing == "op":
			within(name, "optimizer states", int64(b.OptimizerStates), st["OPT"])
			within(name, "activations, temporaries and gradients", int64(b.Activations+b.Temporaries+b.Gradients), st["ACT"]+st["TEMP"]+st["GRAD"])
		default:
			within(name, "optimizer states", int64(b.OptimizerStates), st["OPT"])
			within(name, "activations", int64(b.Activations), st["ACT"])
			within(name, "temporaries and gradients", int64(b.Temporaries+b.Gradients), st["TEMP"]+st["GRAD"])
		}
	}
	t.Logf("%d traces; worst peak difference from either tracker %.2f%%, worst category %.2f%%", len(files), 100*worst, 100*worstCategory)
}

// TestExpertImbalanceExplainsMixtralGap: the tiny Mixtral traces' random
// router sent the expert at the peak 162 of 512 routed tokens (balanced: 128).
// Told so, the engine's activations, temporaries and gradients at the peak
// come within 0.5 % of the trace.
func TestExpertImbalanceExplainsMixtralGap(t *testing.T) {
	for _, name := range []string{"mixtral-tiny-fp32-eager-full-sgd", "mixtral-tiny-fp32-sdpa-full-sgd"} {
		var ms traceMeasurement
		tr := loadMeasurement(t, filepath.Join("testdata", "trace", name+".json"), &ms, func() measuredPlan { return ms.Plan })
		tr.ExpertImbalance = 162.0 / 128
		est, err := tr.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		st := peakOf(ms.Storage.Iteration1, ms.Storage.Iteration2)
		b := est.Peak
		got, want := int64(b.Activations+b.Temporaries+b.Gradients), st["ACT"]+st["TEMP"]+st["GRAD"]
		d := float64(got-want) / float64(want)
		if d > 0.005 || d < -0.005 {
			t.Errorf("%s with the traced imbalance: %d, traced %d (%+.2f%%)", name, got, want, 100*d)
		}
		t.Logf("%s with the traced imbalance: %+.2f%%", name, 100*d)
	}
}

// unreachedGraph reports whether a traced plan trains a vision tower whose
// last blocks run (with an autograd graph) but feed nothing the loss reads.
func unreachedGraph(tr Training) bool {
	m := tr.Model.Normalize()
	if m.Vision == nil || tr.VisionTower != "trainable" {
		return false
	}
	return m.Vision.featureIndex(m.visionWrapperOf()) < m.Vision.Tower.Layers
}
