package vram

import (
	"fmt"
	"math"
	"strings"
)

// Throughput bounds: the fastest a plan can run on a GPU, from the
// arithmetic it must do and the bytes it must move, against the GPU's
// datasheet peaks (a roofline, Williams et al. 2009). Real runs reach a
// fraction of it (model FLOPs utilisation, MFU: PaLM §4.1 reports 46 %,
// Megatron-LM 2021 reports up to 52 %); the bound says which plan can go
// faster, and whether a GPU's compute or its memory bandwidth is the limit.
//
// FLOPs are counted the way MFU is (Kaplan et al. 2020 §2.1, PaLM appendix
// B, Narayanan et al. 2021 §5.1): 2 FLOPs per multiply-add of every
// parameter a token passes through (linear layers, routed experts' top-k
// share, the output layer; embedding lookups are free), attention's two
// score matmuls over the keys each query sees (causal attention sees half
// the sequence on average, a sliding window at most its window), the
// backward twice the forward for what needs input and weight gradients, and
// recomputation once more the forward of each checkpointed block. Norms,
// activations and the loss are not counted, so the bound is an upper bound.

// Throughput is the bound for one plan on one GPU.
type Throughput struct {
	// StepFLOPs is the arithmetic of one optimizer step (training; all its
	// micro-batches) or of one whole generation (inference) on one GPU.
	StepFLOPs float64 `json:"step_flops"`
	// StepBytes is the least memory traffic of the same work on one GPU:
	// every weight read by each forward and backward, each gradient written,
	// the optimizer reading and writing its states; for inference, the
	// weights and the KV cache read at every decoding step.
	StepBytes float64 `json:"step_bytes"`
	// Seconds is the least time of that work on the GPU: the larger of
	// StepFLOPs at the GPU's peak and StepBytes at its bandwidth (summed
	// over an inference's prefill and decoding steps).
	Seconds float64 `json:"seconds"`
	// TokensPerSecond is the most tokens a second: those of a step of one
	// data-parallel replica (training: micro_batch × seq_len × grad_accum;
	// a run of DP replicas does DP times as many), or the generated tokens of
	// all sequences (inference; the prompt tokens when nothing is generated).
	TokensPerSecond float64 `json:"tokens_per_second"`
	// Limit is what bounds it: "compute" or "memory bandwidth" (for
	// inference, what bounds the decoding steps).
	Limit string `json:"limit"`
	// Note says how a mixture of experts was counted: the routed experts
	// a decoding step reads, of those the weights hold.
	Note string `json:"note,omitempty"`
}

// noPeaks says why g has no throughput bound: a capacity has no peaks,
// some catalog parts' vendors publish no dense BF16 peak, and for some
// parts no cited source gave them (their Source says "peaks: not found").
func (g GPU) noPeaks() error {
	if strings.Contains(g.Source, peaksNotFound) {
		return fmt.Errorf("throughput: the catalog has no peaks for GPU %q (none found in a cited source), so no bound is given (%s)", g.Name, g.Source)
	}
	if g.Source != "" {
		return fmt.Errorf("throughput: no dense BF16 peak is published for GPU %q, so no bound is given (%s)", g.Name, g.Source)
	}
	return fmt.Errorf("throughput: no compute or bandwidth peak known for GPU %q (catalog GPUs have them; a bare capacity does not)", g.Name)
}

// ThroughputBound bounds the plan's speed on g. It needs g's peaks (catalog
// GPUs have them; a bare capacity such as "48GB" does not).
func (t Training) ThroughputBound(g GPU) (_ Throughput, err error) {
	defer recoverOverflow(&err)
	if g.TFLOPS <= 0 || g.Bandwidth <= 0 {
		return Throughput{}, g.noPeaks()
	}
	r, err := t.resolve()
	if err != nil {
		return Throughput{}, err
	}
	states, err := t.ModelStates()
	if err != nil {
		return Throughput{}, err
	}
	ga := float64(max(1, r.GradAccum))
	flops := ga * r.microBatchFLOPs() / float64(r.tp*r.pp*r.cp)
	// Each micro-batch reads the weights in the forward and again in the
	// backward (input gradients) and writes (accumulates) the gradients;
	// the step reads parameters, gradients and states and writes parameters
	// and states (torch.optim.AdamW._multi_tensor_adamw). The weights are
	// counted as this GPU stores them (sharded ones once), a lower bound.
	p, gr, s := float64(states.Parameters), float64(states.Gradients), float64(states.OptimizerStates)
	bytes := ga*(2*p+gr) + 2*p + gr + 2*s
	dt := r.ComputeDType
	if r.Precision == "tf32" {
		dt = TF32 // float32 tensors, TF32 matmuls (allow_tf32 = True)
	}
	peak := peakFLOPS(g, dt)
	if f8 := ga * r.float8FLOPs() / float64(r.tp*r.pp*r.cp); f8 > 0 {
		// torchao's float8 linears at the float8 peak, the rest at the
		// 16-bit one: the step's time is the sum of the two shares'.
		peak = flops / ((flops-f8)/peak + f8/peakFLOPS(g, FP8E4M3))
	}
	sec, limit := roofline(flops, bytes, peak, g)
	tokens := ga * float64(r.MicroBatch) * float64(r.SeqLen)
	return Throughput{StepFLOPs: flops, StepBytes: bytes, Seconds: sec, TokensPerSecond: tokens / sec, Limit: limit}, nil
}

// peakFLOPS is g's peak for matmuls in dtype, in FLOPs a second: float32
// on the plain FP32 units (PyTorch's default), TF32 on tensor cores at half
// the 16-bit rate (Ampere and later), float8 at twice it (Ada, Hopper and
// later; NVIDIA H100 and L40S datasheets: H100 SXM 1979 dense FP8 TFLOPS
// against 989 BF16; AMD's MI300 line too: MI300X and MI325X 2614.9 dense
// FP8 TFLOPS against 1307.4 BF16, MI355X 5 PFLOPS against 2.5, their
// datasheets), else the 16-bit tensor-core peak.
func peakFLOPS(g GPU, dtype DType) float64 {
	switch {
	case dtype == FP32 && g.FP32TFLOPS > 0:
		return g.FP32TFLOPS * 1e12
	case dtype == TF32 && g.ComputeCapability >= 80:
		return g.TFLOPS / 2 * 1e12
	case dtype == TF32 && g.FP32TFLOPS > 0:
		return g.FP32TFLOPS * 1e12
	case (dtype == FP8E4M3 || dtype == FP8E5M2) && (g.ComputeCapability >= 89 || g.mi300Class()):
		return 2 * g.TFLOPS * 1e12
	}
	return g.TFLOPS * 1e12
}

// roofline is the least time of flops arithmetic at peak FLOPs a second and
// bytes of memory traffic on g, and which of the two bounds it.
func roofline(flops, bytes, peak float64, g GPU) (float64, string) {
	c, m := flops/peak, bytes/g.Bandwidth
	if m > c {
		return m, "memory bandwidth"
	}
	return c, "compute"
}

// stream is a set of tokens that pass through the same parameters: the
// language model's tokens, an encoder-decoder's decoder tokens, a vision
// tower's patches, the projector's image features.
type stream struct {
	tokens    float64 // per micro-batch of one replica
	params    float64 // matmul parameters each token passes through
	trainable float64 // of which get a weight gradient (adapters included)
	attn      float64 // attention FLOPs per token, forward
	recompute float64 // FLOPs per token the forward repeats (checkpointing)
	backward  bool    // the stream's input gradients are needed
}

func (s stream) flops() float64 {
	fwd := s.tokens * (2*s.params + s.attn)
	if !s.backward && s.trainable == 0 {
		return fwd
	}
	// Backward: input gradients (2 FLOPs per parameter, and twice the
	// attention forward: dQ, dK, dV and the score gradient) and weight
	// gradients (2 per trainable parameter).
	bwd := s.tokens * (2*s.params + 2*s.attn + 2*s.trainable)
	return fwd + bwd + s.tokens*s.recompute
}

// microBatchFLOPs is one micro-batch's arithmetic on one replica.
func (r *resolved) microBatchFLOPs() float64 { return r.matmulFLOPs(nil) }

// float8FLOPs is the share of one micro-batch's arithmetic that torchao's
// float8 training runs in float8: the matmuls of the linears it converts
// (float8Linear), forward, both backward matmuls and their recomputation
// (Float8Linear's matmul_with_hp_or_float8_args casts the operands of all
// three GEMMs — output, grad_input, grad_weight — for the tensorwise and
// rowwise recipes, torchao/float8/float8_linear.py); attention's score
// matmuls and the output layer stay in bf16.
func (r *resolved) float8FLOPs() float64 {
	if r.Float8 == "" {
		return 0
	}
	return r.matmulFLOPs(func(t Tensor) bool { return t.part == textPart && t.Layer >= 0 && r.float8Linear(t.Role) })
}

// matmulFLOPs is one micro-batch's arithmetic on one replica, or, with
// only, that of the matmuls of the tensors only keeps (no attention
// scores, no tied output layer).
func (r *resolved) matmulFLOPs(only func(Tensor) bool) float64 {
	m := r.m
	b := float64(r.MicroBatch)
	// An audio encoder attends over half its frames (Model.encoderLen).
	text := stream{tokens: b * float64(m.encoderLen(r.SeqLen)), backward: true}
	dec := stream{backward: true}
	if m.EncoderDecoder() {
		dec.tokens = b * float64(max(r.DecoderSeqLen, 0))
		if r.DecoderSeqLen == 0 {
			dec.tokens = text.tokens
		}
	}
	var tower, proj stream
	if r.tower != nil {
		rv := r.tower
		// The tower's micro-batch is the images, its sequence their patches.
		tower = stream{tokens: float64(rv.MicroBatch) * float64(rv.SeqLen), backward: r.towerTrains()}
		proj = stream{tokens: b * float64(r.images) * float64(m.Vision.ImageTokens()), backward: r.towerTrains()}
	}
	perBlock := make([]float64, m.Layers) // matmul parameters of each block
	for _, t := range m.tensors() {
		if only != nil && !only(t) {
			continue
		}
		if tiedHead(m, t) {
			// The tied input embedding is also the output layer: a matmul
			// over every position.
			head := float64(m.Vocab) * float64(m.Hidden)
			dst := &text
			if m.EncoderDecoder() {
				dst = &dec
			}
			dst.params += head
			if r.trains(t) {
				dst.trainable += head
			}
		}
		n := matmulParams(m, t)
		if n == 0 {
			continue
		}
		var s *stream
		switch {
		case t.part == towerPart:
			s = &tower
		case t.part == projectorPart:
			s = &proj
		case t.part == unusedPart || t.part == audioPart || t.part == speechPart:
			continue // never run (an audio tower's or a speech generator's forward is not modelled)
		case m.EncoderDecoder() && (t.head || (t.Layer >= 0 && m.DecoderBlock(t.Layer))):
			s = &dec
		default:
			s = &text
		}
		s.params += n
		if r.trains(t) {
			s.trainable += n
		}
		if t.Layer >= 0 && t.Layer < m.Layers && t.part == textPart {
			perBlock[t.Layer] += n
		}
		if out := r.loraOut(t); out > 0 && len(t.Shape) == 2 {
			// The adapter's A (rank × in) and B (out × rank) run beside W.
			a := float64(r.LoRA.Rank) * float64(t.Shape[1]+out)
			s.params += a
			s.trainable += a
		}
	}
	r.blockFLOPs(&text, &dec, perBlock, only == nil)
	if r.tower != nil && only == nil {
		tm := r.tower.m
		for i := 0; i < tm.Layers; i++ {
			tower.attn += attentionFLOPs(tm, i, r.tower.SeqLen, false)
		}
	}
	return text.flops() + dec.flops() + tower.flops() + proj.flops()
}

// blockFLOPs adds each block's attention (with attn) and recomputation to
// its stream, the blocks holding perBlock matmul parameters each.
func (r *resolved) blockFLOPs(text, dec *stream, perBlock []float64, attn bool) {
	m, b := r.m, float64(r.MicroBatch)
	every := max(1, r.CheckpointEvery)
	for i := 0; i < m.Layers; i++ {
		s, seq := text, m.encoderLen(r.SeqLen)
		if m.DecoderBlock(i) {
			s, seq = dec, int(dec.tokens/b)
		}
		var a float64
		if attn {
			a = attentionFLOPs(m, i, seq, !m.Encoder() && (!m.EncoderDecoder() || m.DecoderBlock(i)))
			if m.DecoderBlock(i) {
				// Cross-attention: each decoder token attends to every encoder token.
				a += 4 * float64(m.Heads) * float64(m.HeadDim) * float64(m.encoderLen(r.SeqLen))
			}
		}
		s.attn += a
		switch {
		case r.Checkpointing == CheckpointFull && r.checkpointed(i):
			s.recompute += 2*perBlock[i] + a
		case r.Checkpointing == CheckpointOp && i%every == 0:
			// Every other matmul is recomputed, the attention kernel is not.
			s.recompute += perBlock[i]
		case r.Checkpointing == CheckpointSelective:
			s.recompute += a
		}
	}
}

// matmulParams is the number of t's parameters a token multiplies (routed
// experts: the top-k share), or 0 for lookups and element-wise weights.
func matmulParams(m Model, t Tensor) float64 {
	switch t.Role {
	case "embedding", "position", "norm", "bias", "":
		return 0
	}
	if len(t.Shape) < 2 {
		return 0
	}
	n := float64(t.Numel())
	if m.Experts > 0 && (t.Expert >= 0 || t.Stacked > 0) {
		// Routed experts: a token passes through ExpertsPerToken of Experts.
		return n * float64(m.ExpertsPerToken) / float64(m.Experts)
	}
	return n
}

// tiedHead reports whether t is a token embedding that is also the output
// layer (tied weights): a lookup on the way in, a matmul on the way out.
func tiedHead(m Model, t Tensor) bool {
	return m.TiedEmbeddings && t.Role == "embedding" && t.Layer < 0 && m.Vocab > 0 && !m.Encoder() &&
		len(t.Shape) == 2 && t.Shape[0] == int64(m.Vocab) && t.part == textPart
}

// attentionFLOPs is block i's attention score arithmetic per token, forward:
// q·kᵀ and the weighted sum of values, 2 FLOPs per multiply-add each, over
// the keys the token sees (Narayanan et al. 2021 eq. 3 counts the full
// sequence; causal kernels skip the masked half, so the average query sees
// (s+1)/2 keys; a sliding window or chunk at most its span).
func attentionFLOPs(m Model, i, seq int, causal bool) float64 {
	qk, v := float64(m.HeadDim), float64(m.HeadDim)
	if m.VHeadDim > 0 {
		v = float64(m.VHeadDim) // values of their own width
	}
	if m.KVLoRARank > 0 {
		// Multi-head latent attention: queries and keys of nope + rope
		// width, values of v_head_dim (DeepSeek-V2 §2.1.2).
		qk, v = float64(m.QKNopeDim+m.QKRopeDim), float64(m.VHeadDim)
	}
	s := float64(seq)
	keys := s
	if causal {
		keys = (s + 1) / 2
		if m.LocalLayer(i) {
			if w := float64(m.localSpan()); w > 0 && w < s {
				// Σ_{j=1..s} min(j, w) / s.
				keys = (w*(w+1)/2 + (s-w)*w) / s
			}
		}
	}
	return 2 * float64(m.Heads) * (qk + v) * keys
}

// ThroughputBound bounds the generation's speed on g: the prefill's
// arithmetic at the GPU's peak, then each decoding step's larger of its
// arithmetic and its memory traffic (the weights, and the cache so far,
// read once per step; Pope et al. 2022 §2). Of a mixture of experts' routed
// experts a step reads those its tokens pick: top-k of E for one sequence,
// 1 − (1 − k/E)^batch of them for a batch routed evenly.
func (in Inference) ThroughputBound(g GPU) (_ Throughput, err error) {
	defer recoverOverflow(&err)
	if g.TFLOPS <= 0 || g.Bandwidth <= 0 {
		return Throughput{}, g.noPeaks()
	}
	in, m, err := in.resolve()
	if err != nil {
		return Throughput{}, err
	}
	gpus := float64(max(1, in.TP) * max(1, in.PP))
	// An encoder-decoder's prefill is its encoder over the prompt (and the
	// decoder's first token); decoding runs the decoder blocks only.
	var params, decoder, head float64
	for _, t := range m.tensors() {
		switch {
		case t.part == speechPart:
			continue // not loaded by the serving engines, never run (speech.go)
		case t.Role == "lm_head":
			head += matmulParams(m, t)
		case tiedHead(m, t):
			head += float64(m.Vocab) * float64(m.Hidden)
		case m.EncoderDecoder() && t.Layer >= 0 && m.DecoderBlock(t.Layer):
			decoder += matmulParams(m, t)
		default:
			params += matmulParams(m, t)
		}
	}
	if !m.EncoderDecoder() {
		decoder = params
	}
	b := float64(in.Batch)
	weights := float64(in.weightBytes(m))
	// A decoding step reads the routed experts its tokens pick, not all.
	stepWeights := weights * (1 - routedShare(in, m)*(1-expertsTouched(m, b)))
	kv := float64(in.kvPerToken(m))
	// Prefill: every prompt token through the model; logits for the last
	// token only unless LogitsAll.
	p := float64(in.PromptTokens)
	var pre float64
	for i := 0; i < m.Layers; i++ {
		if !m.DecoderBlock(i) {
			pre += attentionFLOPs(m, i, in.PromptTokens, !m.Encoder() && !m.EncoderDecoder())
		}
	}
	heads := b
	if in.LogitsAll {
		heads = b * p
	}
	prefill := (b*p*(2*params+pre) + 2*head*heads) / gpus
	peak := peakFLOPS(g, in.UnquantizedDType)
	if in.Weights.DType == FP32 {
		peak = peakFLOPS(g, FP32)
	}
	sec, limit := roofline(prefill, weights, peak, g)
	flops, bytes := prefill, weights
	if in.NewTokens == 0 {
		tps := b * p / sec
		if math.IsInf(tps, 0) || math.IsNaN(tps) {
			tps = 0
		}
		return Throughput{StepFLOPs: flops, StepBytes: bytes, Seconds: sec, TokensPerSecond: tps, Limit: limit}, nil
	}
	// Decoding steps in groups of equal size (at most 1024 groups): a
	// step's arithmetic and traffic grow linearly with its context, so the
	// group's middle step times its size is exact for each, and the larger
	// of the two is exact except in the group where they cross.
	var decodeLimit string
	group := max(1, (in.NewTokens+1023)/1024)
	for j := 0; j < in.NewTokens; j += group {
		k := min(group, in.NewTokens-j)
		ctx := float64(in.PromptTokens+j+1) + float64(k-1)/2
		if m.EncoderDecoder() {
			ctx = float64(j+1) + float64(k-1)/2 // the decoder's own tokens
		}
		f := float64(k) * b * (2*decoder + 2*head + decodeAttention(m, ctx, p)) / gpus
		by := float64(k) * (stepWeights + b*kv*ctx)
		s, l := roofline(f, by, peak, g)
		sec += s
		flops += f
		bytes += by
		decodeLimit = l
	}
	th := Throughput{StepFLOPs: flops, StepBytes: bytes, Seconds: sec, TokensPerSecond: b * float64(in.NewTokens) / sec, Limit: decodeLimit}
	if m.Experts > 0 {
		th.Note = fmt.Sprintf("a decoding step reads the routed experts its %d sequence(s) pick — %d of %d per token, %.0f %% of them for the batch — so %v of the %v of weights",
			in.Batch, m.ExpertsPerToken, m.Experts, 100*expertsTouched(m, b), Bytes(stepWeights), Bytes(weights))
	}
	return th, nil
}

// routedShare is the share of the weights' bytes in routed experts.
func routedShare(in Inference, m Model) float64 {
	if m.Experts == 0 {
		return 0
	}
	var routed, all float64
	for _, t := range m.tensors() {
		b := float64(in.tensorBytes(t))
		all += b
		if t.Expert >= 0 || t.Stacked > 0 {
			routed += b
		}
	}
	if all == 0 {
		return 0
	}
	return routed / all
}

// expertsTouched is the share of a layer's routed experts a decoding step
// of batch tokens reads: each token picks ExpertsPerToken of Experts, so
// with routing spread evenly an expert is left out with probability
// (1 − k/E)^batch.
func expertsTouched(m Model, batch float64) float64 {
	if m.Experts == 0 || m.ExpertsPerToken == 0 {
		return 1
	}
	return 1 - math.Pow(1-float64(m.ExpertsPerToken)/float64(m.Experts), batch)
}

// decodeAttention is one new token's attention arithmetic over a context of
// ctx tokens: every key for global layers, at most the span for local ones;
// an encoder-decoder's decoder blocks also attend to the prompt's tokens.
func decodeAttention(m Model, ctx, prompt float64) float64 {
	var a float64
	for i := 0; i < m.Layers; i++ {
		if m.EncoderDecoder() && !m.DecoderBlock(i) {
			continue
		}
		keys := ctx
		if w := float64(m.localSpan()); m.LocalLayer(i) && w > 0 && w < ctx {
			keys = w
		}
		if m.DecoderBlock(i) {
			keys += prompt
		}
		a += attentionFLOPs(m, i, 1, false) * keys
	}
	return a
}
