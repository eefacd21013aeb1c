package vram

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ErrServingOnly is what training and transformers' generate of a family
// whose modeling code the engine's rules do not follow yet fail with
// (family.servingOnly): the family's serving plans are modelled, so a plan
// that a serving engine runs (vLLM, SGLang) is answered by the engine's
// carve alone.
var ErrServingOnly = errors.New("training and transformers' generate are not modelled yet")

// generateOnlyError is ErrServingOnly for transformers' generate alone: a
// transformers 5 model whose training is modelled (trainsAt5).
type generateOnlyError struct{ family string }

func (e generateOnlyError) Error() string {
	return fmt.Sprintf("model: %s: transformers' generate is not modelled yet (its training is, traced at transformers %s); its serving plans (vLLM, SGLang) are modelled", e.family, transformers5String())
}

// Is makes errors.Is(err, ErrServingOnly) hold, as the answer's serving
// fallback asks.
func (e generateOnlyError) Is(target error) bool {
	return target == ErrServingOnly
}

// A family is everything particular to one architecture — a Hugging Face
// model_type — declared in that family's own file, family_<model_type>.go,
// the way transformers keeps one modeling file per family. The engine (the
// tensor inventory, the activation builder, the timeline, the allocator
// replay, inference) works from these declarations, from the model's generic
// fields and from the shared building blocks in layout.go and
// activations.go; no other file names a family (TestFamilyNamesStayHome).
type family struct {
	name   string // model_type
	source string // the transformers modeling file the declarations follow
	// gguf is the family's architecture name in GGUF files
	// (general.architecture, llama.cpp's src/llama-arch.cpp); empty where
	// none is recorded.
	gguf string
	kind familyKind
	// latentAttention: the family's attention may be multi-head latent
	// attention (q_lora_rank, kv_lora_rank, … are its fields).
	latentAttention bool
	// indexer: the family's latent attention has DeepSeek Sparse
	// Attention's lightning indexer (index_heads, index_head_dim; dsa.go).
	indexer bool
	// valueHeadDim: the family's attention has values of a width of
	// their own, model.v_head_dim, beside its q/k head_dim.
	valueHeadDim bool
	// globalAttention: the family's global layers may have heads of
	// another width, fewer key/value heads and no value projection
	// (model.global_head_dim, global_kv_heads, global_k_eq_v).
	globalAttention bool
	// perLayerInputs: the family's models may have per-layer embeddings
	// (model.per_layer_input, per_layer_vocab).
	perLayerInputs bool
	// images: the family's models read images (model.image).
	images bool
	// audio: the family's models read log-mel frames (model.mel_bins,
	// model.source_positions).
	audio bool
	// conformer: the family is an audio encoder of conformer blocks
	// (model.conformer), a multimodal model's audio tower (towerOnly).
	conformer bool
	// seq2seq: an encoder-decoder's pieces outside its blocks where they
	// are not T5's (encdec.go); nil for T5. Its blocks are the family's
	// block.
	seq2seq *seq2seqHooks
	// ssm: the family's mixers are Mamba-2 state-space layers (model.ssm).
	ssm bool
	// shortConv: the family's non-attention layers are gated short
	// convolutions (model.short_conv).
	shortConv bool
	// deltaNet: the family's non-attention layers are Gated DeltaNet
	// linear attention (model.delta_net).
	deltaNet bool
	// kda: the family's non-attention layers are Kimi Delta Attention
	// linear attention (model.kda).
	kda bool
	// compressed: the family's attention is DeepSeek-V4's compressed
	// attention (model.compressed).
	compressed bool
	// lightning: the family's non-attention layers are MiniMax's
	// lightning attention (model.lightning).
	lightning bool
	// blockSparse: the family's attention may be MiniMax-M3's block-sparse
	// attention (model.block_sparse; blocksparse.go).
	blockSparse bool
	// mamba1: the family has Mamba-1 mixers (model.mamba).
	mamba1 bool
	// altUp: the family's blocks are wrapped in Alternating Updates, with
	// a low-rank residual and sparse MLP gates (model.altup_inputs,
	// laurel_rank, sparse_layers).
	altUp bool
	// kvShared: the family's last layers may reuse earlier layers' keys
	// and values (model.kv_shared_layers; kvshare5.go), their MLPs then
	// maybe twice as wide (model.double_wide_mlp).
	kvShared bool
	// loneSublayers: each of the family's hybrid layers holds one sublayer
	// behind one norm, and model.ssm.mlp_layers and moe_layers name the
	// feed-forward ones.
	loneSublayers bool
	// servingOnly says why training and transformers' generate are not
	// modelled for the family, where its modeling code is new in the 5.x
	// releases and runs what the engine's rules do not yet follow
	// (transformers 5's grouped_mm experts, MLA's compressed cache); its
	// tensors, stored bytes, caches and serving engines are. Empty for
	// the others.
	servingOnly string
	// only5: transformers 4.x has no such model (its modeling code is
	// transformers 5's): a plan naming no transformers release is
	// modelled at the traced 5.x release, one naming a 4.x release is
	// refused (transformers5.go transformersOf). Its training is modelled
	// once its traces at that release hold under its rules
	// (transformers5Traced), servingOnly notwithstanding.
	only5 bool
	// has4, for a family transformers 4.x has too, says what of its 4.x
	// modeling code or training the engine does not model (other
	// parameter names, another experts' loop, another training step):
	// the family is planned as transformers 5 builds and trains it, as an
	// only5 family is, and a plan naming a 4.x release is refused with
	// this reason. Empty for the others.
	has4 string
	// reentrantFails is how transformers fails the family's training step
	// under reentrant activation checkpointing (empty: it does not).
	reentrantFails string
	// towerOnly: the family is a vision-language model's tower (its
	// vision tower, or with conformer its audio tower) and has no model of
	// its own in transformers (no presets, not planned alone).
	towerOnly bool
	// unhookedTower: the family is a vision tower whose transformers 5
	// class finds no input embeddings (get_input_embeddings raises), so
	// enable_input_require_grads passes it by and its frozen forward
	// records no graph (tower_records5.go).
	unhookedTower bool
	// loadOnly: the family is a vision tower whose forward the engine
	// does not model and whose model's plans run without it: its weights
	// load with the model, the plan runs the text alone and refuses images
	// (Vision.TowerRuns). A tower without towerEmbed that is not loadOnly
	// refuses every plan instead.
	loadOnly bool
	// wrappedText: the family is a vision-language model's language model
	// that transformers builds only inside its wrapper (no presets of its
	// own; planned only with model.vision).
	wrappedText bool
	// attention lists the attention implementations transformers offers
	// the family (its _supports_sdpa / _supports_flash_attn); nil for all.
	// A plan asking for another runs eager attention, as transformers
	// falls back to, and the estimate says so.
	attention []string
	// aliases are other model_types whose config.json has this family's
	// keys (Kimi-K2's "kimi_k2", a DeepSeek-V3 under its own name).
	aliases []string
	// wrappers map other model_types whose config.json holds this family's
	// config under a key (gemma3's "text_config") to that key: FromHFConfig
	// reads such a config through it.
	wrappers map[string]string
	// vision declares a vision-language wrapper (LLaVA): a family of its
	// own whose models are a language model of another family with a
	// vision tower (Model.Vision). Nil for other families.
	vision *visionWrapper
	// configDefaults are the config class's defaults for keys a nested
	// config (a wrapper's text_config or vision_config) may leave out,
	// which transformers fills from the class (LlamaConfig.__init__).
	configDefaults map[string]any

	// defaults are the family's conventions for a model's zero fields (see
	// Model.Normalize): MLP, Norm, Position, Bias, TiedEmbeddings, …
	defaults Model
	// dropout is the (hidden, attention) dropout of the family's released
	// configs, which training keeps unless the plan overrides it.
	dropout [2]float64

	// fromConfig reads a config.json into m (FromHFConfig).
	fromConfig func(c *hfReader, m *Model)
	// toConfig writes the keys that make transformers build m (HFConfig).
	toConfig func(m Model, c map[string]any)
	// check reports the first family rule m breaks (optional).
	check func(m Model) error
	// tensors lists m's parameters in state-dict order with their Hugging
	// Face names and shapes.
	tensors func(m Model, l *tensorList)
	// buffers lists m's module buffers (optional).
	buffers func(m Model, b *bufferList)
	// storedOnly lists what the family's checkpoints store that the model
	// does not load: its Model.MTPLayers multi-token-prediction layers
	// (optional).
	storedOnly func(m Model, l *tensorList)
	// recipe is how the family's modeling code computes, beyond what the
	// model's fields say (optional: the zero recipe); lib is the
	// transformers release that runs it.
	recipe func(m Model, lib libVersion) recipe

	// towerEmbed builds an image encoder's embedding ops where it serves
	// as a vision-language model's tower (vision.go): from the pixels of
	// images images to the first block's input, and the tensors every
	// block reads besides (rotary cos and sin), which live until the tower
	// returns; grad: its weights train.
	towerEmbed func(b *actBuilder, p blockPlan, m Model, images int64, grad bool) (x *actT, shared []*actT)
	// towerPadding is the patches the model's processor pads each image
	// of the tower's to, which transformers' tower runs over (Gemma 4's);
	// nil where it pads none.
	towerPadding func(im Image) int
	// block builds the family's blocks where the shared builder does not
	// (Qwen2.5-VL's windowed vision blocks); nil for the shared one.
	block func(r *resolved, layer int) BlockActivations

	// presets are the family's catalog entries, each citing its config.json.
	presets map[string]Preset
}

// seq2seqHooks are an encoder-decoder family's own ops outside its blocks.
type seq2seqHooks struct {
	// inputs are the batch's tensors (features, ids, labels).
	inputs func(r *resolved) Bytes
	// embed builds the encoder's input to its first block.
	embed func(b *actBuilder, p blockPlan) *actT
	// bridge is what runs between the stacks (buildBridge for T5).
	bridge func(r *resolved, p blockPlan) BlockActivations
	// masks are built once and passed to the blocks (positionBiases for T5).
	masks func(r *resolved, p blockPlan) []maskPart
	// finalNorm is the decoder's final norm and what follows it before the
	// output projection, on x (the last block's output) of width h.
	finalNorm func(b *actBuilder, p blockPlan, x *actT, h int64) *actT
}

// familyKind is what a family's model does with a sequence.
type familyKind uint8

const (
	decoder        familyKind = iota // causal language model with a KV cache
	encoder                          // bidirectional, no cache (BERT, ViT)
	encoderDecoder                   // an encoder's blocks, then a decoder's with cross-attention (T5)
)

// recipe lists the implementation details of a family's modeling code that
// change memory but are not architecture: which tensors its ops create and
// keep. Each field's comment says what it models; a family's declaration
// cites the code.
type recipe struct {
	// fusedQKV: q, k and v are strided views of one matmul's output.
	fusedQKV bool
	// fusedMoE: the routed experts run as a serving engine's fused MoE
	// kernel (vLLM's fused_experts), not in transformers' loop.
	fusedMoE bool
	// splitQKV: k and v are split off the fused output into tensors of
	// their own (advanced indexing), so nothing keeps the fused output;
	// broadcastKV: they are broadcast to every query head first (Falcon's
	// new decoder architecture), so attention never repeats them.
	splitQKV, broadcastKV bool
	// rotaryFP32: the rotary embedding runs in fp32 with the module's own
	// cos/sin caches, concatenates the pass-through part and casts back; a
	// returned cache holds the fp32 key.
	rotaryFP32 bool
	// scoresFP32: eager attention casts q and k to fp32 before the scores
	// matmul (GPT-J's _attn).
	scoresFP32 bool
	// softmaxInDType: eager attention's softmax runs in the scores' dtype
	// (no upcast to fp32 in 16-bit training).
	softmaxInDType bool
	// scoreClamp: eager scores are clamped with torch.max(scores,
	// finfo.min), whose backward saves both inputs.
	scoreClamp bool
	// parallelNorms: the norms of a parallel block, 1 (both branches read
	// one) or 2 (each branch its own).
	parallelNorms int
	// embedNorm: a LayerNorm on the embeddings.
	embedNorm bool
	// mropeSections: each layer cuts its cos and sin out of the model's
	// three-section (time, height, width) rotary tables with torch.cat, and
	// the products with q and k save them (Qwen2.5-VL's
	// apply_multimodal_rotary_pos_emb); the tables, 3 × batch × sequence ×
	// head_dim each, live through the blocks.
	mropeSections bool
	// mropeInterleaved: the rotary embedding reads 3-D position ids (3 ×
	// batch × sequence, int64, passed to every layer) and interleaves the
	// three sections' frequencies into one cos and one sin of batch ×
	// sequence × head_dim in the hidden states' dtype, which every layer's
	// products save (Qwen3-VL's apply_interleaved_mrope).
	mropeInterleaved bool
	// autocastError: transformers raises in training under autocast with
	// weights wider than the compute dtype, for the reason given (Qwen3-VL-
	// MoE's router: scatter_ of hidden-dtype weights into bf16 logits).
	autocastError string
	// pooledNorm: the final norm reads the first (class) token only, the
	// pooled output (CLIP's post_layernorm); the model returns the last
	// hidden state without it.
	pooledNorm bool
	// towerPostNorm: a vision tower's last hidden state goes through its
	// final norm, every token (SigLIP's post_layernorm).
	towerPostNorm bool
	// imageMasks: image tokens attend to each other both ways, an
	// or_mask_function on the causal mask, so SDPA gets a materialised
	// mask for every kind of layer (Gemma 3's token_type_ids mask).
	imageMasks bool
	// alwaysMasked: the model materialises its causal mask whatever the
	// attention (create_causal_mask(allow_is_causal_skip=False), Falcon
	// in transformers 5 for its ALiBi), so SDPA gets a bool mask in
	// every layer, as under imageMasks.
	alwaysMasked bool
	// maskedShiftLoss: the loss upcasts the logits, gathers the shifted
	// ones where the attention mask is set (a copy) and runs
	// CrossEntropyLoss on them (Gemma3ForConditionalGeneration.forward).
	maskedShiftLoss bool
	// shiftLossInDType: with maskedShiftLoss, the logits are not upcast
	// (Llama 4): the gathered ones and cross_entropy run in their dtype
	// (fp32 under autocast, which puts cross_entropy on its fp32 list).
	shiftLossInDType bool
	// ropeComplex: the rotary embedding is a complex product
	// (Llama 4's vision_apply_rotary_emb): q.float() and k.float(), the
	// products (fp32-sized complex), cast back with type_as.
	ropeComplex bool
	// towerOneSequence: a vision tower attends over all its images'
	// patches as one sequence (batch one) under a block-diagonal mask its
	// embedding builds and every block reads (Pixtral).
	towerOneSequence bool
	// towerPadMask: the tower runs over padding patches (Gemma 4's,
	// Image.padTo) and its encoder builds a bidirectional padding mask
	// every block reads: eager attention adds it in the hidden states'
	// dtype, SDPA gets it as a bool mask.
	towerPadMask bool
	// eagerQKHeld: eager attention's q and k (after rope) are referenced
	// as eager_attention_forward's arguments until it returns, which
	// without a graph (a frozen tower) is their whole life (Gemma 4's
	// vision tower; attention.go eagerAttention).
	eagerQKHeld bool
	// headTransform: a masked-LM head's dense + GELU + LayerNorm before the
	// decoder.
	headTransform bool
	// normWeightFP32: RMSNorm multiplies by its weight in fp32, then casts
	// back to the input dtype (Gemma's output · (1 + weight), OLMo 2),
	// rather than casting first (Llama).
	normWeightFP32 bool
	// fusedGateUp: the gated MLP's gate and up are chunks of one matmul's
	// output (Phi-3's gate_up_proj).
	fusedGateUp bool
	// ropeConcat: apply_rotary_pos_emb concatenates the rotated part with
	// the pass-through part even when nothing passes through (Phi-3), so q
	// is a new tensor in (batch, heads, seq, dim) order.
	ropeConcat bool
	// ropeKeepsDType: the rotated q and k are cast back to their dtype
	// (OLMo 2's apply_rotary_pos_emb), not left in cos/sin's fp32.
	ropeKeepsDType bool
	// localRotary: the local layers have a rotary embedding of their own,
	// computed every step beside the global one (Gemma 3's
	// rotary_emb_local, OLMo 3's rotary_embs): two cos/sin pairs.
	localRotary bool
	// ropeInterleaved: the rotary embedding is applied in the interleaved
	// (GPT-J) layout in fp32 (ERNIE 4.5's apply_rotary_pos_emb): each
	// call cuts cos and sin to half and repeat_interleaves them into new
	// tensors, which its products save; q and k are promoted with
	// .float() and the sum is cast back to their dtype. The model's cos and
	// sin are then saved by no layer.
	ropeInterleaved bool
	// embedScale: the embeddings are multiplied by a constant (Gemma's
	// sqrt(hidden), Granite's embedding_multiplier): a tensor of their own.
	embedScale bool
	// branchScale: each residual branch's output is multiplied by a constant
	// before the residual add (Granite's residual_multiplier).
	branchScale bool
	// layerScale: each residual branch's output is multiplied by a learned
	// per-channel scale (DINOv2's layer_scale1/2).
	layerScale bool
	// logitsScale: the logits are divided by a constant (Granite's
	// logits_scaling): the returned logits are a tensor of their own.
	logitsScale bool
	// logitsFloat: the model returns logits.float() (Mamba2ForCausalLM):
	// the output holds the fp32 copy, and the lm_head's own output, in
	// the compute dtype, dies once it is copied.
	logitsFloat bool
	// attention, when set, is the attention implementations the family's
	// modeling code offers under the recipe's release, in place of
	// family.attention (Gemma 2 dropped SDPA in transformers 5).
	attention []string
	// noTrainingCache: the model builds no KV cache in training mode
	// (Gemma 2/3: "if use_cache and past_key_values is None and not
	// self.training"), so neither the cache's copies of k and v nor a
	// returned past_key_values exist in training.
	noTrainingCache bool
	// cacheKeepsKV: the training cache keeps each layer's k and v as they
	// are (a list appended to, no torch.cat onto a fresh cache:
	// Lfm2HybridConvCache.update), so there are no copies of them.
	cacheKeepsKV bool
	// ssmInputScale, ssmProjScale: the mixer multiplies its input by a
	// constant and its in_proj output by a per-channel buffer (Falcon-H1's
	// ssm_in_multiplier and mup_vector): each a tensor of its own.
	ssmInputScale, ssmProjScale bool
	// gatedAttention: q_proj also makes a per-channel output gate (twice
	// its width, chunked per head), and the attention output is multiplied
	// by its sigmoid before o_proj (Qwen3-Next).
	gatedAttention bool
	// headGate: the attention output is multiplied by a sigmoid gate per
	// head from a projection of the attention's input (g_proj, hidden →
	// heads), before o_proj (LFM3, modeling_lfm3.py:280-281 at 5.23).
	headGate bool
	// shortConv5: the short convolutions run as transformers 5 runs them
	// (shortconv5.go): the torch causal_conv1d_fn, and a DynamicCache
	// whose conv states each layer makes on first use, not a cache that
	// builds them all before the layers (LFM2's Lfm2HybridConvCache).
	shortConv5 bool
	// keyScale: k is multiplied by a constant before the rotary embedding
	// (Falcon-H1's key_multiplier): a tensor of its own.
	keyScale bool
	// repeatKV: the family's SDPA attention repeats grouped k and v to
	// every query head itself (repeat_kv before the call, in transformers'
	// older per-implementation attention classes) rather than passing
	// enable_gqa (sdpa_attention.py).
	repeatKV bool
	// holdAttnOutput: the decoder layer keeps the attention's output in a
	// variable of its own until it returns (Llama 4's attention_states).
	holdAttnOutput bool
	// noRopeTemperature: layers without the rotary embedding scale q by an
	// fp32 per-position temperature (Llama 4's attn_temperature_tuning).
	noRopeTemperature bool
	// attnSinks: eager attention adds a learned sink logit per head as one
	// more key column of the softmax (gpt-oss).
	attnSinks bool
	// localSinks: only the sliding-window layers have sinks (attnSinks
	// there), and every layer's eager softmax subtracts the row max first,
	// sinks or not (MiMo-V2-Flash, eager_attention_forward
	// modeling_mimo_v2_flash.py:316-322 at 5.23, MiMoV2FlashAttention
	// l.360).
	localSinks bool
	// localKVDouble: the sliding-window layers have twice the model's
	// key/value heads (MiMo-V2-Flash, modeling_mimo_v2_flash.py:341 at
	// 5.23).
	localKVDouble bool
	// valueScale: v is multiplied by a constant after its projection
	// (MiMo-V2-Flash's attention_value_scale, modeling_mimo_v2_flash.py:379
	// at 5.23): a tensor of its own.
	valueScale bool
	// noCheckpointing: gradient_checkpointing_enable() has no effect (the
	// blocks are not GradientCheckpointingLayers and the model's loop never
	// calls the checkpoint function); the plan runs without.
	noCheckpointing bool
	// denseExperts: every routed expert runs on every token, its output
	// scaled by the token's score (zero off its top k), as batched matmuls
	// over stacked expert weights (Llama 4), rather than a loop over each
	// expert's tokens.
	denseExperts bool
	// sharedExpertGate: the shared expert's output is scaled by a sigmoid
	// gate of its own (Qwen2-MoE's shared_expert_gate).
	sharedExpertGate bool
	// sharedFirst: the shared experts run before the router and the
	// routed experts, and their output is added last (Hunyuan's
	// shared_mlp, ERNIE 4.5's shared_experts).
	sharedFirst bool
	// sharedGateLast: with sharedFirst, the shared expert's gate
	// (sharedExpertGate) and the product with it run after the routed
	// experts (transformers 5's Qwen2-MoE,
	// qwen2_moe/modeling_qwen2_moe.py:342-346).
	sharedGateLast bool
	// routerLogitsDType: a softmax_topk router casts the routing weights
	// to the logits' dtype (bf16 under autocast), not the hidden states'
	// (transformers 5's Qwen-MoE TopKRouter: `router_top_value.to(
	// router_logits.dtype)`, qwen3_moe/modeling_qwen3_moe.py:264);
	routerLogitsDType bool
	// routerNoScatter: the router returns the top-k weights, [tokens, k],
	// without scattering them into a [tokens, experts] tensor
	// (transformers 5's TopKRouters: softmax_topk_norm_scatter as
	// Qwen3-MoE's, qwen3_vl_moe/modeling_qwen3_vl_moe.py:132-140;
	// topk_softmax as gpt_oss/modeling_gpt_oss.py:117-122).
	routerNoScatter bool
	// floatTopKRouter: the router takes the top k of its fp32 logits and
	// softmaxes them, cast to the hidden states' dtype (GraniteMoE's
	// TopKGating; transformers 5's GraniteMoeHybridTopKRouter,
	// granitemoehybrid/modeling_granitemoehybrid.py:832-836), whichever
	// experts follow.
	floatTopKRouter bool
	// sortedExperts: the routed experts run on the tokens sorted by
	// expert (DeepSeek-V2's MoE.moe: argsort, one gather, the outputs
	// concatenated and put back), not in Mixtral's masked loop.
	sortedExperts bool
	// parallelExperts: the routed experts are GraniteMoE's ParallelExperts
	// with its own top-k gating (moe.go parallelExperts).
	parallelExperts bool
	// complexRope: the rotary embedding multiplies q and k as complex
	// numbers by the model's freqs_cis (complex64; DeepSeek-V2's
	// apply_rotary_emb): fp32 products cast back to q's and k's dtype.
	complexRope bool
	// latentCache: multi-head latent attention as transformers 5 runs it
	// (mla5.go): the cache keeps the compressed latents, which are
	// expanded into k and v after it, the key built by new_empty and
	// copy_ in kv_b_proj's dtype.
	latentCache bool
	// indexerInterleaved: DSA's indexer rotates its q and k in the
	// interleaved layout (GLM-5's apply_rotary_pos_emb_interleave), not
	// rotate_half's (dsa_indexer5.go); topKReturned: each layer returns
	// its indexer's top-k, which the model's loop holds until the next
	// layer returns (GLM-5's prev_topk_indices).
	indexerInterleaved, topKReturned bool
	// deltaRule5: the Gated DeltaNet's chunked rule as transformers 5
	// runs it (deltanet5.go): q and k repeated to the value heads inside
	// it, fp32 copies before the L2 norms, the triangular system solved
	// by torch.linalg.solve_triangular, the decays applied once.
	deltaRule5 bool
	// qkNormAfterRope: the per-head q/k norm runs on the rotated q and k
	// (Hunyuan's query_layernorm, key_layernorm), not before the rotary
	// embedding.
	qkNormAfterRope bool
	// expertMLP builds one routed expert's ops on x, its gathered tokens (h
	// wide), with inner width f, where they are not the model's gated MLP
	// (gpt-oss's clamped SwiGLU); nil for the gated MLP.
	expertMLP func(b *actBuilder, p blockPlan, x *actT, h, f int64) *actT
	// groupedMM: the routed experts run as transformers 5's default
	// experts implementation, grouped_mm (moe_grouped_mm.go), not in a
	// Python loop over the experts; groupedGate, where set, is the
	// family's _apply_gate on the gate and up halves of the gate|up
	// output (f wide each; an op saving either saves both, views of one
	// tensor), nil for act_fn(gate) * up.
	// groupedBias: the grouped experts have stacked biases (has_bias,
	// gpt-oss), gathered per sorted pair and added in place.
	groupedMM, groupedBias bool
	groupedGate            func(b *actBuilder, p blockPlan, gate, up *actT, f int64) *actT
	// mlpGate, where set, is the gated MLP's gate on its gate and up
	// halves (with fusedGateUp: chunks of one output, f wide each) where
	// it is not act_fn(gate) * up (MiniMax-M3's dense MLP and shared
	// expert run the experts' clamped SwiGLU); nil for that product.
	mlpGate func(b *actBuilder, p blockPlan, gate, up *actT, f int64) *actT
	// groupedUngated: the grouped experts have no gate (has_gate=False:
	// up_proj [E, F, H] alone, its output through act_fn; integrations/
	// moe.py:481-482, 498-502 at 5.23; Nemotron-H's ungated squared-ReLU
	// experts).
	groupedUngated bool
	// powNorm: the RMSNorm raises mean(x²)+eps to the power -0.5 with
	// torch.pow (Gemma4RMSNorm._norm, gemma4/modeling_gemma4.py
	// l.213-216 at 5.23), which saves its input as well as its result:
	// one more fp32 statistic per normalized vector (gemma4_text5.go).
	powNorm bool
	// vNorm: a weightless RMSNorm on v (Gemma 4's v_norm, l.1232); with
	// attention_k_eq_v the global layers' v is k_proj's output itself
	// (l.1222).
	vNorm bool
	// perLayerInputs5: Gemma 4's per-layer inputs (gemma4_text5.go): the
	// model computes every layer's slice before the layers, each layer
	// gates itself with its slice after its MLP.
	perLayerInputs5 bool
	// denseBesideExperts: a MoE layer runs its dense MLP and its routed
	// experts side by side, each between norms of its own, the router on
	// the residual stream (Gemma 4: gemma4_text5.go gemma4MoE).
	denseBesideExperts bool
	// perLayerScaleInPlace: the per-layer inputs' projection is scaled in
	// place (Gemma 3n's per_layer_projection *= scale), not into a new
	// tensor (Gemma 4's).
	perLayerScaleInPlace bool
	// altUp: the blocks carry a stack of altup_num_inputs copies of the
	// hidden state, built before the blocks and merged after them, each
	// block Gemma 3n's decoder layer (gemma3n_text5.go).
	altUp bool
	// lossInDType: the loss runs on the logits in their dtype (T5's
	// CrossEntropyLoss on lm_logits), not on an fp32 copy.
	lossInDType bool
	// conv1D: matmul weights are stored [in, out] (transformers' Conv1D);
	// the engine keeps [out, in] for every matmul and says so here.
	conv1D bool
}

// families is the registry, filled by each family file's init.
var families = map[string]*family{}

// register adds a family and its presets; a family file calls it from init.
func register(f *family) {
	if _, dup := families[f.name]; dup {
		panic("vram: family " + f.name + " registered twice")
	}
	families[f.name] = f
	for name, p := range f.presets {
		if _, dup := presets[name]; dup {
			panic("vram: preset " + name + " registered twice")
		}
		if f.vision != nil {
			p.Model.Vision.Family = f.name // the language model keeps its family
		} else {
			p.Model.Family = f.name
		}
		presets[name] = p
	}
}

// lookupFamily returns the declaration of a model's family, or nil.
func lookupFamily(name string) *family {
	return families[name]
}

// Families lists the supported architecture families (Hugging Face
// model_type values), sorted.
func Families() []string {
	out := make([]string, 0, len(families))
	for n := range families {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// requireQKNorm is a family check: the family's modeling code has this
// q/k norm (or none, for "").
func requireQKNorm(kind string) func(Model) error {
	return func(m Model) error {
		if m.QKNorm != kind {
			return fmt.Errorf("model.qk_norm = %q: family %s normalizes queries and keys with %q", m.QKNorm, m.Family, kind)
		}
		return nil
	}
}

// requireNormPosition is a family check: the family's blocks place their
// norms so.
func requireNormPosition(pos string) func(Model) error {
	return func(m Model) error {
		if m.NormPosition != pos {
			return fmt.Errorf("model.norm_position = %q: family %s places its norms %q", m.NormPosition, m.Family, pos)
		}
		return nil
	}
}

// familiesWhere lists the families with a property, sorted.
func familiesWhere(has func(*family) bool) []string {
	var out []string
	for _, n := range Families() {
		if has(families[n]) {
			out = append(out, n)
		}
	}
	return out
}

// recipeOf is the family's recipe for m under library version lib.
func (m Model) recipeOf(lib libVersion) recipe {
	f := lookupFamily(m.Family)
	var rec recipe
	if f != nil && f.recipe != nil {
		rec = f.recipe(m, lib)
	}
	if w := m.visionWrapperOf(); w != nil && w.textRecipe != nil {
		r := rec
		w.textRecipe(&r, lib) // the wrapper's text model differs from its family's
		return r
	}
	return rec
}

// Transformers is the transformers release whose modeling code the engine
// follows by default: the one the committed PyTorch measurements were taken
// with (examples/measure/requirements.txt).
const Transformers = "4.57.6"

// libVersion is a transformers release as major, minor, patch.
type libVersion = Version

// pinned is Transformers as a libVersion (TestPinnedTransformers keeps the
// two in step).
var pinned = libVersion{4, 57, 6}

// parseVersion reads "4.57.6" (or "4.57"); an empty string is the pinned
// release. Of the 5.x releases it reads the one traced
// (transformers5Release), which resolveStep then allows family by family,
// and those after it, modelled as it with a note (transformers5Step); the
// 5.x releases before it are refused: their step may be either's.
func parseVersion(s string) (libVersion, error) {
	if s == "" {
		return pinned, nil
	}
	var v libVersion
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, fmt.Errorf("transformers %q: want a release such as %q", s, Transformers)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 999 {
			return v, fmt.Errorf("transformers %q: want a release such as %q", s, Transformers)
		}
		v[i] = n
	}
	if v[0] == 5 && v.Less(transformers5Release) {
		return v, fmt.Errorf("transformers %q: of the 5.x releases %s is traced (testdata/trace5), and a later one is modelled as it; the engine models 4.x releases (module and parameter names changed in 5.0) and, from %s, the families whose step it left unchanged or whose change it models (transformers5.go)", s, transformers5String(), transformers5String())
	}
	if v[0] != 4 && v[0] != 5 {
		return v, fmt.Errorf("transformers %q: the engine models 4.x releases (module and parameter names changed in 5.0)", s)
	}
	return v, nil
}

// before reports whether v is older than major.minor.
func (v Version) before(major, minor int) bool {
	return v[0] < major || v[0] == major && v[1] < minor
}
