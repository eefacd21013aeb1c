package vram

import (
	"math"
	"strings"
	"testing"
)

func near(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Abs(b) }

// TestTrainingFLOPsGPT2 checks the count against the closed form of
// Narayanan et al. 2021 (eq. 3) for a GPT (MHA, 4h MLP, tied output layer):
// a forward of 24·B·s·L·h² + 4·B·s²·L·h + 2·B·s·V·h FLOPs, the backward
// twice that, with the attention term over the keys a causal query sees
// ((s+1)/2 of s) and full checkpointing adding one forward of the blocks.
func TestTrainingFLOPsGPT2(t *testing.T) {
	m := MustPreset("gpt2-medium")
	L, h, V := float64(m.Layers), float64(m.Hidden), float64(m.Vocab)
	const B, s, ga = 2, 1024, 3
	attn := 4 * L * h * (s + 1) / 2 // per token, forward
	fwd := B * s * (24*L*h*h + attn + 2*V*h)
	blocks := B * s * (24*L*h*h + attn)
	for _, c := range []struct {
		ckpt Checkpointing
		want float64
	}{
		{"none", ga * 3 * fwd},
		{"full", ga * (3*fwd + blocks)},
		{"selective", ga * (3*fwd + B*s*attn)},
	} {
		tr := Training{Model: m, SeqLen: s, MicroBatch: B, GradAccum: ga, Precision: "amp_bf16", Checkpointing: c.ckpt}
		got, err := tr.ThroughputBound(mustGPU("H100-80GB"))
		if err != nil {
			t.Fatal(err)
		}
		if !near(got.StepFLOPs, c.want, 1e-9) {
			t.Errorf("%s: %.6g FLOPs a step, want %.6g", c.ckpt, got.StepFLOPs, c.want)
		}
		if got.Limit != "compute" {
			t.Errorf("%s: limit %q, want compute", c.ckpt, got.Limit)
		}
		if tok := float64(ga * B * s); !near(got.TokensPerSecond, tok/got.Seconds, 1e-12) {
			t.Errorf("%s: tokens/s %v with %v s for %v tokens", c.ckpt, got.TokensPerSecond, got.Seconds, tok)
		}
	}
}

// TestTrainingFLOPsRelations: what each plan choice does to the count.
func TestTrainingFLOPsRelations(t *testing.T) {
	h100 := mustGPU("H100-80GB")
	base := Training{Model: MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 1, Precision: "mixed_bf16"}
	bound := func(tr Training) Throughput {
		t.Helper()
		b, err := tr.ThroughputBound(h100)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	full := bound(base)
	n := float64(base.Model.ActiveParamCount())
	// 6N a token within the embedding table and attention (Kaplan et al. 2020).
	if per := full.StepFLOPs / 2048; per < 6*n*0.9 || per > 6*n*1.2 {
		t.Errorf("llama-3-8b: %.4g FLOPs a token, 6N = %.4g", per, 6*n)
	}
	lora := base
	lora.Trainable, lora.LoRA = "lora", &LoRA{Rank: 16, Targets: []string{"all_linear"}}
	if l := bound(lora).StepFLOPs; l >= full.StepFLOPs || l < full.StepFLOPs*2/3 {
		t.Errorf("LoRA %.4g FLOPs, full %.4g: want between 2/3 and 1 (no weight gradients for the base)", l, full.StepFLOPs)
	}
	tp := base
	tp.Parallel = Parallel{TP: 2}
	if got := bound(tp).StepFLOPs; !near(got, full.StepFLOPs/2, 1e-9) {
		t.Errorf("TP=2: %.6g FLOPs a GPU, want half of %.6g", got, full.StepFLOPs)
	}
	ga := base
	ga.GradAccum = 4
	if got := bound(ga); !near(got.StepFLOPs, 4*full.StepFLOPs, 1e-9) || !near(got.TokensPerSecond, full.TokensPerSecond, 0.01) {
		t.Errorf("grad_accum 4: %.6g FLOPs, %.4g tokens/s; want 4× %.6g and the same %.4g", got.StepFLOPs, got.TokensPerSecond, full.StepFLOPs, full.TokensPerSecond)
	}
	// A single short sequence cannot keep an H100 busy: the weights read
	// twice and the AdamW step's traffic take longer than its arithmetic.
	short := base
	short.SeqLen = 16
	if got := bound(short); got.Limit != "memory bandwidth" {
		t.Errorf("16 tokens a step: limit %q, want memory bandwidth", got.Limit)
	}
	// float32 matmuls run on the FP32 units (PyTorch's default), TF32 at
	// half the 16-bit tensor-core rate, float8 at twice it.
	for _, c := range []struct {
		precision string
		peak      float64
	}{{"fp32", h100.FP32TFLOPS}, {"tf32", h100.TFLOPS / 2}, {"fp8", 2 * h100.TFLOPS}} {
		p := base
		p.Precision, p.GradAccum = c.precision, 8 // enough work a step to be compute-bound
		got := bound(p)
		if got.Limit == "compute" && !near(got.Seconds, got.StepFLOPs/(c.peak*1e12), 1e-9) {
			t.Errorf("%s: %.4g s for %.4g FLOPs, want the %v TFLOPS peak", c.precision, got.Seconds, got.StepFLOPs, c.peak)
		}
		if got.Limit != "compute" {
			t.Errorf("%s: limit %q", c.precision, got.Limit)
		}
	}
	// Sliding-window layers see at most their window.
	mis := Training{Model: MustPreset("mistral-7b"), SeqLen: 16384, MicroBatch: 1, Precision: "mixed_bf16"}
	glob := mis
	glob.Model.SlidingWindow = 0
	if a, b := bound(mis).StepFLOPs, bound(glob).StepFLOPs; a >= b {
		t.Errorf("mistral-7b at 16k with its 4k window: %.4g FLOPs, without: %.4g", a, b)
	}
}

// TestTrainingFLOPsMoE: a token passes through top-k of the routed experts.
func TestTrainingFLOPsMoE(t *testing.T) {
	m := MustPreset("mixtral-8x7b")
	tr := Training{Model: m, SeqLen: 512, MicroBatch: 1, Precision: "mixed_bf16"}
	got, err := tr.ThroughputBound(mustGPU("H100-80GB"))
	if err != nil {
		t.Fatal(err)
	}
	active, all := float64(m.ActiveParamCount()), float64(m.ParamCount())
	per := got.StepFLOPs / 512 / 6
	if per < active*0.95 || per > active*1.05 {
		t.Errorf("mixtral: %.4g parameters a token by the count, %.4g active (of %.4g)", per, active, all)
	}
}

// TestTrainingFLOPsVisionAndEncDec: a frozen tower runs forward only; a
// trainable one adds its backward. An encoder-decoder's decoder tokens pass
// through the decoder blocks only.
func TestTrainingFLOPsVisionAndEncDec(t *testing.T) {
	h100 := mustGPU("H100-80GB")
	lv := Training{Model: MustPreset("llava-1.5-7b"), SeqLen: 1024, MicroBatch: 1, Precision: "mixed_bf16"}
	frozen, err := lv.ThroughputBound(h100)
	if err != nil {
		t.Fatal(err)
	}
	lv.VisionTower = "trainable"
	trained, err := lv.ThroughputBound(h100)
	if err != nil {
		t.Fatal(err)
	}
	if trained.StepFLOPs <= frozen.StepFLOPs {
		t.Errorf("trainable tower %.4g FLOPs, frozen %.4g", trained.StepFLOPs, frozen.StepFLOPs)
	}
	t5 := Training{Model: MustPreset("flan-t5-base"), SeqLen: 512, DecoderSeqLen: 128, MicroBatch: 4, Precision: "amp_bf16"}
	short, err := t5.ThroughputBound(h100)
	if err != nil {
		t.Fatal(err)
	}
	t5.DecoderSeqLen = 512
	long, err := t5.ThroughputBound(h100)
	if err != nil {
		t.Fatal(err)
	}
	if long.StepFLOPs <= short.StepFLOPs || long.StepFLOPs >= 4*short.StepFLOPs {
		t.Errorf("t5 decoder 512 tokens %.4g FLOPs, 128 tokens %.4g", long.StepFLOPs, short.StepFLOPs)
	}
}

// TestInferenceBound: one sequence decoding on a big GPU is bound by reading
// the weights (and the cache) each step; a large batch's prefill by compute.
func TestInferenceBound(t *testing.T) {
	h100 := mustGPU("H100-80GB")
	in := Inference{Model: MustPreset("llama-3-8b"), Weights: Quant{DType: BF16}, Batch: 1, PromptTokens: 128, NewTokens: 256}
	got, err := in.ThroughputBound(h100)
	if err != nil {
		t.Fatal(err)
	}
	if got.Limit != "memory bandwidth" {
		t.Errorf("batch 1 decode: limit %q", got.Limit)
	}
	rn, _, err := in.resolve()
	if err != nil {
		t.Fatal(err)
	}
	w := float64(rn.weightBytes(rn.Model.Normalize()))
	// Pope et al. 2022: a step reads every weight; tokens/s ≤ bandwidth / weights.
	if ceil := h100.Bandwidth / w; got.TokensPerSecond > ceil || got.TokensPerSecond < 0.9*ceil {
		t.Errorf("batch 1: %.1f tokens/s, bandwidth/weights = %.1f", got.TokensPerSecond, ceil)
	}
	big := in
	big.Batch = 256
	b, err := big.ThroughputBound(h100)
	if err != nil {
		t.Fatal(err)
	}
	if b.TokensPerSecond <= 50*got.TokensPerSecond {
		t.Errorf("batch 256: %.0f tokens/s, batch 1: %.0f; batching shares each weight read", b.TokensPerSecond, got.TokensPerSecond)
	}
	pre := in
	pre.Batch, pre.PromptTokens, pre.NewTokens = 8, 4096, 0
	p, err := pre.ThroughputBound(h100)
	if err != nil {
		t.Fatal(err)
	}
	if p.Limit != "compute" || p.TokensPerSecond <= 0 {
		t.Errorf("prefill of 8×4096: %+v", p)
	}
	// Long generations are grouped; the bound moves smoothly with length.
	long := in
	long.NewTokens = 100_000
	l, err := long.ThroughputBound(h100)
	if err != nil {
		t.Fatal(err)
	}
	if l.TokensPerSecond >= got.TokensPerSecond || l.TokensPerSecond <= 0 {
		t.Errorf("100k tokens: %.1f tokens/s, 256 tokens: %.1f (the cache read grows)", l.TokensPerSecond, got.TokensPerSecond)
	}
	t5 := Inference{Model: MustPreset("flan-t5-large"), Weights: Quant{DType: BF16}, Batch: 4, PromptTokens: 512, NewTokens: 64}
	if _, err := t5.ThroughputBound(h100); err != nil {
		t.Fatal(err)
	}
}

// TestThroughputUnknownPeak: a bare capacity has no peaks; the error says so.
func TestThroughputUnknownPeak(t *testing.T) {
	g, err := ParseCapacity("48GB")
	if err != nil {
		t.Fatal(err)
	}
	tr := Training{Model: MustPreset("gpt2"), SeqLen: 128, MicroBatch: 1}
	if _, err := tr.ThroughputBound(g); err == nil || !strings.Contains(err.Error(), "48GB") {
		t.Errorf("training: %v", err)
	}
	in := Inference{Model: MustPreset("gpt2"), Batch: 1, PromptTokens: 8, NewTokens: 8}
	if _, err := in.ThroughputBound(g); err == nil || !strings.Contains(err.Error(), "peak") {
		t.Errorf("inference: %v", err)
	}
	bad := tr
	bad.SeqLen = -1
	if _, err := bad.ThroughputBound(mustGPU("A100-80GB")); err == nil || !strings.Contains(err.Error(), "seq_len") {
		t.Errorf("invalid plan: %v", err)
	}
}

// TestCatalogPeaks: every catalog GPU has its datasheet peaks, or says
// that its vendor publishes no dense BF16 peak, or that no cited source
// gave its peaks (it then has none); throughput bounds refuse those
// without a peak rather than guess, and say why.
func TestCatalogPeaks(t *testing.T) {
	tr := Training{Model: MustPreset("gpt2"), SeqLen: 128, MicroBatch: 1}
	for _, g := range gpus {
		if strings.Contains(g.Source, peaksNotFound) {
			_, err := tr.ThroughputBound(g)
			if g.TFLOPS != 0 || g.Bandwidth != 0 || err == nil || !strings.Contains(err.Error(), "none found in a cited source") {
				t.Errorf("%s: TFLOPS %v, bandwidth %v, though its source found no peaks; bound: %v", g.Name, g.TFLOPS, g.Bandwidth, err)
			}
			continue
		}
		unpublished := strings.Contains(g.Source, "no published dense BF16 peak")
		if g.TFLOPS <= 0 && !unpublished || g.TFLOPS > 0 && unpublished || g.Bandwidth <= 0 {
			t.Errorf("%s: TFLOPS %v, bandwidth %v", g.Name, g.TFLOPS, g.Bandwidth)
		}
		if !strings.Contains(g.Source, "peaks") {
			t.Errorf("%s: the source does not cite its peaks", g.Name)
		}
	}
}

func mustGPU(name string) GPU {
	g, err := LookupGPU(name)
	if err != nil {
		panic(err)
	}
	return g
}

// TestMoEBoundReadsActiveExperts: a decoding step of one sequence reads the
// top-k routed experts of each layer, not all of them (Llama 4 Scout in
// int4: 1 of 16 per token), and the bound says so; a large batch touches
// nearly every expert, and a dense model reads all its weights.
func TestMoEBoundReadsActiveExperts(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	scout := Inference{Model: MustPreset("llama-4-scout"), Weights: Quant{DType: INT4}, Batch: 1, PromptTokens: 1024, NewTokens: 256}
	one, err := scout.ThroughputBound(g)
	if err != nil {
		t.Fatal(err)
	}
	r, m, _ := scout.resolve()
	weights := float64(r.weightBytes(m))
	share := routedShare(r, m)
	if share < 0.5 || share > 1 {
		t.Fatalf("routed share %.2f", share)
	}
	step := weights * (1 - share*(1-1.0/16))
	if !strings.Contains(one.Note, "1 of 16 per token") || !strings.Contains(one.Note, Bytes(step).String()) {
		t.Errorf("note %q, want the 1 of 16 experts and %v a step", one.Note, Bytes(step))
	}
	wide := scout
	wide.Batch = 256
	many, _ := wide.ThroughputBound(g)
	if touched := expertsTouched(m, 256); touched < 0.99 || !strings.Contains(many.Note, "100 %") {
		t.Errorf("256 sequences touch %.3f of the experts (%s)", touched, many.Note)
	}
	dense := Inference{Model: MustPreset("llama-3.1-8b"), Batch: 1, PromptTokens: 1024, NewTokens: 256}
	if th, _ := dense.ThroughputBound(g); th.Note != "" {
		t.Errorf("a dense model's bound notes %q", th.Note)
	}
	// One sequence's decode is bandwidth-bound: its bound is the weights a
	// step reads at the GPU's bandwidth, about 1/16 of the experts' bytes.
	if one.TokensPerSecond < 150 {
		t.Errorf("Scout int4 on an H100: ≤ %.0f tokens/s, as if every expert were read", one.TokensPerSecond)
	}
}
