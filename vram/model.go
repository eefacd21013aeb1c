package vram

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Model is a transformer architecture: enough to list every parameter tensor
// exactly and to size every activation. JSON field names follow the project's
// plan format (the same as the measured-case files); FromHFConfig reads a
// Hugging Face config.json instead.
//
// Zero values take the family's defaults (see Normalize): KVHeads = Heads,
// HeadDim = Hidden/Heads, MLP/Norm/Position by family.
type Model struct {
	Name   string `json:"name,omitempty"`
	Family string `json:"family"` // Hugging Face model_type: one of Families()

	// Layers is the number of transformer blocks; an encoder-decoder's
	// counts the encoder's and the decoder's together, DecoderLayers of
	// them the decoder's (the last ones).
	Layers        int `json:"layers"`
	DecoderLayers int `json:"decoder_layers,omitempty"`
	Hidden        int `json:"hidden"`
	Heads         int `json:"heads"`
	KVHeads       int `json:"kv_heads,omitempty"` // key/value heads: Heads (MHA), 1 (MQA), in between (GQA)
	HeadDim       int `json:"head_dim,omitempty"` // per-head width when it is not Hidden/Heads (Gemma: 256)
	FFN           int `json:"ffn"`                // MLP inner width (each of gate and up for gated MLPs)
	Vocab         int `json:"vocab,omitempty"`

	TiedEmbeddings bool   `json:"tied_embeddings,omitempty"`
	MLP            string `json:"mlp,omitempty"`  // gelu, gelu_new, gelu_pytorch_tanh, quick_gelu, relu, swiglu, geglu
	Norm           string `json:"norm,omitempty"` // layernorm, rmsnorm
	// NormPosition is where a block's norms sit: empty for before each
	// sublayer (pre-LN), "post" after each residual add (BERT, OPT-350m),
	// "sandwich" before and after each sublayer (Gemma 2/3), "sublayer" only
	// after each sublayer, before its residual add (OLMo 2).
	NormPosition  string   `json:"norm_position,omitempty"`
	Bias          BiasMode `json:"bias,omitempty"`
	LMHeadBias    bool     `json:"lm_head_bias,omitempty"`
	Position      string   `json:"position,omitempty"`   // rope, learned, relative, alibi
	RotaryPct     float64  `json:"rotary_pct,omitempty"` // fraction of head dims rotated (no parameters either way)
	MaxPosition   int      `json:"max_position,omitempty"`
	ParallelBlock bool     `json:"parallel_block,omitempty"` // attention and MLP read the same input (GPT-J, NeoX, Phi)

	WordEmbedProjDim int    `json:"word_embed_proj_dim,omitempty"` // OPT-350m: embeddings of width 512 projected to Hidden
	TypeVocab        int    `json:"type_vocab,omitempty"`          // BERT token-type rows
	Pooler           bool   `json:"pooler,omitempty"`              // BERT/ViT pooler (dense + tanh)
	Head             string `json:"head,omitempty"`                // lm (default for decoders), seq_cls_N, image_cls_N, none
	Image            *Image `json:"image,omitempty"`               // ViT input
	// Vision makes the model (the language model) a vision-language model:
	// a vision tower, a projector and image tokens in the sequence.
	Vision *Vision `json:"vision,omitempty"`
	// Audio gives a vision-language model an audio tower too (see Audio);
	// nil for none.
	Audio *Audio `json:"audio,omitempty"`
	// Speech gives a multimodal model a speech generator after its
	// language model (see Speech); nil for none.
	Speech *Speech `json:"speech,omitempty"`

	// Mixture of experts.
	Experts         int `json:"experts,omitempty"`           // routed experts per MoE layer
	ExpertsPerToken int `json:"experts_per_token,omitempty"` // top-k
	SharedExperts   int `json:"shared_experts,omitempty"`    // always-on experts every token passes through (DeepSeek, Qwen2-MoE, Llama 4)
	ExpertFFN       int `json:"expert_ffn,omitempty"`        // inner width of each expert (default FFN)
	// SharedExpertFFN is the inner width of each shared expert (default
	// ExpertFFN; Qwen2-MoE's shared_expert_intermediate_size).
	SharedExpertFFN int `json:"shared_expert_ffn,omitempty"`
	// MoELatent is the width the routed experts read and write when it is
	// not Hidden: a projection down to it before them and back after
	// (Nemotron 3's latent MoE, moe_latent_size); 0 for Hidden.
	MoELatent   int `json:"moe_latent,omitempty"`
	DenseLayers int `json:"dense_layers,omitempty"` // the first k layers keep a dense MLP (DeepSeek first_k_dense_replace)
	// MoEEvery interleaves dense and MoE layers: past DenseLayers, layer i
	// has experts iff (i+1) is a multiple of it (Qwen-MoE
	// decoder_sparse_step, Llama 4 interleave_moe_layer_step); 0 or 1 for
	// every layer.
	MoEEvery int `json:"moe_every,omitempty"`
	// Router is how router logits become each token's expert weights:
	//   softmax_topk_norm  softmax over the experts, top-k, renormalized (Mixtral)
	//   softmax_topk       softmax over the experts, top-k (Qwen-MoE without norm_topk_prob)
	//   topk_softmax       top-k logits, softmax over those k (gpt-oss)
	//   topk_sigmoid       top-k logits, sigmoid of each (Llama 4)
	//   sigmoid_topk_norm  sigmoid scores in fp32, top-k, renormalized and scaled (DeepSeek-V3)
	//   softmax_gather_norm  softmax in fp32 outside autocast, top-k chosen with a bias, gathered and renormalized (ERNIE 4.5)
	//   softmax_topk_scaled  softmax in fp32, top-k (within ExpertGroups groups), scaled, not renormalized (DeepSeek-V2)
	//   softmax_topk_norm_scatter  softmax_topk_norm's weights scattered into a tokens × experts tensor (Qwen3-VL-MoE)
	// Empty takes the family's.
	Router string `json:"router,omitempty"`
	// ExpertGroups is the number of groups group-limited routing first
	// chooses among (DeepSeek-V2's n_group with topk_method
	// group_limited_greedy); 0 or 1 for none.
	ExpertGroups int `json:"expert_groups,omitempty"`

	// Multi-head latent attention (DeepSeek-V2/V3).
	QLoRARank  int `json:"q_lora_rank,omitempty"`
	KVLoRARank int `json:"kv_lora_rank,omitempty"`
	QKNopeDim  int `json:"qk_nope_head_dim,omitempty"`
	QKRopeDim  int `json:"qk_rope_head_dim,omitempty"`
	VHeadDim   int `json:"v_head_dim,omitempty"`
	// DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2,
	// GLM-5): beside each layer's latent attention, IndexHeads query heads
	// of IndexHeadDim from the q latent (wq_b) and one shared key of
	// IndexHeadDim (wk, then a LayerNorm) score the earlier tokens, weighted
	// per head (weights_proj), to pick the keys attention reads
	// (index_n_heads, index_head_dim). Zero for the other families.
	IndexHeads   int `json:"index_heads,omitempty"`
	IndexHeadDim int `json:"index_head_dim,omitempty"`
	// BlockSparse gives the layers it lists MiniMax-M3's block-sparse
	// attention, its own lightning indexer (see BlockSparse); nil for the
	// other families.
	BlockSparse *BlockSparse `json:"block_sparse,omitempty"`

	// Local attention. SlidingWindow (Mistral, Gemma 2/3, gpt-oss) or
	// AttentionChunk (Llama 4: keys in the query's chunk only) bounds a local
	// layer's keys and KV cache. Every layer is local unless GlobalEvery > 0,
	// when layer i is global iff (i+1) is a multiple of it (Gemma 2: 2,
	// Gemma 3: 6; Llama 4: 4, whose global layers also skip the rotary
	// embedding, NoRopeGlobal).
	SlidingWindow  int  `json:"sliding_window,omitempty"`
	AttentionChunk int  `json:"attention_chunk,omitempty"`
	GlobalEvery    int  `json:"global_every,omitempty"`
	NoRopeGlobal   bool `json:"no_rope_global,omitempty"`
	// GlobalFirst makes layer 0 global too, besides every GlobalEvery-th
	// (MiMo-V2-Flash's layer_types: full attention at layer 0 and every
	// sixth).
	GlobalFirst bool `json:"global_first,omitempty"`
	// NoRopeEvery skips the rotary embedding in layer i iff (i+1) is a
	// multiple of it, whatever the layer's attention (SmolLM3's NoPE
	// layers, no_rope_layer_interval); 0 for none.
	NoRopeEvery int `json:"no_rope_every,omitempty"`

	// Soft-capping (Gemma 2): cap · tanh(x / cap) on the attention scores
	// (eager attention) and on the final logits; zero for none.
	AttnSoftcap  float64 `json:"attn_softcap,omitempty"`
	FinalSoftcap float64 `json:"final_softcap,omitempty"`

	// RelativeBuckets is the number of buckets of T5's learned relative
	// position bias (relative_attention_num_buckets).
	RelativeBuckets int `json:"relative_buckets,omitempty"`

	// MelBins and SourcePositions describe an audio encoder-decoder
	// (Whisper): its encoder reads train.seq_len log-mel frames of MelBins
	// channels (num_mel_bins: 80, or 128 from large-v3 on), which a
	// stride-2 convolution turns into SourcePositions positions
	// (max_source_positions: 1500 for 3000 frames, 30 s of audio); its
	// decoder reads train.decoder_seq_len tokens, at most MaxPosition
	// (max_target_positions: 448).
	MelBins         int `json:"mel_bins,omitempty"`
	SourcePositions int `json:"source_positions,omitempty"`
	// DownsampleChannels is the width of an audio tower's convolutional
	// front end: stride-2 3×3 convolutions over the log-mel frames, this
	// many channels each, their output flattened and projected to Hidden
	// (Qwen3-Omni's audio encoder, downsample_hidden_size); 0 for none.
	DownsampleChannels int `json:"downsample_channels,omitempty"`

	// GlobalHeadDim and GlobalKVHeads are the global layers' head width
	// and key/value heads where they differ from the local layers'
	// HeadDim and KVHeads (Gemma 4's global_head_dim and
	// num_global_key_value_heads); 0 for the same. GlobalKEqV: the global
	// layers have no value projection, the keys' projection serving as
	// the values too (attention_k_eq_v).
	GlobalHeadDim int  `json:"global_head_dim,omitempty"`
	GlobalKVHeads int  `json:"global_kv_heads,omitempty"`
	GlobalKEqV    bool `json:"global_k_eq_v,omitempty"`
	// PerLayerInput is the width of each layer's slice of a second token
	// embedding of PerLayerVocab rows, which every layer adds to its
	// output through a gated projection (Gemma 4's per-layer embeddings:
	// hidden_size_per_layer_input, vocab_size_per_layer_input); 0 for
	// none.
	PerLayerInput int `json:"per_layer_input,omitempty"`
	PerLayerVocab int `json:"per_layer_vocab,omitempty"`
	// AltUpInputs is the number of copies of the hidden state that
	// Alternating Updates carries through the blocks, one of them run by
	// each block and the others predicted and corrected around it
	// (altup_num_inputs); LaurelRank is the rank of each block's learned
	// low-rank residual beside its attention (laurel_rank). 0 for none.
	AltUpInputs int `json:"altup_inputs,omitempty"`
	LaurelRank  int `json:"laurel_rank,omitempty"`
	// KVSharedLayers is how many of the last layers reuse the keys and
	// values of the last earlier layer of their kind (num_kv_shared_layers):
	// they have no key/value projections of their own. 0 for none.
	KVSharedLayers int `json:"kv_shared_layers,omitempty"`
	// DoubleWideMLP: the KV-shared layers' MLPs are twice ffn wide (Gemma
	// 4's use_double_wide_mlp; Model.LayerFFN).
	DoubleWideMLP bool `json:"double_wide_mlp,omitempty"`
	// SparseLayers is how many of the first layers take a Gaussian top-k
	// of their MLP's gate before its activation (Gemma 3n's
	// activation_sparsity_pattern, whose released configs sparsify the
	// first ten layers). 0 for none.
	SparseLayers int `json:"sparse_layers,omitempty"`

	// QKNorm normalizes queries and keys before attention: "head" (an RMSNorm
	// over each head: Qwen3, Gemma 3), "full" (an RMSNorm over all heads
	// together: OLMo 2), "l2" (a weightless L2 norm over each head, after the
	// rotary embedding: Llama 4); empty for none.
	QKNorm string `json:"qk_norm,omitempty"`

	// SSM makes the model's mixers Mamba-2's state-space layers (see SSM):
	// every layer of a Mamba-2 model, whose Heads, HeadDim and FFN then
	// repeat the mixer's heads, head width and inner width.
	SSM *SSM `json:"ssm,omitempty"`
	// ShortConv makes the layers outside its Attention list gated short
	// convolutions (LFM2; see ShortConv) instead of attention.
	ShortConv *ShortConv `json:"short_conv,omitempty"`
	// DeltaNet makes the layers outside its Attention list Gated DeltaNet
	// linear attention (Qwen3-Next; see DeltaNet).
	DeltaNet *DeltaNet `json:"delta_net,omitempty"`
	// KDA makes the layers outside its Attention list Kimi Delta
	// Attention linear attention (Kimi-Linear; see KDA).
	KDA *KDA `json:"kda,omitempty"`
	// Compressed makes every layer's attention DeepSeek-V4's: one shared
	// key-value head over a sliding window, with compressed entries in
	// its CSA and HCA layers, around hyper-connected residual streams (see
	// Compressed).
	Compressed *Compressed `json:"compressed,omitempty"`
	// Lightning makes the layers outside its Attention list MiniMax's
	// lightning attention (MiniMax-Text-01; see Lightning).
	Lightning *Lightning `json:"lightning,omitempty"`
	// Mamba makes the layers outside its Attention list Mamba-1 selective
	// state-space mixers (Jamba; see Mamba).
	Mamba *Mamba `json:"mamba,omitempty"`
	// Conformer makes the model an audio encoder of conformer blocks, a
	// multimodal model's audio tower (see Conformer).
	Conformer *Conformer `json:"conformer,omitempty"`
	// Codec is a speech generator stage's codebooks and a vocoder's
	// decoder (see Codec); nil for other models.
	Codec *Codec `json:"codec,omitempty"`

	// Params is a stated total, when the source gives one; Tensors are always
	// computed from the shape, and Validate reports a mismatch.
	Params int64 `json:"params,omitempty"`

	// MTPLayers is the checkpoint's multi-token-prediction layers
	// (DeepSeek-V3's num_nextn_predict_layers): stored after the blocks,
	// not loaded by transformers (_keys_to_ignore_on_load_unexpected) or by
	// vLLM's main model; StoredBytes counts them.
	MTPLayers int `json:"mtp_layers,omitempty"`

	// Release is how the released checkpoint stores the weights (its
	// quantization_config); nil for bf16 (or torch_dtype) throughout.
	Release *Release `json:"release,omitempty"`

	// Origin says where the model was read from and how what its config
	// says was resolved; estimates repeat its notes. It changes no size.
	Origin *Origin `json:"-"`
}

// SSM is the shape of a Mamba-2 mixer (transformers' Mamba2Mixer; Dao &
// Gu 2024, "Transformers are SSMs"): an input projection to the gate, the
// convolved x, B and C, and one Δt per head; a depthwise causal
// convolution over x, B and C; the selective scan with a state of State
// numbers per head channel; a gated RMSNorm and an output projection. It
// keeps, per sequence, the convolution's last ConvKernel inputs and the
// scan's state, whatever the context length.
type SSM struct {
	Heads   int `json:"heads"`    // num_heads
	HeadDim int `json:"head_dim"` // head_dim; Heads · HeadDim is the inner width (expand · hidden)
	State   int `json:"state"`    // state_size
	// Groups share B and C among Heads/Groups heads (n_groups; default 1).
	Groups     int `json:"groups,omitempty"`
	ConvKernel int `json:"conv_kernel,omitempty"` // conv_kernel (default 4)
	// Chunk is the scan's chunk length (chunk_size, default 256): the
	// torch path materializes products of Chunk × Chunk per chunk.
	Chunk      int  `json:"chunk,omitempty"`
	NoConvBias bool `json:"no_conv_bias,omitempty"` // use_conv_bias false
	ProjBias   bool `json:"proj_bias,omitempty"`    // biases on in_proj and out_proj (use_bias, mamba_proj_bias)
	// Attention lists the layers that are attention blocks instead (a
	// hybrid's attn_layer_indices or layer_types), ascending; empty for
	// a model of mixers only.
	Attention []int `json:"attention_layers,omitempty"`
	// MLP and MoE list the layers that hold a feed-forward sublayer alone
	// — a dense MLP, or routed experts (with their shared expert) — with
	// neither mixer nor attention and nothing cached, in a hybrid whose
	// every layer is one sublayer behind one norm; ascending. A model
	// that lists them has experts in its MoE layers only.
	MLP []int `json:"mlp_layers,omitempty"`
	MoE []int `json:"moe_layers,omitempty"`
	// ParallelAttention: every layer runs attention beside its mixer and
	// sums the two (Falcon-H1); Attention is then empty.
	ParallelAttention bool `json:"parallel_attention,omitempty"`
	// Norm is the mixer's gated norm: "" Mamba-2's (y · silu(gate), then
	// an RMSNorm per group), "before_gate" (the RMSNorm, then · silu(gate):
	// Falcon-H1's mamba_norm_before_gate), "none" (y · silu(gate), no norm:
	// Falcon-H1's mamba_rms_norm false).
	Norm string `json:"norm,omitempty"`
}

// Normalize fills the defaults of Mamba2Config: one group, a kernel of
// 4, chunks of 256.
func (s SSM) Normalize() SSM {
	s.Groups = cmp.Or(s.Groups, 1)
	s.ConvKernel = cmp.Or(s.ConvKernel, 4)
	s.Chunk = cmp.Or(s.Chunk, 256)
	return s
}

// inner is the mixer's inner width, Heads · HeadDim.
func (s SSM) inner() int64 { return int64(s.Heads) * int64(s.HeadDim) }

// convDim is the width the convolution runs over: x, B and C.
func (s SSM) convDim() int64 { return s.inner() + 2*int64(s.Groups)*int64(s.State) }

// StateBytes is what one sequence keeps in one mixer layer between steps
// (Mamba2Cache): the convolution's last ConvKernel inputs (conv_states,
// conv_dim × conv_kernel) and the scan's state (ssm_states, heads ×
// head_dim × state), in dtype d.
func (s SSM) StateBytes(d DType) Bytes {
	return d.Size(s.convDim()*int64(s.ConvKernel) + s.inner()*int64(s.State))
}

// SSMLayer reports whether layer i is a state-space mixer: every layer of
// a model with SSM but its Attention, MLP and MoE layers.
func (m *Model) SSMLayer(i int) bool {
	return m.SSM != nil && !slices.Contains(m.SSM.Attention, i) && !m.FeedForwardLayer(i)
}

// FeedForwardLayer reports whether layer i is a feed-forward sublayer
// alone (SSM.MLP, SSM.MoE): no mixer, no attention, no cache.
func (m *Model) FeedForwardLayer(i int) bool {
	return m.SSM != nil && (slices.Contains(m.SSM.MLP, i) || slices.Contains(m.SSM.MoE, i))
}

// ShortConv is a gated short-convolution operator (transformers'
// Lfm2ShortConv): an input projection to B, C and x (3 · hidden), B · x,
// a depthwise causal convolution of Kernel taps over it, C times the
// result and an output projection. It keeps, per sequence, the last
// Kernel inputs of the convolution, whatever the context length.
type ShortConv struct {
	Kernel int  `json:"kernel"`         // conv_L_cache
	Bias   bool `json:"bias,omitempty"` // conv_bias: biases on in_proj, the conv and out_proj
	// Attention lists the layers that are attention blocks instead
	// (layer_types "full_attention", or full_attn_idxs), ascending.
	Attention []int `json:"attention_layers,omitempty"`
	// Local lists which of the Attention layers attend within
	// Model.SlidingWindow, ascending (LFM3's layer_types
	// "sliding_attention"); the rest are global. Nil leaves locality to
	// Model.GlobalEvery. It lives here, not on Model, because Model stays
	// comparable (a slice would not be).
	Local []int `json:"local_layers,omitempty"`
}

// DeltaNet is a Gated DeltaNet layer (Yang et al. 2024; transformers'
// Qwen3NextGatedDeltaNet): projections to q, k (KeyHeads × KeyDim each),
// v and the output gate z (ValueHeads × ValueDim each) and to β and the
// decay a (one per value head); a depthwise causal convolution of
// ConvKernel taps over q|k|v; the gated delta rule over chunks of 64
// tokens; a gated RMSNorm; the output projection. It keeps, per sequence,
// the convolution's last ConvKernel inputs and a KeyDim × ValueDim state
// per value head, whatever the context length.
type DeltaNet struct {
	KeyHeads   int `json:"key_heads"`   // linear_num_key_heads
	ValueHeads int `json:"value_heads"` // linear_num_value_heads (a multiple of KeyHeads)
	KeyDim     int `json:"key_dim"`     // linear_key_head_dim
	ValueDim   int `json:"value_dim"`   // linear_value_head_dim
	ConvKernel int `json:"conv_kernel"` // linear_conv_kernel_dim
	// Attention lists the layers that are (gated) attention blocks
	// instead (layer_types "full_attention"), ascending.
	Attention []int `json:"attention_layers,omitempty"`
}

// KDA is a Kimi Delta Attention layer (Kimi Team 2025, "Kimi Linear";
// transformers 5.23's KimiLinearDeltaAttention, kda.go): q, k and v
// projections of Heads × HeadDim each, a depthwise causal convolution of
// ConvKernel taps over q|k|v, a per-channel forget gate and a per-head β,
// the gated delta rule, a gated RMSNorm per head and the output
// projection. It keeps, per sequence, the convolution's last ConvKernel
// inputs and a HeadDim × HeadDim state per head, whatever the context
// length.
type KDA struct {
	Heads      int `json:"heads"`       // linear_num_heads (linear_attn_config.num_heads)
	HeadDim    int `json:"head_dim"`    // linear_head_dim (linear_attn_config.head_dim)
	ConvKernel int `json:"conv_kernel"` // linear_conv_kernel_dim (linear_attn_config.short_conv_kernel_size)
	// Attention lists the layers that are attention blocks instead
	// (layer_types "full_attention"), ascending.
	Attention []int `json:"attention_layers,omitempty"`
}

// width is q's (and k's, and v's) width, Heads · HeadDim.
func (d KDA) width() int64 { return int64(d.Heads) * int64(d.HeadDim) }

// StateBytes is what one sequence keeps in one layer between steps as
// transformers' cache holds it (cache_utils.py LinearAttentionLayer, fed
// by modeling_kimi_linear.py:652-654 and 708): the conv state, 3 · Heads ·
// HeadDim channels × ConvKernel positions in dtype (the activations'), and
// the recurrent state, Heads × HeadDim × HeadDim in fp32.
func (d KDA) StateBytes(dtype DType) Bytes {
	return dtype.Size(3*d.width()*int64(d.ConvKernel)) + FP32.Size(int64(d.Heads)*int64(d.HeadDim)*int64(d.HeadDim))
}

// KDALayer reports whether layer i is a Kimi Delta Attention layer: every
// layer of a model with KDA but its Attention layers.
func (m *Model) KDALayer(i int) bool {
	return m.KDA != nil && !slices.Contains(m.KDA.Attention, i)
}

// Compressed is DeepSeek-V4's block (DeepSeek-AI 2026, §2; transformers
// 5.23's models/deepseek_v4): attention with one key-value head of
// HeadDim read as both key and value (multi-query, K = V) over the last
// SlidingWindow tokens in every layer; in its CSA layers also one
// compressed entry per CSARate tokens (overlapping windows), of which a
// lightning indexer (IndexHeads × IndexHeadDim) picks index_topk per
// query; in its HCA layers one per HCARate tokens, all read; a low-rank q
// (QLoRARank); an output projection in OGroups head groups, each to
// OLoRARank, then mixed to hidden; Streams copies of the residual stream
// (manifold-constrained hyper-connections), mixed around every attention
// and MLP by learned projections; and a mixture of experts in every layer
// whose Hash layers choose experts by a fixed token-id table. Its cache
// keeps the window and the compressed entries, not every token's key.
type Compressed struct {
	CSA       []int `json:"csa_layers,omitempty"`  // layer_types "compressed_sparse_attention", ascending
	HCA       []int `json:"hca_layers,omitempty"`  // layer_types "heavily_compressed_attention", ascending
	CSARate   int   `json:"csa_rate"`              // compress_rates["compressed_sparse_attention"]
	HCARate   int   `json:"hca_rate"`              // compress_rates["heavily_compressed_attention"]
	Hash      []int `json:"hash_layers,omitempty"` // mlp_layer_types "hash_moe", ascending
	Streams   int   `json:"hc_mult"`               // hc_mult
	OGroups   int   `json:"o_groups"`              // o_groups
	OLoRARank int   `json:"o_lora_rank"`           // o_lora_rank
}

// Lightning is MiniMax's lightning attention (MiniMax 2025, "MiniMax-01";
// transformers 5.23's MiniMaxLightningAttention, lightning.go): one
// projection to q|k|v of the model's Heads × HeadDim each through silu, a
// linear attention without softmax whose scores decay per head by a fixed
// slope, computed in blocks of BlockSize tokens, an RMSNorm over all heads,
// a sigmoid output gate and the output projection. It keeps, per sequence,
// a HeadDim × HeadDim state per head (K^T V, decayed), whatever the
// context length, and no convolution state.
type Lightning struct {
	BlockSize int `json:"block_size"` // block_size
	// Attention lists the layers that are softmax attention blocks
	// instead (layer_types "full_attention"), ascending.
	Attention []int `json:"attention_layers,omitempty"`
}

// LightningLayer reports whether layer i is a lightning-attention layer:
// every layer of a model with Lightning but its Attention layers.
func (m *Model) LightningLayer(i int) bool {
	return m.Lightning != nil && !slices.Contains(m.Lightning.Attention, i)
}

// BlockSparse is MiniMax-M3's block-sparse attention (transformers 5.23's
// MiniMaxM3VLIndexer, blocksparse.go): on each of its Layers a lightning
// indexer — Heads query heads and one shared key of HeadDim projected from
// the layer's input, each RMS-normed and rotated — scores the earlier
// tokens, max-pools the scores over blocks of keys and keeps each query's
// top blocks, the only keys the layer's attention reads. Beside K and V
// such a layer caches the indexer's key, HeadDim numbers a token. The
// blocks' size and how many are kept change no parameter and no cache; a
// training step's pooled scores and top-k indices are sized by them.
type BlockSparse struct {
	Heads   int `json:"heads"`    // index_n_heads
	HeadDim int `json:"head_dim"` // index_head_dim
	// BlockSize is index_block_size, the keys one block pools; TopKBlocks
	// is index_topk_blocks, the blocks each query keeps
	// (configuration_minimax_m3_vl.py:113-114, defaults 128 and 16, which
	// a zero here stands for). index_local_blocks, the preceding blocks
	// always kept, sizes no tensor (an in-place scatter, l.574-578 of the
	// modeling file) and is not kept.
	BlockSize  int `json:"block_size,omitempty"`
	TopKBlocks int `json:"topk_blocks,omitempty"`
	// Layers lists the layers with the indexer (layer_types
	// "minimax_m3_sparse"), ascending.
	Layers []int `json:"layers"`
}

// BlockSparseLayer reports whether layer i has the block-sparse indexer.
func (m *Model) BlockSparseLayer(i int) bool {
	return m.BlockSparse != nil && slices.Contains(m.BlockSparse.Layers, i)
}

// Mamba is a Mamba-1 mixer (Gu & Dao 2023, "Mamba"; transformers'
// JambaMambaMixer): an input projection to x and the gate (Inner each), a
// depthwise causal convolution of ConvKernel taps over x, the selective
// projections (x_proj to Δt's DTRank and B and C's State each, each
// RMS-normed; dt_proj to Inner), a scan with a State-wide state per
// channel, the gate and an output projection. It keeps, per sequence, the
// convolution's last ConvKernel inputs and the scan's state, whatever the
// context length.
type Mamba struct {
	Inner      int  `json:"inner"`       // mamba_expand · hidden_size
	State      int  `json:"state"`       // mamba_d_state
	ConvKernel int  `json:"conv_kernel"` // mamba_d_conv
	DTRank     int  `json:"dt_rank"`     // mamba_dt_rank
	ConvBias   bool `json:"conv_bias,omitempty"`
	ProjBias   bool `json:"proj_bias,omitempty"` // in_proj and out_proj biases
	// Attention lists the layers that are attention blocks instead,
	// ascending.
	Attention []int `json:"attention_layers,omitempty"`
}

// StateBytes is what one sequence keeps in one mixer layer between steps
// (HybridMambaAttentionDynamicCache: conv_states inner × conv_kernel and
// ssm_states inner × state, in dtype).
func (s Mamba) StateBytes(d DType) Bytes {
	return d.Size(int64(s.Inner) * int64(s.ConvKernel+s.State))
}

// MambaLayer reports whether layer i is a Mamba-1 mixer: every layer of a
// model with Mamba but its Attention layers.
func (m *Model) MambaLayer(i int) bool {
	return m.Mamba != nil && !slices.Contains(m.Mamba.Attention, i)
}

// keyDim and valueDim are the widths of q (and k) and of v (and z).
func (d DeltaNet) keyDim() int64   { return int64(d.KeyHeads) * int64(d.KeyDim) }
func (d DeltaNet) valueDim() int64 { return int64(d.ValueHeads) * int64(d.ValueDim) }

// convDim is the width the convolution runs over: q, k and v.
func (d DeltaNet) convDim() int64 { return 2*d.keyDim() + d.valueDim() }

// StateBytes is what one sequence keeps in one layer between steps
// (Qwen3NextDynamicCache): the convolution's last ConvKernel inputs in
// dtype, and the recurrent state (value heads × KeyDim × ValueDim), which
// the gated delta rule keeps in fp32.
func (d DeltaNet) StateBytes(dtype DType) Bytes {
	return dtype.Size(d.convDim()*int64(d.ConvKernel)) + FP32.Size(int64(d.ValueHeads)*int64(d.KeyDim)*int64(d.ValueDim))
}

// DeltaNetLayer reports whether layer i is a Gated DeltaNet layer: every
// layer of a model with DeltaNet but its Attention layers.
func (m *Model) DeltaNetLayer(i int) bool {
	return m.DeltaNet != nil && !slices.Contains(m.DeltaNet.Attention, i)
}

// ConvLayer reports whether layer i is a short-convolution operator:
// every layer of a model with ShortConv but its Attention layers.
func (m *Model) ConvLayer(i int) bool {
	return m.ShortConv != nil && !slices.Contains(m.ShortConv.Attention, i)
}

// RecurrentLayer reports whether layer i keeps a fixed-size state: a
// state-space mixer, a short convolution or a linear attention.
func (m *Model) RecurrentLayer(i int) bool {
	return m.SSMLayer(i) || m.ConvLayer(i) || m.DeltaNetLayer(i) || m.MambaLayer(i) || m.KDALayer(i) || m.LightningLayer(i)
}

// AttentionLayer reports whether layer i runs attention (and keeps K and
// V): every layer that is not recurrent, and every layer of a model whose
// mixers run beside attention.
func (m *Model) AttentionLayer(i int) bool {
	return !m.RecurrentLayer(i) && !m.FeedForwardLayer(i) || m.SSM != nil && m.SSM.ParallelAttention
}

// recurrent reports whether some layers of m keep a state, not K and V.
func (m Model) recurrent() bool {
	return m.SSM != nil || m.ShortConv != nil || m.DeltaNet != nil || m.Mamba != nil || m.KDA != nil || m.Lightning != nil
}

// attentionLayers is the number of layers with attention (and a KV cache)
// among layers [from, to).
func (m Model) attentionLayers(from, to int) int {
	n := 0
	for i := from; i < to; i++ {
		if m.AttentionLayer(i) {
			n++
		}
	}
	return n
}

// Origin is where a model was read from (a config.json, a checkpoint
// folder) and the notes of that reading: what the config names that the
// engine resolves in its own way ("architectures: BertForMaskedLM is
// modelled as …").
type Origin struct {
	Source string
	Notes  []string
}

// note adds a note to m's origin.
func (m *Model) note(source, msg string) {
	if m.Origin == nil {
		m.Origin = &Origin{Source: source}
	} else {
		o := *m.Origin
		o.Notes = slices.Clone(o.Notes)
		m.Origin = &o
	}
	m.Origin.Notes = append(m.Origin.Notes, msg)
}

// Vision is the image side of a vision-language model (LLaVA): a vision
// tower (an image encoder of its own family) reads each image, the
// projector maps the tower's features to the language model's width, and
// the wrapper puts them in the token sequence in place of the image's
// placeholder tokens. The Model that holds it is the language model.
type Vision struct {
	Family string `json:"family"` // the wrapper's model_type (llava)
	Tower  Model  `json:"tower"`  // the vision encoder (family clip_vision_model)
	// FeatureLayer is the tower hidden state the projector reads, counted
	// as Python indexes hidden_states: 1 … tower layers after that block,
	// negative from the end (-1 the last block's output); 0 takes the
	// wrapper's default (LLaVA: -2, the penultimate block's output).
	FeatureLayer int `json:"feature_layer,omitempty"`
	// KeepClassToken keeps the tower's class token among the image
	// features (vision_feature_select_strategy "full"); LLaVA drops it.
	KeepClassToken bool `json:"keep_class_token,omitempty"`
	// NoProjectorBias: the projector's linears have no bias
	// (multimodal_projector_bias false).
	NoProjectorBias bool `json:"no_projector_bias,omitempty"`
}

// Audio is the audio side of a multimodal model whose wrapper family (its
// Vision.Family) declares one (visionWrapper.audioPrefix): an audio tower,
// an encoder of its own tower-only family, reads each clip's log-mel
// frames, and a projector maps its output to the language model's width in
// place of the clip's placeholder tokens. Its parameters, buffers and
// stored bytes are modelled; its forward is not (audio.go).
type Audio struct {
	Tower Model `json:"tower"` // the audio encoder, a tower-only family (audioTower)
}

// Conformer is an audio encoder's shape beyond its blocks' widths (layers,
// hidden, heads, ffn): a front end of two stride-2 convolutions of
// SubsampleChannels output channels each, a depthwise convolution of
// ConvKernel taps in each block, an output projection to OutputDim, and
// with ClippedLinears four stored scalar bounds on every clippable linear
// (Gemma 4's audio tower: subsampling_conv_channels, conv_kernel_size,
// output_proj_dims, use_clipped_linears). Where the front end's output
// width follows the frames' InputFeatures (mel bins) and the blocks'
// chunked local attention keeps a mask of Chunk queries by Chunk +
// ContextLeft − 1 + ContextRight keys as a buffer (Gemma 3n's:
// input_feat_size, conf_attention_chunk_size, conf_attention_context_left
// and _right), those are set; zero elsewhere.
type Conformer struct {
	SubsampleChannels [2]int `json:"subsample_channels"`
	ConvKernel        int    `json:"conv_kernel"`
	OutputDim         int    `json:"output_dim"`
	ClippedLinears    bool   `json:"clipped_linears,omitempty"`
	InputFeatures     int    `json:"input_features,omitempty"`
	Chunk             int    `json:"chunk,omitempty"`
	ContextLeft       int    `json:"context_left,omitempty"`
	ContextRight      int    `json:"context_right,omitempty"`
}

// Speech is the speech generator of a multimodal model that talks
// (Model.Speech): stages that turn its language model's hidden states
// into a waveform, each a model of a tower-only family of its own, which
// the wrapper family (Vision.Family) builds after its language model and
// names (visionWrapper.speechStages): Qwen3-Omni's talker (codec tokens
// from the language model's states), code predictor (each frame's further
// codebooks) and code2wav vocoder. A stage whose family is empty is
// absent. Their parameters, buffers and stored bytes are modelled; their
// forward is not (speech.go).
type Speech struct {
	Talker    Model `json:"talker"`
	Predictor Model `json:"predictor"`
	Vocoder   Model `json:"vocoder"`
}

// Codec is a speech generator stage's codec beyond its blocks
// (Model.Codec): Groups codebooks a frame of Model.Vocab codes each
// (Qwen3-Omni's code predictor: num_code_groups; its vocoder:
// num_quantizers and codebook_size), and a vocoder's convolutional
// decoder: DecoderDim channels wide, after transposed convolutions that
// upsample by the Upsample factors (upsampling_ratios), its blocks
// upsampling by the DecoderUpsample factors (upsample_rates), in order.
type Codec struct {
	Groups          int       `json:"groups"`
	DecoderDim      int       `json:"decoder_dim,omitempty"`
	Upsample        BlockList `json:"upsample,omitempty"`
	DecoderUpsample BlockList `json:"decoder_upsample,omitempty"`
}

// Image describes a ViT's input.
type Image struct {
	Size       int  `json:"size"`
	Patch      int  `json:"patch"`
	Channels   int  `json:"channels"`
	ClassToken bool `json:"class_token"`
	// Registers are learned register tokens appended to the sequence
	// (DINOv2 with registers, Darcet et al. 2023).
	Registers int `json:"registers,omitempty"`
	// TemporalPatch: the patch embedding is a Conv3d over this many frames,
	// a still image repeated to fill them (Qwen2.5-VL: 2).
	TemporalPatch int `json:"temporal_patch,omitempty"`
	// Merge: a vision-language tower merges Merge×Merge neighbouring
	// patches into one language-model token (Qwen2.5-VL's PatchMerger: 2).
	Merge int `json:"merge,omitempty"`
	// Window: the side in pixels of the squares a windowed block attends
	// within (Qwen2.5-VL: 112); global blocks attend to the whole image.
	Window int `json:"window,omitempty"`
	// NoMaskToken: the encoder has no learned mask token (DINOv2 with
	// use_mask_token false, as timm builds it).
	NoMaskToken bool `json:"no_mask_token,omitempty"`
	// AdapterDim: the tower ends in its own adapter, an MLP this wide over
	// the Merge×Merge pixel-shuffled patches (Llama 4's vision_adapter:
	// projector_input_dim = projector_output_dim).
	AdapterDim int `json:"adapter_dim,omitempty"`
	// PositionTable: the tower adds a learned position table of this many
	// entries (a square grid), bilinearly interpolated to each image's
	// patch grid (Qwen3-VL's pos_embed, num_position_embeddings).
	PositionTable int `json:"position_table,omitempty"`
	// Deepstack: the tower blocks (0-based) whose outputs a merger of
	// their own projects into the language model's width, added to the
	// image tokens' hidden states after decoder layer 0, 1, … in turn
	// (Qwen3-VL's deepstack_visual_indexes).
	Deepstack BlockList `json:"deepstack,omitempty"`
	// Standardize: the tower's pooled features are shifted and scaled by
	// a stored per-channel bias and scale (Gemma 4's standardize:
	// std_bias and std_scale buffers).
	Standardize bool `json:"standardize,omitempty"`
	// ClippedLinears: every linear of the tower clamps its input and
	// output between stored bounds (Gemma 4's use_clipped_linears: four
	// scalar buffers a linear).
	ClippedLinears bool `json:"clipped_linears,omitempty"`
	// TimeTable: the tower adds a fixed sinusoidal position table over a
	// video's frames, this many (a buffer, no parameter; row 0 a zero pad
	// for still images).
	TimeTable int `json:"time_table,omitempty"`
	// padTo: the patches the processor pads each image to, which the
	// tower runs over (Gemma 4's, family.towerPadding); set on a tower's
	// own plan (towerPlan), 0 otherwise.
	padTo int
}

// BlockList is a list of block indexes, a JSON array of integers. It is a
// string underneath ("8,16,24") so that Image stays comparable: the tensor
// cache keys models by value.
type BlockList string

// Blocks makes a BlockList of the indexes.
func Blocks(ix ...int) BlockList {
	s := make([]string, len(ix))
	for i, x := range ix {
		s[i] = strconv.Itoa(x)
	}
	return BlockList(strings.Join(s, ","))
}

// Indexes returns the list's block indexes.
func (l BlockList) Indexes() []int {
	if l == "" {
		return nil
	}
	parts := strings.Split(string(l), ",")
	out := make([]int, len(parts))
	for i, p := range parts {
		out[i], _ = strconv.Atoi(p)
	}
	return out
}

// Len is the number of indexes.
func (l BlockList) Len() int {
	if l == "" {
		return 0
	}
	return strings.Count(string(l), ",") + 1
}

// MarshalJSON writes the list as a JSON array.
func (l BlockList) MarshalJSON() ([]byte, error) { return json.Marshal(l.Indexes()) }

// UnmarshalJSON reads a JSON array of integers.
func (l *BlockList) UnmarshalJSON(b []byte) error {
	var ix []int
	if err := json.Unmarshal(b, &ix); err != nil {
		return fmt.Errorf("a list of block indexes (integers) is expected: %w", err)
	}
	*l = Blocks(ix...)
	return nil
}

// Tokens per image: (size/patch)² patches plus the class and register
// tokens, or the padded patches where the processor pads them (padTo).
func (im Image) Tokens() int {
	if im.Patch < 1 {
		return 0
	}
	n := (im.Size/im.Patch)*(im.Size/im.Patch) + im.Registers
	if im.ClassToken {
		n++
	}
	return max(n, im.padTo)
}

// BiasMode says which linear layers have bias vectors.
type BiasMode string

const (
	BiasNone    BiasMode = "false"
	BiasAll     BiasMode = "true"
	BiasMLPOnly BiasMode = "mlp_only"  // GPT-J
	BiasQKVOnly BiasMode = "qkv_only"  // Qwen2: q, k, v projections only
	BiasAttn    BiasMode = "attention" // q, k, v and output projections, not the MLP (attention_bias)
)

// UnmarshalJSON accepts true, false or one of the mode strings.
func (b *BiasMode) UnmarshalJSON(data []byte) error {
	switch s := strings.TrimSpace(string(data)); s {
	case "true":
		*b = BiasAll
	case "false", "null":
		*b = BiasNone
	default:
		u, err := strconv.Unquote(s)
		if err != nil {
			return fmt.Errorf("bias: want true, false, \"mlp_only\", \"qkv_only\" or \"attention\", got %s", s)
		}
		switch BiasMode(u) {
		case BiasNone, BiasAll, BiasMLPOnly, BiasQKVOnly, BiasAttn:
			*b = BiasMode(u)
		default:
			return fmt.Errorf("bias: want true, false, \"mlp_only\", \"qkv_only\" or \"attention\", got %q", u)
		}
	}
	return nil
}

// MarshalJSON writes true/false for the plain modes.
func (b BiasMode) MarshalJSON() ([]byte, error) {
	switch b {
	case BiasAll:
		return []byte("true"), nil
	case BiasNone, "":
		return []byte("false"), nil
	}
	return json.Marshal(string(b))
}

func (b BiasMode) attn() bool { return b == BiasAll || b == BiasQKVOnly || b == BiasAttn }
func (b BiasMode) out() bool  { return b == BiasAll || b == BiasAttn }
func (b BiasMode) mlp() bool  { return b == BiasAll || b == BiasMLPOnly }

// Normalize fills zero fields with the family's defaults. Validate calls it;
// everything that reads a Model works on a normalized copy.
func (m Model) Normalize() Model {
	var d Model
	if f := lookupFamily(m.Family); f != nil {
		d = f.defaults
	}
	if m.MLP == "" {
		m.MLP = d.MLP
	}
	if m.Norm == "" {
		m.Norm = d.Norm
	}
	if m.Position == "" {
		m.Position = d.Position
	}
	if m.Bias == "" {
		m.Bias = d.Bias
	}
	if m.NormPosition == "" {
		m.NormPosition = d.NormPosition
	}
	if m.QKNorm == "" {
		m.QKNorm = d.QKNorm
	}
	if m.RelativeBuckets == 0 && m.DecoderLayers > 0 {
		m.RelativeBuckets = d.RelativeBuckets
	}
	if !m.ParallelBlock {
		m.ParallelBlock = d.ParallelBlock
	}
	if !m.LMHeadBias {
		m.LMHeadBias = d.LMHeadBias
	}
	if m.Head == "" {
		m.Head = d.Head
		if m.Head == "" {
			m.Head = "lm"
		}
	}
	if m.KVHeads == 0 {
		m.KVHeads = m.Heads
	}
	if m.HeadDim == 0 && m.Heads > 0 {
		m.HeadDim = m.Hidden / m.Heads
	}
	if m.Position == "rope" && m.RotaryPct == 0 {
		m.RotaryPct = 1
	}
	if m.Experts > 0 && m.ExpertFFN == 0 {
		m.ExpertFFN = m.FFN
	}
	if m.SharedExperts > 0 && m.SharedExpertFFN == 0 {
		m.SharedExpertFFN = m.ExpertFFN
	}
	if m.Vision != nil {
		v := *m.Vision
		v.Tower = v.Tower.Normalize()
		if w := m.visionWrapperOf(); w != nil && v.FeatureLayer == 0 {
			v.FeatureLayer = w.featureLayer
		}
		m.Vision = &v
	}
	if m.Audio != nil {
		a := *m.Audio
		a.Tower = a.Tower.Normalize()
		m.Audio = &a
	}
	if m.Speech != nil {
		m.Speech = m.Speech.each(Model.Normalize)
	}
	if m.Experts > 0 && m.Router == "" {
		m.Router = d.Router
		if m.Router == "" {
			m.Router = "softmax_topk_norm"
		}
	}
	if m.SSM != nil {
		s := m.SSM.Normalize()
		m.SSM = &s
	}
	return m
}

// validateSSM checks a Mamba-2 mixer's shape.
func (m Model) validateSSM() error {
	s := m.SSM
	if s == nil {
		return nil
	}
	for _, f := range []struct {
		name   string
		v, max int
	}{{"heads", s.Heads, maxHeads}, {"head_dim", s.HeadDim, maxWidth}, {"state", s.State, maxWidth}, {"groups", s.Groups, maxHeads},
		{"conv_kernel", s.ConvKernel, 1024}, {"chunk", s.Chunk, MaxPositions}} {
		if f.v < 1 || f.v > f.max {
			return fmt.Errorf("model.ssm.%s = %d is out of range [1, %d]", f.name, f.v, f.max)
		}
	}
	if s.ParallelAttention && len(s.Attention) > 0 {
		return fmt.Errorf("model.ssm.attention_layers: with parallel_attention every layer runs attention beside its mixer; list none")
	}
	switch s.Norm {
	case "", "before_gate", "none":
	default:
		return fmt.Errorf("model.ssm.norm = %q: want \"\" (Mamba-2's gated norm), \"before_gate\" or \"none\"", s.Norm)
	}
	if s.Heads%s.Groups != 0 {
		return fmt.Errorf("model.ssm.groups = %d must divide ssm.heads = %d (each group's B and C serve heads/groups heads)", s.Groups, s.Heads)
	}
	for _, list := range []struct {
		name   string
		layers []int
	}{{"attention_layers", s.Attention}, {"mlp_layers", s.MLP}, {"moe_layers", s.MoE}} {
		for i, l := range list.layers {
			if l < 0 || l >= m.Layers || i > 0 && l <= list.layers[i-1] {
				return fmt.Errorf("model.ssm.%s[%d] = %d: want ascending layer indices in [0, %d)", list.name, i, l, m.Layers)
			}
			if list.name != "attention_layers" && slices.Contains(s.Attention, l) || list.name == "moe_layers" && slices.Contains(s.MLP, l) {
				return fmt.Errorf("model.ssm.%s[%d] = %d: the layer is listed twice (attention, mlp and moe layers are each one kind)", list.name, i, l)
			}
		}
	}
	if len(s.MoE) > 0 && m.Experts == 0 {
		return fmt.Errorf("model.ssm.moe_layers lists mixture-of-experts layers; set experts too")
	}
	return nil
}

// validateShortConv checks a short convolution's kernel and attention
// layers.
func (m Model) validateShortConv() error {
	c := m.ShortConv
	if c == nil {
		return nil
	}
	if c.Kernel < 1 || c.Kernel > 1024 {
		return fmt.Errorf("model.short_conv.kernel = %d is out of range [1, 1024]", c.Kernel)
	}
	if m.SSM != nil {
		return fmt.Errorf("model: short_conv and ssm describe different recurrent layers; a model has one kind")
	}
	for i, l := range c.Attention {
		if l < 0 || l >= m.Layers || i > 0 && l <= c.Attention[i-1] {
			return fmt.Errorf("model.short_conv.attention_layers[%d] = %d: want ascending layer indices in [0, %d)", i, l, m.Layers)
		}
	}
	return nil
}

// validateDeltaNet checks a Gated DeltaNet's heads, widths and attention
// layers.
func (m Model) validateDeltaNet() error {
	d := m.DeltaNet
	if d == nil {
		return nil
	}
	for _, f := range []struct {
		name   string
		v, max int
	}{{"key_heads", d.KeyHeads, maxHeads}, {"value_heads", d.ValueHeads, maxHeads}, {"key_dim", d.KeyDim, maxWidth},
		{"value_dim", d.ValueDim, maxWidth}, {"conv_kernel", d.ConvKernel, 1024}} {
		if f.v < 1 || f.v > f.max {
			return fmt.Errorf("model.delta_net.%s = %d is out of range [1, %d]", f.name, f.v, f.max)
		}
	}
	if d.ValueHeads%d.KeyHeads != 0 {
		return fmt.Errorf("model.delta_net.value_heads = %d must be a multiple of key_heads = %d (q and k are repeated to every value head)", d.ValueHeads, d.KeyHeads)
	}
	if m.SSM != nil || m.ShortConv != nil {
		return fmt.Errorf("model: delta_net, ssm and short_conv describe different recurrent layers; a model has one kind")
	}
	for i, l := range d.Attention {
		if l < 0 || l >= m.Layers || i > 0 && l <= d.Attention[i-1] {
			return fmt.Errorf("model.delta_net.attention_layers[%d] = %d: want ascending layer indices in [0, %d)", i, l, m.Layers)
		}
	}
	return nil
}

// validateKDA checks a Kimi Delta Attention's heads, widths and attention
// layers.
func (m Model) validateKDA() error {
	d := m.KDA
	if d == nil {
		return nil
	}
	for _, f := range []struct {
		name   string
		v, max int
	}{{"heads", d.Heads, maxHeads}, {"head_dim", d.HeadDim, maxWidth}, {"conv_kernel", d.ConvKernel, 1024}} {
		if f.v < 1 || f.v > f.max {
			return fmt.Errorf("model.kda.%s = %d is out of range [1, %d]", f.name, f.v, f.max)
		}
	}
	if m.SSM != nil || m.ShortConv != nil || m.DeltaNet != nil || m.Mamba != nil {
		return fmt.Errorf("model: kda, ssm, short_conv, delta_net and mamba describe different recurrent layers; a model has one kind")
	}
	for i, l := range d.Attention {
		if l < 0 || l >= m.Layers || i > 0 && l <= d.Attention[i-1] {
			return fmt.Errorf("model.kda.attention_layers[%d] = %d: want ascending layer indices in [0, %d)", i, l, m.Layers)
		}
	}
	return nil
}

// validateCompressed checks DeepSeek-V4's block: its widths and rates,
// and its layer lists (ascending, in range; no layer both CSA and HCA).
func (m Model) validateCompressed() error {
	c := m.Compressed
	if c == nil {
		return nil
	}
	for _, f := range []struct {
		name   string
		v, max int
	}{{"csa_rate", c.CSARate, MaxPositions}, {"hca_rate", c.HCARate, MaxPositions}, {"hc_mult", c.Streams, 64},
		{"o_groups", c.OGroups, maxHeads}, {"o_lora_rank", c.OLoRARank, maxWidth}} {
		if f.v < 1 || f.v > f.max {
			return fmt.Errorf("model.compressed.%s = %d is out of range [1, %d]", f.name, f.v, f.max)
		}
	}
	if m.recurrent() {
		return fmt.Errorf("model: compressed describes attention layers; a model with recurrent layers (ssm, short_conv, delta_net, mamba, kda) has none of its kind")
	}
	for _, l := range []struct {
		name   string
		layers []int
	}{{"csa_layers", c.CSA}, {"hca_layers", c.HCA}, {"hash_layers", c.Hash}} {
		for i, v := range l.layers {
			if v < 0 || v >= m.Layers || i > 0 && v <= l.layers[i-1] {
				return fmt.Errorf("model.compressed.%s[%d] = %d: want ascending layer indices in [0, %d)", l.name, i, v, m.Layers)
			}
		}
	}
	for _, v := range c.CSA {
		if slices.Contains(c.HCA, v) {
			return fmt.Errorf("model.compressed: layer %d is in both csa_layers and hca_layers", v)
		}
	}
	return nil
}

// validateLightning checks a lightning attention's block size and
// attention layers.
func (m Model) validateLightning() error {
	d := m.Lightning
	if d == nil {
		return nil
	}
	if d.BlockSize < 1 || d.BlockSize > maxLightningBlock {
		return fmt.Errorf("model.lightning.block_size = %d is out of range [1, %d]", d.BlockSize, maxLightningBlock)
	}
	if m.SSM != nil || m.ShortConv != nil || m.DeltaNet != nil || m.Mamba != nil || m.KDA != nil {
		return fmt.Errorf("model: lightning, ssm, short_conv, delta_net, mamba and kda describe different recurrent layers; a model has one kind")
	}
	for i, l := range d.Attention {
		if l < 0 || l >= m.Layers || i > 0 && l <= d.Attention[i-1] {
			return fmt.Errorf("model.lightning.attention_layers[%d] = %d: want ascending layer indices in [0, %d)", i, l, m.Layers)
		}
	}
	return nil
}

// validateBlockSparse checks a block-sparse indexer's widths and layers,
// and that the family has one.
func (m Model) validateBlockSparse(f *family) error {
	s := m.BlockSparse
	if s == nil {
		return nil
	}
	if !f.blockSparse {
		return fmt.Errorf("model.block_sparse describes MiniMax-M3's block-sparse attention (families %s), not %q", strings.Join(familiesWhere(func(f *family) bool { return f.blockSparse }), ", "), m.Family)
	}
	if s.Heads < 1 || s.Heads > maxHeads || s.HeadDim < 1 || s.HeadDim > maxWidth {
		return fmt.Errorf("model.block_sparse: heads = %d and head_dim = %d must be in [1, %d] and [1, %d]", s.Heads, s.HeadDim, maxHeads, maxWidth)
	}
	if s.BlockSize < 0 || s.TopKBlocks < 0 || s.BlockSize > MaxTokens || s.TopKBlocks > MaxTokens {
		return fmt.Errorf("model.block_sparse: block_size = %d and topk_blocks = %d must be in [0, %d] (0: the class's default)", s.BlockSize, s.TopKBlocks, MaxTokens)
	}
	for i, l := range s.Layers {
		if l < 0 || l >= m.Layers || i > 0 && l <= s.Layers[i-1] {
			return fmt.Errorf("model.block_sparse.layers[%d] = %d: want ascending layer indices in [0, %d)", i, l, m.Layers)
		}
	}
	return nil
}

// validateMamba checks a Mamba-1 mixer's shape.
func (m Model) validateMamba() error {
	s := m.Mamba
	if s == nil {
		return nil
	}
	for _, f := range []struct {
		name   string
		v, max int
	}{{"inner", s.Inner, maxWidth}, {"state", s.State, maxWidth}, {"conv_kernel", s.ConvKernel, 1024}, {"dt_rank", s.DTRank, maxWidth}} {
		if f.v < 1 || f.v > f.max {
			return fmt.Errorf("model.mamba.%s = %d is out of range [1, %d]", f.name, f.v, f.max)
		}
	}
	if m.SSM != nil || m.ShortConv != nil || m.DeltaNet != nil {
		return fmt.Errorf("model: mamba, ssm, short_conv and delta_net describe different recurrent layers; a model has one kind")
	}
	for i, l := range s.Attention {
		if l < 0 || l >= m.Layers || i > 0 && l <= s.Attention[i-1] {
			return fmt.Errorf("model.mamba.attention_layers[%d] = %d: want ascending layer indices in [0, %d)", i, l, m.Layers)
		}
	}
	return nil
}

// clone is a deep copy of m: the result shares no memory with m.
func (m Model) clone() Model {
	if m.Release != nil {
		r := *m.Release
		m.Release = &r
	}
	if m.Origin != nil {
		o := *m.Origin
		o.Notes = slices.Clone(o.Notes)
		m.Origin = &o
	}
	if m.Image != nil {
		im := *m.Image
		m.Image = &im
	}
	if m.SSM != nil {
		s := *m.SSM
		s.Attention, s.MLP, s.MoE = slices.Clone(s.Attention), slices.Clone(s.MLP), slices.Clone(s.MoE)
		m.SSM = &s
	}
	if m.ShortConv != nil {
		c := *m.ShortConv
		c.Attention, c.Local = slices.Clone(c.Attention), slices.Clone(c.Local)
		m.ShortConv = &c
	}
	if m.DeltaNet != nil {
		d := *m.DeltaNet
		d.Attention = slices.Clone(d.Attention)
		m.DeltaNet = &d
	}
	if m.Mamba != nil {
		s := *m.Mamba
		s.Attention = slices.Clone(s.Attention)
		m.Mamba = &s
	}
	if m.KDA != nil {
		d := *m.KDA
		d.Attention = slices.Clone(d.Attention)
		m.KDA = &d
	}
	if m.Compressed != nil {
		c := *m.Compressed
		c.CSA, c.HCA, c.Hash = slices.Clone(c.CSA), slices.Clone(c.HCA), slices.Clone(c.Hash)
		m.Compressed = &c
	}
	if m.Lightning != nil {
		d := *m.Lightning
		d.Attention = slices.Clone(d.Attention)
		m.Lightning = &d
	}
	if m.BlockSparse != nil {
		s := *m.BlockSparse
		s.Layers = slices.Clone(s.Layers)
		m.BlockSparse = &s
	}
	if m.Vision != nil {
		v := *m.Vision
		v.Tower = v.Tower.clone()
		m.Vision = &v
	}
	if m.Audio != nil {
		a := *m.Audio
		a.Tower = a.Tower.clone()
		m.Audio = &a
	}
	if m.Speech != nil {
		m.Speech = m.Speech.each(Model.clone)
	}
	if m.Conformer != nil {
		c := *m.Conformer
		m.Conformer = &c
	}
	if m.Codec != nil {
		c := *m.Codec
		m.Codec = &c
	}
	return m
}

// Bounds on a model's size fields: each well above every released model
// (the largest today: 126 layers, hidden 18432, 256k vocabulary, 384
// experts, 10M positions) and low enough that a valid plan estimates in
// well under a second and no count can overflow (see checked.go).
const (
	maxLayers    = 1024
	maxWidth     = 1 << 20
	maxHeads     = 1 << 16
	MaxPositions = 1 << 25 // a model's longest context, as importers check it too
	maxExperts   = 4096
	maxTensors   = 1 << 16 // layers × (experts + 1): Kimi K2 has 61 × 385 = 23,485
	maxImageSide = 1 << 16
	maxChannels  = 1 << 10
)

// Validate reports the first field that makes m unusable, naming it and the rule.
func (m Model) Validate() error { return m.validate(false) }

// validate is Validate; asTower: m is a multimodal model's part (a tower,
// or a wrapped language model run alone inside it).
func (m Model) validate(asTower bool) error {
	f := lookupFamily(m.Family)
	if err := m.standsAlone(f, asTower); err != nil {
		return err
	}
	if f == nil {
		if m.Family == "" && m.Name != "" && m.Layers == 0 {
			// A name alone: FromPreset's answer for a name not in the catalog.
			if _, err := LookupPreset(m.Name); err != nil {
				return fmt.Errorf("model.name: %w", err)
			}
		}
		if m.Family == "" {
			return fmt.Errorf("model.family is required; known: %s", strings.Join(Families(), ", "))
		}
		return unsupportedModelType("model.family", m.Family)
	}
	if m.HeadDim == 0 && m.Heads > 0 && m.Hidden%m.Heads != 0 {
		return fmt.Errorf("model.hidden = %d is not divisible by heads = %d; set head_dim", m.Hidden, m.Heads)
	}
	m = m.Normalize()
	pos := func(name string, v int) error {
		if v < 1 {
			return fmt.Errorf("model.%s must be ≥ 1, got %d", name, v)
		}
		return nil
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"layers", m.Layers}, {"hidden", m.Hidden}, {"heads", m.Heads}, {"ffn", m.FFN}} {
		if err := pos(f.name, f.v); err != nil {
			return err
		}
	}
	if err := m.ranges(); err != nil {
		return err
	}
	if err := m.validateSSM(); err != nil {
		return err
	}
	if err := m.validateShortConv(); err != nil {
		return err
	}
	if err := m.validateMamba(); err != nil {
		return err
	}
	if err := m.validateDeltaNet(); err != nil {
		return err
	}
	if err := m.validateKDA(); err != nil {
		return err
	}
	if err := m.validateCompressed(); err != nil {
		return err
	}
	if err := m.validateLightning(); err != nil {
		return err
	}
	if err := m.validateLayout(f); err != nil {
		return err
	}
	if err := m.validateKinds(); err != nil {
		return err
	}
	if m.Experts > 0 {
		if err := m.validateExperts(); err != nil {
			return err
		}
	}
	if f.check != nil {
		if err := f.check(m); err != nil {
			return err
		}
	}
	if m.Vision != nil {
		if err := m.validateVision(); err != nil {
			return err
		}
	}
	if err := m.validateAudio(); err != nil {
		return err
	}
	if err := m.validateSpeech(); err != nil {
		return err
	}
	if _, err := m.headClasses(); err != nil {
		return err
	}
	if _, err := m.countParams(); err != nil {
		return err
	}
	if m.Params > 0 {
		if got := m.ParamCount(); got != m.Params {
			return fmt.Errorf("model.params = %d disagrees with the %d parameters of the described architecture (check the shape fields)", m.Params, got)
		}
	}
	return nil
}

// validateLayout checks the fields that describe the family's kind of
// layers: images, experts, an encoder-decoder's split, latent attention,
// heads and vocabulary.
func (m Model) validateLayout(f *family) error {
	if m.SSM != nil && !f.ssm {
		return fmt.Errorf("model.ssm describes state-space mixers (families %s), not %q", strings.Join(familiesWhere(func(f *family) bool { return f.ssm }), ", "), m.Family)
	}
	if m.SSM != nil && (len(m.SSM.MLP) > 0 || len(m.SSM.MoE) > 0) && !f.loneSublayers {
		return fmt.Errorf("model.ssm.mlp_layers and moe_layers describe hybrids of one sublayer a layer (families %s), not %q", strings.Join(familiesWhere(func(f *family) bool { return f.loneSublayers }), ", "), m.Family)
	}
	if m.DeltaNet != nil && !f.deltaNet {
		return fmt.Errorf("model.delta_net describes Gated DeltaNet layers (families %s), not %q", strings.Join(familiesWhere(func(f *family) bool { return f.deltaNet }), ", "), m.Family)
	}
	if m.Compressed != nil && !f.compressed {
		return fmt.Errorf("model.compressed describes DeepSeek-V4's compressed attention (families %s), not %q", strings.Join(familiesWhere(func(f *family) bool { return f.compressed }), ", "), m.Family)
	}
	if m.KDA != nil && !f.kda {
		return fmt.Errorf("model.kda describes Kimi Delta Attention layers (families %s), not %q", strings.Join(familiesWhere(func(f *family) bool { return f.kda }), ", "), m.Family)
	}
	if m.Lightning != nil && !f.lightning {
		return fmt.Errorf("model.lightning describes lightning-attention layers (families %s), not %q", strings.Join(familiesWhere(func(f *family) bool { return f.lightning }), ", "), m.Family)
	}
	if m.Mamba != nil && !f.mamba1 {
		return fmt.Errorf("model.mamba describes Mamba-1 mixers (families %s), not %q", strings.Join(familiesWhere(func(f *family) bool { return f.mamba1 }), ", "), m.Family)
	}
	if m.ShortConv != nil && !f.shortConv {
		return fmt.Errorf("model.short_conv describes short-convolution layers (families %s), not %q", strings.Join(familiesWhere(func(f *family) bool { return f.shortConv }), ", "), m.Family)
	}
	if (m.MelBins != 0 || m.SourcePositions != 0) != f.audio {
		if f.audio {
			return fmt.Errorf("model.mel_bins = %d and model.source_positions = %d: family %s reads log-mel frames; both must be ≥ 1", m.MelBins, m.SourcePositions, m.Family)
		}
		return fmt.Errorf("model: mel_bins and source_positions describe audio models (families %s), not %q", strings.Join(familiesWhere(func(f *family) bool { return f.audio }), ", "), m.Family)
	}
	if f.audio && (m.MelBins < 1 || m.SourcePositions < 1) {
		return fmt.Errorf("model.mel_bins = %d and model.source_positions = %d must both be ≥ 1", m.MelBins, m.SourcePositions)
	}
	if (m.Conformer != nil) != f.conformer {
		if f.conformer {
			return fmt.Errorf("model.conformer (subsample_channels, conv_kernel, output_dim) is required for family %s, an audio encoder of conformer blocks", m.Family)
		}
		return fmt.Errorf("model.conformer describes audio encoders of conformer blocks (families %s), not %q", strings.Join(familiesWhere(func(f *family) bool { return f.conformer }), ", "), m.Family)
	}
	if m.DownsampleChannels != 0 && !(f.towerOnly && f.audio) {
		return fmt.Errorf("model.downsample_channels describes an audio tower's convolutional front end (families %s), not %q", strings.Join(familiesWhere(func(f *family) bool { return f.towerOnly && f.audio }), ", "), m.Family)
	}
	if m.Codec != nil && !speechStage(f.name) {
		return fmt.Errorf("model.codec describes the stages of a speech generator (families %s), not %q", strings.Join(familiesWhere(func(f *family) bool { return speechStage(f.name) }), ", "), m.Family)
	}
	if m.Image != nil && !f.images {
		return fmt.Errorf("model.image applies to image models (families %s), not %q", strings.Join(familiesWhere(func(f *family) bool { return f.images }), ", "), m.Family)
	}
	if m.Experts == 0 && (m.ExpertsPerToken != 0 || m.SharedExperts != 0 || m.ExpertFFN != 0 || m.DenseLayers != 0 ||
		m.SharedExpertFFN != 0 || m.MoEEvery != 0 || m.Router != "" || m.MoELatent != 0) {
		return fmt.Errorf("model: experts_per_token, shared_experts, expert_ffn, shared_expert_ffn, dense_layers, moe_every, moe_latent and router describe mixture-of-experts layers; set experts too, or drop them")
	}
	if m.SharedExperts == 0 && m.SharedExpertFFN != 0 {
		return fmt.Errorf("model.shared_expert_ffn = %d sizes shared experts; set shared_experts too", m.SharedExpertFFN)
	}
	if f.kind == encoderDecoder {
		if m.DecoderLayers < 1 || m.DecoderLayers >= m.Layers {
			return fmt.Errorf("model.decoder_layers = %d must be in [1, layers = %d): layers counts the encoder's and the decoder's blocks together", m.DecoderLayers, m.Layers)
		}
	} else if m.DecoderLayers != 0 || m.RelativeBuckets != 0 {
		return fmt.Errorf("model: decoder_layers and relative_buckets describe encoder-decoder models (families %s), not %q",
			strings.Join(familiesWhere(func(f *family) bool { return f.kind == encoderDecoder }), ", "), m.Family)
	}
	if !f.latentAttention && (m.QLoRARank != 0 || m.KVLoRARank != 0 || m.QKNopeDim != 0 || m.QKRopeDim != 0 || m.VHeadDim != 0 && !f.valueHeadDim) {
		return fmt.Errorf("model: q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim describe multi-head latent attention (families %s), not %q",
			strings.Join(familiesWhere(func(f *family) bool { return f.latentAttention }), ", "), m.Family)
	}
	if err := m.validateBlockSparse(f); err != nil {
		return err
	}
	if err := m.validateGemmaParts(f); err != nil {
		return err
	}
	if !f.indexer && (m.IndexHeads != 0 || m.IndexHeadDim != 0) {
		return fmt.Errorf("model: index_heads and index_head_dim describe DeepSeek Sparse Attention's indexer (families %s), not %q",
			strings.Join(familiesWhere(func(f *family) bool { return f.indexer }), ", "), m.Family)
	}
	if m.KVHeads > m.Heads || m.Heads%m.KVHeads != 0 {
		return fmt.Errorf("model.kv_heads = %d must divide heads = %d", m.KVHeads, m.Heads)
	}
	if m.HeadDim < 1 {
		return fmt.Errorf("model.head_dim must be ≥ 1 (hidden %d / heads %d)", m.Hidden, m.Heads)
	}
	if m.Image == nil && m.Conformer == nil && !(f.towerOnly && f.audio) && m.Vocab < 1 {
		return fmt.Errorf("model.vocab must be ≥ 1 for family %q", m.Family)
	}
	return nil
}

// validateGemmaParts checks the fields that describe Gemma 3n's and Gemma
// 4's parts (global layers of their own shape, per-layer embeddings,
// AltUp, KV-shared layers) against f, the model's family.
func (m Model) validateGemmaParts(f *family) error {
	if !f.globalAttention && (m.GlobalHeadDim != 0 || m.GlobalKVHeads != 0 || m.GlobalKEqV) {
		return fmt.Errorf("model: global_head_dim, global_kv_heads and global_k_eq_v describe global layers shaped unlike the local ones (families %s), not %q",
			strings.Join(familiesWhere(func(f *family) bool { return f.globalAttention }), ", "), m.Family)
	}
	if !f.perLayerInputs && (m.PerLayerInput != 0 || m.PerLayerVocab != 0) {
		return fmt.Errorf("model: per_layer_input and per_layer_vocab describe per-layer embeddings (families %s), not %q",
			strings.Join(familiesWhere(func(f *family) bool { return f.perLayerInputs }), ", "), m.Family)
	}
	if !f.altUp && (m.AltUpInputs != 0 || m.LaurelRank != 0 || m.SparseLayers != 0) {
		return fmt.Errorf("model: altup_inputs, laurel_rank and sparse_layers describe AltUp blocks (families %s), not %q",
			strings.Join(familiesWhere(func(f *family) bool { return f.altUp }), ", "), m.Family)
	}
	if !f.kvShared && (m.KVSharedLayers != 0 || m.DoubleWideMLP) {
		return fmt.Errorf("model: kv_shared_layers and double_wide_mlp describe layers reusing earlier layers' keys and values (families %s), not %q",
			strings.Join(familiesWhere(func(f *family) bool { return f.kvShared }), ", "), m.Family)
	}
	return nil
}

// validateKinds checks the named choices: MLP, norm and its position,
// softcaps, q/k norm, local and global layers, positions, the image.
func (m Model) validateKinds() error {
	switch m.MLP {
	case "gelu", "gelu_new", "gelu_pytorch_tanh", "quick_gelu", "relu", "relu2", "swiglu", "geglu", "silu":
	default:
		return fmt.Errorf("model.mlp %q is not supported; known: gelu, gelu_new, gelu_pytorch_tanh, quick_gelu, relu, relu2, swiglu, geglu", m.MLP)
	}
	switch m.Norm {
	case "layernorm", "rmsnorm":
	default:
		return fmt.Errorf("model.norm %q is not supported; known: layernorm, rmsnorm", m.Norm)
	}
	switch m.NormPosition {
	case "", "post", "sandwich", "sublayer":
	default:
		return fmt.Errorf("model.norm_position %q is not supported; known: post, sandwich, sublayer (or empty: pre-norm)", m.NormPosition)
	}
	if !(m.AttnSoftcap >= 0 && m.FinalSoftcap >= 0) {
		return fmt.Errorf("model: attn_softcap and final_softcap must be ≥ 0")
	}
	switch m.QKNorm {
	case "", "head", "full", "l2":
	default:
		return fmt.Errorf("model.qk_norm %q is not supported; known: head, full, l2 (or none)", m.QKNorm)
	}
	if m.GlobalEvery > 0 && m.SlidingWindow == 0 && m.AttentionChunk == 0 {
		return fmt.Errorf("model.global_every = %d interleaves local and global layers; set sliding_window or attention_chunk for the local ones", m.GlobalEvery)
	}
	if m.SlidingWindow > 0 && m.AttentionChunk > 0 {
		return fmt.Errorf("model: local layers use either sliding_window or attention_chunk, not both")
	}
	if m.GlobalFirst && m.SlidingWindow == 0 && m.AttentionChunk == 0 {
		return fmt.Errorf("model.global_first makes layer 0 global among local layers; set sliding_window or attention_chunk for the local ones")
	}
	if err := m.validateLocalLayers(); err != nil {
		return err
	}
	if m.NoRopeGlobal && m.GlobalEvery == 0 {
		return fmt.Errorf("model.no_rope_global applies to models with global layers (global_every > 0)")
	}
	if m.NoRopeEvery > 0 && m.Position != "rope" {
		return fmt.Errorf("model.no_rope_every applies to models with rotary positions (position rope)")
	}
	switch m.Position {
	case "rope", "learned", "relative", "alibi", "none":
	default:
		return fmt.Errorf("model.position %q is not supported; known: rope, learned, relative, alibi, none", m.Position)
	}
	if m.Position == "learned" && m.MaxPosition < 1 && m.Image == nil {
		return fmt.Errorf("model.max_position must be ≥ 1 with learned positions (it sizes the position table)")
	}
	if im := m.Image; im != nil && (im.Patch < 1 || im.Size < im.Patch || im.Channels < 1) {
		return fmt.Errorf("model.image needs size ≥ patch ≥ 1 and channels ≥ 1")
	}
	return nil
}

// standsAlone refuses a model of a family transformers builds only inside
// a wrapper: a tower (asTower: m is one) or a wrapped language model
// without its vision side (asTower: run as the wrapper's part).
func (m Model) standsAlone(f *family, asTower bool) error {
	switch {
	case f == nil:
		return nil
	case f.towerOnly && speechStage(f.name) && !asTower:
		users := familiesWhere(func(w *family) bool { return w.vision != nil && w.vision.speech != nil })
		return fmt.Errorf("model.family %q is a stage of a speech generator only (transformers has no model of it alone); use it in model.speech of a multimodal model (%s)", m.Family, strings.Join(users, ", "))
	case audioTower(f) && !asTower:
		users := familiesWhere(func(w *family) bool { return w.vision != nil && w.vision.audioPrefix != "" })
		return fmt.Errorf("model.family %q is an audio tower only (transformers has no model of it alone); use it as model.audio.tower of a multimodal model (%s)", m.Family, strings.Join(users, ", "))
	case f.towerOnly && !asTower:
		users := familiesWhere(func(w *family) bool { return w.vision != nil })
		return fmt.Errorf("model.family %q is a vision tower only (transformers has no model of it alone); use it as model.vision.tower of a vision-language model (%s)", m.Family, strings.Join(users, ", "))
	case f.wrappedText && m.Vision == nil && !asTower:
		users := familiesWhere(func(w *family) bool { return w.vision != nil })
		return fmt.Errorf("model.family %q is a vision-language model's language model only (transformers has no model of it alone); give it model.vision (%s)", m.Family, strings.Join(users, ", "))
	}
	return nil
}

// validateExperts checks a mixture-of-experts model's routing fields.
func (m Model) validateExperts() error {
	if m.ExpertsPerToken < 1 || m.ExpertsPerToken > m.Experts {
		return fmt.Errorf("model.experts_per_token = %d must be in [1, experts = %d]", m.ExpertsPerToken, m.Experts)
	}
	if m.DenseLayers < 0 || m.DenseLayers > m.Layers {
		return fmt.Errorf("model.dense_layers = %d must be in [0, layers = %d]", m.DenseLayers, m.Layers)
	}
	if m.MoEEvery > m.Layers {
		return fmt.Errorf("model.moe_every = %d must be in [0, layers = %d]", m.MoEEvery, m.Layers)
	}
	if !knownRouter(m.Router) {
		return fmt.Errorf("model.router %q is not supported; known: %s%s", m.Router, strings.Join(routers, ", "), didYouMean(m.Router, routers))
	}
	return nil
}

// headClasses parses Head: 0 for "lm" and "none", N for seq_cls_N/image_cls_N.
func (m Model) headClasses() (int, error) {
	switch {
	case m.Head == "lm" || m.Head == "none":
		return 0, nil
	case strings.HasPrefix(m.Head, "seq_cls_"), strings.HasPrefix(m.Head, "image_cls_"):
		n, err := strconv.Atoi(m.Head[strings.LastIndex(m.Head, "_")+1:])
		if err != nil || n < 1 || n > maxWidth {
			return 0, fmt.Errorf("model.head %q: the class count must be an integer in [1, %d]", m.Head, maxWidth)
		}
		return n, nil
	}
	return 0, fmt.Errorf("model.head %q is not supported; known: lm, none, seq_cls_N, image_cls_N", m.Head)
}

// Gated reports whether the MLP has a gate projection (SwiGLU/GeGLU).
func (m Model) Gated() bool { return m.MLP == "swiglu" || m.MLP == "geglu" }

// LocalLayer reports whether layer i attends within a sliding window or a
// chunk rather than to every earlier token.
func (m *Model) LocalLayer(i int) bool {
	if m.SlidingWindow == 0 && m.AttentionChunk == 0 {
		return false
	}
	if m.ShortConv != nil && m.ShortConv.Local != nil {
		return slices.Contains(m.ShortConv.Local, i)
	}
	if m.GlobalFirst && i == 0 {
		return false
	}
	return m.GlobalEvery == 0 || (i+1)%m.GlobalEvery != 0
}

// validateLocalLayers checks short_conv.local_layers: attention layers,
// ascending, with a sliding window for them and no period beside them.
func (m *Model) validateLocalLayers() error {
	if m.ShortConv == nil || m.ShortConv.Local == nil {
		return nil
	}
	switch {
	case m.SlidingWindow == 0:
		return fmt.Errorf("model.short_conv.local_layers lists sliding-window layers; set sliding_window")
	case m.GlobalEvery > 0 || m.GlobalFirst || m.AttentionChunk > 0:
		return fmt.Errorf("model.short_conv.local_layers lists the local layers itself; leave global_every, global_first and attention_chunk unset")
	}
	for k, i := range m.ShortConv.Local {
		if !slices.Contains(m.ShortConv.Attention, i) || k > 0 && i <= m.ShortConv.Local[k-1] {
			return fmt.Errorf("model.short_conv.local_layers[%d] = %d: want ascending indices of attention layers (short_conv.attention_layers)", k, i)
		}
	}
	return nil
}

// Roped reports whether layer i applies the rotary embedding to q and k:
// every layer of a rope model but Llama 4's and EXAONE 4's global layers
// (NoRopeGlobal) and SmolLM3's NoPE layers (NoRopeEvery).
func (m *Model) Roped(i int) bool {
	if m.Position != "rope" || (m.NoRopeGlobal && !m.LocalLayer(i)) {
		return false
	}
	return m.NoRopeEvery == 0 || (i+1)%m.NoRopeEvery != 0
}

// localSpan is the keys a local layer's query sees at most, and the tokens
// its KV cache keeps: the sliding window or the chunk.
func (m *Model) localSpan() int { return max(m.SlidingWindow, m.AttentionChunk) }

// blockKinds is the number of distinct blockKind values.
const blockKinds = 64

// blockKind sorts blocks into those that build the same activations: dense
// or with routed experts, global or local attention, with or without the
// rotary embedding. Blocks of one kind share one inventory.
func (m *Model) blockKind(i int) int {
	if m.AltUpInputs > 0 || m.KVSharedLayers > 0 {
		// Gemma 3n's layers, and those of a model with KV-shared layers,
		// differ one from another beyond the bits below (the KV-shared
		// layers' missing projections and wider MLPs, the store layers'
		// keys and values and the waits of their gradients, Gemma 3n's
		// sparse MLPs, the last layer's per-layer inputs' gradient):
		// each is a kind of its own (gemma3nTextCheck and kvSharingCheck
		// keep them to blockKinds).
		return i
	}
	// Written out (not through LocalLayer) so that the per-layer calls of
	// an estimate copy no Model.
	k := 0
	if m.IsMoELayer(i) {
		k |= 1
	}
	local := (m.SlidingWindow != 0 || m.AttentionChunk != 0) && (m.GlobalEvery == 0 || (i+1)%m.GlobalEvery != 0) && !(m.GlobalFirst && i == 0)
	if local && m.ShortConv != nil && m.ShortConv.Local != nil {
		local = slices.Contains(m.ShortConv.Local, i)
	}
	if local {
		k |= 2
	}
	if (m.NoRopeGlobal && !local) || (m.NoRopeEvery > 0 && (i+1)%m.NoRopeEvery == 0) {
		k |= 4
	}
	if m.RecurrentLayer(i) || m.BlockSparseLayer(i) {
		// A recurrent layer: a state-space mixer, a short convolution or a
		// DeltaNet (one kind a model); or a block-sparse layer, whose
		// indexer the other attention layers lack (only MiniMax-M3's
		// families have one, and none of them a recurrent mixer).
		k |= 32
	}
	if m.DecoderLayers > 0 {
		if i >= m.Layers-m.DecoderLayers {
			k |= 8
		}
		if i == 0 || i == m.Layers-m.DecoderLayers {
			k |= 16
		}
		if i == m.Layers-m.DecoderLayers-1 || i == m.Layers-1 {
			// The last layer of each stack: the stack's gradient
			// starts there (stackGradients, encoderGradient). Bit 4 is
			// free here: no encoder-decoder the engine models has a
			// rotary embedding to leave out.
			k |= 4
		}
	} else if m.Vision != nil && m.hookedLayer(i) {
		// The vision-language wrapper adds to this layer's output (no
		// encoder-decoder has a vision tower, so bit 8 is free here; a
		// bit of its own would double the kinds every estimate clears).
		k |= 8
	}
	if m.DecoderLayers == 0 && m.FeedForwardLayer(i) {
		k |= 16 // a lone MLP or MoE layer (bit 16 is an encoder-decoder's otherwise)
	}
	if m.PerLayerInput > 0 && i == m.Layers-1 {
		// The per-layer inputs' gradient exists from the last layer's
		// product on, before it in every other layer
		// (perLayerInputsGrad): the last layer is a kind apart, also
		// where an earlier global layer has its bits. Bit 16 is free
		// here: the models with per-layer inputs (Gemma 4; Gemma 3n
		// returns above) are neither encoder-decoders nor state-space
		// hybrids (FeedForwardLayer).
		k |= 16
	}
	return k
}

// AttentionShape is layer i's head width and key/value heads: a global
// layer's own where the model gives them (GlobalHeadDim, GlobalKVHeads),
// the model's HeadDim and KVHeads otherwise.
func (m *Model) AttentionShape(i int) (headDim, kvHeads int) {
	headDim, kvHeads = m.HeadDim, m.KVHeads
	if m.LocalLayer(i) {
		return headDim, kvHeads
	}
	return cmp.Or(m.GlobalHeadDim, headDim), cmp.Or(m.GlobalKVHeads, kvHeads)
}

// globalShapeNote says that engine's cache is sized as if every layer
// were shaped as the local ones, where the global layers have a head
// width or key/value heads of their own (GlobalHeadDim, GlobalKVHeads),
// and by how much that misstates a global layer's cache; "" otherwise.
func (m Model) globalShapeNote(engine string) string {
	hd, kv := m.AttentionShape(m.Layers - 1)
	global := false
	for i := 0; i < m.Layers && !global; i++ {
		global = !m.LocalLayer(i)
	}
	if !global || hd*kv == m.HeadDim*m.KVHeads {
		return ""
	}
	return fmt.Sprintf("%s's cache is sized as if every layer had the local layers' %d key/value heads of %d; the global layers have %d of %d, which is not modelled: for them it counts %.3g× what their keys and values take",
		engine, m.KVHeads, m.HeadDim, kv, hd, float64(m.HeadDim*m.KVHeads)/float64(hd*kv))
}

// KVSharedLayer reports whether layer i reuses an earlier layer's keys and
// values (the last KVSharedLayers layers: Gemma 3n's and Gemma 4's
// num_kv_shared_layers) and keeps no cache of its own.
func (m *Model) KVSharedLayer(i int) bool {
	return m.KVSharedLayers > 0 && i >= m.Layers-m.KVSharedLayers
}

// LayerFFN is layer i's MLP width: twice FFN in a KV-shared layer of a
// model with DoubleWideMLP (Gemma4TextMLP, transformers 5.23.0
// models/gemma4/modeling_gemma4.py l.1062-1067: the "reuse" layers of
// kv_sharing_modes), FFN otherwise.
func (m *Model) LayerFFN(i int) int {
	if m.DoubleWideMLP && m.KVSharedLayer(i) {
		return 2 * m.FFN
	}
	return m.FFN
}

// IsMoELayer reports whether layer i has routed experts.
func (m *Model) IsMoELayer(i int) bool {
	if m.SSM != nil && (m.SSM.MLP != nil || m.SSM.MoE != nil) {
		return m.Experts > 0 && slices.Contains(m.SSM.MoE, i) // the hybrid's lone MoE layers
	}
	return m.Experts > 0 && i >= m.DenseLayers && (m.MoEEvery <= 1 || (i+1)%m.MoEEvery == 0)
}

// widestActivation is the most elements per token one tensor of a block
// can have (for bounds): hidden, MLP, attention, or the routed and shared
// experts' widths — every expert's, where the family runs all of them on
// every token. The fields must be in range.
func (m Model) widestActivation() int64 {
	w := int64(max(m.Hidden, m.LayerFFN(m.Layers-1), m.Heads*m.HeadDim))
	k := int64(m.ExpertsPerToken)
	if f := lookupFamily(m.Family); f != nil && f.recipe != nil && f.recipe(m, pinned).denseExperts {
		k = int64(m.Experts)
	}
	return max(w, 2*k*int64(m.ExpertFFN)+int64(m.SharedExperts)*int64(m.SharedExpertFFN))
}

// routers are the Router values.
var routers = []string{"softmax_topk_norm", "softmax_topk", "topk_softmax", "topk_sigmoid", "sigmoid_topk_norm", "softmax_gather_norm", "softmax_topk_scaled", "softmax_topk_norm_scatter"}

func knownRouter(s string) bool {
	for _, r := range routers {
		if s == r {
			return true
		}
	}
	return false
}

// Encoder reports whether the model attends bidirectionally with no KV cache.
func (m Model) Encoder() bool {
	f := lookupFamily(m.Family)
	return f != nil && f.kind == encoder
}

// EncoderDecoder reports whether the model is an encoder followed by a
// decoder that attends to the encoder's output (T5).
func (m Model) EncoderDecoder() bool {
	f := lookupFamily(m.Family)
	return f != nil && f.kind == encoderDecoder
}

// seq2seq is the encoder-decoder family's own ops outside its blocks, or
// nil (T5's, in encdec.go).
func (m Model) seq2seq() *seq2seqHooks {
	if f := lookupFamily(m.Family); f != nil {
		return f.seq2seq
	}
	return nil
}

// encoderLen is how many positions an encoder-decoder's encoder attends
// over for seq input frames or tokens: an audio front end's stride-2
// convolution halves them (modeling_whisper.py:579-583
// _get_feat_extract_output_lengths, (seq − 1) // 2 + 1).
func (m Model) encoderLen(seq int) int {
	if m.MelBins > 0 {
		return (seq-1)/2 + 1
	}
	return seq
}

// DecoderBlock reports whether block i is an encoder-decoder's decoder
// block (causal self-attention, then cross-attention to the encoder).
func (m Model) DecoderBlock(i int) bool {
	return m.DecoderLayers > 0 && i >= m.Layers-m.DecoderLayers
}

// stackStart reports whether block i is the first of its stack (an
// encoder-decoder's first encoder or first decoder block).
func (m Model) stackStart(i int) bool {
	return i == 0 || (m.DecoderLayers > 0 && i == m.Layers-m.DecoderLayers)
}

// ranges checks that every size field of a normalized model is within its
// bound, so that listing its tensors is cheap and no count overflows.
func (m Model) ranges() error {
	for _, f := range []struct {
		name string
		v    int
		max  int
	}{
		{"layers", m.Layers, maxLayers}, {"hidden", m.Hidden, maxWidth}, {"heads", m.Heads, maxHeads}, {"ffn", m.FFN, maxWidth},
		{"vocab", m.Vocab, maxWidth}, {"kv_heads", m.KVHeads, maxHeads}, {"head_dim", m.HeadDim, maxHeads},
		{"max_position", m.MaxPosition, MaxPositions}, {"experts", m.Experts, maxExperts}, {"expert_ffn", m.ExpertFFN, maxWidth},
		{"shared_experts", m.SharedExperts, maxExperts}, {"experts_per_token", m.ExpertsPerToken, maxExperts},
		{"shared_expert_ffn", m.SharedExpertFFN, maxWidth}, {"moe_latent", m.MoELatent, maxWidth}, {"dense_layers", m.DenseLayers, maxLayers}, {"moe_every", m.MoEEvery, maxLayers}, {"expert_groups", m.ExpertGroups, maxExperts},
		{"word_embed_proj_dim", m.WordEmbedProjDim, maxWidth}, {"type_vocab", m.TypeVocab, maxWidth},
		{"q_lora_rank", m.QLoRARank, maxWidth}, {"kv_lora_rank", m.KVLoRARank, maxWidth}, {"qk_nope_head_dim", m.QKNopeDim, maxHeads},
		{"qk_rope_head_dim", m.QKRopeDim, maxHeads}, {"v_head_dim", m.VHeadDim, maxHeads}, {"sliding_window", m.SlidingWindow, MaxPositions},
		{"index_heads", m.IndexHeads, maxHeads}, {"index_head_dim", m.IndexHeadDim, maxHeads},
		{"attention_chunk", m.AttentionChunk, MaxPositions}, {"global_every", m.GlobalEvery, maxLayers}, {"no_rope_every", m.NoRopeEvery, maxLayers},
		{"decoder_layers", m.DecoderLayers, maxLayers}, {"relative_buckets", m.RelativeBuckets, MaxPositions},
		{"mel_bins", m.MelBins, maxWidth}, {"source_positions", m.SourcePositions, MaxPositions}, {"downsample_channels", m.DownsampleChannels, maxChannels},
		{"global_head_dim", m.GlobalHeadDim, maxHeads}, {"global_kv_heads", m.GlobalKVHeads, maxHeads},
		{"per_layer_input", m.PerLayerInput, maxWidth}, {"per_layer_vocab", m.PerLayerVocab, maxWidth},
		{"altup_inputs", m.AltUpInputs, maxHeads}, {"laurel_rank", m.LaurelRank, maxWidth}, {"kv_shared_layers", m.KVSharedLayers, maxLayers},
	} {
		if f.v < 0 || f.v > f.max {
			return fmt.Errorf("model.%s = %d is out of range [0, %d]", f.name, f.v, f.max)
		}
	}
	if !(m.RotaryPct >= 0 && m.RotaryPct <= 1) {
		return fmt.Errorf("model.rotary_pct = %v must be in [0, 1]", m.RotaryPct)
	}
	if _, err := boundedProduct(maxTensors, "model.layers × (experts + shared_experts + 1)", int64(m.Layers), int64(m.Experts+m.SharedExperts)+1); err != nil {
		return err
	}
	if im := m.Image; im != nil && (im.Size < 0 || im.Size > maxImageSide || im.Patch < 0 || im.Channels < 0 || im.Channels > maxChannels) {
		return fmt.Errorf("model.image: size = %d must be in [0, %d] pixels and channels = %d in [0, %d]", im.Size, maxImageSide, im.Channels, maxChannels)
	}
	if im := m.Image; im != nil && (im.Registers < 0 || im.Registers > maxImageSide) {
		return fmt.Errorf("model.image.registers = %d must be in [0, %d]", im.Registers, maxImageSide)
	}
	if im := m.Image; im != nil && im.Patch > 0 && int64(im.Size/im.Patch)*int64(im.Size/im.Patch) > MaxPositions {
		return fmt.Errorf("model.image: size %d / patch %d makes %d patches an image, beyond %d", im.Size, im.Patch, int64(im.Size/im.Patch)*int64(im.Size/im.Patch), MaxPositions)
	}
	if im := m.Image; im != nil && (im.TemporalPatch < 0 || im.TemporalPatch > maxChannels || im.Merge < 0 || im.Merge > maxChannels || im.Window < 0 || im.Window > maxImageSide) {
		return fmt.Errorf("model.image: temporal_patch = %d and merge = %d must be in [0, %d], window = %d in [0, %d]", im.TemporalPatch, im.Merge, maxChannels, im.Window, maxImageSide)
	}
	if c := m.Conformer; c != nil && (min(c.SubsampleChannels[0], c.SubsampleChannels[1]) < 0 || max(c.SubsampleChannels[0], c.SubsampleChannels[1]) > maxChannels ||
		c.ConvKernel < 0 || c.ConvKernel > maxChannels || c.OutputDim < 0 || c.OutputDim > maxWidth) {
		return fmt.Errorf("model.conformer: subsample_channels %v and conv_kernel = %d must be in [0, %d], output_dim = %d in [0, %d]", c.SubsampleChannels, c.ConvKernel, maxChannels, c.OutputDim, maxWidth)
	}
	if c := m.Conformer; c != nil && (c.InputFeatures < 0 || c.InputFeatures > maxWidth || min(c.Chunk, c.ContextLeft, c.ContextRight) < 0 || max(c.Chunk, c.ContextLeft, c.ContextRight) > MaxPositions) {
		return fmt.Errorf("model.conformer: input_features = %d must be in [0, %d], chunk = %d, context_left = %d and context_right = %d in [0, %d]", c.InputFeatures, maxWidth, c.Chunk, c.ContextLeft, c.ContextRight, MaxPositions)
	}
	if err := m.speechRanges(); err != nil {
		return err
	}
	if a := m.Audio; a != nil {
		if a.Tower.Vision != nil || a.Tower.Audio != nil {
			return fmt.Errorf("model.audio.tower has a vision or audio side of its own")
		}
		if err := a.Tower.Normalize().ranges(); err != nil {
			return fmt.Errorf("model.audio.tower: %s", strings.TrimPrefix(err.Error(), "model."))
		}
	}
	if v := m.Vision; v != nil {
		if v.Tower.Vision != nil {
			return fmt.Errorf("model.vision.tower has a vision side of its own")
		}
		if err := v.Tower.Normalize().ranges(); err != nil {
			return fmt.Errorf("model.vision.tower: %s", strings.TrimPrefix(err.Error(), "model."))
		}
		if v.FeatureLayer < -maxLayers || v.FeatureLayer > maxLayers {
			return fmt.Errorf("model.vision.feature_layer = %d is out of range [-%d, %d]", v.FeatureLayer, maxLayers, maxLayers)
		}
	}
	return nil
}

// maxParams bounds a model's parameter count (2^55, 36 quadrillion): with
// 16 bytes of training state each it stays below maxPlanBytes.
const maxParams = 1 << 55

// countParams checks that the parameters and buffers of a model whose
// fields are in range have a representable size.
func (m Model) countParams() (n int64, err error) {
	defer recoverOverflow(&err)
	n = m.paramsLinearInExperts()
	if n > maxParams {
		return 0, fmt.Errorf("model: %d parameters is beyond any trainable or servable model (limit %d); check layers, hidden, ffn, vocab and experts", n, int64(maxParams))
	}
	var bufs []Buffer
	if m.Experts <= 2 {
		bufs = m.tensorSet().bufs // listed with the tensors ParamCount counted
	} else {
		bufs = m.Buffers() // as paramsLinearInExperts, without listing every expert
	}
	var buf Bytes
	for _, b := range bufs {
		buf = addBytes(buf, b.Bytes())
	}
	if buf > maxPlanBytes {
		return 0, fmt.Errorf("model: its buffers (causal masks of max_position² per block) take %d bytes; max_position = %d is too large for family %q", buf, m.MaxPosition, m.Family)
	}
	return n, nil
}

// paramsLinearInExperts is ParamCount found from the inventories of the
// model with one and with two routed experts: every tensor that depends
// on their number holds one copy or one row per expert (the experts'
// matrices, stacked or not, the router's rows, the correction biases), so
// the count is linear in it. A config naming thousands of experts over a
// thousand layers is so checked without listing millions of tensors
// (FromHFConfig's budget, fileio/budget). The two small models' tensors
// are the tensor cache's (tensors.go), so a model's estimates, each of
// which validates it, list them once.
func (m Model) paramsLinearInExperts() int64 {
	if m.Experts <= 2 {
		return m.ParamCount()
	}
	count := func(e int) Bytes {
		c := m.clone()
		c.Experts, c.ExpertsPerToken = e, min(c.ExpertsPerToken, e)
		return Bytes(c.ParamCount())
	}
	one, two := count(1), count(2)
	return int64(addBytes(one, mulBytes(int64(m.Experts-1), two-one)))
}

// ParamCount is the exact number of parameters: the sum over Tensors, tied
// matrices counted once.
func (m Model) ParamCount() int64 { return m.tensorSet().params }

// ActiveParamCount counts the parameters one token passes through: routed
// experts contribute ExpertsPerToken of Experts; a speech generator
// (Model.Speech), which no text token passes through, none.
func (m Model) ActiveParamCount() int64 {
	var n int64
	m = m.Normalize()
	for _, t := range m.tensors() {
		if t.Expert >= m.ExpertsPerToken || t.part == speechPart {
			continue
		}
		if t.Stacked > 0 {
			n += t.Numel() / int64(t.Stacked) * int64(m.ExpertsPerToken)
			continue
		}
		n += t.Numel()
	}
	return n
}
