package vram

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestCompiledSavedSet holds the compiled block's saved set (compile.go) to
// what PyTorch's torch.compile saves, measured on the CPU with
// saved_tensors_hooks while each block is compiled on its own (examples/
// measure saved with "compile": true; make truth): the 24 small models of
// testdata/saved (BERT, GPT-2, Llama, Mistral, GPT-NeoX, OPT; fp32 and bf16;
// eager and SDPA attention), within 1 % per block. Under compile the eager
// set shrinks by up to 40 % (GPT-2's Python GELU is recomputed in the
// backward), and the engine follows it.
func TestCompiledSavedSet(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "compiled", "*.json"))
	if len(files) != 24 {
		t.Fatalf("want the 24 compiled measurements, found %d", len(files))
	}
	sort.Strings(files)
	var rows []string
	for _, f := range files {
		ms, tr, blk := measuredBlock(t, f)
		if !tr.Compile {
			t.Fatalf("%s: not a compiled measurement", f)
		}
		got, want := int64(blk.SavedCompiled-blk.Held), ms.PerBlock
		d := float64(got)/float64(want) - 1
		if d < -0.01 || d > 0.01 {
			t.Errorf("%s: the compiled block saves %d bytes, PyTorch %d (%+.2f%%)", f, got, want, 100*d)
		}
		if blk.SavedCompiled > blk.Saved {
			t.Errorf("%s: compiled %v above eager %v", f, blk.SavedCompiled, blk.Saved)
		}
		rows = append(rows, fmt.Sprintf("| %s | %d | %d | %d | %+.2f %% |", strings.TrimSuffix(filepath.Base(f), ".json"), int64(blk.Saved-blk.Held), want, got, 100*d))
	}
	t.Logf("per block (bytes): eager engine, compiled PyTorch, compiled engine\n%s", strings.Join(rows, "\n"))
}

// A compiled plan's activations are the compiled set: the estimate uses
// it, and a checkpointed block still keeps only its input.
func TestCompileShrinksActivations(t *testing.T) {
	base := Training{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 1, Precision: "bf16", Optimizer: "sgd"}
	comp := base
	comp.Compile = true
	a, err := base.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	b, err := comp.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	if b.Static.Activations >= a.Static.Activations {
		t.Errorf("compiled activations %v, eager %v", b.Static.Activations, a.Static.Activations)
	}
	comp.Checkpointing = "full"
	r, err := comp.resolve()
	if err != nil {
		t.Fatal(err)
	}
	blk := buildBlock(&r, 0)
	if got := r.savedFor(blk, 0); got != blk.Input || blk.SavedCompiled <= blk.Input {
		t.Errorf("checkpointed compiled block keeps %v, its input is %v (compiled set %v)", got, blk.Input, blk.SavedCompiled)
	}
}
