package vram

import "fmt"

// Inference is a serving or generation run: weights, KV cache, and the
// activations of the prefill and of each decoding step.
type Inference struct {
	Model Model `json:"model"`
	// Weights is the format of the linear layers (fp16, bf16, fp32, int8,
	// nf4, fp4, int4/gptq4, fp8); other tensors are held in UnquantizedDType.
	Weights          Quant  `json:"weights"`
	UnquantizedDType DType  `json:"unquantized_dtype,omitempty"` // default fp16 (bf16 for bf16 weights)
	QuantizedModules string `json:"quantized_modules,omitempty"` // all_linear_except_lm_head (default) or all_linear

	Batch        int `json:"batch"`                     // concurrent sequences
	PromptTokens int `json:"prompt_tokens"`             // per sequence; 0 with NewTokens 0 = load only
	NewTokens    int `json:"new_tokens"`                // generated per sequence
	KVCacheLen   int `json:"kv_cache_tokens,omitempty"` // preallocated cache length per sequence (static caches)

	// Images is the number of images in each prompt of a vision-language
	// model (default 1); their tokens count in prompt_tokens.
	Images int `json:"images,omitempty"`

	KVDType   DType  `json:"kv_dtype,omitempty"`  // default: the compute dtype
	Attention string `json:"attention,omitempty"` // sdpa (default), flash2, eager
	// Cache is how the KV cache grows: dynamic (default; transformers
	// DynamicCache, torch.cat per layer), legacy (tuple of tensors rebuilt each
	// step while the previous tuple is alive: transformers < 4.36), static
	// (preallocated to KVCacheLen: litgpt, StaticCache), paged (vLLM blocks of
	// PageSize tokens).
	Cache    string `json:"cache,omitempty"`
	PageSize int    `json:"page_size,omitempty"` // paged: tokens per block (default 16, vLLM)
	// MaxBatchedTokens caps the tokens one prefill step processes (chunked
	// prefill). Zero means the whole batch of prompts at once, except with the
	// paged cache, where it defaults to vLLM's 8192 (max_num_batched_tokens
	// with chunked prefill, vllm/config.py SchedulerConfig).
	MaxBatchedTokens int `json:"max_batched_tokens,omitempty"`
	// LogitsAll: the prefill computes logits for every prompt token (true for
	// transformers < 4.45 and litgpt), else only for the last one.
	LogitsAll bool `json:"logits_all,omitempty"`
	// LogitsFP32 upcasts logits to fp32 (transformers generate does).
	LogitsFP32 bool `json:"logits_fp32,omitempty"`

	TP int `json:"tp,omitempty"` // tensor parallel degree (default 1)
	PP int `json:"pp,omitempty"` // pipeline stages (default 1)
	// DeviceMap "sequential" places blocks on GPU 0 until DeviceCapacity
	// (minus room for the largest block) is used, then on the next GPU, as
	// accelerate's infer_auto_device_map does for device_map="auto"
	// (accelerate/utils/modeling.py). Only GPU 0 is reported.
	DeviceMap      string `json:"device_map,omitempty"`
	DeviceCapacity Bytes  `json:"device_capacity,omitempty"`

	// CPUResident are the modules whose weights stay in host memory while
	// the rest runs on the GPU: "embed_tokens" (the token embedding, as
	// ExLlama keeps it: the lookup runs on the CPU and only the looked-up
	// rows move to the GPU) and "lm_head" (the output layer, untied).
	CPUResident []string `json:"cpu_resident,omitempty"`

	// Dequantize: transformers dequantizes a released MXFP4 checkpoint's
	// experts to bf16 on load (Mxfp4Config(dequantize=True), as its
	// fine-tuning recipe does; it does so by itself without the kernels
	// package and triton ≥ 3.4, or on a GPU below compute capability 7.5:
	// quantizers/quantizer_mxfp4.py validate_environment).
	Dequantize bool `json:"dequantize,omitempty"`

	// stored is a checkpoint's bytes per tensor (WithCheckpoint); the
	// weights load as stored unless Weights names a format.
	stored       map[string]Bytes
	asCheckpoint bool
	// asRelease: the weights load as the model's Release stores them
	// (Weights names no format), as runtime keeps them on a GPU of
	// compute capability cc (0: not known).
	asRelease bool
	// namedRelease: the plan named the release's own format as Weights,
	// which means the release.
	namedRelease bool
	attnSet      bool // the plan names its attention (else transformers picks)
	runtime      runtime
	// towerWhole: the serving engine keeps the vision tower whole on
	// every rank (vLLM's mm_encoder_tp_mode "data", vision_tp.go).
	towerWhole bool
	// towerOff: the serving engine builds no vision tower or projector
	// (SGLang's Llama 4 without --enable-multimodal, vLLM's text-only
	// launches: VLLM.textOnly).
	towerOff bool
	// towerCut: the serving engine builds the tower's blocks only up to
	// the deepest feature layer, without the post-norm (vLLM's
	// init_vision_tower_for_llava: VLLM.Carve).
	towerCut bool
	// audioOff: the serving engine builds no audio tower or projector
	// (vLLM with limit_mm_per_prompt {"audio": 0}; audio.go).
	audioOff bool
	cc       int
	mxfp4    string // vLLM's MXFP4 backend (VLLM.MXFP4Backend)
}

// runtime is the program that loads the weights.
type runtime uint8

const (
	runTransformers runtime = iota // transformers' from_pretrained (generate)
	runVLLM
	runSGLang
	runTGI
)

// InferenceEstimate is the memory of one GPU for an inference plan.
type InferenceEstimate struct {
	// Notes say how the plan's words and the model's release were read:
	// the storage the weights load in and why.
	Notes   []string  `json:"notes,omitempty"`
	Peak    Breakdown `json:"peak"`     // live at the allocated peak
	PeakAt  string    `json:"peak_at"`  // "load", "prefill", "decode"
	Weights Bytes     `json:"weights"`  // per GPU
	KVCache Bytes     `json:"kv_cache"` // at the final length
	// KVPerToken is the cache of one token of one sequence on one GPU.
	KVPerToken Bytes `json:"kv_per_token"`
	// State is what the state-space layers keep for every sequence
	// (Mamba2Cache's conv_states and ssm_states), the same at any
	// length; the peaks count it with the KV cache.
	State Bytes `json:"state,omitempty"`
}

func (in Inference) resolve() (Inference, Model, error) {
	if err := in.Model.Validate(); err != nil {
		return in, Model{}, err
	}
	if err := in.applies(); err != nil {
		return in, Model{}, err
	}
	m := in.Model.Normalize()
	if in.stored != nil && in.Weights.DType == DTypeUnset {
		in.asCheckpoint = true
	}
	if !in.asCheckpoint && m.Release.Quantized() && in.Weights.DType != DTypeUnset && in.Weights.SameFormat(m.Release.Format) {
		// A plan that names the format the release stores its weights in
		// means the release (a serving engine loads the checkpoint as it
		// is): its scope, skipped modules and backend, as the command line
		// that names the checkpoint gets them.
		in.Weights, in.namedRelease = Quant{}, true
	}
	if !in.asCheckpoint && in.Weights.DType == DTypeUnset && m.Release.Quantized() {
		in.asRelease = true
		if in.UnquantizedDType == DTypeUnset {
			in.UnquantizedDType = m.Release.dtype()
		}
	}
	if in.Dequantize && !(in.asRelease && m.Release.Format.DType == MXFP4) {
		return in, m, fmt.Errorf("dequantize applies to a released MXFP4 checkpoint loaded as released (gpt-oss), not to %s weights", orDefault(in.Weights.DType.String(), "these"))
	}
	if in.Weights.DType == DTypeUnset {
		in.Weights.DType = BF16
	}
	if in.Batch < 1 || in.Batch > MaxTokens {
		return in, m, fmt.Errorf("batch must be in [1, %d], got %d", MaxTokens, in.Batch)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"prompt_tokens", in.PromptTokens}, {"new_tokens", in.NewTokens}, {"kv_cache_tokens", in.KVCacheLen}} {
		if f.v < 0 || f.v > MaxTokens {
			return in, m, fmt.Errorf("%s must be in [0, %d], got %d", f.name, MaxTokens, f.v)
		}
	}
	// Each term is at most 2^26, so the sum cannot overflow.
	if _, err := boundedProduct(maxBatchTokens, "batch × (prompt_tokens + new_tokens + kv_cache_tokens)", int64(in.Batch), int64(in.PromptTokens)+int64(in.NewTokens)+int64(in.KVCacheLen)); err != nil {
		return in, m, err
	}
	if in.UnquantizedDType == DTypeUnset {
		in.UnquantizedDType = FP16
		switch d := in.Weights.DType; {
		case d == FP8E4M3 || d == FP8E5M2:
			// An fp8 checkpoint converts the linear layers only: the
			// embeddings, norms and head stay in the model's 16-bit dtype
			// (transformers' quantizer_finegrained_fp8 and vLLM's Fp8Config
			// replace nn.Linear; released FP8 checkpoints store the rest in
			// bf16).
			in.UnquantizedDType = BF16
		case d.IsFloat():
			in.UnquantizedDType = d
		}
	}
	if !in.UnquantizedDType.IsFloat() {
		return in, m, fmt.Errorf("unquantized_dtype must be a float type, got %s", in.UnquantizedDType)
	}
	if in.KVDType == DTypeUnset {
		in.KVDType = in.UnquantizedDType
	}
	if in.QuantizedModules == "" {
		in.QuantizedModules = "all_linear_except_lm_head"
	}
	if err := oneOf("quantized_modules", in.QuantizedModules, "all_linear", "all_linear_except_lm_head", "experts", "all_linear_except_experts"); err != nil {
		return in, m, err
	}
	if err := in.resolveRun(m); err != nil {
		return in, m, err
	}
	if err := in.bound(m); err != nil {
		return in, m, err
	}
	return in, m, nil
}

// resolveRun checks and defaults how the model runs: attention, cache and
// its pages, batching, tensor and pipeline stages, the device map.
func (in *Inference) resolveRun(m Model) error {
	in.attnSet = in.attnSet || in.Attention != ""
	if in.Attention == "" {
		in.Attention = "sdpa"
	}
	if err := oneOf("attention", in.Attention, "sdpa", "flash2", "flash3", "memory_efficient", "eager"); err != nil {
		return err
	}
	if in.Cache == "" {
		in.Cache = "dynamic"
	}
	if err := oneOf("cache", in.Cache, "dynamic", "legacy", "static", "paged"); err != nil {
		return err
	}
	if in.PageSize == 0 {
		in.PageSize = 16
	}
	if in.MaxBatchedTokens < 0 || in.MaxBatchedTokens > MaxTokens {
		return fmt.Errorf("max_batched_tokens must be in [0, %d], got %d", MaxTokens, in.MaxBatchedTokens)
	}
	if in.MaxBatchedTokens == 0 && in.Cache == "paged" {
		in.MaxBatchedTokens = 8192
	}
	if in.PageSize < 1 || in.PageSize > maxPageSize {
		return fmt.Errorf("page_size must be in [1, %d] tokens, got %d", maxPageSize, in.PageSize)
	}
	if in.TP == 0 {
		in.TP = 1
	}
	if in.PP == 0 {
		in.PP = 1
	}
	if in.TP < 1 || in.TP > maxHeads || m.Heads%in.TP != 0 {
		return fmt.Errorf("tp=%d does not divide %d attention heads", in.TP, m.Heads)
	}
	if err := oneOf("device_map", in.DeviceMap, "", "sequential"); err != nil {
		return err
	}
	if in.DeviceCapacity < 0 {
		return fmt.Errorf("device_capacity must be ≥ 0")
	}
	if in.PP < 1 || in.PP > m.Layers {
		return fmt.Errorf("pp=%d must be in [1, layers = %d]", in.PP, m.Layers)
	}
	return nil
}

// applies rejects settings that the rest of the plan makes meaningless (in
// is the plan as written, before defaults).
func (in Inference) applies() error {
	if in.KVCacheLen != 0 && in.Cache != "static" {
		return fmt.Errorf("kv_cache_tokens sizes a preallocated cache; it applies to cache \"static\", not %q", orDefault(in.Cache, "dynamic"))
	}
	if in.PageSize != 0 && in.Cache != "paged" {
		return fmt.Errorf("page_size applies to cache \"paged\", not %q", orDefault(in.Cache, "dynamic"))
	}
	if in.DeviceCapacity != 0 && in.DeviceMap != "sequential" {
		return fmt.Errorf("device_capacity applies to device_map \"sequential\"")
	}
	if in.QuantizedModules != "" && !in.Weights.Quantized() {
		return fmt.Errorf("quantized_modules applies to quantized weights (int8, nf4, fp4, int4), not %s", in.Weights.DType)
	}
	for _, r := range in.CPUResident {
		if err := oneOf("cpu_resident", r, "embed_tokens", "lm_head"); err != nil {
			return err
		}
		if r == "lm_head" && in.Model.TiedEmbeddings {
			return fmt.Errorf("cpu_resident \"lm_head\": the model ties its output layer to the token embedding (name embed_tokens)")
		}
	}
	if in.Images != 0 && in.Model.Vision == nil {
		return fmt.Errorf("images applies to vision-language models (model.vision), not %q", in.Model.Family)
	}
	if v := in.Model.Vision; v != nil && in.PromptTokens > 0 && !in.towerOff {
		if in.Images < 0 || in.Images > MaxTokens {
			return fmt.Errorf("images must be in [1, %d], got %d", MaxTokens, in.Images)
		}
		if n := int64(max(1, in.Images)) * int64(v.ImageTokens()); n > int64(in.PromptTokens) {
			return fmt.Errorf("prompt_tokens = %d cannot hold images = %d of %d tokens each: prompt_tokens counts the image tokens too", in.PromptTokens, max(1, in.Images), v.ImageTokens())
		}
	}
	return nil
}

func orDefault[S ~string](s, def S) S {
	if s == "" {
		return def
	}
	return s
}

// maxPageSize bounds the tokens of one KV-cache page (vLLM uses 16).
const maxPageSize = 1 << 20

// bound rejects, naming the fields, an inference plan whose largest tensors
// would not be representable (see checked.go and Training.bound).
func (in Inference) bound(m Model) error {
	tokens := int64(in.Batch) * int64(max(in.PromptTokens, 1)) // ≤ 2^32, checked above
	width := m.widestActivation()
	if _, err := boundedProduct(int64(maxPlanBytes)/256, "batch × prompt_tokens × the widest activation (hidden, ffn or heads × head_dim)", tokens, width); err != nil {
		return err
	}
	if _, err := boundedProduct(int64(maxPlanBytes)/64, "batch × prompt_tokens × vocab (the prefill's logits)", tokens, int64(m.Vocab)); err != nil {
		return err
	}
	if in.Attention == "eager" {
		seq := int64(max(in.PromptTokens, 1))
		if _, err := boundedProduct(int64(maxPlanBytes)/64, `attention "eager": batch × heads × prompt_tokens² (the prefill's score maps)`, int64(in.Batch), int64(m.Heads), seq, seq); err != nil {
			return err
		}
	}
	// The cache: every token of every sequence in every layer, K and V.
	perToken := int64(m.Layers) * 2 * int64(max(m.KVHeads*m.HeadDim, m.KVLoRARank+m.QKRopeDim)) * 4
	total := int64(in.Batch) * (int64(in.PromptTokens) + int64(in.NewTokens) + int64(in.KVCacheLen) + int64(in.PageSize))
	if _, err := boundedProduct(int64(maxPlanBytes), "batch × (prompt_tokens + new_tokens + kv_cache_tokens) × the KV cache per token", total, perToken); err != nil {
		return err
	}
	return nil
}

// Validate reports the first invalid field.
func (in Inference) Validate() error {
	_, _, err := in.resolve()
	return err
}

// WeightBytes is the device storage of the model's weights in this format,
// per GPU (TP shards matrices; PP takes the largest stage).
func (in Inference) weightBytes(m Model) Bytes {
	var perLayer = make([]Bytes, m.Layers)
	var first, last Bytes // embedding side on the first stage, head side on the last
	for _, t := range m.tensors() {
		b := in.tensorBytes(t)
		switch {
		case t.Layer >= 0:
			perLayer[t.Layer] = addBytes(perLayer[t.Layer], b)
		case t.head:
			last = addBytes(last, b)
		default:
			first = addBytes(first, b)
		}
	}
	if in.DeviceMap == "sequential" && in.DeviceCapacity > 0 {
		var largest Bytes
		for _, b := range perLayer {
			largest = max(largest, b)
		}
		used := first
		for _, b := range perLayer {
			if addBytes(addBytes(used, b), largest) > in.DeviceCapacity {
				return used
			}
			used = addBytes(used, b)
		}
		if addBytes(used, last) > in.DeviceCapacity {
			return used
		}
		return addBytes(used, last)
	}
	var best Bytes
	for k := 0; k < in.PP; k++ {
		var s Bytes
		for l := k * m.Layers / in.PP; l < (k+1)*m.Layers/in.PP; l++ {
			s = addBytes(s, perLayer[l])
		}
		if k == 0 {
			s = addBytes(s, first)
		}
		if k == in.PP-1 {
			s = addBytes(s, last)
		}
		if s > best {
			best = s
		}
	}
	return best
}

// tensorBytes is one weight tensor's storage on one GPU: as a checkpoint
// stores it, as the model's release stores it (as the runtime keeps it), or
// quantized linear layers and routed experts in the weight format and the
// rest in UnquantizedDType; matrices, stacked experts and embeddings split
// by TP.
func (in Inference) tensorBytes(t Tensor) Bytes {
	var b Bytes
	rows, cols, n := t.matrix()
	switch {
	case in.onCPU(t):
		return 0
	case in.asCheckpoint:
		b = in.stored[t.Name]
	case in.asRelease:
		b = in.releasedBytes(t)
	case in.Weights.Quantized() && in.quantizes(t):
		b = mulBytes(n, in.Weights.Size(rows, cols))
	case in.Weights.DType.IsFloat() && in.quantizes(t):
		b = in.Weights.DType.Size(t.Numel())
	default:
		b = in.UnquantizedDType.Size(t.Numel())
	}
	if in.towerOff && (t.part == towerPart || t.part == projectorPart || t.part == unusedPart) || in.towerCut && t.part == unusedPart {
		return 0
	}
	if in.towerWhole && (t.part == towerPart || t.part == projectorPart && !in.splitsProjector(t)) {
		return b // every rank holds the whole tower (vision_tp.go)
	}
	if t.part == audioPart && in.audioOff {
		return 0
	}
	if t.part == audioPart && in.runtime == runVLLM {
		return b // vLLM replicates an audio tower and its projector on every rank (audio.go)
	}
	if t.part == speechPart && (in.runtime == runVLLM || in.runtime == runSGLang) {
		return 0 // they serve the text model and load no speech generator (speech.go)
	}
	if t.IsLinear() || t.Stacked > 0 || t.Role == "embedding" || in.splitsProjector(t) || in.splitsTowerMatrix(t) {
		b /= Bytes(in.TP)
	}
	return b
}

// onCPU reports whether t is a weight CPUResident keeps in host memory.
func (in Inference) onCPU(t Tensor) bool {
	for _, r := range in.CPUResident {
		switch {
		case r == "embed_tokens" && t.Role == "embedding" && !t.head,
			r == "lm_head" && t.Role == "lm_head":
			return true
		}
	}
	return false
}

// quantizes reports whether the plan's weight format applies to t: every
// linear layer and stacked expert tensor but the routers and (unless
// quantized_modules says all_linear) the output layer; "experts" limits
// it to the routed experts, "all_linear_except_experts" leaves them out.
func (in Inference) quantizes(t Tensor) bool {
	if t.Role == "router" || t.Role == "bias" || !t.IsLinear() && t.Stacked == 0 {
		return false
	}
	expert := t.Expert >= 0 || t.Stacked > 0
	switch in.QuantizedModules {
	case "experts":
		return expert
	case "all_linear_except_experts":
		return !expert && t.Role != "lm_head"
	case "all_linear":
		return true
	}
	return t.Role != "lm_head"
}

// kvPerToken is the K and V of one token in every layer of one stage.
func (in Inference) kvPerToken(m Model) Bytes {
	if m.Encoder() {
		return 0
	}
	layers := int64(m.Layers / in.PP)
	if m.EncoderDecoder() {
		layers = int64(max(1, m.DecoderLayers/in.PP)) // only the decoder caches
	}
	if m.recurrent() {
		// State-space and short-convolution layers keep a state, not K and V (stateBytes).
		layers = int64(m.attentionLayers(0, in.stageLayers(m)))
	}
	var per int64
	if m.KVLoRARank > 0 {
		// MLA caches the compressed latent and the rotary key (DeepSeek-V2 §2.1.2).
		per = int64(m.KVLoRARank + m.QKRopeDim)
		// DeepSeek Sparse Attention's indexer keeps one index_head_dim key
		// a token beside them (transformers 5.23 DynamicIndexedLayer,
		// cache_utils.py:316-350: [batch, seq, index_head_dim]).
		per += int64(m.IndexHeadDim)
	} else {
		kv := int64(m.KVHeads)
		if kv >= int64(in.TP) {
			kv /= int64(in.TP)
		}
		per = 2 * kv * int64(m.HeadDim)
	}
	return in.KVDType.Size(layers * per)
}

// Estimate predicts the inference memory of one GPU.
func (in Inference) Estimate() (_ InferenceEstimate, err error) {
	defer recoverOverflow(&err)
	in, m, err := in.resolve()
	if err != nil {
		return InferenceEstimate{}, err
	}
	var est InferenceEstimate
	est.Weights = in.weightBytes(m)
	est.Notes = in.notes(m, est.Weights)
	est.KVPerToken = in.kvPerToken(m)
	total := in.PromptTokens + in.NewTokens
	b := int64(in.Batch)
	est.KVCache = in.cacheAt(m, total)
	est.State = in.stateBytes(m)
	est.Notes = append(est.Notes, in.stateNotes(m, est.State)...)
	if m.EncoderDecoder() {
		return in.estimateEncDec(m, est)
	}
	load := Breakdown{Parameters: est.Weights}
	if total == 0 {
		est.Peak, est.PeakAt = load, "load"
		return est, nil
	}

	// Prefill: one block's forward without autograd (nothing saved): its
	// largest set of simultaneously live tensors, plus the logits.
	e := in.UnquantizedDType
	seq, batch := max(in.PromptTokens, 1), in.Batch
	if in.MaxBatchedTokens > 0 && batch*seq > in.MaxBatchedTokens {
		// Chunked prefill: one step sees at most MaxBatchedTokens tokens.
		batch = 1
		seq = min(seq*in.Batch, in.MaxBatchedTokens)
	}
	tr := Training{Model: m, SeqLen: seq, MicroBatch: batch, WeightsDType: e, ComputeDType: e,
		Trainable: "frozen", Optimizer: "none", Attention: in.Attention, Dropout: new(float64), Parallel: Parallel{TP: in.TP}, Images: in.Images, generate: true}
	if in.towerOff {
		// The engine builds no tower or projector: a text-only forward
		// (an audio tower and a speech generator go with the vision side
		// they need) of the language model, which runs as the wrapper's
		// part (a wrapped family is no model alone: asTower).
		tr.Model.Vision, tr.Model.Audio, tr.Model.Speech, tr.Images = nil, nil, nil, 0
		tr.asTower = true
	}
	if !in.attnSet {
		tr.Attention = "" // transformers' own choice
	}
	if in.runtime != runTransformers {
		// The engine's own model code: flash attention, fused MoE.
		tr.servingEngine, tr.Attention = true, "flash2"
	}
	if in.runtime == runVLLM && vllmTowerOf(m).split && !in.towerWhole && checkTowerTP(m, in.TP) == nil {
		tr.towerTP = in.TP // vLLM splits the tower too (vision_tp.go; the carve refuses a degree it cannot)
	}
	r, err := tr.resolve()
	if err != nil {
		// The bounds of Inference.resolve cover the prefill's; this would be
		// a gap between the two.
		return est, fmt.Errorf("prefill (batch %d × %d tokens): %w", batch, seq, err)
	}
	r.frozen = true
	prefillCache := est.KVCache
	if in.Cache != "static" && in.Cache != "paged" {
		prefillCache = in.cacheAt(m, in.PromptTokens)
	}
	v := int64(m.Vocab) / int64(in.TP)
	logitTokens := b
	if in.LogitsAll {
		logitTokens = b * int64(in.PromptTokens)
	}
	logits := e.Size(mulI64(logitTokens, v))
	if in.LogitsFP32 {
		logits = addBytes(logits, FP32.Size(mulI64(logitTokens, v)))
	}
	temp := max(in.prefillBlocks(&r), logits)
	prefill := Breakdown{Parameters: est.Weights, KVCache: addBytes(prefillCache, est.State), Temporaries: temp}

	// Decoding: the cache at its final length; a legacy tuple cache is rebuilt
	// with torch.cat each step while the previous tuple is still referenced,
	// so two copies coexist at the end; a dynamic cache copies one layer at a time.
	decodeCache := est.KVCache
	var decodeTemp Bytes
	switch in.Cache {
	case "legacy":
		decodeCache = addBytes(est.KVCache, in.cacheAt(m, total-1))
	case "dynamic":
		decodeTemp = in.catTemp(m, total)
	}
	stepLogits := e.Size(mulI64(b, v))
	if in.LogitsFP32 {
		stepLogits = addBytes(stepLogits, FP32.Size(mulI64(b, v)))
	}
	decode := Breakdown{Parameters: est.Weights, KVCache: addBytes(decodeCache, est.State), Temporaries: addBytes(decodeTemp, stepLogits)}
	est.Peak, est.PeakAt = prefill, "prefill"
	if in.NewTokens > 1 && decode.Total() > prefill.Total() {
		est.Peak, est.PeakAt = decode, "decode"
	}
	return est, nil
}

// estimateEncDec is generate() on an encoder-decoder (T5): the encoder runs
// once over the prompt, and its output stays for the decoder's
// cross-attention; each decoder layer caches its self-attention's k and v
// for the generated tokens and the cross-attention's for the prompt
// (EncoderDecoderCache), the latter computed at the first step.
func (in Inference) estimateEncDec(m Model, est InferenceEstimate) (InferenceEstimate, error) {
	b := int64(in.Batch)
	S := int64(max(in.PromptTokens, 1))
	T := int64(max(in.NewTokens, 1)) // generated tokens, after the start token
	if m.MelBins > 0 && in.NewTokens > m.MaxPosition {
		return est, fmt.Errorf("new_tokens = %d: %s's decoder reads at most model.max_position = %d tokens (max_target_positions), the start tokens among them", in.NewTokens, m.Family, m.MaxPosition)
	}
	e := in.UnquantizedDType
	// The encoder's positions: an audio encoder's prompt is its log-mel
	// frames, two a position (Model.encoderLen).
	pos := int64(m.encoderLen(int(S)))
	cross := mulBytes(mulI64(b, pos), est.KVPerToken)
	est.KVCache = addBytes(mulBytes(mulI64(b, T), est.KVPerToken), cross)
	encOut := e.Size(mulI64(mulI64(b, pos), int64(m.Hidden)))
	tr := Training{Model: m, SeqLen: int(S), DecoderSeqLen: 1, MicroBatch: in.Batch, WeightsDType: e, ComputeDType: e,
		Trainable: "frozen", Optimizer: "none", Attention: in.Attention, Dropout: new(float64), Parallel: Parallel{TP: in.TP}, generate: true}
	if !in.attnSet {
		tr.Attention = "" // transformers' own choice
	}
	r, err := tr.resolve()
	if err != nil {
		return est, fmt.Errorf("encoder pass (batch %d × prompt_tokens %d): %w", b, S, err)
	}
	r.frozen = true
	encoder := buildBlock(&r, 0).NoGradPeak // an encoder block under torch.no_grad
	if m.MelBins > 0 {
		// The audio front end under no_grad: conv1's output and its GELU,
		// batch × hidden × frames each, live at once
		// (modeling_whisper.py:679).
		encoder = max(encoder, e.Size(mulI64(2*b*S, int64(m.Hidden))))
	}
	v := int64(m.Vocab) / int64(in.TP)
	stepLogits := e.Size(mulI64(b, v))
	if in.LogitsFP32 {
		stepLogits = addBytes(stepLogits, FP32.Size(mulI64(b, v)))
	}
	prefill := Breakdown{Parameters: est.Weights, Temporaries: addBytes(encoder, encOut)}
	decode := Breakdown{Parameters: est.Weights, KVCache: est.KVCache, Temporaries: addBytes(encOut, stepLogits)}
	est.Peak, est.PeakAt = prefill, "prefill"
	if decode.Total() > prefill.Total() {
		est.Peak, est.PeakAt = decode, "decode"
	}
	return est, nil
}

// stateNotes say what the recurrent layers keep in generate, or for a
// serving engine's profile run how it runs them (its state pages are the
// engine's cache: vllm_state.go).
func (in Inference) stateNotes(m Model, state Bytes) []string {
	if in.runtime != runTransformers && m.recurrent() {
		split := ""
		if in.TP > 1 {
			split = fmt.Sprintf(", heads split over %d ranks", in.TP)
		}
		return []string{"recurrent layers: the profile run calls them without attention metadata, which takes vLLM's short profile path (in_proj, the gate's norm, out_proj: no scan)" + split}
	}
	var notes []string
	if m.DeltaNet != nil {
		notes = append(notes, fmt.Sprintf("delta_net: the Gated DeltaNet layers keep %v for the %d sequence(s), whatever their length (conv and recurrent states, Qwen3NextDynamicCache); the KV cache is the %d attention layers'", state, in.Batch, m.attentionLayers(0, m.Layers)))
	}
	if m.ShortConv != nil {
		notes = append(notes, fmt.Sprintf("short_conv: the convolution layers keep %v for the %d sequence(s), whatever their length (Lfm2HybridConvCache's conv states, one per layer); the KV cache is the %d attention layers'", state, in.Batch, m.attentionLayers(0, m.Layers)))
	}
	if m.Mamba != nil {
		notes = append(notes, fmt.Sprintf("mamba: the Mamba-1 layers keep %v for the %d sequence(s), whatever their length (conv and SSM states, HybridMambaAttentionDynamicCache); the prefill runs transformers' slow_forward (a loop over the prompt), whose discretized tensors the no_grad prefill holds per layer", state, in.Batch))
	}
	if m.SSM != nil {
		notes = append(notes, fmt.Sprintf("ssm: the state-space layers keep %v for the %d sequence(s), whatever their length (conv and SSM states, Mamba2Cache); the prefill runs transformers' torch path of Mamba2Mixer, which materializes the chunked scan's products (the mamba_ssm kernels on a GPU do not; that path is not modelled)", state, in.Batch))
	}
	return notes
}

// stateBytes is the state-space layers' state of the plan's sequences on
// one GPU: Mamba2Cache holds conv_states and ssm_states for every layer
// and sequence in the model's dtype (Mamba2ForCausalLM builds it with
// dtype=self.dtype), whatever the length.
func (in Inference) stateBytes(m Model) Bytes {
	if d := m.DeltaNet; d != nil {
		// Qwen3NextDynamicCache: each DeltaNet layer's conv state (batch ×
		// conv_dim × kernel, the projections' dtype) and recurrent state (fp32).
		layers := int64(in.stageLayers(m) - m.attentionLayers(0, in.stageLayers(m)))
		return mulBytes(mulI64(int64(in.Batch), layers), d.StateBytes(in.UnquantizedDType))
	}
	if c := m.ShortConv; c != nil {
		// Lfm2HybridConvCache: conv_cache, batch × hidden × conv_L_cache in
		// the model's dtype, for every layer (attention layers too), built
		// at the first forward (Lfm2Model.forward, modeling_lfm2.py).
		return mulBytes(mulI64(int64(in.Batch), int64(in.stageLayers(m))), in.UnquantizedDType.Size(mulI64(int64(m.Hidden), int64(c.Kernel))))
	}
	if s := m.Mamba; s != nil {
		// HybridMambaAttentionDynamicCache: conv_states (batch × inner ×
		// conv_kernel) and ssm_states (batch × inner × state) in the
		// model's dtype for every Mamba layer (modeling_jamba.py).
		var layers int64
		for i := range in.stageLayers(m) {
			if m.MambaLayer(i) {
				layers++
			}
		}
		return mulBytes(mulI64(int64(in.Batch), layers), s.StateBytes(in.UnquantizedDType))
	}
	if m.SSM == nil {
		return 0
	}
	var layers int64
	for i := range in.stageLayers(m) {
		if m.SSMLayer(i) {
			layers++
		}
	}
	return mulBytes(mulI64(int64(in.Batch), layers), m.SSM.StateBytes(in.UnquantizedDType))
}

// cacheAt is the KV cache of the plan's sequences at n tokens each, layer
// by layer at the length each layer kind keeps (cacheLayerLen).
func (in Inference) cacheAt(m Model, n int) Bytes {
	if n <= 0 || m.Encoder() {
		return 0
	}
	per := in.kvLayerPerToken(m)
	var tokens int64
	for i := range in.stageLayers(m) {
		if m.AttentionLayer(i) {
			tokens += int64(in.cacheLayerLen(m, i, n))
		}
	}
	return mulBytes(mulI64(int64(in.Batch), tokens), per)
}

// cacheLayerLen is the tokens layer i's cache holds after n tokens of a
// sequence:
//   - a global layer all n (dynamic and legacy), kv_cache_tokens (static),
//     n in whole pages (paged);
//   - a sliding-window or chunked layer (transformers ≥ 4.53 builds
//     DynamicSlidingWindowLayer for both, cache_utils.py) the last
//     window − 1 (dynamic: "Only cache the last sliding_window - 1
//     tokens"), the window (static: StaticSlidingWindowLayer keeps
//     min(max_cache_len, sliding_window)), the window in whole pages
//     (paged); the legacy tuple cache of older releases keeps all n.
func (in Inference) cacheLayerLen(m Model, i, n int) int {
	local := m.LocalLayer(i) && in.Cache != "legacy"
	w := m.localSpan()
	switch in.Cache {
	case "static":
		if in.KVCacheLen > 0 {
			n = in.KVCacheLen
		}
		if local {
			return min(n, w)
		}
		return n
	case "paged":
		if local {
			n = min(n, w)
		}
		return (n + in.PageSize - 1) / in.PageSize * in.PageSize
	}
	if local {
		return min(n, w-1)
	}
	return n
}

// catTemp is dynamic decoding's largest transient: the torch.cat of one
// layer's cache with the new token (DynamicLayer.update), which the
// longest-keeping layer makes.
func (in Inference) catTemp(m Model, n int) Bytes {
	longest := 0
	for i := range in.stageLayers(m) {
		if m.AttentionLayer(i) {
			longest = max(longest, in.cacheLayerLen(m, i, n-1)+1)
		}
	}
	return mulBytes(mulI64(int64(in.Batch), int64(min(longest, n))), in.kvLayerPerToken(m))
}

// stageLayers is the number of layers with a cache on one GPU (the first
// pipeline stage; the decoder's layers of an encoder-decoder).
func (in Inference) stageLayers(m Model) int {
	if m.EncoderDecoder() {
		return max(1, m.DecoderLayers/in.PP)
	}
	return m.Layers / in.PP
}

// kvLayerPerToken is one token's K and V in one layer on one GPU.
func (in Inference) kvLayerPerToken(m Model) Bytes {
	layers := in.stageLayers(m)
	if m.recurrent() {
		layers = m.attentionLayers(0, layers)
	}
	return in.kvPerToken(m) / Bytes(max(1, layers))
}

// buildBlockInference is a block's forward under torch.no_grad: nothing is
// saved, so its peak is the largest set of live transients.
func buildBlockInference(r *resolved) Bytes {
	if r.m.Compressed != nil {
		return compressedPrefillPeak(r) // its layers differ in kind (compressed.go)
	}
	return buildBlock(r, 0).NoGradPeak
}

// prefillBlocks is the prefill's peak before the logits: a block's
// forward without autograd and, under transformers' generate with its
// dynamic (or legacy) cache, what the model's forward builds before its
// decoder layers and keeps until it returns —
// the attention masks, the rotary tables (LlamaModel.forward's
// position_embeddings, passed to every layer) and a wrapper's features
// beside the blocks (Qwen3-VL's deepstack; edges.go's masks, as a
// training step's forward counts them); a vision-language model's images
// go through the tower, the projector and into the embeddings before the
// first block.
func (in Inference) prefillBlocks(r *resolved) Bytes {
	blk := buildBlockInference(r)
	hfMasks := in.runtime == runTransformers && in.Cache != "static" && in.Cache != "paged"
	if !hfMasks && r.m.Vision == nil {
		return blk // an engine's own kernels, or a cache whose masks are not transformers' dynamic ones
	}
	edges := buildEdges(r)
	if hfMasks {
		for _, mp := range edges.Masks {
			blk = addBytes(blk, mp.bytes)
		}
	}
	if r.m.Vision != nil {
		blk = max(blk, edges.Embed.NoGradPeak)
	}
	return blk
}
