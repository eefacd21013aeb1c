package vram

import (
	"fmt"
	"strings"
	"testing"
)

// TestBudgetMeasures: the same plan judged on each measure. On a card
// sized between its allocated peak (plus the context) and what nvidia-smi
// would show, it fits on allocated and not on device-used — the default —
// and the reason says the cache and the context make the difference.
func TestBudgetMeasures(t *testing.T) {
	tr := Training{Model: MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 2, Precision: "bf16",
		Trainable: "lora", LoRA: &LoRA{Rank: 16, Targets: []string{"all_linear"}}}
	g, _ := LookupGPU("A100-80GB")
	big, err := Budget{GPU: g}.Judge(tr)
	if err != nil {
		t.Fatal(err)
	}
	if !big.Fits || big.Measure != MeasureDeviceUsed || big.Reserved <= big.Allocated || big.DeviceUsed != big.Reserved+big.Context+big.NCCL || big.Need != big.DeviceUsed {
		t.Fatalf("on an A100 80GB: %+v", big)
	}
	if !strings.HasPrefix(big.Why, "fits: needs") || !strings.Contains(big.Why, "CUDA context") {
		t.Errorf("why %q", big.Why)
	}
	tight := g
	tight.Memory = big.Allocated + g.Context + (big.Reserved-big.Allocated)/2
	for _, c := range []struct {
		measure string
		fits    bool
		need    Bytes
	}{
		{"", false, big.DeviceUsed},
		{MeasureDeviceUsed, false, big.DeviceUsed},
		{MeasureReserved, false, big.Reserved},
		{MeasureAllocated, true, big.Allocated},
	} {
		v, err := Budget{GPU: tight, Measure: c.measure}.Judge(tr)
		if err != nil {
			t.Fatal(err)
		}
		// The allocated measure skips the replay: the estimate plus
		// cuBLAS's workspace, without the allocator's 512-byte rounding.
		off := float64(v.Need-c.need) / float64(c.need)
		if v.Fits != c.fits || off < -0.005 || off > 0.005 || (c.measure != MeasureAllocated && v.Need != c.need) {
			t.Errorf("measure %q: fits %v need %v, want %v %v (%s)", c.measure, v.Fits, v.Need, c.fits, c.need, v.Why)
		}
		if !c.fits && !strings.Contains(v.Why, "the allocated peak alone") {
			t.Errorf("measure %q: the reason does not say allocated alone would fit: %s", c.measure, v.Why)
		}
	}
	// Over the limit on allocated: the solvers' quick answer needs no
	// replay to say no.
	small := g
	small.Memory = big.Allocated / 2
	v, err := Budget{GPU: small}.judgeTraining(tr, true)
	if err != nil {
		t.Fatal(err)
	}
	if v.Fits || v.Reserved != 0 || !strings.Contains(v.Why, "at least") {
		t.Errorf("half the allocated peak: %+v", v)
	}
	// The solvers answer on the budget's measure.
	nDev, err := MaxMicroBatch(tr, Budget{GPU: g})
	if err != nil {
		t.Fatal(err)
	}
	nAlloc, err := MaxMicroBatch(tr, Budget{GPU: g, Measure: MeasureAllocated})
	if err != nil {
		t.Fatal(err)
	}
	if nDev < 1 || nDev > nAlloc {
		t.Errorf("max micro-batch on device-used %d, on allocated %d", nDev, nAlloc)
	}
	if _, err := (Budget{GPU: g, Measure: "vram"}).Judge(tr); err == nil || !strings.Contains(err.Error(), "measure") {
		t.Errorf("unknown measure: %v", err)
	}
	if l := (Budget{GPU: g, Headroom: 0.1}).Limit(); l != Bytes(float64(g.Total())*0.9) {
		t.Errorf("device-used limit %v", l)
	}
	if l := (Budget{GPU: g, Measure: MeasureAllocated}).Limit(); l != g.Usable() {
		t.Errorf("allocated limit %v, want usable %v", l, g.Usable())
	}
}

// TestSearchBudget: the galloping search finds the same answer as a plain
// search on the budget's measure, for limits where the answer sits at
// every distance below the allocated bound.
func TestSearchBudget(t *testing.T) {
	tr := Training{Model: MustPreset("gpt2"), SeqLen: 1024, MicroBatch: 1, Precision: "fp32"}
	g, _ := LookupGPU("T4")
	for _, mem := range []Bytes{2 * GiB, 3 * GiB, 5 * GiB, 9 * GiB, 15 * GiB} {
		gg := g
		gg.Memory = mem
		b := Budget{GPU: gg}
		got, err := MaxMicroBatch(tr, b)
		if err != nil {
			t.Fatal(err)
		}
		want, err := SearchLargest(1<<16, func(n int) (bool, error) {
			x := tr
			x.MicroBatch = n
			ok, _, err := fits(x, b)
			return ok, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%v card: galloping search %d, plain search %d", mem, got, want)
		}
	}
}

// TestUnifiedMemoryVerdict: on a unified-memory machine (DGX Spark) the
// verdict says that the host's share comes off the same pool; on a
// discrete card it does not.
func TestUnifiedMemoryVerdict(t *testing.T) {
	tr := Training{Model: MustPreset("llama-3-8b"), SeqLen: 1024, MicroBatch: 1, Precision: "bf16", Trainable: "lora", LoRA: &LoRA{Rank: 16, Targets: []string{"all_linear"}}}
	for _, c := range []struct {
		gpu    string
		shared bool
	}{{"DGX-Spark", true}, {"GB10", true}, {"H100-80GB", false}} {
		v, err := Budget{GPU: mustGPU(c.gpu), Headroom: DefaultHeadroom}.Judge(tr)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(v.Why, "unified, shared with the CPU"); got != c.shared || !v.Fits {
			t.Errorf("%s: fits %v, %s", c.gpu, v.Fits, v.Why)
		}
	}
}

// TestUnifiedBudget: on a unified part (DGX Spark) the limit leaves out
// what the operating system and other processes were measured to keep,
// and the need counts the plan's host memory (here its offloaded
// optimizer states), which comes off the same pool; a discrete GPU's
// verdict counts neither.
func TestUnifiedBudget(t *testing.T) {
	p := Training{Model: MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 1, Precision: "mixed_bf16", Checkpointing: CheckpointFull,
		Parallel: Parallel{ZeRO: 2, CPUOffload: "optimizer"}}
	est, err := p.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	if est.Host.Total() == 0 {
		t.Fatal("the offloaded plan keeps nothing on the host")
	}
	spark := mustGPU("DGX-Spark")
	b := Budget{GPU: spark, Headroom: 0.05}
	if want := Bytes(float64(spark.Total()-spark.UnifiedReserve) * 0.95); b.Limit() != want || spark.UnifiedReserve == 0 {
		t.Errorf("limit %v, want %v (the reserve %v left out)", b.Limit(), want, spark.UnifiedReserve)
	}
	v, err := b.Judge(p)
	if err != nil {
		t.Fatal(err)
	}
	if v.Host != est.Host.Total()+est.PagedStates || v.Need != v.DeviceUsed+v.Host || !strings.Contains(v.Why, "host memory") || !strings.Contains(v.Why, "operating system") {
		t.Errorf("unified verdict: host %v, need %v, device used %v: %s", v.Host, v.Need, v.DeviceUsed, v.Why)
	}
	h := Budget{GPU: mustGPU("H100-80GB"), Headroom: 0.05}
	if v, err := h.Judge(p); err != nil || v.Host != 0 || v.Need != v.DeviceUsed {
		t.Errorf("discrete verdict counts host memory: %+v, %v", v, err)
	}
}

// TestVLLMVerdictOutsidePyTorch: the vLLM verdict names the memory outside
// PyTorch for what it holds, the CUDA context and, with TP, NCCL, each
// figure the carve's.
func TestVLLMVerdictOutsidePyTorch(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	in := Inference{Model: MustPreset("qwen3-8b")}
	for _, tp := range []int{1, 4} {
		v := VLLM{Version: "0.11.0", TP: tp}
		c, err := v.Carve(in, g)
		if err != nil {
			t.Fatal(err)
		}
		verdict, err := Budget{GPU: g}.JudgePlan(Plan{Inference: &in, VLLM: &v})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("memory outside PyTorch %v: the CUDA context", c.NonTorch)
		if c.NCCL > 0 {
			want += fmt.Sprintf(" and NCCL %v", c.NCCL)
		}
		if !strings.Contains(verdict.Why, want+")") {
			t.Errorf("tp %d: why %q, want %q", tp, verdict.Why, want)
		}
		if (tp > 1) != (c.NCCL > 0) {
			t.Errorf("tp %d: NCCL %v", tp, c.NCCL)
		}
	}
}
