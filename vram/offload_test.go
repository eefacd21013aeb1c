package vram

import (
	"strings"
	"testing"
)

// TestOffloadHostMemory: the host memory per rank and parameter each
// framework's offload takes, from the allocations its source makes
// (offload.go), against the sizes its own estimators print where they have
// one: DeepSpeed's estimate_zero2_model_states_mem_needs counts 16 bytes per
// parameter with the optimizer offloaded (stage_1_and_2.py), as the first
// row does; its ZeRO-3 estimator counts 18 with offload_param and 16
// without, leaving out the model-dtype gradient buffer the rows below add.
func TestOffloadHostMemory(t *testing.T) {
	for _, c := range []struct {
		name, train string
		perParam    float64 // host bytes per trainable parameter and rank (× dp)
	}{
		// fp32 master 4 + fp32 gradient partition 4 + Adam's m and v 8.
		{"zero2 offload", `"precision": "mixed_bf16", "framework": "deepspeed", "parallel": {"dp": 8, "zero_stage": 2, "cpu_offload": "optimizer"}`, 16},
		// … + the model-dtype gradients accumulated on the CPU (2).
		{"zero2 offload, accumulating", `"precision": "mixed_bf16", "framework": "deepspeed", "grad_accum": 4, "parallel": {"dp": 8, "zero_stage": 2, "cpu_offload": "optimizer"}`, 18},
		// ZeRO-3: … + grad_partitions_flat_buffer (2); + the bf16
		// partitions with offload_param (2).
		{"zero3 offload optimizer", `"precision": "mixed_bf16", "framework": "deepspeed", "parallel": {"dp": 8, "zero_stage": 3, "cpu_offload": "optimizer"}`, 18},
		{"zero3 offload params", `"precision": "mixed_bf16", "framework": "deepspeed", "parallel": {"dp": 8, "zero_stage": 3, "cpu_offload": "optimizer+params"}`, 20},
		// FSDP1 offload_params, fp32 parameters: the pinned shard 4, its
		// pinned _cpu_grad 4, Adam's states on the CPU parameters 8.
		{"fsdp1 offload", `"precision": "fp32", "framework": "hf_trainer", "parallel": {"dp": 8, "fsdp": "full_shard", "fsdp_version": 1, "cpu_offload": "optimizer+params"}`, 16},
		// FSDP2 CPUOffloadPolicy: the same three on the CPU.
		{"fsdp2 offload", `"precision": "fp32", "framework": "torchtune", "parallel": {"dp": 8, "fsdp": "full_shard", "cpu_offload": "optimizer+params"}`, 16},
	} {
		p, err := ParsePlan([]byte(`{"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 1, `+c.train+`}}`), t.TempDir())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		e := estimateOf(t, *p.Training)
		want := c.perParam * float64(e.Params) / 8
		if got := float64(e.Host.Total()); got < want*0.999 || got > want*1.001 {
			t.Errorf("%s: host %v per rank = %.2f B/param × params/8, want %.0f (%v)", c.name, e.Host.Total(), got*8/float64(e.Params), c.perParam, e.Host)
		}
	}
}

// TestZeRO2OffloadStepCopy: with the optimizer offloaded, ZeRO-2 keeps no
// gradient partition on the GPU (each gradient goes to the CPU fp32
// partition), and its step copies the fp32 partition back to the GPU whole
// before casting it into the bf16 weights: 4 bytes per parameter of the
// rank's partition, in the timeline and in the allocator replay alike.
func TestZeRO2OffloadStepCopy(t *testing.T) {
	p, err := ParsePlan([]byte(`{"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 1, "precision": "mixed_bf16", "framework": "deepspeed", "parallel": {"dp": 8, "zero_stage": 2, "cpu_offload": "optimizer"}}}`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tl, err := p.Training.Timeline()
	if err != nil {
		t.Fatal(err)
	}
	params := MustPreset("llama-3-8b").ParamCount()
	copyBytes := FP32.Size(params / 8)
	steps := 0
	for _, ev := range tl.Events {
		if ev.Phase == "optimizer" {
			steps++
			if ev.Live.Temporaries != copyBytes {
				t.Errorf("%s: temporaries %v, want the fp32 partition %v", ev.Where(), ev.Live.Temporaries, copyBytes)
			}
		}
		if ev.Phase != "backward" && ev.Live.Gradients != 0 {
			t.Errorf("%s: %v of gradients on the GPU, want none (offloaded)", ev.Where(), ev.Live.Gradients)
		}
	}
	if steps != 2 {
		t.Errorf("%d optimizer steps, want 2", steps)
	}
	rp, err := p.Training.Replay(ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	est := estimateOf(t, *p.Training)
	if rp.PeakAllocated < est.Peak.Total()*99/100 || rp.PeakAllocated > est.Peak.Total()*101/100 {
		t.Errorf("replay peak %v, timeline %v: want them within 1 %%", rp.PeakAllocated, est.Peak.Total())
	}
}

// TestFSDPOffloadRunsAsFSDP: offload_params keeps FSDP's own schedule.
// FSDP2's CPUOffloadPolicy still reduce-scatters group by group and each
// unshard first copies the fp32 shard to the GPU and casts it to bf16;
// FSDP1's offload_params keeps the reduced shards on the GPU until
// backward ends. The replay agrees with the timeline.
func TestFSDPOffloadRunsAsFSDP(t *testing.T) {
	plan := func(version int) Training {
		return Training{Model: MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 1, Precision: "fp32", ComputeDType: BF16,
			Checkpointing: "full", Framework: "torchtune", Parallel: Parallel{DP: 4, FSDP: "full_shard", FSDPVersion: version, CPUOffload: "optimizer+params"}}
	}
	f2 := plan(2)
	r, err := f2.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if !r.fsdp2() {
		t.Fatal("FSDP2 with CPUOffloadPolicy should run FSDP2's schedule")
	}
	blocks, _, _ := r.units()
	b := blocks[0]
	if want := b.host.Parameters + b.gathered/4; b.h2d != want || b.params != 0 {
		t.Errorf("block 0: device copy at unshard %v, want the fp32 shard %v and its bf16 cast %v; params on the GPU %v, want 0", b.h2d, b.host.Parameters, b.gathered/4, b.params)
	}
	tl, err := f2.Timeline()
	if err != nil {
		t.Fatal(err)
	}
	reduces := 0
	for _, ev := range tl.Events {
		if ev.Name == "reduce-scatter" {
			reduces++
		}
	}
	if reduces == 0 {
		t.Error("FSDP2 with offload: no reduce-scatter events")
	}
	f1 := plan(1)
	tl1, err := f1.Timeline()
	if err != nil {
		t.Fatal(err)
	}
	var inBackward Bytes
	for _, ev := range tl1.Events {
		if ev.Phase == "backward" && ev.Layer == 0 {
			inBackward = max(inBackward, ev.Live.Gradients)
		}
		if ev.Phase == "optimizer" && ev.Live.Gradients != 0 {
			t.Errorf("FSDP1 offload: %v of gradients on the GPU at the step, want none", ev.Live.Gradients)
		}
	}
	if inBackward == 0 {
		t.Error("FSDP1 offload: the reduced gradient shards should stay on the GPU until backward ends")
	}
	for _, tr := range []Training{f1, f2} {
		est := estimateOf(t, tr)
		rp, err := tr.Replay(ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ratio := float64(rp.PeakAllocated) / float64(est.Peak.Total()); ratio < 0.98 || ratio > 1.02 {
			t.Errorf("FSDP%d offload: replay peak %v, timeline %v (ratio %.3f)", tr.Parallel.FSDPVersion, rp.PeakAllocated, est.Peak.Total(), ratio)
		}
	}
}

// TestZeROInfinityHost: with the optimizer on NVMe the host keeps a pool
// of four fp32 buffers of the largest sub-group (master, gradient and
// Adam's two) beside the bf16 gradient buffer; with the parameters on
// NVMe, up to max_in_cpu elements of them, the swap pool (5 × 1e8), and
// a sub-group's write-back buffer when the partition is larger.
// Llama-3-8B over 8 ranks: 1.004e9 elements a rank, just over 1e9.
func TestZeROInfinityHost(t *testing.T) {
	for _, c := range []struct {
		name, ds, offload string
		want              func(n float64) float64
	}{
		{"optimizer on nvme", `"offload_optimizer_device": "nvme"`, "optimizer",
			func(n float64) float64 { return 16*1e9 + 2*n }},
		{"optimizer on nvme, sub_group_size 1e8", `"offload_optimizer_device": "nvme", "sub_group_size": 1e8`, "optimizer",
			func(n float64) float64 { return 16*1e8 + 2*n }},
		{"parameters on nvme", `"offload_param_device": "nvme"`, "optimizer+params",
			func(n float64) float64 { return 18*n + 2*1e9 + 2*1e9 + 2*5e8 }},
		{"parameters on nvme, max_in_cpu 2e9", `"offload_param_device": "nvme", "max_in_cpu": 2e9`, "optimizer+params",
			func(n float64) float64 { return 18*n + 2*n + 2*5e8 }},
	} {
		p, err := ParsePlan([]byte(`{"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 1, "precision": "mixed_bf16", "framework": "deepspeed",
			"parallel": {"dp": 8, "zero_stage": 3, "cpu_offload": "`+c.offload+`", "deepspeed": {`+c.ds+`}}}}`), t.TempDir())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		e := estimateOf(t, *p.Training)
		want := c.want(float64(e.Params) / 8)
		if got := float64(e.Host.Total()); got < want*0.999 || got > want*1.001 {
			t.Errorf("%s: host %v per rank, want %v (%v)", c.name, e.Host.Total(), Bytes(want), e.Host)
		}
	}
	for _, c := range []struct{ parallel, want string }{
		{`{"dp": 8, "zero_stage": 2, "cpu_offload": "optimizer", "deepspeed": {"offload_optimizer_device": "nvme"}}`, "runs at zero_stage 3"},
		{`{"dp": 8, "zero_stage": 3, "cpu_offload": "optimizer", "deepspeed": {"offload_param_device": "nvme"}}`, `needs parallel.cpu_offload "optimizer+params"`},
		{`{"dp": 8, "zero_stage": 3, "cpu_offload": "optimizer", "deepspeed": {"offload_optimizer_device": "disk"}}`, `unknown parallel.deepspeed.offload_optimizer_device "disk"`},
	} {
		_, err := ParsePlan([]byte(`{"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 1, "precision": "mixed_bf16", "framework": "deepspeed", "parallel": `+c.parallel+`}}`), t.TempDir())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.parallel, err, c.want)
		}
	}
}
