package vram

import (
	"math"
	"strings"
	"testing"
)

func grpoUnsloth() PostTraining {
	return PostTraining{Algorithm: "grpo", Framework: "unsloth", PromptLen: 256, CompletionLen: 1024, Generations: 4,
		Policy:  Training{Model: MustPreset("qwen2.5-7b"), MicroBatch: 4, GradAccum: 1, LoRA: &LoRA{Rank: 32, Targets: []string{"all_linear"}}},
		Rollout: &Rollout{Engine: "vllm", GPUMemoryUtilization: 0.6}}
}

func partBytes(p Phase, name string) Bytes {
	for _, q := range p.Live {
		if q.What == name {
			return q.Bytes
		}
	}
	return 0
}

// TestUnslothPhases: the base weights are vLLM's tensors, held once (the
// engine's), never synced; without standby the KV cache stays through
// the training step, with it only the weights do and PyTorch's cache is
// emptied around generation.
func TestUnslothPhases(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	for _, standby := range []bool{false, true} {
		p := grpoUnsloth()
		if standby {
			p.Rollout.Sleep = SleepLevel1
		}
		e, err := p.Estimate(g)
		if err != nil || !e.Starts {
			t.Fatalf("standby %v: %v %s", standby, err, e.Err)
		}
		var names []string
		for _, ph := range e.Phases {
			names = append(names, ph.Name)
		}
		if got := strings.Join(names, " | "); got != "generation | old log-probs | reference log-probs (adapter off) | training step" {
			t.Fatalf("standby %v: phases %s", standby, got)
		}
		gen, train := phaseNamed(t, e, "generation"), phaseNamed(t, e, "training step")
		weights := partBytes(train, "vLLM weights")
		if weights == 0 || partBytes(train, "policy parameters") != 0 {
			t.Errorf("standby %v: the training step holds vLLM's weights %v and no second copy %v", standby, weights, partBytes(train, "policy parameters"))
		}
		if lora := partBytes(gen, "LoRA adapters"); lora == 0 || lora > weights/10 {
			t.Errorf("standby %v: the trainer's own parameters in generation are the adapters (%v), not the base (%v)", standby, lora, weights)
		}
		// The no-grad passes hold one chunk of one row's logits, never the
		// micro-batch's fp32 logits.
		whole := FP32.Size(int64(p.Policy.MicroBatch) * int64(p.CompletionLen) * int64(p.Policy.Model.Vocab))
		if pass := partBytes(phaseNamed(t, e, "old log-probs"), "no-grad pass: activations and logits"); pass == 0 || pass >= whole {
			t.Errorf("standby %v: the old log-probs' pass %v, the whole fp32 logits %v", standby, pass, whole)
		}
		kv := partBytes(train, "vLLM KV cache")
		if standby == (kv != 0) {
			t.Errorf("standby %v: KV cache in the training step %v", standby, kv)
		}
		if cache := partBytes(gen, "PyTorch's cache (reserved, not allocated)"); standby && cache != 0 {
			t.Errorf("standby: wake_up empties PyTorch's cache, generation keeps %v", cache)
		}
		if want := 0.925 * 0.95 * float64(g.Total()-g.Context); standby && math.Abs(float64(e.VLLM.Requested)-want) > float64(MiB) {
			t.Errorf("standby on an H100: vLLM asks %v, want 0.87875 of the memory free at load (%v)", e.VLLM.Requested, Bytes(want))
		}
	}
}

// TestUnslothEngine: the utilization vLLM gets and the scheduler limits,
// as unsloth-zoo computes them.
func TestUnslothEngine(t *testing.T) {
	for _, c := range []struct {
		gib  float64
		want float64
	}{{79.19, 0.925 * 0.95}, {23.6, 0.825 * 0.95}, {14.6, 0.8 * 0.95}, {7.9, 0.75 * 0.95}, {30, 0.9 * 0.95}} {
		if got := unslothStandbyTarget(c.gib * float64(GiB)); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("standby target on %v GiB: %v, want %v", c.gib, got, c.want)
		}
	}
	for _, c := range []struct {
		kv            float64
		batched, seqs int
	}{{1, 2048, 8}, {10, 4096, 48}, {60, 8192, 128}, {100, 8192, 256}} {
		if b, s := unslothScheduler(c.kv); b != c.batched || s != c.seqs {
			t.Errorf("KV %v GiB: %d tokens, %d sequences; want %d, %d", c.kv, b, s, c.batched, c.seqs)
		}
	}
	if unslothLoRARank(33) != 64 || unslothLoRARank(8) != 8 || unslothLoRARank(600) != 512 {
		t.Error("LoRA ranks round up to vLLM's")
	}
	// A 32B model at 0.5 of an H100: its 16-bit weights leave no KV cache.
	p := grpoUnsloth()
	p.Policy.Model = MustPreset("qwen3-32b")
	p.Rollout.GPUMemoryUtilization = 0.5
	g, _ := LookupGPU("H100-80GB")
	e, err := p.Estimate(g)
	if err != nil || e.Starts || !strings.Contains(e.Err, "Unsloth: Your GPU cannot handle sequence lengths of 1280") {
		t.Errorf("qwen3-32b at 0.5: %v %v %q", err, e.Starts, e.Err)
	}
}

// TestUnslothFourBit: with load_in_4bit vLLM loads the base in
// bitsandbytes 4-bit, and that is the copy both sides share.
func TestUnslothFourBit(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	weights := func(four bool) Bytes {
		p := grpoUnsloth()
		if four {
			p.Policy.QuantizedBase = Quant{DType: NF4}
		}
		e, err := p.Estimate(g)
		if err != nil || !e.Starts {
			t.Fatal(err, e.Err)
		}
		return partBytes(phaseNamed(t, e, "training step"), "vLLM weights")
	}
	if w16, w4 := weights(false), weights(true); w4 >= w16/2 {
		t.Errorf("4-bit weights %v, 16-bit %v", w4, w16)
	}
}

func TestUnslothRefusals(t *testing.T) {
	for _, c := range []struct {
		edit func(*PostTraining)
		want string
	}{
		{func(p *PostTraining) { p.Algorithm, p.Rollout = "dpo", nil }, "plan dpo with framework trl"},
		{func(p *PostTraining) { p.Policy.LoRA = nil }, "trains LoRA adapters"},
		{func(p *PostTraining) { p.Policy.Parallel.DP = 2 }, "runs on one GPU"},
		{func(p *PostTraining) { p.Rollout.Engine = "sglang" }, "fast_inference"},
		{func(p *PostTraining) { p.Rollout.Placement = "separate" }, "in the trainer's process"},
		{func(p *PostTraining) { p.Rollout.TP = 2 }, "one vLLM on the trainer's GPU"},
		{func(p *PostTraining) { p.Rollout.MaxNumSeqs = 64 }, "from its own estimate"},
		{func(p *PostTraining) { p.Reference = "model" }, "adapter disabled"},
		{func(p *PostTraining) { p.OptimizerOffload = true }, "verl's settings"},
	} {
		p := grpoUnsloth()
		c.edit(&p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
}

// TestHiddenChunksLoss: computed from the hidden states chunk by chunk,
// the training pass keeps every chunk's fp32 logits, as the whole pass
// does, but holds one chunk of the projection's bf16 output, not all.
func TestHiddenChunksLoss(t *testing.T) {
	head := func(chunks int) BlockActivations {
		tr := Training{Model: MustPreset("qwen2.5-0.5b"), SeqLen: 1024, MicroBatch: 2, Precision: "bf16", Optimizer: "adamw",
			LogProbs: &LogProbLoss{Tokens: 511, LogitsFP32: true, HiddenChunks: chunks}}
		r, err := tr.resolve()
		if err != nil {
			t.Fatal(err)
		}
		return buildEdges(&r).Head
	}
	whole, chunked := head(0), head(4)
	v := int64(MustPreset("qwen2.5-0.5b").Vocab)
	if whole.Saved != chunked.Saved {
		t.Errorf("saved %v whole, %v chunked: the fp32 logits stay either way", whole.Saved, chunked.Saved)
	}
	if d, want := whole.ForwardPeak-chunked.ForwardPeak, BF16.Size(2*(512-128)*v); d != want {
		t.Errorf("forward peak whole − chunked = %v, want the bf16 output of 3 chunks of 4 (%v)", d, want)
	}
}
