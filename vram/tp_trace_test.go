package vram

import (
	"path/filepath"
	"sort"
	"testing"
)

// TestTPTraces holds the engine to MemTracker on tensor parallelism through
// DTensor (examples/measure tp, torchtitan's Llama plan): tp 2 and 4, the
// logits vocab-sharded under loss_parallel() or all-gathered, without and
// with sequence parallelism (whose sublayers save their all-gathered input). Parameters (the embedding and lm_head sharded, norms
// replicated) and optimizer states agree exactly and activations within
// 1 % (with loss_parallel's decomposed loss holding one local-vocabulary
// buffer more than the fused kernels, edges.go); the peak within 2 %.
func TestTPTraces(t *testing.T) {
	fs, err := filepath.Glob("testdata/tp/*.json")
	if err != nil || len(fs) != 8 {
		t.Fatalf("want the 8 traces of the grid, found %d (%v)", len(fs), err)
	}
	sort.Strings(fs)
	peaks := map[string]Bytes{}
	for _, f := range fs {
		name, est, m := distributedTrace(t, f)
		if m["ACT"] < m["Total"]/100 {
			// The traced peak is the optimizer step, whose temporaries the
			// tracker files as optimizer states: parameters alone compare.
			if got := int64(est.Peak.Parameters); got != m["PARAM"]+m["BUFFER"] {
				t.Errorf("%s: parameters %d, traced %d", name, got, m["PARAM"]+m["BUFFER"])
			}
		} else {
			statesMatch(t, name, est, m["PARAM"]+m["BUFFER"], m["OPT"])
		}
		const tol = 0.01
		if m["ACT"] < m["Total"]/100 {
			// The traced peak is the first optimizer step (no activations
			// left); the engine's is in backward, within the peak's 2 %.
		} else if a, want := float64(est.Peak.Activations), float64(m["ACT"]); a < want*(1-tol) || a > want*(1+tol) {
			t.Errorf("%s: activations %v, traced %d", name, est.Peak.Activations, m["ACT"])
		}
		got := est.Peak.Total() - est.Peak.Other // MemTracker does not see the batch
		d := float64(got)/float64(m["Total"]) - 1
		if d < -0.02 || d > 0.02 {
			t.Errorf("%s: peak %v, traced %v (%+.1f%%)", name, got, Bytes(m["Total"]), 100*d)
		}
		t.Logf("%-40s peak %+5.2f%% at %s", name, 100*d, est.PeakAt.Where())
		peaks[name] = got
	}
	// All-gathered logits cost more than sharded ones, more so at tp 4.
	for _, tp := range []string{"tp2", "tp4"} {
		if peaks["llama-tiny-mha-"+tp+"-gathered_logits"] <= peaks["llama-tiny-mha-"+tp+"-loss_parallel"] {
			t.Errorf("%s: gathered logits should need more than loss parallelism", tp)
		}
	}
}
