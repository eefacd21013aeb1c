package vram

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

// searchPlan is Llama-3-8B under torchtitan at 8k tokens.
func searchPlan() Training {
	return Training{Model: MustPreset("llama-3-8b"), SeqLen: 8192, Precision: "mixed_bf16", Framework: FrameworkTorchtitan}
}

// TestSearchExact: a searched layout's figures are Estimate's and
// Replay's of its plan, byte for byte; the layouts come fastest first, all
// fit, and each is a layout of the GPUs asked for.
func TestSearchExact(t *testing.T) {
	g := mustGPU("H100-80GB")
	res, err := Search(SearchSpace{Plan: searchPlan(), GPU: g, GPUs: 16, GlobalBatch: 32})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Layouts) == 0 || res.Feasible < len(res.Layouts) || res.Candidates < res.Feasible {
		t.Fatalf("%d candidates, %d feasible, %d layouts", res.Candidates, res.Feasible, len(res.Layouts))
	}
	for i, l := range res.Layouts {
		p := l.Training.Parallel
		if p.DP*p.TP*p.PP*p.CP != 16 || !l.Fits || l.DeviceUsed > res.Limit {
			t.Errorf("layout %d: %+v on %d GPUs, fits %v, %v", i, p, p.DP*p.TP*p.PP*p.CP, l.Fits, l.DeviceUsed)
		}
		if i > 0 && l.Step.TokensPerSecond > res.Layouts[i-1].Step.TokensPerSecond {
			t.Errorf("layout %d is faster than layout %d", i, i-1)
		}
		if i%7 != 0 {
			continue // a sample
		}
		est, err := l.Training.Estimate()
		if err != nil || est.Peak.Total()+gemmWorkspace(&g, "") != l.Allocated {
			t.Errorf("layout %d: Estimate %v + workspace, searched %v (%v)", i, est.Peak.Total(), l.Allocated, err)
		}
		rep, err := l.Training.Replay(ReplayOptions{GPU: &g})
		if err != nil || rep.DeviceUsed != l.DeviceUsed || rep.PeakReserved != l.Reserved {
			t.Errorf("layout %d: Replay %v / %v, searched %v / %v (%v)", i, rep.PeakReserved, rep.DeviceUsed, l.Reserved, l.DeviceUsed, err)
		}
	}
}

// TestSearchFixedChoices: what the plan sets stays; a search with nothing
// that fits says so with no layout; bad spaces are refused by field.
func TestSearchFixedChoices(t *testing.T) {
	g := mustGPU("H100-80GB")
	p := searchPlan()
	p.Parallel.TP, p.Checkpointing = 4, CheckpointFull
	res, err := Search(SearchSpace{Plan: p, GPU: g, GPUs: 16, GlobalBatch: 32})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range res.Layouts {
		if l.Training.Parallel.TP != 4 || l.Training.Checkpointing != CheckpointFull {
			t.Errorf("layout %+v, %s: the plan fixed tp 4 and full checkpointing", l.Training.Parallel, l.Training.Checkpointing)
		}
	}
	big := Training{Model: MustPreset("llama-3.1-405b"), SeqLen: 8192, Precision: "mixed_bf16", Framework: FrameworkTorchtitan}
	if res, err := Search(SearchSpace{Plan: big, GPU: mustGPU("RTX-4090"), GPUs: 2, GlobalBatch: 2}); err != nil || len(res.Layouts) != 0 || res.Feasible != 0 {
		t.Errorf("405B on two RTX 4090: %d layouts, %d feasible, %v", len(res.Layouts), res.Feasible, err)
	}
	for _, c := range []struct {
		s    SearchSpace
		want string
	}{
		{SearchSpace{Plan: searchPlan(), GPU: g}, "gpus must be"},
		{SearchSpace{Plan: fixedTP2(), GPU: g, GPUs: 8, GlobalBatch: 3}, "no layout of 8 GPUs"},
		{SearchSpace{Plan: searchPlan(), GPU: g, GPUs: 8, Headroom: 1}, "headroom"},
	} {
		if _, err := Search(c.s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.s.GPUs, err, c.want)
		}
	}
}

// TestStepTime: the communication terms of a step, from their formulas.
// Llama-3-8B (8,030,261,248 parameters) fully sharded over 8 H100s of a
// node, one micro-batch: all-gathers in the forward and the backward in
// bf16 and a reduce-scatter in fp32 (mixed_bf16's gradients), 7/8 of
// 8 bytes a parameter at NVLink's 450 GB/s; the same over two nodes of 8
// crosses the network at 50 GB/s. Tensor parallel 2 in a node: four
// all-reduces a layer of 8192 tokens × 4096 in bf16, twice ½ of it each,
// over 32 layers. A pipeline of 4 over 8 microbatches: a bubble of 3/11.
func TestStepTime(t *testing.T) {
	g := mustGPU("H100-80GB")
	p := searchPlan()
	p.MicroBatch = 1
	p.Parallel = Parallel{DP: 8, FSDP: "full_shard"}
	st, err := p.StepTime(g, 50e9)
	if err != nil {
		t.Fatal(err)
	}
	params := 8030261248.0
	if want := 7.0 / 8 * params * (2*2 + 4) / 450e9; math.Abs(st.DataComm-want) > 1e-9*want {
		t.Errorf("data parallel in a node: %g s, want %g", st.DataComm, want)
	}
	p.Parallel.DP = 16
	st, _ = p.StepTime(g, 50e9)
	if want := 15.0 / 16 * params * 8 / 50e9; math.Abs(st.DataComm-want) > 1e-9*want {
		t.Errorf("data parallel across nodes: %g s, want %g", st.DataComm, want)
	}
	p.Parallel = Parallel{TP: 2}
	st, _ = p.StepTime(g, 50e9)
	if want := 0.5 * 32 * 4 * 2 * 8192 * 4096 * 2 / 450e9; math.Abs(st.TPComm-want) > 1e-9*want {
		t.Errorf("tensor parallel: %g s, want %g", st.TPComm, want)
	}
	p.Parallel, p.MicroBatch = Parallel{PP: 4, PPMicrobatches: 8}, 8
	st, _ = p.StepTime(g, 50e9)
	if want := 3.0 / 11; math.Abs(st.Bubble-want) > 1e-12 {
		t.Errorf("1F1B bubble: %g, want %g", st.Bubble, want)
	}
	if st.Seconds <= st.Compute || st.TokensPerSecond <= 0 {
		t.Errorf("step %+v", st)
	}
}

// TestLaunchFlags: a layout as torchtitan and Megatron-LM launch it.
func TestLaunchFlags(t *testing.T) {
	p := searchPlan()
	p.MicroBatch, p.Checkpointing = 16, CheckpointOp
	p.Parallel = Parallel{DP: 4, FSDP: "full_shard", TP: 2, PP: 2, PPMicrobatches: 8}
	got := p.LaunchFlags()
	for _, want := range []string{"--parallelism.data_parallel_shard_degree 4", "--parallelism.tensor_parallel_degree 2", "--parallelism.pipeline_parallel_degree 2",
		"--training.local_batch_size 16", "--training.global_batch_size 64", "--parallelism.pipeline_parallel_microbatch_size 2", "--activation_checkpoint.mode selective --activation_checkpoint.selective_ac_option op", "(2 nodes)"} {
		if !strings.Contains(got, want) {
			t.Errorf("torchtitan: %q lacks %q", got, want)
		}
	}
	p.Framework, p.Checkpointing, p.Parallel.SP = FrameworkMegatron, CheckpointFull, true
	got = p.LaunchFlags()
	for _, want := range []string{"--tensor-model-parallel-size 2", "--pipeline-model-parallel-size 2", "--sequence-parallel", "--micro-batch-size 2 --global-batch-size 64", "--recompute-granularity full"} {
		if !strings.Contains(got, want) {
			t.Errorf("megatron: %q lacks %q", got, want)
		}
	}
}

// fixedTP2 is searchPlan on tensor parallel 2, no pipeline, no context
// parallelism: 8 GPUs make 4 replicas, which 3 sequences do not divide.
func fixedTP2() Training {
	p := searchPlan()
	p.Parallel = Parallel{TP: 2, PP: 1, CP: 1}
	return p
}

// TestSearchServing: every vLLM launch of Llama-3.1-70B on up to 8 H100s
// for 32k-token requests that starts and holds one request, ranked by the
// requests all replicas hold at once; each launch's figures are its
// carve's; fixed settings stay; the command line says the launch.
func TestSearchServing(t *testing.T) {
	in := Inference{Model: MustPreset("llama-3.1-70b")}
	g := mustGPU("H100-80GB")
	res, err := SearchServing(ServingSpace{Inference: in, GPU: g, GPUs: 8, Context: 32768})
	if err != nil || len(res) < 4 {
		t.Fatalf("%d launches, %v", len(res), err)
	}
	for i, l := range res {
		if i > 0 && l.Concurrency > res[i-1].Concurrency {
			t.Errorf("launch %d holds more than launch %d", i, i-1)
		}
		c, err := l.VLLM.Carve(Inference{Model: in.Model, Weights: weightsOf(l)}, g)
		if err != nil || c.KVCache.Blocks != l.Carve.KVCache.Blocks || l.Concurrency != float64(l.Replicas)*c.KVCache.MaxConcurrencyFor(32768) || l.Replicas*l.VLLM.TP > 8 {
			t.Errorf("launch %d: %+v, carve again %v blocks (%v)", i, l.VLLM, c.KVCache.Blocks, err)
		}
		if !strings.Contains(l.Command, fmt.Sprintf("--tensor-parallel-size %d", l.VLLM.TP)) || !strings.Contains(l.Command, "--max-model-len 32768") {
			t.Errorf("launch %d command %q", i, l.Command)
		}
	}
	fixed, err := SearchServing(ServingSpace{Inference: in, Launch: VLLM{TP: 4, KVCacheDType: BF16}, GPU: g, GPUs: 8, Context: 32768})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range fixed {
		if l.VLLM.TP != 4 || l.VLLM.KVCacheDType != BF16 || l.Replicas != 2 {
			t.Errorf("fixed tp 4, bf16 cache: %+v", l.VLLM)
		}
	}
	if res, err := SearchServing(ServingSpace{Inference: Inference{Model: MustPreset("llama-3.1-405b")}, GPU: mustGPU("RTX-4090"), GPUs: 1, Context: 8192}); err != nil || len(res) != 0 {
		t.Errorf("405B on one RTX 4090: %d launches, %v", len(res), err)
	}
	if _, err := SearchServing(ServingSpace{Inference: in, GPU: g, GPUs: 8}); err == nil || !strings.Contains(err.Error(), "context") {
		t.Errorf("no context: %v", err)
	}
}

// weightsOf is the weights a searched launch loads.
func weightsOf(l ServingLayout) Quant {
	if l.Weights == "as released" {
		return Quant{}
	}
	return Quant{DType: FP8E4M3}
}

// TestSearchInterleaved: a pipeline the plan leaves unscheduled is also
// searched interleaved over two virtual stages, whose bubble is the
// halved (p − 1)/(2m + p − 1); such a layout launches with Megatron-LM's
// layers per virtual stage.
func TestSearchInterleaved(t *testing.T) {
	p := searchPlan()
	p.Framework = FrameworkMegatron // torchtitan would also need (32 + 2) layers to divide its stages
	res, err := Search(SearchSpace{Plan: p, GPU: mustGPU("H100-80GB"), GPUs: 16, GlobalBatch: 32, Replay: 400})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range res.Layouts {
		p := l.Training.Parallel
		if p.VirtualStages != 2 {
			continue
		}
		found = true
		m, pp := float64(p.PPMicrobatches), float64(p.PP)
		if want := (pp - 1) / (2*m + pp - 1); p.PPSchedule != ScheduleInterleaved1F1B || math.Abs(l.Step.Bubble-want) > 1e-12 || !strings.Contains(l.Launch, "--num-layers-per-virtual-pipeline-stage") {
			t.Errorf("%+v: bubble %g, want %g; %s", p, l.Step.Bubble, want, l.Launch)
		}
	}
	if !found {
		t.Error("no interleaved layout among those that fit")
	}
}

// TestSearchExpertParallel: a MoE model's search under torchtitan tries
// expert-parallel degrees that divide its experts and its data and context
// ranks, prices their all-to-alls, and prints the degree as torchtitan's
// flag; a dense model's tries none.
func TestSearchExpertParallel(t *testing.T) {
	s := SearchSpace{Plan: Training{Model: MustPreset("qwen1.5-moe-a2.7b"), SeqLen: 2048, Precision: "mixed_bf16", Framework: FrameworkTorchtitan,
		Parallel: Parallel{TP: 1, PP: 1, CP: 1}}, GPU: mustGPU("H100-80GB"), GPUs: 16, GlobalBatch: 32}
	s, err := s.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cands, err := s.candidates()
	if err != nil {
		t.Fatal(err)
	}
	eps := map[int]bool{}
	for _, c := range cands {
		eps[max(1, c.Parallel.EP)] = true
	}
	// 60 routed experts on 16 data-parallel ranks: 1, 2 and 4 divide both.
	if want := map[int]bool{1: true, 2: true, 4: true}; !reflect.DeepEqual(eps, want) {
		t.Errorf("expert-parallel degrees %v, want %v", eps, want)
	}
	for _, c := range cands {
		st, err := c.StepTime(s.GPU, s.NetworkBandwidth)
		if err != nil {
			t.Fatal(err)
		}
		if (c.Parallel.EP > 1) != (st.EPComm > 0) {
			t.Errorf("ep %d: all-to-all %g s", c.Parallel.EP, st.EPComm)
		}
		if f := c.LaunchFlags(); (c.Parallel.EP > 1) != strings.Contains(f, fmt.Sprintf("--parallelism.expert_parallel_degree %d", c.Parallel.EP)) {
			t.Errorf("ep %d: %s", c.Parallel.EP, f)
		}
	}
	dense := s
	dense.Plan.Model = MustPreset("llama-3.2-1b")
	if got := dense.epDegrees(16); !reflect.DeepEqual(got, []int{1}) {
		t.Errorf("a dense model's expert-parallel degrees: %v", got)
	}
}

// TestSearchDeepSpeedStages: a DeepSpeed search tries ZeRO stages 1–3 (it
// had laid FSDP over DeepSpeed's ranks) and prints each as DeepSpeed's
// config; accelerate's layouts print as its launch flags.
func TestSearchDeepSpeedStages(t *testing.T) {
	s := SearchSpace{Plan: Training{Model: MustPreset("llama-3.2-1b"), SeqLen: 1024, Precision: "bf16", Framework: FrameworkDeepSpeed, Checkpointing: "full", MicroBatch: 2},
		GPU: mustGPU("A100-80GB"), GPUs: 8, GlobalBatch: 64}
	res, err := Search(s)
	if err != nil {
		t.Fatal(err)
	}
	stages := map[int]bool{}
	for _, l := range res.Layouts {
		z := l.Training.Parallel.ZeRO
		stages[z] = true
		want := fmt.Sprintf(`"zero_optimization": {"stage": %d}`, z)
		if l.Training.Parallel.FSDP != "" || !strings.Contains(l.Launch, want) || !strings.Contains(l.Launch, `"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4`) {
			t.Errorf("ZeRO %d, fsdp %q: %s", z, l.Training.Parallel.FSDP, l.Launch)
		}
	}
	if !reflect.DeepEqual(stages, map[int]bool{1: true, 2: true, 3: true}) {
		t.Errorf("ZeRO stages %v", stages)
	}
	acc := Training{Model: MustPreset("llama-3.2-1b"), SeqLen: 1024, MicroBatch: 2, GradAccum: 2, Precision: "bf16", Framework: FrameworkAccelerate, Checkpointing: "full",
		Parallel: Parallel{DP: 4, TP: 2, FSDP: "full_shard"}}
	if f, want := acc.LaunchFlags(), "accelerate launch --num_processes 8 --num_machines 1 --mixed_precision bf16 --use_fsdp --fsdp_version 1 --fsdp_reshard_after_forward true --fsdp_activation_checkpointing true --parallelism_config_dp_shard_size 4 --parallelism_config_tp_size 2 --parallelism_config_cp_size 1"; !strings.HasPrefix(f, want) {
		t.Errorf("accelerate:\n  %s\nwant a prefix\n  %s", f, want)
	}
}

// TestSearchSaysItsReleases: a search's answer lists the releases its
// layouts were modelled with: torch (the GEMM workspace) as the space names
// it, and NCCL for a run over several GPUs.
func TestSearchSaysItsReleases(t *testing.T) {
	s := SearchSpace{Plan: Training{Model: MustPreset("llama-3.2-1b"), SeqLen: 1024, Precision: "bf16", Framework: FrameworkTorchtitan, Checkpointing: "full", MicroBatch: 1,
		Parallel: Parallel{TP: 1, PP: 1, CP: 1}}, GPU: mustGPU("H100-80GB"), GPUs: 8, GlobalBatch: 8, Torch: "2.11.0"}
	res, err := Search(s)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range res.Releases {
		got[m.Library] = m.Release
	}
	if got["torch"] != "2.9.0" || got["nccl"] != CurrentNCCL {
		t.Errorf("releases %+v: want torch 2.11.0 as the 2.9.0 row's rules and NCCL %s", res.Releases, CurrentNCCL)
	}
}
