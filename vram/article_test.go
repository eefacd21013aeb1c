package vram

import "testing"

// sevenB is a model with exactly 7e9 parameters for the article's round
// figures: the parameter count overrides nothing, so use a shape whose
// ModelStates scale linearly and check against N = ParamCount.
func TestArticleFigures(t *testing.T) {
	const n = 7e9
	// Parameters: N × bytes per element (article §2).
	if got := FP32.Size(n); got != 28*GB {
		t.Errorf("7B fp32 weights = %v, want 28 GB", got.Format(GB, 1))
	}
	if got := BF16.Size(n); got != 14*GB {
		t.Errorf("7B bf16 weights = %v, want 14 GB", got.Format(GB, 1))
	}
	// AdamW: two fp32 states per parameter = 56 GB; with fp32 weights and
	// gradients the model states are 112 GB (article §6).
	r := resolved{Training: Training{Optimizer: "adamw"}}
	st, _ := r.stateBytes(n, []int64{n}, FP32)
	if st != 56*GB {
		t.Errorf("7B AdamW states = %v, want 56 GB", st.Format(GB, 1))
	}
	if total := FP32.Size(n) + FP32.Size(n) + st; total != 112*GB {
		t.Errorf("7B params+grads+states = %v, want 112 GB", total.Format(GB, 1))
	}
	// The working-set rule of thumb (§8) at its middle values.
	if got := (RuleOfThumb{Params: n}).Total(); got != 100*GB {
		t.Errorf("rule of thumb for 7B = %v, want 100 GB", got.Format(GB, 1))
	}
	lo := RuleOfThumb{Params: n, ActivationMult: 2, Buffers: GB}.Total()
	hi := RuleOfThumb{Params: n, ActivationMult: 4, Buffers: 2 * GB}.Total()
	if lo != 85*GB || hi != 114*GB {
		t.Errorf("rule of thumb range = %v … %v, want 85 … 114 GB", lo.Format(GB, 0), hi.Format(GB, 0))
	}
}

// TestArticleLlama7BModelStates runs the same accounting through the engine
// for the real LLaMA-7B shape: fp32 AdamW model states are 16 bytes/param.
func TestArticleLlama7BModelStates(t *testing.T) {
	m := MustPreset("llama-7b")
	ms, err := Training{Model: m, SeqLen: 2048, MicroBatch: 1, Precision: "fp32", Optimizer: "adamw"}.ModelStates()
	if err != nil {
		t.Fatal(err)
	}
	n := Bytes(m.ParamCount())
	if ms.Parameters != 4*n || ms.Gradients != 4*n || ms.OptimizerStates != 8*n {
		t.Errorf("model states = %+v, want 4N/4N/8N with N = %d", ms, n)
	}
}
