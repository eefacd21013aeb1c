package vram

import (
	"fmt"
	"math"
	"reflect"
	"sort"
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
	seen := map[[2]bool]bool{}
	for i, l := range res.Layouts {
		p := l.Training.Parallel
		if p.DP*p.TP*p.PP*p.CP != 16 || !l.Fits || l.DeviceUsed > res.Limit {
			t.Errorf("layout %d: %+v on %d GPUs, fits %v, %v", i, p, p.DP*p.TP*p.PP*p.CP, l.Fits, l.DeviceUsed)
		}
		if i > 0 && l.Step.TokensPerSecond > res.Layouts[i-1].Step.TokensPerSecond {
			t.Errorf("layout %d is faster than layout %d", i, i-1)
		}
		kind := [2]bool{l.Training.Float8 != "", l.Training.Parallel.CPUOffload != ""}
		if i%7 != 0 && seen[kind] {
			continue // a sample, and the first of each kind: float8 or not, offloaded or not
		}
		seen[kind] = true
		est, err := l.Training.Estimate()
		if err != nil || est.Peak.Total()+gemmWorkspace(&g, "") != l.Allocated || est.Host.Total() != l.Host {
			t.Errorf("layout %d: Estimate %v + workspace, host %v; searched %v, %v (%v)", i, est.Peak.Total(), est.Host.Total(), l.Allocated, l.Host, err)
		}
		if st, err := l.Training.StepTime(g, 50e9); err != nil || st != l.Step {
			t.Errorf("layout %d: StepTime %+v, searched %+v (%v)", i, st, l.Step, err)
		}
		rep, err := l.Training.Replay(ReplayOptions{GPU: &g})
		if err != nil || rep.DeviceUsed != l.DeviceUsed || rep.PeakReserved != l.Reserved {
			t.Errorf("layout %d: Replay %v / %v, searched %v / %v (%v)", i, rep.PeakReserved, rep.DeviceUsed, l.Reserved, l.DeviceUsed, err)
		}
	}
	// Llama-3-8B on 16 H100s under torchtitan: float8 and FSDP2's CPU
	// offload are searched, and float8 layouts lead the fastest 100 (the
	// bf16 ones come after: float8's matmuls run at twice the peak). An
	// offloaded layout is estimated only where the same layout without
	// offload does not fit: here many do, and those left out are counted.
	if !seen[[2]bool{true, false}] {
		t.Error("no float8 layout without offload among those that fit")
	}
	if res.Dominated == 0 {
		t.Error("no offloaded layout was left out for its twin without offload, which fits")
	}
	for i, l := range res.Layouts {
		if l.Training.Parallel.CPUOffload == "" {
			continue
		}
		twin := l.Training
		twin.Parallel.CPUOffload = ""
		est, err := twin.Estimate()
		if err == nil && est.Peak.Total()+gemmWorkspace(&g, "")+g.Context <= res.Limit {
			t.Errorf("layout %d offloads, but its twin without offload fits", i)
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

// TestSearchServing: every vLLM launch of Llama-3.1-70B on up to 8 H100s,
// tensor and pipeline parallel,
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
	pipelined := false
	for i, l := range res {
		if i > 0 && l.Concurrency > res[i-1].Concurrency {
			t.Errorf("launch %d holds more than launch %d", i, i-1)
		}
		c, err := l.VLLM.Carve(Inference{Model: in.Model, Weights: weightsOf(l)}, g)
		if err != nil || c.KVCache.Blocks != l.Carve.KVCache.Blocks || l.Concurrency != float64(l.Replicas)*c.KVCache.MaxConcurrencyFor(32768) || l.Replicas*l.VLLM.TP*max(1, l.VLLM.PP) > 8 {
			t.Errorf("launch %d: %+v, carve again %v blocks (%v)", i, l.VLLM, c.KVCache.Blocks, err)
		}
		if !strings.Contains(l.Command, fmt.Sprintf("--tensor-parallel-size %d", l.VLLM.TP)) || !strings.Contains(l.Command, "--max-model-len 32768") ||
			(l.VLLM.PP > 1) != strings.Contains(l.Command, fmt.Sprintf("--pipeline-parallel-size %d", l.VLLM.PP)) {
			t.Errorf("launch %d command %q", i, l.Command)
		}
		pipelined = pipelined || l.VLLM.PP > 1
	}
	if !pipelined {
		t.Error("no pipeline-parallel launch among those that start")
	}
	fixed, err := SearchServing(ServingSpace{Inference: in, Launch: VLLM{TP: 4, KVCacheDType: BF16}, GPU: g, GPUs: 8, Context: 32768})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range fixed {
		if l.VLLM.TP != 4 || l.VLLM.KVCacheDType != BF16 || l.Replicas != 8/(4*l.VLLM.PP) {
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
		if l.Training.Parallel.CPUOffload == "optimizer" {
			want = fmt.Sprintf(`"zero_optimization": {"stage": %d, "offload_optimizer": {"device": "cpu"}}`, z)
		}
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

// TestSearchFloat8AndOffloadChoices: the candidates try float8 only under
// torchtitan on a GPU with float8 tensor cores for a bf16 plan, and CPU
// offload only as DeepSpeed's offload_optimizer (any ZeRO stage) or
// torchtitan's enable_cpu_offload (FSDP2 layouts, dp > 1), for a full
// fine-tune with an optimizer; what the plan sets stays.
func TestSearchFloat8AndOffloadChoices(t *testing.T) {
	titan, ds := searchPlan(), searchPlan()
	ds.Framework = FrameworkDeepSpeed
	with := func(p Training, f func(*Training)) Training { f(&p); return p }
	for _, c := range []struct {
		name        string
		plan        Training
		gpu         string
		f8, offload []string
	}{
		{"torchtitan H100", titan, "H100-80GB", []string{"", "rowwise"}, []string{"", "optimizer+params"}},
		{"torchtitan B200", titan, "B200", []string{"", "rowwise"}, []string{"", "optimizer+params"}},
		{"torchtitan MI300X", titan, "MI300X", []string{"", "rowwise"}, []string{"", "optimizer+params"}},
		{"torchtitan A100: no float8 tensor cores", titan, "A100-80GB", []string{""}, []string{"", "optimizer+params"}},
		{"a bare capacity", titan, "80 GiB", []string{""}, []string{"", "optimizer+params"}},
		{"fp32 compute", with(titan, func(p *Training) { p.Precision = "fp32" }), "H100-80GB", []string{""}, []string{"", "optimizer+params"}},
		{"float8 and offload fixed off", with(titan, func(p *Training) { p.Float8, p.Parallel.CPUOffload = "none", "none" }), "H100-80GB", []string{"none"}, []string{"none"}},
		{"float8 fixed tensorwise", with(titan, func(p *Training) { p.Float8 = "tensorwise" }), "H100-80GB", []string{"tensorwise"}, []string{"", "optimizer+params"}},
		{"no optimizer", with(titan, func(p *Training) { p.Optimizer = "none" }), "H100-80GB", []string{"", "rowwise"}, []string{""}},
		{"Megatron-LM", with(titan, func(p *Training) { p.Framework = FrameworkMegatron }), "H100-80GB", []string{""}, []string{""}},
		{"DeepSpeed", ds, "H100-80GB", []string{""}, []string{"", "optimizer"}},
		{"DeepSpeed LoRA", with(ds, func(p *Training) { p.Trainable, p.LoRA = "lora", &LoRA{Rank: 16} }), "H100-80GB", []string{""}, []string{""}},
	} {
		g, err := ParseCapacity(c.gpu)
		if err != nil {
			t.Fatal(err)
		}
		s, err := SearchSpace{Plan: c.plan, GPU: g, GPUs: 16, GlobalBatch: 32}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		cands, err := s.candidates()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		f8s, offs := map[string]bool{}, map[string]bool{}
		for _, l := range cands {
			f8s[l.Float8], offs[l.Parallel.CPUOffload] = true, true
			if o := l.Parallel.CPUOffload; o == "optimizer+params" && l.Parallel.DP < 2 {
				t.Errorf("%s: FSDP2 offload on %+v, no data parallelism to shard", c.name, l.Parallel)
			}
		}
		if got, want := keys(f8s), c.f8; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: float8 %q, want %q", c.name, got, want)
		}
		if got, want := keys(offs), c.offload; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: offload %q, want %q", c.name, got, want)
		}
	}
}

// keys is a set's members in order.
func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestSearchOffloadFits: Llama-3.1-70B under DeepSpeed on 8 H100s fits
// only as ZeRO-3 with the optimizer offloaded (16 bytes a parameter over
// 8 ranks is 140 GB a GPU otherwise), which the search finds, prints as
// DeepSpeed's offload_optimizer and prices with its copies over PCIe; its
// ranks' host memory (8 × Host) must fit the node's: not 1 TiB, 2 TiB.
func TestSearchOffloadFits(t *testing.T) {
	p := Training{Model: MustPreset("llama-3.1-70b"), SeqLen: 4096, Precision: "mixed_bf16", Framework: FrameworkDeepSpeed, Checkpointing: CheckpointFull}
	s := SearchSpace{Plan: p, GPU: mustGPU("H100-80GB"), GPUs: 8, GlobalBatch: 8}
	off := s
	off.Plan.Parallel.CPUOffload = "none"
	if res, err := Search(off); err != nil || res.Feasible != 0 || res.Candidates != 3 {
		t.Fatalf("without offload: %d of %d fit (%v), want none of ZeRO 1–3", res.Feasible, res.Candidates, err)
	}
	for _, c := range []struct {
		host                Bytes
		feasible, hostShort int
	}{{0, 1, 0}, {1 * TiB, 0, 1}, {2 * TiB, 1, 0}} {
		s.HostMemory = c.host
		res, err := Search(s)
		if err != nil {
			t.Fatal(err)
		}
		if res.Candidates != 6 || res.Feasible != c.feasible || res.HostShort != c.hostShort || len(res.Layouts) != c.feasible {
			t.Errorf("host %v: %d candidates, %d feasible, %d short of host memory, %d layouts", c.host, res.Candidates, res.Feasible, res.HostShort, len(res.Layouts))
		}
		if unchecked := len(res.Notes) > 0 && strings.Contains(res.Notes[0], "not checked"); unchecked != (c.host == 0) {
			t.Errorf("host %v: notes %q", c.host, res.Notes)
		}
		if len(res.Layouts) == 0 {
			continue
		}
		l := res.Layouts[0]
		if q := l.Training.Parallel; q.ZeRO != 3 || q.CPUOffload != "optimizer" || l.Host <= 0 || 8*l.Host > 2*TiB || 8*l.Host <= TiB || l.Step.HostComm <= 0 {
			t.Errorf("host %v: %+v, host %v, host copies %g s", c.host, q, l.Host, l.Step.HostComm)
		}
		if !strings.Contains(l.Launch, `"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}`) {
			t.Errorf("launch: %s", l.Launch)
		}
	}
}

// TestStepTimeFloat8AndOffload: float8's converted linears run at twice
// the 16-bit peak, the rest at it (a compute-bound step's seconds are the
// two shares'); DeepSpeed's optimizer offload copies each rank's
// partition's gradients (fp32 under mixed_bf16) to the host and its bf16
// parameters back, 64 GB/s each way (PCIe Gen5 x16), the return after
// the step; FSDP2's offload copies the parameters in at each unshard,
// forward and backward (as the engine stores them: bf16 beside an fp32
// master under mixed_bf16), and the gradients out; the CPU's optimizer
// step is timed at the host memory's bandwidth.
func TestStepTimeFloat8AndOffload(t *testing.T) {
	g := mustGPU("H100-80GB")
	p := searchPlan()
	p.MicroBatch, p.Parallel = 1, Parallel{DP: 8, FSDP: "full_shard"}
	bf, err := p.ThroughputBound(g)
	if err != nil {
		t.Fatal(err)
	}
	p.Float8 = "rowwise"
	f8, err := p.ThroughputBound(g)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := p.resolve()
	share := r.float8FLOPs()
	if want := (f8.StepFLOPs-share)/989e12 + share/1978e12; f8.Limit != "compute" || math.Abs(f8.Seconds-want) > 1e-9*want || f8.StepFLOPs != bf.StepFLOPs || share <= 0.5*f8.StepFLOPs {
		t.Errorf("float8: %g s of %g FLOPs (%g in float8), want %g s; bf16 %g FLOPs", f8.Seconds, f8.StepFLOPs, share, want, bf.StepFLOPs)
	}
	part := 8030261248.0 / 8
	for _, c := range []struct {
		framework  Framework
		parallel   Parallel
		want, step float64
	}{
		{FrameworkDeepSpeed, Parallel{DP: 8, ZeRO: 3, CPUOffload: "optimizer"}, part * (4 + 2) / 64e9, part * 28 / 76.8e9},
		{FrameworkTorchtitan, Parallel{DP: 8, FSDP: "full_shard", CPUOffload: "optimizer+params"}, part * (4 + 2*2) / 64e9, part * 28 / 76.8e9},
		{FrameworkTorchtitan, Parallel{DP: 8, FSDP: "full_shard"}, 0, 0},
	} {
		q := searchPlan()
		q.MicroBatch, q.Framework, q.Parallel = 1, c.framework, c.parallel
		st, err := q.StepTime(g, 50e9)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(st.HostComm-c.want) > 1e-9*c.want {
			t.Errorf("%s %+v: host copies %g s, want %g", c.framework, c.parallel, st.HostComm, c.want)
		}
		// The CPU's AdamW step streams the fp32 master and both fp32
		// moments in and out and the fp32 gradients in, 28 bytes an
		// element, at an eighth of a DGX H100 node's 614.4 GB/s.
		if math.Abs(st.HostStep-c.step) > 1e-9*c.step {
			t.Errorf("%s %+v: CPU optimizer step %g s, want %g", c.framework, c.parallel, st.HostStep, c.step)
		}
	}
}

// TestLaunchFlagsFloat8AndOffload: float8 and FSDP2's CPU offload as
// torchtitan 0.3.0 takes them.
func TestLaunchFlagsFloat8AndOffload(t *testing.T) {
	p := searchPlan()
	p.MicroBatch, p.Float8, p.Parallel = 2, "rowwise", Parallel{DP: 8, FSDP: "full_shard", CPUOffload: "optimizer+params"}
	got := p.LaunchFlags()
	for _, want := range []string{"--training.enable_cpu_offload", `converters=[Float8LinearConverter.Config(recipe_name="rowwise", filter_fqns=["lm_head"])]`} {
		if !strings.Contains(got, want) {
			t.Errorf("torchtitan: %q lacks %q", got, want)
		}
	}
	p.Float8, p.Parallel.CPUOffload = "", ""
	if got := p.LaunchFlags(); strings.Contains(got, "cpu_offload") || strings.Contains(got, "float8") {
		t.Errorf("torchtitan without float8 or offload: %s", got)
	}
}

// TestOffloadTwins: each offloaded candidate's twin is the same layout
// without offload, and only offloads the search added have one.
func TestOffloadTwins(t *testing.T) {
	s, err := SearchSpace{Plan: searchPlan(), GPU: mustGPU("H100-80GB"), GPUs: 16, GlobalBatch: 32}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cands, err := s.candidates()
	if err != nil {
		t.Fatal(err)
	}
	twins := 0
	for i, c := range cands {
		j := s.offloadTwin(cands, i)
		if (j >= 0) != (c.Parallel.CPUOffload != "") {
			t.Fatalf("candidate %d (offload %q): twin %d", i, c.Parallel.CPUOffload, j)
		}
		if j < 0 {
			continue
		}
		twins++
		want := c
		want.Parallel.CPUOffload = ""
		if !reflect.DeepEqual(cands[j], want) {
			t.Errorf("candidate %d's twin %d is %+v, want %+v", i, j, cands[j], want)
		}
	}
	if twins == 0 {
		t.Error("no offloaded candidate")
	}
	s.Plan.Parallel.CPUOffload = "optimizer+params"
	if cands, _ := s.candidates(); s.offloadTwin(cands, 1) >= 0 {
		t.Error("an offload the plan fixes has a twin")
	}
}
