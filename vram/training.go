package vram

import (
	"fmt"
	"slices"
	"strings"
)

// Training is the memory-relevant configuration of a training run. Field
// names in JSON follow the project's plan format (the same as the
// measured-case files). The zero value of every optional field means the
// default written beside it.
type Training struct {
	Model Model `json:"model"`

	SeqLen int `json:"seq_len"` // tokens per sequence (tokens per image for ViT; the encoder's input for an encoder-decoder; log-mel frames for Whisper, 2 × model.source_positions)
	// DecoderSeqLen is an encoder-decoder's target length (the decoder's
	// tokens); default seq_len (an audio model's: model.max_position,
	// Whisper's max_target_positions, which it may not exceed).
	DecoderSeqLen int `json:"decoder_seq_len,omitempty"`
	MicroBatch    int `json:"micro_batch"`          // sequences per forward/backward per data-parallel rank
	GradAccum     int `json:"grad_accum,omitempty"` // micro-batches per optimizer step (default 1)

	// Precision is a shorthand that sets the dtypes below when they are unset:
	// "fp32" (default), "amp_bf16"/"amp_fp16" (fp32 weights, autocast),
	// "mixed_bf16"/"mixed_fp16" (16-bit weights + fp32 master copy and fp32
	// gradients, as DeepSpeed/Megatron), "bf16"/"fp16" (pure 16-bit, no master
	// copy), "fp8" (bf16 weights + fp32 master, fp8 matmuls).
	Precision     string `json:"precision,omitempty"`
	WeightsDType  DType  `json:"weights_dtype,omitempty"`  // persistent parameters
	ComputeDType  DType  `json:"compute_dtype,omitempty"`  // matmuls and activations
	Autocast      bool   `json:"autocast,omitempty"`       // torch.autocast casts ops while weights stay in WeightsDType
	MasterWeights DType  `json:"master_weights,omitempty"` // extra copy of trainable params for the update; unset = none
	GradsDType    DType  `json:"grads_dtype,omitempty"`    // persistent (accumulated) gradients; default: trainable params' dtype

	// Optimizer: adamw (default), adam, sgd, sgd_momentum, adafactor, lion,
	// adamw_8bit, adam_8bit, paged_adamw, paged_adamw_8bit, adamw_4bit, none
	// (forward and backward only), or custom (CustomStateBytes per param).
	Optimizer           string  `json:"optimizer,omitempty"`
	OptimizerStateDType DType   `json:"optimizer_state_dtype,omitempty"` // default: fp32 with a master copy or fp32 params, else the params' dtype (torch zeros_like)
	OptimizerImpl       string  `json:"optimizer_impl,omitempty"`        // foreach (default, PyTorch on CUDA), fused, for_loop
	OptimizerInBackward bool    `json:"optimizer_in_backward,omitempty"` // step each param during backward, free its grad at once
	CustomStateBytes    float64 `json:"custom_state_bytes,omitempty"`    // bytes per trainable parameter, optimizer "custom"

	// Checkpointing: none (default), selective (recompute attention internals,
	// Korthikanti et al. 2022 §4.2), full (keep each block's input), op
	// (torchtitan's op-level selective checkpointing: keep the outputs of
	// every other matmul and of the fused attention kernels, recompute the
	// rest; BlockActivations.SavedOp). CheckpointEvery k > 1 checkpoints
	// every k-th block only.
	Checkpointing   Checkpointing `json:"grad_checkpointing,omitempty"`
	CheckpointEvery int           `json:"checkpoint_every,omitempty"`
	// CheckpointEarlyStop is torch.utils.checkpoint's early_stop for the
	// checkpointed blocks: true ends a block's recomputation once its last
	// saved tensor exists (torch's default), false runs the whole block
	// again, its last ops' outputs too (checkpoint_early_stop.go). Unset:
	// the framework's — torchtitan's release (off from 0.2.0), torch's
	// default elsewhere. transformers hands it to torch in
	// gradient_checkpointing_kwargs ({"early_stop": false}); torchtitan
	// 0.2.x reads activation_checkpoint.early_stop.
	CheckpointEarlyStop *bool `json:"checkpoint_early_stop,omitempty"`
	// SelectiveACOption is torchtitan's selective_ac_option for its
	// grad_checkpointing "selective": "op" (op-level) or a block
	// frequency N (every N-th block checkpointed); default "2", as
	// torchtitan's own (vocabulary.go).
	SelectiveACOption string `json:"selective_ac_option,omitempty"`
	// RecomputeMethod is Megatron-LM's --recompute-method for full
	// checkpointing, with RecomputeNumLayers (--recompute-num-layers,
	// default 1): "uniform" checkpoints groups of that many consecutive
	// blocks, keeping only each group's input and recomputing the whole
	// group when its backward begins; "block" checkpoints the first that
	// many blocks of each pipeline chunk and keeps the others' activations
	// (megatron/core/transformer/transformer_block.py _checkpointed_forward).
	// The allocator replay checkpoints a uniform group's blocks one by one.
	RecomputeMethod    string `json:"recompute_method,omitempty"`
	RecomputeNumLayers int    `json:"recompute_num_layers,omitempty"`

	// Attention: sdpa (default; fused kernels keep O(s) statistics), flash2,
	// flash3, memory_efficient, or eager (materialised s×s scores).
	Attention string `json:"attention,omitempty"`
	// Dropout overrides the model's dropout probabilities (hidden and
	// attention); nil keeps the family's defaults (BERT/GPT-2 0.1, OPT 0.1 on
	// hidden states, Llama-style 0).
	Dropout *float64 `json:"dropout,omitempty"`

	// Trainable: full (default), lora, or frozen (inference-like backward
	// through adapters only). LoRA configures the adapters.
	Trainable string `json:"trainable,omitempty"`
	LoRA      *LoRA  `json:"lora,omitempty"`
	// QuantizedBase stores the frozen base's linear layers quantized (QLoRA:
	// nf4). QuantizedModules: all_linear_except_lm_head (default) or all_linear.
	QuantizedBase    Quant  `json:"quantized_base,omitempty"`
	QuantizedModules string `json:"quantized_modules,omitempty"`
	// Bitsandbytes is the bitsandbytes release running a 4-bit base, e.g.
	// "0.41.1"; empty means vram.Bitsandbytes. Before 0.43.2 each 4-bit
	// matmul kept its input for backward (fourbit.go).
	Bitsandbytes string `json:"bitsandbytes,omitempty"`
	// KbitPrep: PEFT's prepare_model_for_kbit_training runs on the
	// quantized base, as the QLoRA recipe's scripts call it: every weight
	// it leaves unquantized turns fp32 (kbitprep.go).
	KbitPrep bool `json:"kbit_prep,omitempty"`
	// NCCL is the NCCL release the run's process groups use, e.g.
	// "2.21.5"; empty means vram.CurrentNCCL (torch 2.15's). NCCLMemory,
	// when set, is NCCL's device memory per GPU as measured on the
	// cluster, in place of the engine's count (nccl.go).
	NCCL       string `json:"nccl,omitempty"`
	NCCLMemory Bytes  `json:"nccl_memory,omitempty"`
	// OtherProcesses are the processes beside the training process that
	// hold a CUDA context of their own on each of its GPUs (an inference
	// engine colocated in its own process, Ray workers or a profiler that
	// touch the GPU): nvidia-smi counts each one's context (the "~4 GB
	// unexplained" of verl#5979), and Replay adds them to device-used.
	OtherProcesses int `json:"other_processes,omitempty"`

	// Loss: cross_entropy (default; logits upcast to fp32 as transformers
	// does), chunked_cross_entropy (litgpt/torchtune chunks), fused (never
	// materialises logits), chunked_head (the output projection and the
	// loss chunk by chunk, each chunk's backward at once: torchtitan's
	// ChunkedLossWrapper, loss_chunked.go), logits_sum, classification.
	Loss string `json:"loss,omitempty"`
	// LossChunks is chunked_head's number of token chunks (default 8,
	// ChunkedLossWrapper's num_chunks).
	LossChunks int `json:"loss_chunks,omitempty"`
	// LogProbs makes the loss a post-training one over per-token
	// log-probabilities (logprobs.go): GRPO's, RLOO's and DPO's. The
	// post-training planner sets it; Loss must then be unset.
	LogProbs *LogProbLoss `json:"log_probs,omitempty"`
	// Compile: torch.compile, each block compiled on its own (as
	// torchtitan and torchtune do): a block saves what Inductor's
	// partitioner keeps (BlockActivations.SavedCompiled, compile.go), and
	// the compiled loss fuses log-softmax into its kernels and keeps only
	// the logits and a per-token logsumexp.
	Compile bool `json:"compile,omitempty"`
	// CompileLoss: the loss is compiled too (fused log-softmax, logsumexp
	// kept); unset, it follows Compile. torchtitan names the two
	// compile.components "model" and "loss" (since 08b8b244f, 2025-08-20);
	// its loss ran eager from e8977b007 ("turning off compile on loss
	// function", 2024-12-18) until bbb1b616e (2025-04-02).
	CompileLoss *bool `json:"compile_loss,omitempty"`
	// AllocConf is the run's PYTORCH_CUDA_ALLOC_CONF, e.g.
	// "expandable_segments:True"; empty: what the framework's launcher sets
	// (allocconf.go). Training.Replay uses it unless its options name one.
	AllocConf string `json:"alloc_conf,omitempty"`
	// ActivationOffloading keeps the blocks' saved tensors in pinned host
	// memory between forward and backward, as torchtune's
	// enable_activation_offloading and TRL's activation_offloading do
	// (activation_offload.go).
	ActivationOffloading bool `json:"activation_offloading,omitempty"`
	// OffloadStash is how many checkpointed blocks' inputs the forward keeps
	// on the GPU under activation offloading: 0 means torchtune's
	// max_fwd_stash_size (5); Unsloth's offloaded checkpointing keeps the
	// last block's (1).
	OffloadStash int `json:"offload_stash,omitempty"`
	// Float8 is torchao's float8 training of the block linears (float8.go):
	// "tensorwise" (torchao's default recipe), "rowwise" or
	// "rowwise_with_gw_hp" (the weight's gradient in bf16); empty or "none"
	// is off. The saved activations stay bf16; the float8 copies are
	// transient. Float8AllGather all-gathers FSDP2's weights in float8
	// (enable_fsdp_float8_all_gather, tensorwise).
	Float8          string `json:"float8,omitempty"`
	Float8AllGather bool   `json:"float8_all_gather,omitempty"`
	// Framework picks documented defaults where frameworks differ: hf_trainer,
	// accelerate, litgpt, torchtune, torchtitan, deepspeed, megatron,
	// plain_pytorch (default). vram/README.md's "Framework defaults" lists them
	// with their sources.
	Framework Framework `json:"framework,omitempty"`
	// UseReentrant is gradient_checkpointing_kwargs' use_reentrant, which
	// the HF Trainer hands to transformers' gradient_checkpointing_enable:
	// unset, transformers' default (True before 5.0, 4.57.6
	// modeling_utils.py:3692; False from 5.0, 5.23.0 l.3149). The engine's
	// checkpointing rules are the non-reentrant ones its traces measured;
	// a family that fails under reentrant checkpointing is refused there.
	UseReentrant *bool `json:"use_reentrant,omitempty"`
	// Transformers is the transformers release whose modeling code runs the
	// model (the HF Trainer and plain PyTorch loops), e.g. "4.46.3"; empty
	// means the pinned release the engine's measurements were taken with
	// (vram.Transformers). A family's recipe records which behaviour belongs
	// to which releases.
	Transformers string `json:"transformers,omitempty"`
	// Torchtitan is the torchtitan release that runs the plan (framework
	// torchtitan), e.g. "0.2.2"; empty means the current one
	// (vram.CurrentTorchtitan; torchtitan_releases.go).
	Torchtitan string `json:"torchtitan,omitempty"`
	// ExpertImbalance is how many times the balanced share of routed tokens
	// the busiest expert on a rank receives (MoE models; 0 or 1: balanced).
	// The routed total is fixed, so it moves only the backward's per-expert
	// peak, where that expert's saved tensors and gradients are in flight.
	// Under torchtitan's grouped GEMMs (torchtitan_moe.go) with expert
	// parallelism it is the busiest rank's received rows instead:
	// N·(e−1+x)/e for e local experts.
	ExpertImbalance float64 `json:"expert_imbalance,omitempty"`

	// KeepGrads: zero_grad(set_to_none=False) keeps gradient buffers between
	// steps (PyTorch < 2.0 default and HF Trainer of 2022).
	KeepGrads bool `json:"keep_grads,omitempty"`
	// RetainGradCopies models the pitfall of keeping a second copy of every
	// gradient (e.g. out-of-place clipping that stores clipped copies).
	RetainGradCopies bool `json:"retain_grad_copies,omitempty"`

	// Images is the number of images in each sequence of a
	// vision-language model (default 1); their tokens are part of
	// seq_len. VisionTower: frozen (default, as LLaVA's recipes) or
	// trainable (with trainable "full"); the projector trains with the
	// language model.
	Images      int    `json:"images,omitempty"`
	VisionTower string `json:"vision_tower,omitempty"`

	Parallel Parallel `json:"parallel,omitempty"`

	// asTower: the run of a part of a multimodal model: its vision tower
	// (towerPlan), or its language model's text-only forward (a serving
	// engine's CUDA-graph capture, Inference.Estimate with towerOff).
	asTower bool
	// servingEngine: a serving engine's forward (vLLM's profile run, say)
	// runs the model with the engine's own kernels, not transformers'
	// modeling code: flash attention, fused MoE (recipe.fusedMoE).
	servingEngine bool
	// generate: transformers' generate (inference.go's prefill and decode
	// steps), which a family's servingOnly refuses even where its
	// training is modelled (trainsAt5).
	generate bool
	// towerTP is the tensor-parallel degree a serving engine splits the
	// vision tower's and the projector's weights over (vLLM's default
	// mm_encoder_tp_mode "weights", vision_tp.go); 0 or 1: replicated.
	towerTP int
}

// LoRA configures low-rank adapters (Hu et al. 2021): for each targeted
// linear W (out×in), A (rank×in) and B (out×rank) are trained.
type LoRA struct {
	Rank    int      `json:"rank"`
	Alpha   float64  `json:"alpha,omitempty"`
	Dropout float64  `json:"dropout,omitempty"`
	Targets []string `json:"targets"`         // q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head, or "all_linear"
	DType   DType    `json:"dtype,omitempty"` // adapter weights; default the compute dtype (PEFT upcasts to fp32: set fp32)
}

// resolved is a Training with defaults applied; every estimate works on one.
type resolved struct {
	Training
	m Model
	// arena, when set, lends the op inventories' builders (an estimate's;
	// pools.go).
	arena  *builderArena
	dp     int // data-parallel ranks that shard (ZeRO) or replicate
	tp, pp int
	// stageList is the pipeline stages (stages), listed once resolve is
	// done; kinds is each block's kind (Model.blockKind), as often asked.
	stageList []stage
	kinds     []int
	cp, ep    int
	shard     int // ranks that ZeRO/FSDP shards over
	dropHid   float64
	dropAttn  float64
	frozen    bool // base weights frozen (LoRA/adapter)
	// ckptOffset shifts which blocks CheckpointEvery checkpoints: block l
	// when (l + ckptOffset) % CheckpointEvery == 0 (torchtitan counts from 1).
	ckptOffset int
	stateSize  float64
	images     int             // images per sequence (vision-language models)
	tower      *resolved       // the vision tower's run (vision-language models)
	lib        libVersion      // the transformers release
	rec        recipe          // the family's modeling code under lib
	notes      []string        // what runs differently from the plan (TrainingEstimate.Notes)
	ds         deepSpeed       // DeepSpeed's ZeRO settings, when DeepSpeed runs it
	q4         fourBit         // how a 4-bit base runs its matmuls (fourbit.go)
	alloc      AllocatorConfig // the caching allocator the run sets (allocconf.go)
	// earlyStop: a checkpointed block's recomputation ends with its last
	// saved tensor (checkpoint_early_stop.go).
	earlyStop bool
}

// Validate reports the first invalid field, naming it and the rule.
func (t Training) Validate() error {
	_, err := t.resolve()
	return err
}

// The words of the training plan's enumerated fields (enum: their errors
// list them).
var (
	knownOptimizers  = enum("optimizer", "adamw", "adam", "sgd", "sgd_momentum", "adafactor", "lion", "adamw_8bit", "adam_8bit", "paged_adamw", "paged_adamw_8bit", "adamw_4bit", "custom", "none")
	optimizerImpls   = enum("optimizer_impl", "foreach", "fused", "for_loop")
	checkpointings   = enum[Checkpointing]("grad_checkpointing", "none", "selective", "full", "op", "memory_budget")
	attentions       = enum("attention", "sdpa", "flash2", "flash3", "memory_efficient", "eager")
	trainables       = enum("trainable", "full", "lora", "adapter", "frozen")
	loraModules      = enum("targets", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head", "all_linear")
	quantizedModules = enum("quantized_modules", "all_linear", "all_linear_except_lm_head")
	losses           = enum("loss", "cross_entropy", "chunked_cross_entropy", "chunked_head", "fused", "logits_sum", "classification")
	precisions       = enum("precision", "fp32", "tf32", "amp_bf16", "amp_fp16", "mixed_bf16", "mixed_fp16", "bf16", "fp16", "fp8")
)

func oneOf[S ~string](field string, v S, known ...S) error {
	for _, k := range known {
		if v == k {
			return nil
		}
	}
	words := make([]string, len(known))
	for i, k := range known {
		words[i] = string(k)
	}
	return fmt.Errorf("unknown %s %q; known: %s%s", field, v, strings.Join(words, ", "), didYouMean(string(v), words))
}

// servingOnly refuses what is not modelled of a family whose serving
// plans alone are (family.servingOnly): its training, unless it is a
// transformers 5 model whose traces hold (trainsAt5), and transformers'
// generate.
func (t Training) servingOnly(m Model) error {
	f := lookupFamily(m.Family)
	switch {
	case f == nil || f.servingOnly == "" || t.servingEngine:
		return nil
	case t.generate && trainsAt5(m):
		return generateOnlyError{m.Family}
	case !trainsAt5(m):
		return fmt.Errorf("model: %s: %w: %s; its serving plans (vLLM, SGLang) are modelled", m.Family, ErrServingOnly, f.servingOnly)
	}
	return nil
}

func (t Training) resolve() (resolved, error) {
	r := resolved{Training: t}
	if err := t.Model.validate(t.asTower); err != nil {
		return r, err
	}
	r.m = t.Model.Normalize()
	if err := t.servingOnly(r.m); err != nil {
		return r, err
	}
	if o := t.Model.Origin; o != nil {
		r.notes = append(r.notes, o.Notes...)
	}
	if err := r.resolveShape(t); err != nil {
		return r, err
	}
	if err := r.resolvePrecision(); err != nil {
		return r, err
	}
	if err := r.resolveKbitPrep(); err != nil {
		return r, err
	}
	if err := r.resolveNCCL(); err != nil {
		return r, err
	}
	if err := r.resolveStep(t); err != nil {
		return r, err
	}
	if err := r.resolveTrainable(t); err != nil {
		return r, err
	}
	if err := r.resolveRecompute(); err != nil {
		return r, err
	}
	if err := r.resolveFourBit(); err != nil {
		return r, err
	}
	if err := r.resolveAllocConf(); err != nil {
		return r, err
	}
	if err := r.resolveFrameworkWords(t); err != nil {
		return r, err
	}
	if err := r.resolveParallel(); err != nil {
		return r, err
	}
	if err := r.resolveActivationOffload(); err != nil {
		return r, err
	}
	if err := r.resolveDeepSpeed(); err != nil {
		return r, err
	}
	if err := r.resolveMegatron(); err != nil {
		return r, err
	}
	if err := r.resolveFloat8(); err != nil {
		return r, err
	}
	if err := r.bound(); err != nil {
		return r, err
	}
	if err := r.applies(t); err != nil {
		return r, err
	}
	if err := r.resolveVision(); err != nil {
		return r, err
	}
	if err := r.resolveExpertImbalance(t); err != nil {
		return r, err
	}
	if err := r.resolveSSM(); err != nil {
		return r, err
	}
	if err := r.resolveShortConv(); err != nil {
		return r, err
	}
	if err := r.resolveMamba1(); err != nil {
		return r, err
	}
	if err := r.resolveDeltaNet(); err != nil {
		return r, err
	}
	if err := r.resolveKDA(); err != nil {
		return r, err
	}
	if err := r.resolveCompressed(); err != nil {
		return r, err
	}
	if err := r.resolveLightning(); err != nil {
		return r, err
	}
	if err := r.resolveBlockSparse(); err != nil {
		return r, err
	}
	if err := r.resolveAudio(); err != nil {
		return r, err
	}
	r.stageList, r.kinds = r.listStages(), r.listKinds()
	return r, nil
}

// listKinds lists each block's kind.
func (r *resolved) listKinds() []int {
	kinds := make([]int, r.m.Layers)
	for l := range kinds {
		kinds[l] = r.m.blockKind(l)
	}
	return kinds
}

// kind is block l's kind (resolve's list; worked out where it has none).
func (r *resolved) kind(l int) int {
	if l < len(r.kinds) {
		return r.kinds[l]
	}
	return r.m.blockKind(l)
}

// resolveShape checks the batch's shape: micro-batch, sequence lengths,
// accumulation.
func (r *resolved) resolveShape(t Training) error {
	if t.MicroBatch < 1 || t.MicroBatch > MaxTokens {
		return fmt.Errorf("micro_batch must be in [1, %d], got %d", MaxTokens, t.MicroBatch)
	}
	if t.SeqLen < 1 || t.SeqLen > MaxTokens {
		return fmt.Errorf("seq_len must be in [1, %d], got %d", MaxTokens, t.SeqLen)
	}
	if _, err := boundedProduct(maxBatchTokens, "micro_batch × seq_len (tokens per step)", int64(t.MicroBatch), int64(t.SeqLen)); err != nil {
		return err
	}
	if t.DecoderSeqLen != 0 && !r.m.EncoderDecoder() {
		return fmt.Errorf("decoder_seq_len applies to encoder-decoder models (families %s), not %q",
			strings.Join(familiesWhere(func(f *family) bool { return f.kind == encoderDecoder }), ", "), r.m.Family)
	}
	if t.DecoderSeqLen < 0 || t.DecoderSeqLen > MaxTokens {
		return fmt.Errorf("decoder_seq_len must be in [1, %d], got %d", MaxTokens, t.DecoderSeqLen)
	}
	if err := r.resolveAudioShape(); err != nil {
		return err
	}
	if r.m.EncoderDecoder() && r.DecoderSeqLen == 0 {
		r.DecoderSeqLen = r.SeqLen
	}
	if t.GradAccum < 0 || t.GradAccum > maxDegree {
		return fmt.Errorf("grad_accum must be in [1, %d], got %d", maxDegree, t.GradAccum)
	}
	if r.GradAccum == 0 {
		r.GradAccum = 1
	}
	return nil
}

// resolveStep reads the library release and the step's settings:
// optimizer, checkpointing, attention.
func (r *resolved) resolveStep(t Training) error {
	lib, note, err := transformersOf(r.m, t.Transformers)
	if t.servingEngine {
		note = "" // the engine's kernels run it, not transformers'
		lib, err = parseVersion(t.Transformers)
	}
	if err != nil {
		return err
	}
	if note != "" {
		r.notes = append(r.notes, note)
	}
	if lib[0] >= 5 && !t.asTower && !t.servingEngine {
		// transformers5.go: the 4.57 rules, for the families 5.23 left
		// unchanged, with a note citing the trace.
		note, err := transformers5Step(r.m, lib)
		if err != nil {
			return err
		}
		r.notes = append(r.notes, note)
	}
	// The family files' recipes key on lib: a 5.x release gets the 4.57
	// rules but where a recipe says otherwise for 5.x (transformers5.go).
	r.lib, r.rec = lib, r.m.recipeOf(lib)
	if t.servingEngine {
		r.rec = recipe{fusedMoE: true}
	}
	if r.Optimizer == "" {
		r.Optimizer = "adamw"
	}
	if err := oneOf("optimizer", r.Optimizer, knownOptimizers...); err != nil {
		return err
	}
	if r.Optimizer == "custom" && (t.CustomStateBytes <= 0 || t.CustomStateBytes > 1024) {
		return fmt.Errorf("custom_state_bytes must be in (0, 1024] for optimizer \"custom\", got %v", t.CustomStateBytes)
	}
	if r.OptimizerImpl == "" {
		r.OptimizerImpl = "foreach"
	}
	if err := oneOf("optimizer_impl", r.OptimizerImpl, optimizerImpls...); err != nil {
		return err
	}
	if r.Checkpointing == "" {
		r.Checkpointing = CheckpointNone
	}
	if err := oneOf("grad_checkpointing", r.Checkpointing, checkpointings...); err != nil {
		return err
	}
	if t.CheckpointEvery < 0 || t.CheckpointEvery > r.m.Layers {
		return fmt.Errorf("checkpoint_every must be in [0, layers = %d], got %d", r.m.Layers, t.CheckpointEvery)
	}
	if r.CheckpointEvery == 0 {
		r.CheckpointEvery = 1
	}
	if r.Attention == "" {
		r.Attention = "sdpa"
	}
	if err := oneOf("attention", r.Attention, attentions...); err != nil {
		return err
	}
	return nil
}

// resolveTrainable reads what trains (LoRA, a quantized base), the loss
// and the framework.
func (r *resolved) resolveTrainable(t Training) error {
	if r.Trainable == "" {
		r.Trainable = "full"
		if t.LoRA != nil {
			r.Trainable = "lora"
		}
	}
	if err := oneOf("trainable", r.Trainable, trainables...); err != nil {
		return err
	}
	r.frozen = r.Trainable != "full"
	if r.Trainable == "lora" {
		if t.LoRA == nil {
			return fmt.Errorf("trainable \"lora\" needs a lora object (rank, targets)")
		}
		if t.LoRA.Rank < 1 || t.LoRA.Rank > 1<<16 {
			return fmt.Errorf("lora.rank must be in [1, 65536], got %d", t.LoRA.Rank)
		}
		if len(t.LoRA.Targets) == 0 {
			return fmt.Errorf("lora.targets must name at least one module (q_proj, v_proj, …, or all_linear)")
		}
		for _, tg := range t.LoRA.Targets {
			if err := oneOf("lora target", tg, loraModules...); err != nil {
				return err
			}
		}
		if t.LoRA.Dropout < 0 || t.LoRA.Dropout >= 1 {
			return fmt.Errorf("lora.dropout must be in [0, 1), got %v", t.LoRA.Dropout)
		}
	}
	if t.QuantizedBase.Quantized() && !r.frozen {
		return fmt.Errorf("quantized_base %s needs a frozen base (trainable \"lora\"); quantized weights cannot be trained directly", t.QuantizedBase.DType)
	}
	if t.QuantizedBase.DType != DTypeUnset && !t.QuantizedBase.Quantized() {
		return fmt.Errorf("quantized_base.dtype %s is not a quantized format; want nf4, fp4, int8 or int4", t.QuantizedBase.DType)
	}
	if r.QuantizedModules == "" {
		r.QuantizedModules = "all_linear_except_lm_head"
	}
	if err := oneOf("quantized_modules", r.QuantizedModules, quantizedModules...); err != nil {
		return err
	}
	if r.Loss == "" {
		r.Loss = "cross_entropy"
		if c, _ := r.m.headClasses(); c > 0 {
			r.Loss = "classification"
		}
	}
	if err := oneOf("loss", r.Loss, losses...); err != nil {
		return err
	}
	if err := r.checkLossChunks(); err != nil {
		return err
	}
	if r.LogProbs != nil {
		if r.Loss != "cross_entropy" || r.m.Encoder() || r.m.EncoderDecoder() || r.m.Vision != nil {
			return fmt.Errorf("log_probs: a log-probability loss replaces the causal LM's cross-entropy; loss %q on a %s model cannot take it", r.Loss, r.m.Family)
		}
		if err := r.LogProbs.check(r.SeqLen); err != nil {
			return err
		}
	}
	if r.Framework == "" {
		r.Framework = FrameworkPlainPyTorch
	}
	if err := oneOf("framework", r.Framework, Frameworks...); err != nil {
		return err
	}
	return nil
}

// resolveFrameworkWords applies the framework's defaults and words and
// the dropout.
func (r *resolved) resolveFrameworkWords(t Training) error {
	if r.Framework == FrameworkMegatron {
		// Megatron-LM's DistributedDataParallel allocates every
		// parameter's main_grad in one grad buffer when it wraps the model
		// and zeroes it in place each iteration (megatron/core/distributed/
		// param_and_grad_buffer.py:1190, _ParamAndGradBuffer: grad_data =
		// torch.zeros(…); zero_grad_buffer): gradients never leave.
		r.KeepGrads = true
	}
	if err := r.resolveCheckpointWords(t); err != nil {
		return err
	}
	if err := r.followLibrary(t); err != nil {
		return err
	}
	if t.Dropout != nil && (*t.Dropout < 0 || *t.Dropout >= 1) {
		return fmt.Errorf("dropout must be in [0, 1), got %v", *t.Dropout)
	}
	if f := lookupFamily(r.m.Family); f != nil {
		r.dropHid, r.dropAttn = f.dropout[0], f.dropout[1]
	}
	if t.Dropout != nil {
		r.dropHid, r.dropAttn = *t.Dropout, *t.Dropout
	}
	return nil
}

// resolveExpertImbalance checks expert_imbalance against the experts a
// rank holds.
func (r *resolved) resolveExpertImbalance(t Training) error {
	if t.ExpertImbalance != 0 {
		if r.m.Experts == 0 {
			return fmt.Errorf("expert_imbalance applies to mixture-of-experts models; %s has no routed experts", r.m.Name)
		}
		if e := r.expertsPerRank(); !(t.ExpertImbalance >= 1 && t.ExpertImbalance <= float64(e)) {
			return fmt.Errorf("expert_imbalance must be between 1 and the experts per rank (%d), got %v", e, t.ExpertImbalance)
		}
	}
	return nil
}

// followLibrary makes the plan run what transformers' modeling code of the
// family does under the plan's release, noting each change: attention
// implementations the family lacks fall back to eager, and checkpointing the
// family ignores is off.
func (r *resolved) followLibrary(t Training) error {
	if !r.runsTransformers() || r.servingEngine {
		return nil
	}
	f := lookupFamily(r.m.Family)
	if f == nil {
		return nil
	}
	offered := f.attention
	if r.rec.attention != nil {
		offered = r.rec.attention // the release's own (recipe.attention)
	}
	if offered != nil && !slices.Contains(offered, r.Attention) {
		if t.Attention != "" {
			// Asked for by name, from_pretrained refuses it
			// (modeling_utils.py _check_and_adjust_attn_implementation).
			what := map[string]string{"sdpa": "an attention implementation through torch.nn.functional.scaled_dot_product_attention", "flash2": "Flash Attention 2.0", "flash3": "Flash Attention 3"}[r.Attention]
			if what == "" {
				what = fmt.Sprintf("the %s attention implementation", r.Attention)
			}
			return fmt.Errorf("attention %q: transformers %s raises ValueError for %s: it does not support %s (the family offers %s); use attention %q, or leave it unset to get what transformers picks",
				r.Attention, r.lib, f.name, what, strings.Join(offered, " and "), offered[0])
		}
		// Unset, transformers tries sdpa and falls back to what the family
		// has, without a word.
		r.notes = append(r.notes, fmt.Sprintf("attention: transformers %s offers %s only %s attention; with attn_implementation unset it runs eager, and so does this estimate",
			r.lib, f.name, strings.Join(offered, " and ")))
		r.Attention = "eager"
	}
	if r.rec.autocastError != "" && r.Autocast && r.WeightsDType != r.ComputeDType {
		return fmt.Errorf("precision: under autocast with %s weights and %s compute, transformers %s raises RuntimeError in %s: %s; train with weights in the compute dtype (precision bf16) or fp32",
			r.WeightsDType, r.ComputeDType, r.lib, f.name, r.rec.autocastError)
	}
	if r.rec.noCheckpointing && r.Checkpointing != CheckpointNone {
		r.notes = append(r.notes, fmt.Sprintf("grad_checkpointing: gradient_checkpointing_enable() has no effect on %s in transformers %s; the blocks keep all their activations, as in this estimate",
			f.name, r.lib))
		r.Checkpointing = CheckpointNone
	}
	return nil
}

// Bounds on a run's counts (see checked.go): a sequence of up to 64M
// tokens (MaxTokens, which importers check too), 4G tokens per
// micro-batch, and parallel degrees up to 2^20.
const (
	MaxTokens      = 1 << 26
	maxBatchTokens = 1 << 32
	maxDegree      = 1 << 20
)

// bound rejects, naming the fields, a plan whose largest tensors would not
// be representable: the eager attention's score maps, the logits, the widest
// activation of a block, the input pixels.
func (r *resolved) bound() error {
	m := r.m
	tokens := r.tokens()
	width := m.widestActivation()
	// A block holds a few dozen tensors of up to tokens × width fp32 values.
	if _, err := boundedProduct(int64(maxPlanBytes)/256, "micro_batch × seq_len × the widest activation (hidden, ffn or heads × head_dim)", tokens, width); err != nil {
		return err
	}
	if err := r.boundRecurrent(tokens); err != nil {
		return err
	}
	if m.Head == "lm" {
		if _, err := boundedProduct(int64(maxPlanBytes)/64, "micro_batch × seq_len × vocab (the logits)", tokens, int64(m.Vocab)); err != nil {
			return err
		}
	}
	if r.Attention == "eager" {
		seq := int64(r.SeqLen)
		if m.Image != nil {
			seq = int64(m.Image.Tokens())
		}
		if _, err := boundedProduct(int64(maxPlanBytes)/64, `attention "eager": micro_batch × heads × seq_len × seq_len (the score maps)`, int64(r.MicroBatch), int64(m.Heads), seq, seq); err != nil {
			return err
		}
	}
	if im := m.Image; im != nil {
		if _, err := boundedProduct(int64(maxPlanBytes)/64, "micro_batch × image channels × size² (the input pixels)", int64(r.MicroBatch), int64(im.Channels), int64(im.Size), int64(im.Size)); err != nil {
			return err
		}
		if _, err := boundedProduct(int64(maxPlanBytes)/256, "micro_batch × image tokens × the widest activation", int64(r.MicroBatch), int64(im.Tokens()), width); err != nil {
			return err
		}
	}
	if _, err := boundedProduct(maxDegree*16, "parallel.dp × tp × pp × cp (GPUs)", int64(r.dp), int64(r.tp), int64(r.pp), int64(r.cp)); err != nil {
		return err
	}
	return nil
}

// applies rejects settings that the rest of the plan makes meaningless, so
// a plan never silently ignores what its author wrote.
// t is the plan as written, before defaults.
func (r *resolved) applies(t Training) error {
	if t.LoRA != nil && r.Trainable != "lora" {
		return fmt.Errorf("lora is set but trainable is %q: adapters are trained only with trainable \"lora\" (drop the lora object or set trainable \"lora\")", r.Trainable)
	}
	if t.QuantizedModules != "" && !t.QuantizedBase.Quantized() {
		return fmt.Errorf("quantized_modules applies to a quantized base; set quantized_base too, or drop it")
	}
	if t.CustomStateBytes != 0 && r.Optimizer != "custom" {
		return fmt.Errorf("custom_state_bytes applies to optimizer \"custom\", not %q", r.Optimizer)
	}
	if t.OptimizerStateDType != DTypeUnset && (r.Optimizer == "none" || r.Optimizer == "sgd") {
		return fmt.Errorf("optimizer_state_dtype: optimizer %q keeps no state", r.Optimizer)
	}
	if t.OptimizerImpl != "" && r.Optimizer == "none" {
		return fmt.Errorf("optimizer_impl applies to an optimizer step; optimizer is \"none\"")
	}
	if t.CheckpointEvery > 1 && r.Checkpointing == CheckpointNone {
		return fmt.Errorf("checkpoint_every = %d applies to activation checkpointing; grad_checkpointing is \"none\"", t.CheckpointEvery)
	}
	p := t.Parallel
	if p.VirtualStages > 1 && !p.PPSchedule.interleaved() {
		return fmt.Errorf("parallel.virtual_stages applies to pp_schedule \"interleaved_1f1b\" or \"interleaved_zb\", not %q", p.PPSchedule)
	}
	if p.PPMicrobatches > 1 && r.pp == 1 {
		return fmt.Errorf("parallel.pp_microbatches applies to pipeline parallelism (pp > 1)")
	}
	return nil
}

// resolvePrecision fills the dtypes from the Precision shorthand.
func (r *resolved) resolvePrecision() error {
	var w, c, master, g DType
	auto := false
	switch r.Precision {
	case "", "fp32", "tf32":
		w, c, g = FP32, FP32, FP32
	case "amp_bf16", "amp_fp16":
		w, c, g, auto = FP32, BF16, FP32, true
		if r.Precision == "amp_fp16" {
			c = FP16
		}
	case "mixed_bf16", "mixed_fp16":
		w, c, master, g = BF16, BF16, FP32, FP32
		if r.Precision == "mixed_fp16" {
			w, c, g = FP16, FP16, FP16
		}
	case "bf16", "fp16":
		w, c, g = BF16, BF16, BF16
		if r.Precision == "fp16" {
			w, c, g = FP16, FP16, FP16
		}
		if r.Framework == FrameworkMegatron {
			// Megatron's --bf16/--fp16 train 16-bit parameters with fp32 main
			// parameters in the optimizer (Float16OptimizerWithFloat16Params)
			// and, under bf16, fp32 main gradients
			// (megatron/training/arguments.py: bf16 sets
			// accumulate_allreduce_grads_in_fp32).
			master = FP32
			if r.Precision == "bf16" {
				g = FP32
			}
		}
	case "fp8":
		w, c, master, g = BF16, FP8E4M3, FP32, FP32
	default:
		return oneOf("precision", r.Precision, precisions...)
	}
	if r.WeightsDType == DTypeUnset {
		r.WeightsDType = w
	}
	if r.ComputeDType == DTypeUnset {
		r.ComputeDType = c
		if !r.Autocast && r.Precision == "" && r.WeightsDType.IsFloat() {
			r.ComputeDType = r.WeightsDType
		}
	}
	if r.Precision != "" && !r.Autocast {
		r.Autocast = auto
	}
	if r.MasterWeights == DTypeUnset {
		r.MasterWeights = master
	}
	if r.GradsDType == DTypeUnset {
		r.GradsDType = g
		if r.Precision == "" {
			r.GradsDType = r.WeightsDType
		}
	}
	for _, f := range []struct {
		name string
		d    DType
	}{{"weights_dtype", r.WeightsDType}, {"compute_dtype", r.ComputeDType}, {"grads_dtype", r.GradsDType}} {
		if !f.d.IsFloat() {
			return fmt.Errorf("%s must be a float type (fp32, bf16, fp16, fp8_*), got %s; quantized bases go in quantized_base", f.name, f.d)
		}
	}
	if r.MasterWeights != DTypeUnset && !r.MasterWeights.IsFloat() {
		return fmt.Errorf("master_weights must be a float type or unset, got %s", r.MasterWeights)
	}
	if r.WeightsDType == TF32 {
		r.WeightsDType = FP32
	}
	if r.ComputeDType == TF32 {
		r.ComputeDType = FP32
	}
	return nil
}

// tokens is micro_batch × seq_len on one rank before sequence sharding.
func (r *resolved) tokens() int64 {
	return int64(r.MicroBatch) * int64(max(r.SeqLen, r.DecoderSeqLen))
}

// trainableDType is the storage of the parameters the optimizer updates.
func (r *resolved) trainableDType() DType {
	if r.frozen && r.LoRA != nil && r.LoRA.DType != DTypeUnset {
		return r.LoRA.DType
	}
	return r.WeightsDType
}

// Resolved returns t with every default filled in (the precision shorthand
// expanded into dtypes, the optimizer, attention, parallel degrees …): the
// settings the estimate actually used.
func (t Training) Resolved() (Training, error) {
	r, err := t.resolve()
	if err != nil {
		return Training{}, err
	}
	out := r.Training
	out.Model = r.m
	return out, nil
}

// lossCompiled reports whether the loss runs compiled (Training.CompileLoss).
func (r *resolved) lossCompiled() bool {
	if r.CompileLoss != nil {
		return *r.CompileLoss
	}
	return r.Compile
}

// runsTransformers reports whether the plan's loop runs transformers'
// modeling code: a plain PyTorch loop, accelerate's or the HF Trainer's.
func (r *resolved) runsTransformers() bool { return r.Framework.RunsTransformers() }

// RunsTransformers reports whether framework f's loop runs transformers'
// modeling code (unset is plain PyTorch).
func (f Framework) RunsTransformers() bool {
	return f == "" || f == FrameworkPlainPyTorch || f == FrameworkAccelerate || f == FrameworkHFTrainer
}

// resolveAudioShape checks an audio encoder-decoder's lengths: the encoder
// takes exactly 2 × source_positions frames (modeling_whisper.py:668-672
// WhisperEncoder.forward raises otherwise: "Whisper expects the mel input
// features to be of length …"), the decoder at most max_position tokens
// (modeling_whisper.py:1280-1283: labels longer than max_target_positions
// raise), by default that many.
func (r *resolved) resolveAudioShape() error {
	m := r.m
	if m.MelBins == 0 {
		return nil
	}
	if want := 2 * m.SourcePositions; r.SeqLen != want {
		return fmt.Errorf("seq_len = %d: %s's encoder reads exactly 2 × model.source_positions = %d log-mel frames (transformers pads every input to that)", r.SeqLen, m.Family, want)
	}
	if r.DecoderSeqLen == 0 {
		r.DecoderSeqLen = m.MaxPosition
	}
	if r.DecoderSeqLen > m.MaxPosition {
		return fmt.Errorf("decoder_seq_len = %d: %s's decoder reads at most model.max_position = %d target tokens (max_target_positions)", r.DecoderSeqLen, m.Family, m.MaxPosition)
	}
	return nil
}

// resolveAudio refuses what an audio encoder-decoder's builder does not
// model: a framework other than transformers' own modeling code (litgpt,
// torchtitan and Megatron-LM have no Whisper), and splitting the sequence
// (context or sequence parallelism), which its blocks are not built for.
func (r *resolved) resolveAudio() error {
	m := r.m
	switch {
	case m.MelBins == 0:
		return nil
	case !r.runsTransformers():
		return fmt.Errorf("framework %q: %s is modelled as transformers runs it (plain_pytorch, accelerate, hf_trainer); that framework has no such model", r.Framework, m.Family)
	case r.cp > 1:
		return fmt.Errorf("parallel.cp = %d: %s's blocks are modelled without context parallelism", r.cp, m.Family)
	case r.Parallel.SP:
		return fmt.Errorf("parallel.sp: %s's blocks are modelled without sequence parallelism", m.Family)
	}
	return nil
}
