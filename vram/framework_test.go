package vram

import (
	"fmt"
	"strings"
	"testing"
)

// Each framework's documented defaults (vram/README.md, "Framework defaults").
func TestFrameworkDefaults(t *testing.T) {
	base := Training{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 1, Precision: "bf16", Checkpointing: "full"}

	// torchtitan: tensor parallelism always comes with sequence parallelism.
	titan := base
	titan.Framework, titan.Parallel = "torchtitan", Parallel{TP: 4}
	r, err := titan.resolve()
	if err != nil || !r.Parallel.SP {
		t.Errorf("torchtitan with tp 4: sp %v (%v)", r.Parallel.SP, err)
	}
	plain := base
	plain.Parallel = Parallel{TP: 4}
	a, b := estimateOf(t, plain), estimateOf(t, titan)
	if b.Static.Activations >= a.Static.Activations {
		t.Errorf("torchtitan's TP shards the norms' activations: %v vs plain TP %v", b.Static.Activations, a.Static.Activations)
	}

	// Megatron's --bf16: fp32 main parameters and fp32 main gradients.
	mg := base
	mg.Framework = "megatron"
	r, err = mg.resolve()
	if err != nil || r.MasterWeights != FP32 || r.GradsDType != FP32 || r.WeightsDType != BF16 {
		t.Errorf("megatron bf16: weights %v master %v grads %v (%v)", r.WeightsDType, r.MasterWeights, r.GradsDType, err)
	}
	mg.Precision = "fp16"
	if r, _ = mg.resolve(); r.MasterWeights != FP32 || r.GradsDType != FP16 {
		t.Errorf("megatron fp16: master %v grads %v", r.MasterWeights, r.GradsDType)
	}
	// Its DDP grad buffer is allocated once and zeroed in place: the
	// gradients are live through the next iteration's forward.
	mg.Precision = "bf16"
	tl, err := mg.Timeline()
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range tl.Events {
		if ev.Iteration == 2 && ev.Phase == "forward" && ev.Live.Gradients == 0 {
			t.Fatalf("megatron: no gradients live at %s of iteration 2", ev.Name)
		}
	}

	// accelerate: FSDP1 unless told, and the user's loop keeps the output.
	acc := base
	acc.Framework, acc.Parallel = "accelerate", Parallel{DP: 8, FSDP: "full_shard"}
	r, err = acc.resolve()
	if err != nil || r.Parallel.FSDPVersion != 1 || r.fsdp2() || !r.keepsOutputs() {
		t.Errorf("accelerate FSDP: version %d, fsdp2 %v, keeps outputs %v (%v)", r.Parallel.FSDPVersion, r.fsdp2(), r.keepsOutputs(), err)
	}
	acc.Parallel.FSDPVersion = 2
	if r, _ = acc.resolve(); !r.fsdp2() {
		t.Errorf("accelerate with fsdp_version 2 should be FSDP2")
	}
}

// Megatron-LM's recompute methods: "block" checkpoints the first N blocks of
// each chunk; "uniform" checkpoints groups of N blocks as units.
func TestMegatronRecompute(t *testing.T) {
	base := Training{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 1, Precision: "bf16", Framework: "megatron", Optimizer: "sgd"}
	with := func(ckpt Checkpointing, method string, n int) TrainingEstimate {
		tr := base
		tr.Checkpointing, tr.RecomputeMethod, tr.RecomputeNumLayers = ckpt, method, n
		return estimateOf(t, tr)
	}
	none, full := with("none", "", 0), with("full", "", 0)

	blk := base
	blk.Checkpointing, blk.RecomputeMethod, blk.RecomputeNumLayers = "full", "block", 8
	blk.Parallel = Parallel{PP: 2}
	r, err := blk.resolve()
	if err != nil {
		t.Fatal(err)
	}
	for l, want := range map[int]bool{0: true, 7: true, 8: false, 15: false, 16: true, 23: true, 24: false} {
		if r.checkpointed(l) != want {
			t.Errorf("block method, 8 of each 16-block stage: block %d checkpointed %v", l, !want)
		}
	}
	act := func(e TrainingEstimate) Bytes { return e.Static.Activations } // the most activations at any moment
	half := with("full", "block", 16)
	if !(act(half) > act(full) && act(half) < act(none)) {
		t.Errorf("block 16 of 32: activations %v should lie between full %v and none %v", act(half), act(full), act(none))
	}

	// Uniform groups of one block are full checkpointing.
	if u1 := with("full", "uniform", 1); u1.Peak.Total() != full.Peak.Total() || act(u1) != act(full) {
		t.Errorf("uniform 1: %v, full: %v", u1.Peak.Total(), full.Peak.Total())
	}
	// Groups of four keep a quarter of the inputs, and recompute four
	// blocks at once.
	tr := base
	tr.Checkpointing, tr.RecomputeMethod, tr.RecomputeNumLayers = "full", "uniform", 4
	r, _ = tr.resolve()
	if s, e := r.recomputeGroup(6); s != 4 || e != 7 {
		t.Errorf("block 6's group: [%d, %d], want [4, 7]", s, e)
	}
	// When the backward reaches block 31 the group's other three blocks
	// are recomputed whole, beside the eight group inputs.
	blk0 := buildBlock(&r, 0)
	tl4, err := tr.Timeline()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range tl4.Events {
		if ev.Iteration == 2 && ev.Layer == 31 && ev.Name == "recompute" {
			found = true
			if want := 8*blk0.Input + 3*blk0.Saved; ev.Live.Activations != want {
				t.Errorf("recomputing group [28, 31]: activations %v, want 8 inputs and 3 blocks' saved sets %v", ev.Live.Activations, want)
			}
		}
	}
	if !found {
		t.Error("no recompute event for block 31")
	}
	// The forward keeps 8 group inputs instead of 32 block inputs.
	in := buildBlock(&r, 0).Input
	tl, err := tr.Timeline()
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range tl.Events {
		if ev.Iteration == 2 && ev.Phase == "loss" {
			var fullLoss Event
			ft := base
			ft.Checkpointing = "full"
			ftl, _ := ft.Timeline()
			for _, fe := range ftl.Events {
				if fe.Iteration == 2 && fe.Phase == "loss" {
					fullLoss = fe
				}
			}
			if d := fullLoss.Live.Activations - ev.Live.Activations; d != 24*in {
				t.Errorf("at the loss, uniform 4 keeps %v less than full, want 24 block inputs (%v)", d, 24*in)
			}
		}
	}
}

func TestMegatronRecomputeErrors(t *testing.T) {
	for _, c := range []struct{ train, want string }{
		{`"grad_checkpointing": "selective", "recompute_method": "uniform"`, `applies to grad_checkpointing "full"`},
		{`"grad_checkpointing": "full", "recompute_method": "all"`, "recompute_method"},
		{`"grad_checkpointing": "full", "recompute_num_layers": 2`, "goes with recompute_method"},
		{`"grad_checkpointing": "full", "recompute_method": "block", "recompute_num_layers": 99`, "recompute_num_layers must be in"},
		{`"grad_checkpointing": "full", "recompute_method": "block", "checkpoint_every": 2`, "set one"},
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

// Megatron-LM's uneven pipeline stages: explicit first and last stage sizes,
// or the embedding and the loss counted as layers.
func TestMegatronPipelineSplit(t *testing.T) {
	for _, c := range []struct {
		model string
		p     Parallel
		want  []int
		err   string
	}{
		{"llama-2-70b", Parallel{PP: 4, PPFirstStageLayers: 19, PPLastStageLayers: 19}, []int{19, 21, 21, 19}, ""},
		{"llama-2-70b", Parallel{PP: 4, PPLastStageLayers: 17}, []int{21, 21, 21, 17}, ""},
		{"llama-3.1-405b", Parallel{PP: 8, PPAccountEmbedding: true, PPAccountLoss: true}, []int{15, 16, 16, 16, 16, 16, 16, 15}, ""},
		{"llama-3.1-405b", Parallel{PP: 8, PPSchedule: "interleaved_1f1b", VirtualStages: 3, PPMicrobatches: 16, PPAccountEmbedding: true, PPAccountLoss: true}, nil, "do not split evenly"},
		{"llama-2-70b", Parallel{PP: 4, PPFirstStageLayers: 18, PPLastStageLayers: 19}, nil, "share evenly"},
		{"llama-2-70b", Parallel{PP: 4, PPFirstStageLayers: 18, PPAccountLoss: true}, nil, "exclusive"},
		{"llama-2-70b", Parallel{PPFirstStageLayers: 18}, nil, "pp ≥ 2"},
	} {
		tr := Training{Model: MustPreset(c.model), SeqLen: 4096, MicroBatch: 1, Precision: "bf16", Framework: "megatron", Parallel: c.p}
		r, err := tr.resolve()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: %v, want an error with %q", c.p, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%+v: %v", c.p, err)
		}
		if got := r.blocksPerRank(); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%+v: %v blocks a rank, want %v", c.p, got, c.want)
		}
	}
}

// Async TP's symmetric-memory workspace: outside the allocator, in what
// nvidia-smi shows.
func TestAsyncTPWorkspace(t *testing.T) {
	tr := Training{Model: MustPreset("llama-3-8b"), SeqLen: 8192, MicroBatch: 2, Precision: "bf16", Framework: "torchtitan", Compile: true,
		Checkpointing: "full", Parallel: Parallel{TP: 4, DP: 2, FSDP: "full_shard"}}
	off, err := tr.Replay(ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr.Parallel.AsyncTP = true
	on, err := tr.Replay(ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// 2 × 2 × 8192/4 tokens × 4096 × 2 bytes
	if want := Bytes(2 * 2 * 2048 * 4096 * 2); on.SymmetricMemory != want || on.DeviceUsed-off.DeviceUsed != want || on.PeakAllocated != off.PeakAllocated {
		t.Errorf("async TP workspace %v (device used +%v, allocated %v vs %v), want %v", on.SymmetricMemory, on.DeviceUsed-off.DeviceUsed, on.PeakAllocated, off.PeakAllocated, want)
	}
	tr.Compile = false
	if _, err := tr.Estimate(); err == nil || !strings.Contains(err.Error(), "parallel.async_tp") {
		t.Errorf("async TP without compile: %v", err)
	}
}
