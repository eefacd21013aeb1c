package vram

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// vLLM (V1 engine) serving memory, from its code: the worker profiles a
// forward pass of max_num_batched_tokens and gives the KV cache what is
// left of gpu_memory_utilization × the GPU's memory
// (vllm/v1/worker/gpu_worker.py, determine_available_memory); the cache is
// cut into blocks of block_size tokens, one page per layer per block
// (vllm/v1/core/kv_cache_utils.py, get_num_blocks:
// available // page_size // num_layers); a page is
// 2 · block_size · kv_heads · head_size · dtype bytes, one latent of
// kv_lora_rank + qk_rope_head_dim for MLA (vllm/v1/kv_cache_interface.py,
// FullAttentionSpec / MLAAttentionSpec.page_size_bytes); one request of
// max_model_len needs cdiv(max_model_len, block_size) pages per layer
// (max_memory_usage_bytes), and the startup log's "maximum concurrency" is
// num_blocks / that (get_max_concurrency_for_kv_cache_config).

// VLLM is a vLLM launch's memory settings. The zero value is vLLM's
// defaults.
type VLLM struct {
	// Version is the vLLM release the launch runs (a plan's
	// versions.vllm); empty is the current release, CurrentVLLM. The
	// release's own defaults and rules apply (vllm_releases.go).
	Version string `json:"-"`
	// GPUMemoryUtilization is --gpu-memory-utilization (default 0.92;
	// 0.9 before the 0.2x releases; 1.0 from 0.34, whose extensible KV
	// cache measures what vLLM uses instead of leaving headroom).
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization,omitempty" zero:"is refused by vLLM: its CacheConfig takes a fraction greater than 0 and at most 1 (Field(default=0.92, gt=0, le=1) in 0.33, 0.9 in 0.11)"`

	BlockSize    int   `json:"block_size,omitempty"`             // default 16 (64 from 0.34)
	MaxModelLen  int   `json:"max_model_len,omitempty"`          // default: the model's max_position
	KVCacheDType DType `json:"kv_cache_dtype,omitempty"`         // default bf16 ("auto" for bf16 models)
	TP           int   `json:"tensor_parallel_size,omitempty"`   // default 1
	PP           int   `json:"pipeline_parallel_size,omitempty"` // default 1
	// MaxNumBatchedTokens is --max-num-batched-tokens (default 8192): the
	// profile run's tokens, and what a sliding-window layer keeps beyond
	// its window.
	MaxNumBatchedTokens int `json:"max_num_batched_tokens,omitempty"`
	// MaxNumSeqs is --max-num-seqs: the profile run samples that many
	// dummy requests (at most max_num_batched_tokens). Carve defaults both
	// as `vllm serve` does on the plan's GPU (engine/arg_utils.py,
	// _set_default_args): 8192 tokens and 1024 sequences on a GPU of
	// 70 GiB or more that is not an A100, else 2048 and 256.
	MaxNumSeqs int `json:"max_num_seqs,omitempty"`
	// FlashInferSampler: the sampler runs FlashInfer's top-k/top-p kernel
	// (VLLM_USE_FLASHINFER_SAMPLER unset, where FlashInfer is installed, as
	// in the vllm/vllm-openai image); pip's vllm 0.11 does not install it
	// (the "flashinfer" extra), and its PyTorch sampler sorts the logits.
	// vllm 0.14.1 installs FlashInfer but runs its sampler only with
	// VLLM_USE_FLASHINFER_SAMPLER=1.
	FlashInferSampler bool `json:"flashinfer_sampler,omitempty"`
	// CUDAGraphMemory is what capturing CUDA graphs takes (vLLM logs
	// "Graph capturing finished … took X GiB", and since 0.21 "CUDA
	// graph pool memory: X GiB (actual)"). Given, it is used as is;
	// unset, a release that profiles the graphs before sizing the cache
	// has it estimated (vllm_graphs.go), an older one leaves it out.
	CUDAGraphMemory Bytes `json:"cuda_graph_memory,omitempty"`
	// EnforceEager is --enforce-eager: no CUDA graphs.
	EnforceEager bool `json:"enforce_eager,omitempty"`
	// Speculative is --speculative-config (vllm_spec.go): the method,
	// num_speculative_tokens and, for a separate draft, its model. The
	// draft's weights, its attention layers in the KV pool and the
	// proposer's buffers come off the memory before the cache.
	Speculative *SpeculativeConfig `json:"speculative_config,omitempty"`
	// Draft is the draft model of an "eagle", "eagle3" or "draft_model"
	// speculative_config: a plan reads speculative_config.model into it;
	// the Go API sets it beside Speculative.
	Draft *Model `json:"-"`
	// UseV1 is VLLM_USE_V1=1: up to 0.10.1.1 a model with recurrent
	// state runs on the V1 engine instead of falling back to V0, and
	// what V1 cannot run stops instead of falling back (vllm_v0.go).
	UseV1 bool `json:"use_v1,omitempty"`
	// AllowLongMaxModelLen is VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (or RoPE
	// scaling in the config): max_model_len may pass max_position.
	AllowLongMaxModelLen bool `json:"allow_long_max_model_len,omitempty"`
	// DisableHybridKVCache is --disable-hybrid-kv-cache-manager: every
	// layer's cache sized as full attention. vLLM turns the hybrid manager
	// off by itself for chunked local attention (Llama 4) unless
	// VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1
	// (AllowChunkedHybrid), and with a KV transfer or KV events config
	// (vllm/config/__init__.py VllmConfig.__post_init__).
	DisableHybridKVCache bool `json:"disable_hybrid_kv_cache_manager,omitempty"`
	AllowChunkedHybrid   bool `json:"allow_chunked_local_attn_with_hybrid_kv_cache,omitempty"`
	// MXFP4Backend is the kernel vLLM runs MXFP4 experts with
	// (mxfp4.py get_mxfp4_backend): "flashinfer" on compute capability
	// 10.x, "triton" on 9.x with the triton_kernels package (which vLLM
	// 0.11's wheel does not install and 0.14.1's vendors), else "marlin"
	// (weight-only); default by the GPU and the release: flashinfer on
	// 10.x, on 9.x the release's (vllm_releases.go), marlin below.
	MXFP4Backend string `json:"mxfp4_backend,omitempty"`
	// MambaCacheDType and MambaSSMCacheDType are --mamba-cache-dtype and
	// --mamba-ssm-cache-dtype: the dtypes of a recurrent layer's conv and
	// temporal states (bf16, vLLM's "auto" for a bf16 model, or fp32; the
	// temporal state defaults to the conv state's). See vllm_state.go.
	MambaCacheDType    DType `json:"mamba_cache_dtype,omitempty"`
	MambaSSMCacheDType DType `json:"mamba_ssm_cache_dtype,omitempty"`
	// A vision-language model's encoder is profiled before the cache is
	// sized (vllm_mm.go): SkipMMProfiling is --skip-mm-profiling;
	// LimitMMPerPrompt is --limit-mm-per-prompt ({"image": 0, "video": 0}
	// makes the model text-only, {"audio": 0} drops a model's audio tower;
	// each modality defaults to 999); MaxPixels
	// is --mm-processor-kwargs' max_pixels, the largest image the processor
	// passes (default: the model's preprocessor_config.json).
	SkipMMProfiling  bool           `json:"skip_mm_profiling,omitempty"`
	LimitMMPerPrompt map[string]int `json:"limit_mm_per_prompt,omitempty"`
	MaxPixels        int            `json:"max_pixels,omitempty"`
	// MMEncoderTPMode is --mm-encoder-tp-mode: "weights" (the default)
	// splits the vision tower's weights over the TP ranks, "data" keeps
	// them whole on every rank and shares the images out among the ranks,
	// where the model supports it (vision_tp.go).
	MMEncoderTPMode string `json:"mm_encoder_tp_mode,omitempty"`
	// heldAtStart is what other processes hold on the GPU when vLLM starts
	// (a colocated trainer's tensors and contexts, posttraining_phases.go):
	// not free for the KV cache 0.34's extensible cache measures.
	heldAtStart Bytes
}

func (v VLLM) withDefaults(m Model, rel vllmRelease) VLLM {
	v = v.compressedDefaults(m) // vllm_compressed.go
	if v.GPUMemoryUtilization == 0 {
		v.GPUMemoryUtilization = rel.utilization
	}
	if v.BlockSize == 0 {
		v.BlockSize = rel.blockSize
	}
	if v.MaxModelLen == 0 {
		v.MaxModelLen = m.MaxPosition
	}
	if v.KVCacheDType == DTypeUnset {
		v.KVCacheDType = BF16
	}
	if v.MaxNumBatchedTokens == 0 {
		v.MaxNumBatchedTokens = 8192
	}
	v.TP, v.PP = max(1, v.TP), max(1, v.PP)
	return v
}

func (v VLLM) check(m Model, rel vllmRelease) error {
	if !(v.GPUMemoryUtilization > 0 && v.GPUMemoryUtilization <= 1) { // NaN fails too
		return fmt.Errorf("vllm: gpu_memory_utilization must be in (0, 1], got %v", v.GPUMemoryUtilization)
	}
	if v.BlockSize < 1 || v.BlockSize > 1<<16 {
		return fmt.Errorf("vllm: block_size must be in [1, 65536], got %d", v.BlockSize)
	}
	switch {
	case v.MaxModelLen == AutoMaxModelLen && !rel.autoMaxModelLen:
		return fmt.Errorf("vllm: max_model_len auto (-1): vLLM %s has no --max-model-len auto (the releases from 0.33 modelled here pick the longest that fits); give a length", rel.Version)
	case v.MaxModelLen == AutoMaxModelLen && m.MaxPosition < 1:
		return fmt.Errorf("vllm: max_model_len auto (-1) fits up to the model's max_position, which it does not set: give a length")
	case v.MaxModelLen != AutoMaxModelLen && (v.MaxModelLen < 1 || v.MaxModelLen > MaxTokens):
		return fmt.Errorf("vllm: max_model_len must be in [1, %d] or -1 (auto), got %d (the model sets no max_position: give one)", MaxTokens, v.MaxModelLen)
	}
	if v.MaxNumSeqs < 0 || v.MaxNumSeqs > MaxTokens {
		return fmt.Errorf("vllm: max_num_seqs must be in [1, %d], got %d", MaxTokens, v.MaxNumSeqs)
	}
	if v.MaxNumBatchedTokens < 1 || v.MaxNumBatchedTokens > MaxTokens {
		return fmt.Errorf("vllm: max_num_batched_tokens must be in [1, %d], got %d", MaxTokens, v.MaxNumBatchedTokens)
	}
	for k, n := range v.LimitMMPerPrompt {
		if mods := vllmModalities(m); !slices.Contains(mods, k) || n < 0 || n > MaxTokens {
			return fmt.Errorf("vllm: limit_mm_per_prompt %q: %d: this model's modalities are %s, each a count in [0, %d]", k, n, strings.Join(mods, " and "), MaxTokens)
		}
	}
	if v.MaxPixels < 0 || v.MaxPixels > MaxPositions*1024 {
		return fmt.Errorf("vllm: max_pixels must be in [0, %d], got %d", MaxPositions*1024, v.MaxPixels)
	}
	if v.MMEncoderTPMode != "" {
		if err := oneOf("vllm: mm_encoder_tp_mode", v.MMEncoderTPMode, "weights", "data"); err != nil {
			return err
		}
	}
	if v.CUDAGraphMemory < 0 || v.CUDAGraphMemory > maxPlanBytes {
		return fmt.Errorf("vllm: cuda_graph_memory must be in [0, %d] bytes, got %d", int64(maxPlanBytes), int64(v.CUDAGraphMemory))
	}
	if m.MaxPosition > 0 && v.MaxModelLen > m.MaxPosition && !v.AllowLongMaxModelLen {
		// vLLM refuses it (ModelConfig's _get_and_verify_max_len) unless
		// VLLM_ALLOW_LONG_MAX_MODEL_LEN is set.
		return fmt.Errorf("vllm: max_model_len %d is greater than the model's max_position_embeddings %d: vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (allow_long_max_model_len) or the config scales RoPE", v.MaxModelLen, m.MaxPosition)
	}
	if v.TP > maxHeads || v.PP > max(1, m.Layers) {
		return fmt.Errorf("vllm: tensor_parallel_size %d / pipeline_parallel_size %d do not fit the model's %d heads and %d layers", v.TP, v.PP, m.KVHeads, m.Layers)
	}
	if m.Encoder() || m.EncoderDecoder() {
		return fmt.Errorf("vllm: the KV cache model covers decoder-only models, not %q", m.Family)
	}
	if err := rel.checkArchitecture(m, v.Version); err != nil {
		return err
	}
	if err := v.checkV0Fallback(m, rel); err != nil { // vllm_v0.go
		return err
	}
	if err := v.checkCompressed(m); err != nil {
		return err
	}
	if _, err := v.spec(m, rel); err != nil { // vllm_spec.go
		return err
	}
	if m.recurrent() && v.DisableHybridKVCache && m.attentionLayers(0, m.Layers) > 0 {
		// unify_hybrid_kv_cache_specs cannot make state pages attention.
		return fmt.Errorf("vllm: disable_hybrid_kv_cache_manager: %q pools attention and recurrent-state layers, which vLLM cannot convert to one type (ValueError: Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one unified type)", m.Family)
	}
	if err := v.checkMamba(); err != nil {
		return err
	}
	if m.recurrent() {
		if _, err := v.statePage(m); err != nil {
			return err
		}
	}
	if err := v.KVCacheDType.validKV(); err != nil {
		return fmt.Errorf("vllm: %w", err)
	}
	return nil
}

// VLLMKVCache is the block arithmetic of one GPU's KV cache.
type VLLMKVCache struct {
	Available Bytes `json:"available"`  // memory given to the KV cache
	PageBytes Bytes `json:"page_bytes"` // one layer's page of BlockSize tokens
	Layers    int   `json:"layers"`     // layers with a cache on this GPU
	BlockSize int   `json:"block_size"`
	Blocks    int64 `json:"blocks"` // num_gpu_blocks
	Tokens    int64 `json:"tokens"` // "GPU KV cache size: N tokens"
	// PerRequest is what one request of max_model_len needs (all layers):
	// the "KV cache is needed" figure.
	PerRequest  Bytes `json:"per_request"`
	MaxModelLen int   `json:"max_model_len"`
	// MaxConcurrency is "Maximum concurrency for max_model_len tokens per
	// request": Blocks / cdiv(max_model_len, block_size).
	MaxConcurrency float64 `json:"max_concurrency"`
	// Fits is false when one request of max_model_len does not fit, the
	// ValueError vLLM raises at startup (Err, worded as vLLM words it);
	// EstimatedMaxModelLen is then its estimate_max_model_len.
	Fits                 bool   `json:"fits"`
	EstimatedMaxModelLen int    `json:"estimated_max_model_len,omitempty"`
	Err                  string `json:"error,omitempty"`
	// Groups are vLLM's KV cache groups: one for a model whose layers all
	// attend alike; for a hybrid model (sliding-window or chunked layers
	// beside global ones) the layers of each kind in groups of GroupSize.
	Groups    []VLLMGroup `json:"groups"`
	GroupSize int         `json:"group_size"`
	// Compressed is how vLLM pools a model with DeepSeek-V4's compressed
	// attention (vllm_compressed.go): Groups then have block sizes of
	// their own and PageBytes is what a block id costs in all of them.
	Compressed *VLLMCompressedCache `json:"compressed,omitempty"`
	// StateLayers are the recurrent layers on this GPU (Mamba-2 mixers,
	// short convolutions, Gated DeltaNet), each keeping StatePageBytes per
	// request whatever its length, in pages padded to PageBytes (their
	// group's kind is "mamba"); StateKind is vLLM's mamba_type.
	StateLayers    int    `json:"state_layers,omitempty"`
	StatePageBytes Bytes  `json:"state_page_bytes,omitempty"`
	StateKind      string `json:"state_kind,omitempty"`
	// DraftLayers are a speculative draft's attention layers in the pool
	// (the checkpoint's MTP layers, or a draft model's), counted in
	// Layers; DraftPageBytes is their page where it is not PageBytes (a
	// full-attention draft of another shape, in the one group whose page
	// is the sum of its layers' pages: vllm_spec.go).
	DraftLayers    int   `json:"draft_layers,omitempty"`
	DraftPageBytes Bytes `json:"draft_page_bytes,omitempty"`
	// Notes say how the recurrent state is pooled.
	Notes []string `json:"notes,omitempty"`
	// mbt is the tokens in flight a window keeps room for; statePages the
	// state pages a recurrent layer takes per request.
	mbt, statePages int
	kinds           []VLLMGroup // the layers of each kind, before grouping
}

// AutoMaxModelLen is VLLM.MaxModelLen's --max-model-len auto (or -1).
const AutoMaxModelLen = -1

// VLLMGroup is one KV cache group: its kind ("full", "sliding_window",
// "chunked_local", or "mamba" for recurrent state) and span (the window or
// chunk), and its layers.
type VLLMGroup struct {
	Kind   string `json:"kind"`
	Span   int    `json:"span,omitempty"`
	Layers int    `json:"layers"` // real layers (the rest of GroupSize is padding)
	// Block is the group's own block size where groups differ in it (a
	// compressed-attention model's; 0: the cache's), Bytes what its
	// layers' pages take of a block.
	Block int   `json:"block_size,omitempty"`
	Bytes Bytes `json:"bytes,omitempty"`
}

// pagesFor is the pages one layer of group g needs for a request of n
// tokens (kv_cache_interface.py, max_memory_usage_bytes / page size):
// every block for full attention; for a sliding window only the last
// window − 1 tokens and the batches in flight (mbt), plus one block for
// the window not starting at a block boundary; for chunked local
// attention a chunk and the batches in flight; the release's pages of
// state for a recurrent layer.
func (g VLLMGroup) pagesFor(n, block, mbt, statePages int) int64 {
	if g.Block > 0 {
		block = g.Block
	}
	switch g.Kind {
	case "mamba":
		return int64(max(1, statePages))
	case "sliding_window":
		return cdiv64(int64(min(g.Span-1+mbt, n)), int64(block)) + 1
	case "chunked_local":
		return cdiv64(int64(min(g.Span+mbt, n)), int64(block))
	}
	return cdiv64(int64(n), int64(block))
}

// blocksFor is the blocks one request of n tokens takes: the sum over the
// groups (get_max_concurrency_for_kv_cache_config).
func (c VLLMKVCache) blocksFor(n int) int64 {
	var b int64
	for _, g := range c.Groups {
		b += g.pagesFor(n, c.BlockSize, c.mbt, c.statePages)
	}
	return b
}

// pageBytes is one layer's page (kv_cache_interface.py).
func (v VLLM) pageBytes(m Model) Bytes {
	if m.KVLoRARank > 0 {
		// MLAAttentionSpec: one latent per token, kv_lora_rank +
		// qk_rope_head_dim wide, no separate K and V.
		page := v.KVCacheDType.Size(int64(v.BlockSize) * int64(m.KVLoRARank+m.QKRopeDim))
		if m.IndexHeadDim > 0 {
			// DeepSeek Sparse Attention: each layer's indexer registers a
			// cache layer of its own (DeepseekV32IndexerCache, an
			// MLAAttentionSpec of one head), pooled with the latents in
			// one group whose page is the sum of its layers' pages
			// (UniformTypeKVCacheSpecs.page_size_bytes, v1/kv_cache_interface.py
			// l.275-277 in 0.11.0, l.1319-1320 in 0.33.0): a layer's
			// share is its latent page and its indexer page (dsa.go).
			page += Bytes(int64(v.BlockSize) * dsaIndexKeyBytes(m))
		}
		return page
	}
	// vLLM replicates KV heads when TP exceeds them:
	// num_kv_heads = max(1, total_num_kv_heads // tp) (ModelConfig.get_num_kv_heads).
	kv := max(1, m.KVHeads/v.TP)
	return v.KVCacheDType.Size(2 * int64(v.BlockSize) * int64(kv) * int64(m.HeadDim))
}

// KVCache cuts available bytes (per GPU) into vLLM's blocks for model m,
// as the launch's release does (v1/core/kv_cache_utils.py; 0.33:
// kv_cache_planning.py). Layers that attend alike form one group; a
// hybrid model's kinds (sliding-window, chunked or global attention,
// recurrent state: vllm_state.go) are grouped as
// _get_kv_cache_groups_uniform_page_size does: a group size of the
// smallest kind's layer count (0.33: the largest's, when under 1.5 × the
// smallest's), each kind cut into groups of that size (the last padded),
// the memory split into GroupSize pools of equal blocks, and the reported
// tokens the blocks a group gets times the smallest block size (0.11's
// _report; 0.33 logs max concurrency × max_model_len).
func (v VLLM) KVCache(m Model, available Bytes) (VLLMKVCache, error) {
	m = m.Normalize()
	if err := m.Validate(); err != nil {
		return VLLMKVCache{}, err
	}
	rel, _, err := v.release()
	if err != nil {
		return VLLMKVCache{}, err
	}
	v = v.withDefaults(m, rel)
	if err := v.check(m, rel); err != nil {
		return VLLMKVCache{}, err
	}
	if m.Compressed != nil {
		return v.compressedKVCache(m, available, rel)
	}
	layers := (m.Layers + v.PP - 1) / v.PP // the first stage holds the most
	sp, _ := v.spec(m, rel)                // checked above
	c := VLLMKVCache{Available: available, Layers: layers, MaxModelLen: v.MaxModelLen, mbt: rel.inFlightBatches * v.MaxNumBatchedTokens, statePages: rel.statePagesFor(m)}
	if sp != nil && rel.spec.statePages {
		c.statePages += sp.k // num_speculative_blocks (layers/mamba/abstract.py:72-91)
	}
	if err := v.pages(&c, m, rel); err != nil {
		return VLLMKVCache{}, err
	}
	c.kinds = v.layerKinds(m, layers)
	if err := v.draftLayers(&c, sp, m); err != nil {
		return VLLMKVCache{}, err
	}
	if last := c.kinds[len(c.kinds)-1]; last.Kind == "mamba" {
		c.StateLayers = last.Layers
	}
	c.Groups, c.GroupSize = groupKinds(c.kinds, rel.groupLargest)
	if available > 0 {
		c.Blocks = int64(available) / int64(c.BlockBytes())
	}
	// The capacity check's memory: 0.33 first sets the block pool's null
	// block aside (kv_cache_planning.py:1532-1543).
	check := available
	if rel.nullBlock {
		check = max(0, available-c.BlockBytes())
	}
	if c.MaxModelLen == AutoMaxModelLen {
		c.autoFit(m, check)
	}
	c.fill(rel, check, v.fitAdvice(rel))
	if note := m.globalShapeNote("vLLM"); note != "" {
		c.Notes = append(c.Notes, note)
	}
	return c, nil
}

// autoFit is --max-model-len auto (0.33 kv_cache_planning.py
// _auto_fit_max_model_len): the longest length up to the model's
// max_position one request of which fits.
func (c *VLLMKVCache) autoFit(m Model, check Bytes) {
	c.MaxModelLen = m.MaxPosition
	n := c.fitLen(check)
	switch {
	case n <= 0:
		c.MaxModelLen = 1
		c.Notes = append(c.Notes, "max_model_len auto: not enough memory for a single token (vLLM: Cannot auto-fit max_model_len)")
	case n < m.MaxPosition:
		c.MaxModelLen = n
		c.Notes = append(c.Notes, fmt.Sprintf("max_model_len auto: reduced from %d to %d to fit in the available KV cache memory (vLLM's Auto-fit max_model_len)", m.MaxPosition, n))
	default:
		c.Notes = append(c.Notes, fmt.Sprintf("max_model_len auto: the model's full context, %d tokens, fits", m.MaxPosition))
	}
}

// fill works out the figures vLLM logs and whether one request of
// max_model_len fits in check bytes (check_enough_kv_cache_memory), with
// the release's advice when it does not.
func (c *VLLMKVCache) fill(rel vllmRelease, check Bytes, advice string) {
	c.MaxConcurrency = float64(c.Blocks) / float64(c.blocksFor(c.MaxModelLen))
	c.Tokens = c.Blocks / int64(len(c.Groups)) * int64(c.minBlock())
	if rel.tokensByConcurrency {
		c.Tokens = int64(c.MaxConcurrency * float64(c.MaxModelLen))
	}
	c.PerRequest = c.neededFor(c.MaxModelLen)
	c.Fits = c.PerRequest <= check
	if !c.Fits {
		c.EstimatedMaxModelLen = c.fitLen(check)
		est := ""
		if c.EstimatedMaxModelLen > 0 {
			est = fmt.Sprintf("Based on the available memory, the estimated maximum model length is %d.", c.EstimatedMaxModelLen)
		}
		whose := "models's" // 0.11's spelling
		if rel.nullBlock {
			whose = "model's"
		}
		c.Err = fmt.Sprintf("To serve at least one request with the %s max seq len (%d), (%s GiB KV cache is needed, which is larger than the available KV cache memory (%s GiB). %s %s",
			whose, c.MaxModelLen, formatGiB(c.PerRequest), formatGiB(check), est, advice)
	}
	c.Notes = append(c.Notes, c.stateNotes()...)
}

// fitAdvice is what vLLM's refusal of a cache too small for one request
// advises: 0.34's extensible cache, its measured size
// (v1/core/kv_cache_planning.py:64-91, 124-132, called after warmup,
// l.1849-1860), else the utilization.
func (v VLLM) fitAdvice(rel vllmRelease) string {
	if rel.extensibleKV {
		return extensibleHint(v.GPUMemoryUtilization, true) + " Decreasing `max_model_len` also reduces what is needed."
	}
	return "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
}

// extensibleHint is 0.34's advice where the extensible KV cache is short
// (v1/core/kv_cache_planning.py:64-91, _more_kv_cache_memory_hint),
// before warmup (the capacity) or after it (the measured size).
func extensibleHint(util float64, afterWarmup bool) string {
	used, graphs := "the model and its activations", ""
	if afterWarmup {
		used, graphs = "the model, its activations, CUDA graphs and warmup", " CUDA graphs take less with fewer or smaller capture sizes in the compilation config."
	}
	if util < 1 {
		return fmt.Sprintf("The KV cache gets what is left after %s within `gpu_memory_utilization`=%v; increase it (with the extensible KV cache it defaults to 1.0) or decrease `max_model_len` or `max_num_seqs`.%s", used, util, graphs)
	}
	return fmt.Sprintf("The extensible KV cache already takes all device memory left after %s; decrease `max_model_len` or `max_num_seqs`, or the model needs a device with more memory.%s", used, graphs)
}

// pages sets the block size and the page of one layer: an attention page
// (the block size raised for a hybrid's state), or a state page alone for
// a model of recurrent layers only.
func (v VLLM) pages(c *VLLMKVCache, m Model, rel vllmRelease) error {
	c.BlockSize, c.PageBytes = v.BlockSize, v.pageBytes(m)
	if !m.recurrent() {
		return nil
	}
	state, err := v.statePage(m)
	if err != nil {
		return err
	}
	c.StatePageBytes, c.StateKind = state, stateKind(m)
	if m.attentionLayers(0, m.Layers) == 0 {
		c.PageBytes = state // not hybrid: the state page, unpadded
		return nil
	}
	v.BlockSize = v.hybridBlockSize(m, state, rel)
	c.BlockSize, c.PageBytes = v.BlockSize, v.pageBytes(m)
	return nil
}

// layerKinds counts the first stage's layers by kind, attention kinds in
// order of first appearance and then the recurrent layers (the order vLLM
// collects their specs in; a Falcon-H1 layer counts in both).
func (v VLLM) layerKinds(m Model, layers int) []VLLMGroup {
	var kinds []VLLMGroup
	add := func(k VLLMGroup) {
		for j := range kinds {
			if kinds[j].Kind == k.Kind && kinds[j].Span == k.Span {
				kinds[j].Layers++
				return
			}
		}
		k.Layers = 1
		kinds = append(kinds, k)
	}
	hybrid := !v.DisableHybridKVCache && (m.AttentionChunk == 0 || v.AllowChunkedHybrid)
	state := 0
	for i := 0; i < layers; i++ {
		if m.RecurrentLayer(i) {
			state++
		}
		if !m.AttentionLayer(i) {
			continue
		}
		if m.KVSharedLayer(i) {
			// A layer reading an earlier layer's keys and values
			// (kv_sharing_target_layer_name) gets no cache spec: vLLM
			// leaves it out of the pool (v1/worker/gpu_model_runner.py
			// l.4054 in 0.11.0, l.7096-7108 in 0.33.0; Gemma 3n's last
			// num_kv_shared_layers, model_executor/models/gemma3n.py
			// l.355-382 in 0.33.0).
			continue
		}
		k := VLLMGroup{Kind: "full"}
		if m.LocalLayer(i) && hybrid {
			k = VLLMGroup{Kind: "sliding_window", Span: m.SlidingWindow}
			if m.AttentionChunk > 0 {
				k = VLLMGroup{Kind: "chunked_local", Span: m.AttentionChunk}
			}
		}
		add(k)
	}
	if state > 0 {
		kinds = append(kinds, VLLMGroup{Kind: "mamba", Layers: state})
	}
	return kinds
}

// groupKinds cuts the kinds into groups of the smallest kind's layer
// count, the last of each kind padded (0.11.0 kv_cache_utils.py l.974-1001);
// with largest (0.33 kv_cache_planning.py:519-533) of the largest kind's
// when that is under 1.5 × the smallest's.
func groupKinds(kinds []VLLMGroup, largest bool) ([]VLLMGroup, int) {
	if len(kinds) == 1 {
		return kinds, kinds[0].Layers
	}
	size, most := kinds[0].Layers, kinds[0].Layers
	for _, k := range kinds {
		size, most = min(size, k.Layers), max(most, k.Layers)
	}
	if largest && 2*most < 3*size {
		size = most
	}
	var groups []VLLMGroup
	for _, k := range kinds {
		for left := k.Layers; left > 0; left -= size {
			g := k
			g.Layers = min(left, size)
			groups = append(groups, g)
		}
	}
	return groups, size
}

// minBlock is the smallest block size among the groups, which vLLM's
// "GPU KV cache size: N tokens" multiplies by: a state group's is
// max_model_len.
func (c VLLMKVCache) minBlock() int {
	switch {
	case c.StateLayers == 0:
		return c.BlockSize
	case c.hybrid():
		return min(c.BlockSize, c.MaxModelLen)
	}
	return c.MaxModelLen
}

// neededFor is what one request of n tokens takes in every layer on this
// GPU (max_memory_usage_bytes summed over the layers' specs).
func (c VLLMKVCache) neededFor(n int) Bytes {
	kv, state := c.PerRequestFor(n)
	return kv + state
}

// fitLen is the longest length in [1, max_model_len] one request of which
// fits available (estimate_max_model_len's binary search).
func (c VLLMKVCache) fitLen(available Bytes) int {
	return largest(c.MaxModelLen, func(n int) bool { return c.neededFor(n) <= available })
}

// MaxConcurrencyFor is how many requests of tokens each the cache holds at
// once (vLLM's concurrency figure for that length).
func (c VLLMKVCache) MaxConcurrencyFor(tokens int) float64 {
	if tokens < 1 {
		return 0
	}
	return float64(c.Blocks) / float64(c.blocksFor(tokens))
}

// MaxConcurrencyWithPrefix is how many requests of tokens each the cache
// holds when all share their first prefix tokens (a system prompt, with
// prefix caching on): the full blocks of the shared prefix are stored
// once (vLLM's prefix cache shares whole blocks by hash), the rest per
// request. Full-attention groups only; a sliding-window group keeps no
// shareable prefix past its window and is counted per request.
func (c VLLMKVCache) MaxConcurrencyWithPrefix(tokens, prefix int) float64 {
	if tokens < 1 {
		return 0
	}
	prefix = min(max(prefix, 0), tokens)
	shared := int64(prefix / c.BlockSize) // whole blocks only
	if c.StateLayers > 0 {
		shared = 0 // vLLM turns prefix caching off for recurrent models
	}
	var sharedBlocks, perRequest int64
	for _, g := range c.Groups {
		need := g.pagesFor(tokens, c.BlockSize, c.mbt, c.statePages)
		if g.Kind == "full" {
			sharedBlocks += shared
			need -= shared
		}
		perRequest += need
	}
	if c.Blocks <= sharedBlocks || perRequest <= 0 {
		return 0
	}
	return float64(c.Blocks-sharedBlocks) / float64(perRequest)
}

// MaxContextFor is the longest context each of n concurrent requests can
// have, at most max_model_len (vLLM refuses longer requests); 0 when n
// requests of one token do not fit.
func (c VLLMKVCache) MaxContextFor(n int) int64 {
	if n < 1 {
		return 0
	}
	// The longest length whose blocks n requests can have at once.
	return int64(largest(c.MaxModelLen, func(l int) bool { return int64(n)*c.blocksFor(l) <= c.Blocks }))
}

// formatGiB is vllm.utils.mem_utils.format_gib: GiB with two decimals.
func formatGiB(b Bytes) string {
	return fmt.Sprintf("%.2f", float64(b)/float64(GiB))
}

func cdiv64(a, b int64) int64 { return (a + b - 1) / b }

// VLLMCarve is how vLLM divides one GPU: the memory it may use, what the
// weights, the profile run's activations and memory outside PyTorch take,
// and the KV cache that is left.
type VLLMCarve struct {
	// Starts is false when vLLM would not start on this GPU; Err then says
	// why in vLLM's words (a quantization method the GPU cannot run, too
	// little free memory, weights larger than the GPU, no memory left for
	// the KV cache, or a cache too small for one request of max_model_len).
	Starts bool   `json:"starts"`
	Err    string `json:"error,omitempty"`
	// DeviceUsed is what nvidia-smi shows once vLLM has started: it takes
	// its share of the GPU up front, whatever the load.
	DeviceUsed Bytes    `json:"device_used"`
	Notes      []string `json:"notes,omitempty"`
	Requested  Bytes    `json:"requested"`  // gpu_memory_utilization × the GPU's memory
	Weights    Bytes    `json:"weights"`    // "Model loading took …"
	Activation Bytes    `json:"activation"` // the profile run's peak above the weights
	// MMProfile is a vision-language model's encoder profile (nil for
	// others, or when skipped): Activation is the larger of its encoder
	// call and what it holds beside the language model's run.
	MMProfile *VLLMMMProfile `json:"mm_profile,omitempty"`
	NonTorch  Bytes          `json:"non_torch"` // memory outside PyTorch's allocator
	// NCCL is NonTorch's NCCL share: the communicator the profile
	// creates with TP (serving_nccl.go).
	NCCL Bytes `json:"nccl,omitempty"`
	// CUDAGraphs is the CUDA graphs' pool (VLLM.CUDAGraphMemory as given,
	// or estimated as the release's profile does: vllm_graphs.go).
	CUDAGraphs Bytes `json:"cuda_graphs"`
	// RunnerBuffers are Model Runner V2's sampler tables (0.33).
	RunnerBuffers Bytes `json:"runner_buffers,omitempty"`
	// Speculative is what speculative decoding adds (vllm_spec.go): the
	// draft's weights (inside Weights), its KV layers (inside the
	// cache's layers), the proposer's buffers (taken beside the weights)
	// and the drafter's profile forward.
	Speculative *VLLMSpeculative `json:"speculative,omitempty"`
	// SuggestedKVCacheMemory and SuggestedKVCacheMemoryGPU are the
	// --kv-cache-memory values vLLM's log suggests, to fit the requested
	// memory and the whole free GPU.
	SuggestedKVCacheMemory    Bytes `json:"suggested_kv_cache_memory"`
	SuggestedKVCacheMemoryGPU Bytes `json:"suggested_kv_cache_memory_gpu"`
	// FreeAtStart is the device's free memory when the worker starts (its
	// init snapshot's, the startup plan's free_memory_baseline): the GPU's
	// CUDA total less its context.
	FreeAtStart Bytes `json:"free_at_start"`
	// GraphsInBudget: the release profiles the CUDA graphs and sizes the
	// KV cache without them, so they are inside Requested; else they are
	// captured after the cache, beside it.
	GraphsInBudget bool `json:"cuda_graphs_in_budget"`
	// ExtensibleKVCache: the release sizes the KV cache from the memory
	// measured after warmup and capture (0.34, measuredKV), keeping free
	// TransientReserve, the profile's transient peak and the CUDA-graph
	// estimate (peak_activation_memory), and KVMargin beyond it,
	// max(1 GiB, 0.75 × TransientReserve).
	ExtensibleKVCache bool  `json:"extensible_kv_cache,omitempty"`
	TransientReserve  Bytes `json:"transient_reserve,omitempty"`
	KVMargin          Bytes `json:"kv_margin,omitempty"`
	// free is the device's free memory when vLLM starts: its CUDA total
	// less its context and what other processes hold.
	free Bytes
	// Release is the vLLM release the carve modelled.
	Release Modelled `json:"release"`
	// ProfileTokens and ProfileSeqs are the profile run's
	// max_num_batched_tokens and max_num_seqs, as given or as vLLM
	// defaults them on this GPU.
	ProfileTokens int         `json:"profile_tokens"`
	ProfileSeqs   int         `json:"profile_seqs"`
	KVCache       VLLMKVCache `json:"kv_cache"`
}

// Carve estimates a vLLM launch of in's model and weights on g, as the
// launch's release (VLLM.Version) runs it: the weights as the engine sizes
// them, the profile run as a prefill of max_num_batched_tokens (the
// engine's activation peak for it) or its sampler warm-up, outside
// PyTorch the GPU's CUDA context, Model Runner V2's sampler tables and,
// where the release profiles them, the CUDA graphs (vllm_graphs.go); the
// KV cache gets what is left of gpu_memory_utilization × the GPU's memory
// (gpu_worker.py determine_available_memory).
func (v VLLM) Carve(in Inference, g GPU) (VLLMCarve, error) {
	if err := servesOn("vLLM", g); err != nil {
		return VLLMCarve{}, err
	}
	rel, modelled, err := v.release()
	if err != nil {
		return VLLMCarve{}, err
	}
	in.Cache = "paged"
	if v.MaxNumBatchedTokens > 0 {
		in.MaxBatchedTokens = v.MaxNumBatchedTokens
	}
	v = v.serverDefaults(in.MaxBatchedTokens, in.Model.MaxPosition, g, rel)
	in.MaxBatchedTokens = v.MaxNumBatchedTokens
	in.Batch, in.PromptTokens, in.NewTokens = 1, in.MaxBatchedTokens, 0
	in.TP, in.PP = max(1, v.TP), max(1, v.PP)
	in.towerWhole = v.towerData(in.Model)                          // vision_tp.go
	in.towerOff = v.textOnly(in.Model)                             // vllm_mm.go
	in.towerCut = vllmCutsTower(in.Model)                          // vllm_mm.go
	in.audioOff = in.Model.Audio != nil && v.mmLimit("audio") == 0 // audio.go
	rin, m, err := in.resolve()
	if err != nil {
		return VLLMCarve{}, err
	}
	v = v.withDefaults(m, rel)
	if err := v.check(m, rel); err != nil {
		return VLLMCarve{}, err
	}
	if err := v.checkV0GPU(g, rel); err != nil { // vllm_v0.go
		return VLLMCarve{}, err
	}
	backend, err := v.mxfp4Backend(g, rel)
	if err != nil {
		return VLLMCarve{}, err
	}
	sp, _ := v.spec(m, rel) // checked above (vllm_spec.go)
	in.runtime, in.cc, in.mxfp4 = runVLLM, g.ComputeCapability, backend
	rin.runtime, rin.cc, rin.mxfp4 = runVLLM, g.ComputeCapability, backend
	in.PromptTokens = sp.profileTokens(v)
	est, err := in.Estimate()
	if err != nil {
		return VLLMCarve{}, err
	}
	nccl, ncclNote, err := vllmNCCL(v.TP, g, rel)
	if err != nil {
		return VLLMCarve{}, err
	}
	c := VLLMCarve{Release: modelled, Requested: v.requested(g, rel), Weights: rin.weightBytes(m), NonTorch: g.Context + nccl, NCCL: nccl, Notes: est.Notes}
	if ncclNote != "" {
		c.Notes = append(c.Notes, ncclNote)
	}
	if err := c.speculative(sp, v, rin, in, m); err != nil {
		return VLLMCarve{}, err
	}
	if err := c.profile(v, rel, in, m, est); err != nil {
		return VLLMCarve{}, err
	}
	if err := c.draftForward(sp, v, in, m); err != nil {
		return VLLMCarve{}, err
	}
	if rel.runnerV2 && (sp == nil || !slices.Contains(rel.spec.v1Runner, sp.method)) {
		c.RunnerBuffers = v.runnerBuffers(m)
	}
	if err := c.graphs(v, rel, in, g, sp.queryLen()); err != nil {
		return VLLMCarve{}, err
	}
	c.measure(v, rel, g)
	c.ProfileTokens, c.ProfileSeqs = v.MaxNumBatchedTokens, v.MaxNumSeqs
	c.Notes = append(c.Notes, rin.engineNotes(m, "vLLM")...)
	if note := v.transformersBackendNote(m, rel); note != "" { // vllm_transformers_backend.go
		c.Notes = append(c.Notes, note)
	}
	if c.Err = rin.engineRefuses(m, g, rel.modeloptCC); c.Err == "" {
		c.Err = c.startup(v, g)
	}
	c.KVCache, err = v.KVCache(m, c.available())
	if err != nil {
		return c, err
	}
	if c.ExtensibleKVCache {
		c.Notes = append(c.Notes, c.extensibleNote())
	}
	if c.Err == "" && !c.KVCache.Fits {
		c.Err = "ValueError: " + c.KVCache.Err
	}
	c.Starts = c.Err == ""
	c.DeviceUsed = c.deviceUsed(g)
	if c.Starts {
		c.suggest(g)
	}
	return c, nil
}

// available is what the carve leaves the KV cache: the requested memory
// less the weights, Model Runner V2's tables, the profile's peak, memory
// outside PyTorch and, where the release profiles them, the CUDA graphs;
// with 0.34's extensible cache, what it measures after warmup.
func (c VLLMCarve) available() Bytes {
	if c.ExtensibleKVCache {
		return c.measuredKV()
	}
	return c.capacity()
}

// capacity is the profile's KV cache: the requested memory less the
// weights, Model Runner V2's tables, the proposer's buffers, memory outside
// PyTorch, the profile's peak and the graphs it takes off (0.34: the
// address space the extensible cache reserves, gpu_worker.py:776-780).
func (c VLLMCarve) capacity() Bytes {
	return max(0, c.Requested-c.Consumed()-c.Activation-c.budgetGraphs())
}

// measure sets the free memory at start and, where the release sizes the
// cache from what it measures after warmup, what it keeps free: the
// transient (peak_activation_memory, gpu_worker.py:771-775, 946-949) and
// the margin beside it.
func (c *VLLMCarve) measure(v VLLM, rel vllmRelease, g GPU) {
	c.free = max(0, g.Total()-g.Context-v.heldAtStart)
	if rel.extensibleKV {
		c.ExtensibleKVCache, c.TransientReserve = true, c.PeakActivation()
		c.KVMargin = max(kvMarginFloor, Bytes(float64(c.TransientReserve)*kvMarginFraction))
	}
}

// deviceUsed is what nvidia-smi shows once vLLM has started: the requested
// memory and what lies outside it (NCCL's share is taken inside it; graphs
// captured after the cache beside it); with 0.34's extensible cache, what
// the process holds with the cache committed and the transient peak
// PyTorch caches once the steps reach it.
func (c VLLMCarve) deviceUsed(g GPU) Bytes {
	switch {
	case c.ExtensibleKVCache:
		return g.Context + c.resident() + c.KVCache.Available + c.TransientReserve
	case !c.GraphsInBudget:
		return c.Requested + c.NonTorch - c.NCCL + c.CUDAGraphs
	}
	return c.Requested + c.NonTorch - c.NCCL
}

// The extensible KV cache's margin beyond the transient peak
// (v1/worker/extensible_kv_cache.py:64-65): at least 1 GiB on CUDA.
const (
	kvMarginFloor    = 1 * GiB
	kvMarginFraction = 0.75
)

// extensibleNote says how 0.34's extensible KV cache was sized.
func (c VLLMCarve) extensibleNote() string {
	return fmt.Sprintf("vLLM %s sizes its KV cache after warmup and CUDA-graph capture (the extensible KV cache, on by default on CUDA): of the %v free at start and the %v requested (gpu_memory_utilization, 1.0 unless given), what vLLM then holds (%v: weights, memory outside PyTorch, tables, graphs) comes off, then a margin of %v beside the free memory and the %v it keeps free for the profile's transient peak and the CUDA-graph estimate: %v for the cache (not modelled: the warmup steps' own peaks, torch's reservation growth, the 2 MiB granules of each layer's pages)",
		c.Release.Release, c.free, c.Requested, c.resident(), c.KVMargin, c.TransientReserve, c.KVCache.Available)
}

// resident is what vLLM holds beside the KV cache once it has captured
// its CUDA graphs: the weights, Model Runner V2's tables, the proposer's
// buffers, memory outside PyTorch and the graphs' pool.
func (c VLLMCarve) resident() Bytes { return c.Consumed() + c.CUDAGraphs }

// measuredKV is the KV cache 0.34's extensible cache commits
// (v1/worker/extensible_kv_cache.py:592-618, measure_kv_cache_bytes, with
// the memory free after capture, gpu_worker.py:1225-1237): the smaller of
// the requested memory and the device's free memory at start less the
// margin, each less what vLLM then holds, and less the transient reserve.
// At the default utilization, 1.0, the free memory decides.
func (c VLLMCarve) measuredKV() Bytes {
	return max(0, min(c.Requested, c.free-c.KVMargin)-c.resident()-c.TransientReserve)
}

// budgetGraphs is the CUDA graphs' share of the requested memory: all of
// them where the release profiles them, none where it captures them after
// the cache.
func (c VLLMCarve) budgetGraphs() Bytes {
	if c.GraphsInBudget {
		return c.CUDAGraphs
	}
	return 0
}

// requested is the memory vLLM may use: gpu_memory_utilization × the GPU's
// memory (0.11 gpu_worker.py:182-184, truncated where it is subtracted;
// 0.14.1 v1/worker/utils.py:258-260 and 0.33 l.724-725, rounded up).
func (v VLLM) requested(g GPU, rel vllmRelease) Bytes {
	if rel.ceilRequested {
		return Bytes(math.Ceil(float64(g.Total()) * v.GPUMemoryUtilization))
	}
	return Bytes(math.Floor(float64(g.Total()) * v.GPUMemoryUtilization))
}

// mxfp4Backend is the kernel MXFP4 experts run with: as given, else
// FlashInfer on compute capability 10.x and the release's choice below
// (0.11 pip: Marlin, without triton_kernels; 0.14.1 and 0.33: Triton,
// vendored).
func (v VLLM) mxfp4Backend(g GPU, rel vllmRelease) (string, error) {
	backend := v.MXFP4Backend
	if backend == "" {
		backend = "marlin"
		switch {
		case g.ComputeCapability >= 100:
			backend = "flashinfer"
		case g.ComputeCapability >= 90:
			backend = rel.hopperMXFP4
		}
	}
	return backend, oneOf("vllm: mxfp4_backend", backend, "marlin", "triton", "flashinfer")
}

// profile sets the profile run's peak: the larger of the forward of
// max_num_batched_tokens and the sampler's warm-up, and a vision-language
// model's encoder profile beside it.
func (c *VLLMCarve) profile(v VLLM, rel vllmRelease, in Inference, m Model, est InferenceEstimate) error {
	forward, sampler := est.Peak.Total()-est.Peak.Parameters-est.Peak.KVCache, v.samplerWarmup(m, rel)
	c.Activation = max(forward, sampler)
	if sampler > forward {
		c.Notes = append(c.Notes, v.samplerNote(m, sampler, rel))
	}
	c.compressedProfile(v, m) // vllm_compressed_profile.go
	var err error
	if c.MMProfile, err = v.mmProfile(in, m); err != nil {
		return err
	}
	if p := c.MMProfile; p != nil {
		c.Activation = max(p.Encoder, addBytes(p.Held, c.Activation))
		c.Notes = append(c.Notes, p.note())
	} else if m.Vision != nil && !m.Vision.TowerRuns() && !in.towerOff && !v.SkipMMProfiling {
		c.Notes = append(c.Notes, fmt.Sprintf("vLLM's profile run also encodes dummy multimodal items, which the carve does not model: the %s tower's forward is not (vision.go), so the profile-run activations are the language model's forward and the sampler's", m.Vision.Tower.Family))
	}
	if in.towerOff {
		c.Notes = append(c.Notes, "limit_mm_per_prompt allows no images or videos: vLLM loads the language model without the vision tower and projector")
	} else if note := v.towerModeNote(m); note != "" {
		c.Notes = append(c.Notes, note)
	}
	return nil
}

// graphs sets the CUDA graphs' memory: as given, none under
// --enforce-eager, estimated as the release's profile does where it
// profiles them, else none (0.11 captures them after the cache and the
// carve cannot know their size).
func (c *VLLMCarve) graphs(v VLLM, rel vllmRelease, in Inference, g GPU, q int) error {
	c.GraphsInBudget = rel.graphsInBudget
	c.CUDAGraphs = v.CUDAGraphMemory
	n := 0
	switch {
	case v.EnforceEager:
		c.CUDAGraphs = 0
	case c.CUDAGraphs == 0 && rel.graphsInBudget:
		var err error
		if c.CUDAGraphs, n, err = v.graphEstimate(in, g, q, rel); err != nil {
			return err
		}
	}
	if note := c.graphNote(rel, v.CUDAGraphMemory > 0, n); note != "" {
		c.Notes = append(c.Notes, note)
	}
	return nil
}

// suggest sets the --kv-cache-memory values vLLM's startup log suggests
// (0.11 gpu_worker.py:346-393, at debug level; 0.33 l.1012-1068): what
// the KV cache could take to fit the requested memory, and the whole free
// GPU, each less 150 MiB — from the memory used besides the cache and the
// CUDA graphs' actual pool, which 0.33's profile has already counted once
// (its suggestion counts the graphs twice).
func (c *VLLMCarve) suggest(g GPU) {
	const redundancy = 150 * MiB
	used := c.Weights + c.RunnerBuffers + c.draftBuffers() + c.Activation + c.NonTorch + c.budgetGraphs() + c.CUDAGraphs
	c.SuggestedKVCacheMemory = c.Requested - used - redundancy
	c.FreeAtStart = g.Total() - g.Context
	c.SuggestedKVCacheMemoryGPU = c.FreeAtStart - used - redundancy
}

// Consumed is what vLLM 0.33's suggestion line calls "consumed memory
// (weights + non-torch)": the profile's total_consumed, the persistent
// allocations and the memory outside PyTorch (v1/worker/gpu_worker.py:747,
// utils/mem_utils.py:312).
func (c VLLMCarve) Consumed() Bytes {
	return c.Weights + c.RunnerBuffers + c.draftBuffers() + c.NonTorch
}

// PeakActivation is the suggestion line's "peak activation": the profile
// run's transient peak and the CUDA-graph estimate the release subtracts
// (0.33 gpu_worker.py:748-750).
func (c VLLMCarve) PeakActivation() Bytes { return c.Activation + c.budgetGraphs() }

// serverDefaults fills max_num_batched_tokens (unless the plan's
// inference or the launch names it) and max_num_seqs as `vllm serve`
// sets them for the GPU (engine/arg_utils.py _set_default_args, 0.11.0
// l.1605-1680: the device's CUDA total against 70 GiB, A100s excluded;
// max_num_seqs at most max_num_batched_tokens; 0.33 get_batch_defaults
// l.2940-3039: 16384 tokens from 160 GiB), with the release's rules
// (vllm_releases.go): a defaulted max_num_batched_tokens at most
// max_num_seqs × max_model_len (0.14.1 and 0.33), GB10 on the small tier
// (0.33).
func (v VLLM) serverDefaults(planned, maxPosition int, g GPU, rel vllmRelease) VLLM {
	big := g.Total() >= 70*GiB && !strings.Contains(strings.ToLower(g.Name), "a100") &&
		!(rel.gb10SmallTier && g.ComputeCapability == 121)
	tokens, seqs := 2048, 256
	switch {
	case rel.hugeGPUTokens > 0 && g.Total() >= 160*GiB:
		tokens, seqs = rel.hugeGPUTokens, 1024
	case big:
		tokens, seqs = 8192, 1024
	}
	seqsDefaulted := v.MaxNumSeqs == 0
	if seqsDefaulted {
		v.MaxNumSeqs = seqs
	}
	if v.MaxNumBatchedTokens == 0 {
		v.MaxNumBatchedTokens = tokens
		if planned > 0 {
			v.MaxNumBatchedTokens = planned
		} else if maxLen := cmp.Or(max(v.MaxModelLen, 0), maxPosition); rel.capBatchedBySeqs && maxLen > 0 {
			v.MaxNumBatchedTokens = int(min(int64(v.MaxNumBatchedTokens), int64(v.MaxNumSeqs)*int64(maxLen)))
		}
	}
	if seqsDefaulted {
		v.MaxNumSeqs = min(seqs, v.MaxNumBatchedTokens)
	}
	return v
}

// samplerWarmup is the profile run's sampler pass (gpu_model_runner.py
// _dummy_sampler_run): logits of min(max_num_batched_tokens,
// max_num_seqs) dummy requests over the whole vocabulary (every rank
// all-gathers them: platforms/interface.py use_all_gather), with top_k =
// vocab − 1 and top_p 0.9, beside the dummy run's hidden states. Under
// PyTorch's sampler (v1/sample/ops/topk_topp_sampler.py
// apply_top_k_top_p) it peaks at logits.sort (samplerSortBytes) or, for
// one request, at the scatter (28 bytes: the model-dtype logits 2, their
// fp32 copy 4, the sorted values 4 and indices 8, the top-k mask 1, the
// top-p probabilities 4 and mask 1, the scattered result 4); FlashInfer's
// top_k_top_p_sampling_from_logits holds the logits, their fp32 copy, the
// masked logits and the probabilities: 14.
func (v VLLM) samplerWarmup(m Model, rel vllmRelease) Bytes {
	reqs := int64(min(v.MaxNumSeqs, v.MaxNumBatchedTokens))
	perLogit := max(28, samplerSortBytes(reqs))
	if v.FlashInferSampler || rel.flashInferSampler {
		perLogit = 14
	}
	hidden := BF16.Size(int64(v.MaxNumBatchedTokens) * int64(m.Hidden))
	return Bytes(reqs*int64(m.Vocab)*perLogit) + hidden
}

// samplerSortBytes is what a logit takes while PyTorch sorts reqs rows of
// fp32 logits (aten/src/ATen/native/cuda/SortStable.cu,
// do_launch_stable_sort_kernel, read at pytorch 061531e8, and the
// CUB_WRAPPER temporary storage of aten/src/ATen/cuda/cub.cuh, read at
// 01c9b383 — not at the torch 2.7–2.9 the vLLM 0.9–0.14 logs ran, whose
// copies were not at hand; the RTX 4060 log's 1.42 GiB peak, predicted
// at 1.41, agrees): beside the model-dtype logits (2) and
// their fp32 copy (4), the sort's values (4) and int64 indices (8), and
// by the number of rows (segments): from 128 rows segmented_sort_pairs'
// int64 reverse indices (8) and CUB's DeviceSegmentedRadixSort temporary
// storage, a third keys and values buffer when the output may not
// overwrite the input (4 + 8; cub dispatch_radix_sort.cuh) — 38 bytes;
// from 2 to 127, segmented_sort_pairs_by_full_sort's two int2 index and
// segment buffers (8 + 8) and its radix_sort_pairs' own keys output (4)
// with CUB's third buffers (4 + 8) — 50; one row sorts in place of its
// segment (segmented_sort_large_segments), the scatter's 28 the larger.
func samplerSortBytes(reqs int64) int64 {
	const logits, values = 2 + 4, 4 + 8
	switch {
	case reqs >= 128:
		return logits + values + 8 + (4 + 8)
	case reqs >= 2:
		return logits + values + 8 + 8 + 4 + (4 + 8)
	}
	return logits + values
}

// samplerNote says that the profile run's peak is the sampler's warm-up.
func (v VLLM) samplerNote(m Model, b Bytes, rel vllmRelease) string {
	reqs := int64(min(v.MaxNumSeqs, v.MaxNumBatchedTokens))
	how := fmt.Sprintf("PyTorch's sampler sorts them, %d bytes a logit; FlashInfer's sampler (installed in the vllm/vllm-openai image: flashinfer_sampler) takes 14", max(28, samplerSortBytes(reqs)))
	if v.FlashInferSampler || rel.flashInferSampler {
		how = "FlashInfer's sampler, 14 bytes a logit"
	}
	return fmt.Sprintf("the profile run peaks in its sampler warm-up, %v: %d dummy requests (max_num_seqs) × %d logits (%s; a smaller --max-num-seqs takes less)",
		b, reqs, m.Vocab, how)
}

// startup is vLLM's own refusal to start, or "": free memory at start
// short of what gpu_memory_utilization asks (gpu_worker.py init_device),
// weights that do not fit in the free memory (load_model fails with
// torch's out-of-memory error: vLLM has no check of its own), and weights
// and activations that leave no memory for the KV cache
// (check_enough_kv_cache_memory).
func (c VLLMCarve) startup(v VLLM, g GPU) string {
	gib := func(b Bytes) string { return fmt.Sprintf("%.2f", math.Round(float64(b)/float64(GiB)*100)/100) }
	free := g.Total() - g.Context
	switch {
	case c.Requested > free && !c.ExtensibleKVCache: // 0.34 v1/worker/utils.py:783-797
		return fmt.Sprintf("ValueError: Free memory on device (%s/%s GiB) on startup is less than desired GPU memory utilization (%v, %s GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
			gib(free), gib(g.Total()), v.GPUMemoryUtilization, gib(c.Requested))
	case c.Weights > free:
		return fmt.Sprintf("torch.OutOfMemoryError: CUDA out of memory while loading the weights: they take %s GiB on each GPU and %s GiB of %s GiB is free (vLLM has no check of its own: load_model fails)",
			gib(c.Weights), gib(free), gib(g.Total()))
	case c.ExtensibleKVCache && (c.capacity() <= 0 || c.measuredKV() <= 0):
		return "ValueError: No available memory for the cache blocks. " + extensibleHint(v.GPUMemoryUtilization, c.capacity() > 0) +
			" See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
	case c.capacity() <= 0:
		return fmt.Sprintf("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine. (The weights take %s GiB, the profile run %s GiB and memory outside PyTorch and the model's run %s GiB of the %s GiB it may use.)",
			gib(c.Weights), gib(c.Activation), gib(c.NonTorch+c.RunnerBuffers+c.draftBuffers()+c.budgetGraphs()), gib(c.Requested))
	}
	return ""
}

// MinTP is the smallest tensor-parallel degree (1, 2, 4, … up to maxTP,
// dividing the model's attention heads) at which a vLLM launch of in on g
// holds `concurrency` requests of `context` tokens each; 0 when none does.
// It returns the carve at that degree too.
func (v VLLM) MinTP(in Inference, g GPU, context, concurrency, maxTP int) (int, VLLMCarve, error) {
	if context < 1 || concurrency < 1 {
		return 0, VLLMCarve{}, fmt.Errorf("vllm: context and concurrency must be ≥ 1, got %d and %d", context, concurrency)
	}
	m := in.Model.Normalize()
	for tp := 1; tp <= maxTP && tp <= maxHeads; tp *= 2 {
		if m.Heads%tp != 0 {
			break
		}
		vt := v
		vt.TP = tp
		c, err := vt.Carve(in, g)
		if err != nil {
			return 0, VLLMCarve{}, err
		}
		if c.KVCache.Fits && c.KVCache.MaxConcurrencyFor(context) >= float64(concurrency) {
			return tp, c, nil
		}
	}
	return 0, VLLMCarve{}, nil
}
