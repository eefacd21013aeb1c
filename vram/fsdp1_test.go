package vram

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fsdp1Measurement is what examples/measure fsdp1 records: FSDP1 under
// LoRA on a fake process group, per decoder block's unit.
type fsdp1Measurement struct {
	Plan                 measuredPlan        `json:"plan"`
	Error                string              `json:"error"`
	Blocks               int                 `json:"blocks"`
	FlatParamNumel       []int64             `json:"flat_param_numel"`
	UnshardedNumel       []int64             `json:"unsharded_numel"`
	RequiresGrad         []bool              `json:"flat_param_requires_grad"`
	AdapterNumel         []int64             `json:"adapter_numel"` // unsharded, per block
	SavedBytesForward    int64               `json:"saved_bytes_forward"`
	UnshardedAtBackward  [][]json.RawMessage `json:"unsharded_at_backward_start"` // [block, [unsharded blocks]]
	GradNumelAfterNoSync []*int64            `json:"grad_numel_after_no_sync"`
	GradNumelAfterSync   []*int64            `json:"grad_numel_after_sync"`
}

// TestFSDP1Traces holds the engine's FSDP1 LoRA rules to what PyTorch does
// on a fake process group (examples/measure fsdp1; Parallel.FSDPAdapterUnits
// and Parallel.NoSync):
//   - each block is resharded in its own backward, under either wrapping:
//     when a block's backward starts, only it and a neighbour (the
//     prefetched next one, or the one just done) are unsharded;
//   - adapters shared with the frozen weights ("shared") give the whole flat
//     parameter a gradient: the engine's sharded gradients of a block are
//     the flat parameter's shard, and under no_sync its unsharded gradients
//     the whole flat parameter;
//   - adapters apart leave the block's units without gradients: the
//     engine's are the adapters' alone;
//   - what one forward without checkpointing saves (saved-tensor hooks,
//     distinct storages other than the flat parameters) within 1 %: with
//     shared units the frozen linears save their inputs too.
func TestFSDP1Traces(t *testing.T) {
	fs, err := filepath.Glob("testdata/fsdp1/*.json")
	if err != nil || len(fs) != 4 {
		t.Fatalf("want the 4 files of the grid, found %d (%v)", len(fs), err)
	}
	for _, f := range fs {
		var ms fsdp1Measurement
		tr := loadMeasurement(t, f, &ms, func() measuredPlan { return ms.Plan })
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if ms.Error != "" {
			t.Errorf("%s: the grid point did not run: %s", name, ms.Error)
			continue
		}
		for _, st := range ms.UnshardedAtBackward {
			var l int
			var live []int
			if len(st) != 2 || json.Unmarshal(st[0], &l) != nil || json.Unmarshal(st[1], &live) != nil {
				t.Fatalf("%s: unsharded_at_backward_start entry %s is not [block, [blocks]]", name, st)
			}
			if !slices.Contains(live, l) || len(live) > 2 {
				t.Errorf("%s: block %d's backward starts with blocks %v unsharded", name, l, live)
			}
			for _, k := range live {
				if k < l-1 || k > l+1 {
					t.Errorf("%s: block %d's backward starts with block %d still unsharded", name, l, k)
				}
			}
		}
		r, err := tr.resolve()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// What one forward saves: the activations live when the loss
		// starts, and the head's saved tensors.
		tl, err := tr.Timeline()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		saved := Bytes(-1)
		for _, e := range tl.Events {
			if e.Iteration == 1 && e.Phase == "loss" {
				hd := buildEdges(&r).Head
				// The loss moment shows the head's input live; the head's
				// saved tensors count it. The logits the loop holds are
				// not saved.
				saved = e.Live.Activations - hd.Input + hd.Saved - hd.outlives
				if r.inputsEmbedsHeld() {
					// Nor is the first block's input the forward still
					// holds as inputs_embeds.
					saved -= blockActivations(&r)[0].Input
				}
				break
			}
		}
		// Saved-tensor hooks do not see what a checkpoint keeps for its
		// recomputation (its inputs, the rotary tables among them): the
		// checkpointed runs' saved bytes are not compared.
		if want := Bytes(ms.SavedBytesForward); !strings.HasSuffix(name, "-full") && !near(float64(saved), float64(want), 0.01) {
			t.Errorf("%s: a forward saves %v, measured %v", name, saved, want)
		}
		blocks, _, _ := r.units()
		shared := strings.Contains(name, "-shared-")
		if got := r.sharedAdapterUnits(); got != shared {
			t.Errorf("%s: engine's shared units %v", name, got)
		}
		world := int64(r.shard)
		for l, u := range blocks[:ms.Blocks] {
			if shared {
				if !ms.RequiresGrad[l] || ms.GradNumelAfterSync[l] == nil || ms.GradNumelAfterNoSync[l] == nil {
					t.Fatalf("%s: block %d's shared flat parameter has no gradient", name, l)
				}
				if want := FP32.Size(*ms.GradNumelAfterSync[l]); !near(float64(u.grads), float64(want), 0.005) {
					t.Errorf("%s: block %d sharded gradients %v, flat gradient shard %v", name, l, u.grads, want)
				}
				if want := FP32.Size(*ms.GradNumelAfterNoSync[l]); !near(float64(u.gradsFull), float64(want), 0.005) {
					t.Errorf("%s: block %d unsharded gradients %v, no_sync flat gradient %v", name, l, u.gradsFull, want)
				}
				continue
			}
			if ms.RequiresGrad[l] || ms.GradNumelAfterSync[l] != nil {
				t.Fatalf("%s: block %d's frozen unit has a gradient", name, l)
			}
			if want := FP32.Size(ms.AdapterNumel[l] / world); u.grads != want {
				t.Errorf("%s: block %d gradients %v, want the adapters' shard %v", name, l, u.grads, want)
			}
		}
	}
}

// FSDP1 LoRA defaults by framework: litgpt's Block units hold the adapters
// ("shared"), transformers' Trainer applies PEFT's policy ("apart"); the
// loops of litgpt, the Trainer and accelerate accumulate inside no_sync().
func TestFSDP1Defaults(t *testing.T) {
	for _, c := range []struct {
		framework Framework
		accum     int
		units     string
		noSync    bool
	}{
		{"litgpt", 4, "shared", true},
		{"hf_trainer", 4, "apart", true},
		{"accelerate", 2, "apart", true},
		{"plain_pytorch", 4, "apart", false},
		{"litgpt", 1, "shared", false},
	} {
		tr := llamaPlan()
		tr.Framework, tr.GradAccum = c.framework, c.accum
		tr.LoRA = &LoRA{Rank: 8, Targets: []string{"q_proj", "v_proj"}}
		tr.Parallel = Parallel{DP: 2, FSDP: "full_shard", FSDPVersion: 1}
		r, err := tr.resolve()
		if err != nil {
			t.Fatalf("%s: %v", c.framework, err)
		}
		if got := r.Parallel.FSDPAdapterUnits; got != c.units {
			t.Errorf("%s: fsdp_adapter_units %q, want %q", c.framework, got, c.units)
		}
		if got := r.fsdp1NoSync(); got != c.noSync {
			t.Errorf("%s grad_accum %d: no_sync %v, want %v", c.framework, c.accum, got, c.noSync)
		}
	}
}

// no_sync keeps every unit's unsharded gradient through the accumulation
// steps; shared units give the frozen weights gradients (and their linears
// save their inputs), apart units do not.
func TestFSDP1Memory(t *testing.T) {
	plan := func(units string, noSync bool) TrainingEstimate {
		tr := llamaPlan()
		tr.Framework, tr.GradAccum, tr.Checkpointing = "litgpt", 4, "full"
		tr.LoRA = &LoRA{Rank: 8, Targets: []string{"q_proj", "v_proj"}}
		tr.Parallel = Parallel{DP: 2, FSDP: "full_shard", FSDPVersion: 1, FSDPAdapterUnits: units, NoSync: &noSync}
		est, err := tr.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		return est
	}
	sharedSync, sharedNoSync := plan("shared", false), plan("shared", true)
	apartSync, apartNoSync := plan("apart", false), plan("apart", true)
	// Shared units under no_sync hold the whole model's unsharded gradient
	// (bf16, about 12.5 GiB for Llama-2-7B); synced, only shards remain.
	if g := sharedNoSync.Peak.Gradients; g < 12*GiB || g > 13*GiB {
		t.Errorf("shared, no_sync: gradients at the peak %v, want the whole unsharded model's", g)
	}
	if g := sharedSync.Peak.Gradients; g > 7*GiB {
		t.Errorf("shared, synced: gradients at the peak %v, want shards", g)
	}
	// Apart, only the adapters have gradients either way.
	for _, e := range []TrainingEstimate{apartSync, apartNoSync} {
		if g := e.Peak.Gradients; g > 50*MiB {
			t.Errorf("apart: gradients at the peak %v, want the adapters' only", g)
		}
	}
	if sharedSync.Peak.Total() <= apartSync.Peak.Total() {
		t.Errorf("shared units %v should need more than apart %v", sharedSync.Peak.Total(), apartSync.Peak.Total())
	}
}

func TestFSDP1Errors(t *testing.T) {
	for _, c := range []struct{ train, want string }{
		{`"lora": {"rank": 8, "targets": ["q_proj"]}, "parallel": {"dp": 2, "fsdp": "full_shard", "fsdp_version": 1, "fsdp_adapter_units": "mixed"}}`, "parallel.fsdp_adapter_units"},
		{`"lora": {"rank": 8, "targets": ["q_proj"]}, "parallel": {"dp": 2, "fsdp": "full_shard", "fsdp_adapter_units": "shared"}}`, "applies to LoRA"},
		{`"parallel": {"dp": 2, "fsdp": "full_shard", "fsdp_version": 1, "fsdp_adapter_units": "apart"}}`, "applies to LoRA"},
		{`"lora": {"rank": 8, "targets": ["q_proj"]}, "quantized_base": {"dtype": "nf4"}, "parallel": {"dp": 2, "fsdp": "full_shard", "fsdp_version": 1, "fsdp_adapter_units": "shared"}}`, "unquantized base"},
		{`"grad_accum": 2, "parallel": {"dp": 2, "fsdp": "full_shard", "no_sync": true}}`, "parallel.no_sync"},
		{`"grad_accum": 2, "parallel": {"dp": 2, "no_sync": true}}`, "parallel.no_sync"},
	} {
		p, err := ParsePlan([]byte(`{"model": "gpt2", "train": {"seq_len": 64, "micro_batch": 1, `+c.train+`}`), t.TempDir())
		if err == nil {
			_, err = p.Training.Estimate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.train, err, c.want)
		}
	}
}
