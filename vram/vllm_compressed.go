package vram

import (
	"fmt"
	"slices"
)

// vLLM 0.33 serves DeepSeek-V4's compressed attention (Model.Compressed)
// with cache layers of its own, not a key and a value per token per layer
// (paths inside the 0.33.0 vllm package): every layer keeps its last
// sliding_window tokens' rows (DeepseekV4SWACache,
// v1/attention/backends/mla/sparse_swa.py:76-147, registered by
// models/deepseek_v4/attention.py:349); a CSA or HCA layer also one
// compressed row per compress rate tokens (its MLAAttentionSpec,
// attention.py:860-884) and its compressor's partial window
// (CompressorStateCache, compressor.py:137-195); a CSA layer's indexer
// its own compressed keys (DeepseekV4IndexerCache, attention.py:886-925,
// 1017-1034) and its compressor's window. The layers' pages differ, so
// the default grouping packs them block-outermost into groups that share
// one pool of block ids (v1/core/kv_cache_planning.py:914-1041,
// _get_packed_kv_cache_groups): a block id costs the largest group's pages
// and a request holds ids in every group.

// compressedBlockSize is the cache block DeepSeek-V4's sparse MLA and
// indexer backends take, and the platform picks (platforms/interface.py:
// 700-782, the smallest every backend accepts: [256] at
// models/deepseek_v4/sparse_mla.py:60-61 and
// v1/attention/backends/mla/indexer.py:355-357).
const compressedBlockSize = 256

// compressedRowBytes is one token's packed fp8_ds_mla row, fixed in the
// code: "448B NoPE + 128B RoPE + 8B fp8 scale = 584B per token"
// (attention.py:880-882; sparse_swa.py:86), that is 448 fp8 values, 64
// bf16 rotary values, 7 UE8M0 scales and a pad byte (compressor.py:301).
const compressedRowBytes = 584

// compressedPageAlign is the page alignment under fp8_ds_mla (576 B;
// attention.py:877, 923; sparse_swa.py:87; compressor.py:191), applied by
// _apply_alignment_padding (v1/kv_cache_interface.py:719-726).
const compressedPageAlign = 576

// compressedIndexTopK is index_topk, DeepseekV4Config's default (512,
// configuration_deepseek_v4.py:161) and V4-Flash's; Model does not carry
// it: it sizes the profile's top-k buffers, not the cache.
const compressedIndexTopK = 512

// compressedSpec is one cache layer's KVCacheSpec as vLLM registers it.
type compressedSpec struct {
	cache  string // which cache (VLLMCacheSpec.Cache)
	block  int    // tokens per block
	window int    // the sliding window; 0 for full attention
	page   Bytes  // the page, padded to 576
}

// VLLMCompressedCache is how vLLM 0.33 pools a DeepSeek-V4 model's cache
// layers (VLLMKVCache.Compressed): PageBytes is then BytesPerBlock, what
// one block id costs across every group.
type VLLMCompressedCache struct {
	// KVCacheDType is the row format: "fp8_ds_mla", what "auto" and
	// "fp8" resolve to on FlashMLA (attention.py:94-123).
	KVCacheDType string `json:"kv_cache_dtype"`
	// Specs are the kinds of cache layer, with their pages.
	Specs []VLLMCacheSpec `json:"specs"`
	// RepeatsPerGroup splits the balanced buckets (_approximate_gcd); 0
	// where no bucket mixes page sizes.
	RepeatsPerGroup int   `json:"repeats_per_group,omitempty"`
	BytesPerBlock   Bytes `json:"bytes_per_block"`
	// InFlightTokens is what a sliding window or state group keeps room
	// for beyond its window (max_concurrent_batches ×
	// max_num_batched_tokens).
	InFlightTokens int `json:"in_flight_tokens"`
	// BlocksPerRequest is the block ids one request of max_model_len
	// holds, FixedBlocks the sliding-window and state groups' share of
	// them (the rest grow with the context).
	BlocksPerRequest int64 `json:"blocks_per_request"`
	FixedBlocks      int64 `json:"fixed_blocks"`
}

// VLLMCacheSpec is one kind of cache layer: its layers, block, window
// (0: every block of the context) and padded page.
type VLLMCacheSpec struct {
	Cache     string `json:"cache"`
	Layers    int    `json:"layers"`
	BlockSize int    `json:"block_size"`
	Window    int    `json:"window,omitempty"`
	PageBytes Bytes  `json:"page_bytes"`
}

// pad576 is a page rounded up to the fp8_ds_mla alignment.
func pad576(b int64) Bytes {
	return Bytes(cdiv64(b, compressedPageAlign) * compressedPageAlign)
}

// swaSpec is every layer's sliding-window rows: 64-token blocks (the
// DeepseekV4SWACache constructor's default, sparse_swa.py:85) of 584 B
// rows, a SlidingWindowMLASpec of sliding_window.
func swaSpec(m Model) compressedSpec {
	return compressedSpec{cache: "swa", block: 64, window: m.SlidingWindow, page: pad576(64 * compressedRowBytes)}
}

// compressedKVSpec is a CSA or HCA layer's compressed rows: 256/rate rows
// a block (num_states = block_size // tokens_per_state,
// v1/kv_cache_interface.py:274), a page of num_states × 584 B (l.590-594).
func compressedKVSpec(cache string, rate int) compressedSpec {
	return compressedSpec{cache: cache, block: compressedBlockSize, page: pad576(int64(compressedBlockSize/rate) * compressedRowBytes)}
}

// indexKSpec is a CSA layer's indexer keys: index_head_dim fp8 values and
// an fp32 scale a 128 of them, per compressed entry (attention.py:
// 1023-1029, dsaIndexKeyBytes).
func indexKSpec(m Model, rate int) compressedSpec {
	return compressedSpec{cache: "index_k", block: compressedBlockSize, page: pad576(int64(compressedBlockSize/rate) * dsaIndexKeyBytes(m))}
}

// stateSpec is a compressor's open window in fp32, kv and score halves
// (state_dim = 2 · coff · head_dim, compressor.py:281-286; coff 2 where
// the CSA's windows overlap, l.159): blocks of 4 rows at rate 4 and 8 at
// rate 128 (l.167-171), a window of coff · rate (l.160).
func stateSpec(cache string, rate int, headDim int64) compressedSpec {
	coff, block := int64(1), 8
	if rate == 4 {
		coff, block = 2, 4
	}
	return compressedSpec{cache: cache, block: block, window: int(coff) * rate, page: pad576(int64(block) * 2 * coff * headDim * 4)}
}

// compressedSpecs lists the cache layers in the order vLLM registers them,
// layer by layer: a CSA layer's indexer keys and indexer compressor state
// (the indexer is built first, attention.py:302-318), the sliding window
// (l.349), the compressed rows (the attention itself), the compressor
// state (l.368-378).
func compressedSpecs(m Model) []compressedSpec {
	c := m.Compressed
	hd, di := int64(m.HeadDim), int64(m.IndexHeadDim)
	var specs []compressedSpec
	for i := 0; i < m.Layers; i++ {
		switch c.kind(i) {
		case "compressed_sparse_attention":
			specs = append(specs, indexKSpec(m, c.CSARate), stateSpec("index_state", c.CSARate, di), swaSpec(m),
				compressedKVSpec("csa_kv", c.CSARate), stateSpec("csa_state", c.CSARate, hd))
		case "heavily_compressed_attention":
			specs = append(specs, swaSpec(m), compressedKVSpec("hca_kv", c.HCARate), stateSpec("hca_state", c.HCARate, hd))
		default:
			specs = append(specs, swaSpec(m))
		}
	}
	return specs
}

// compressedBucket is a set of cache layers UniformTypeKVCacheSpecs.
// is_uniform_type accepts together (one block size, full attention, or
// sliding windows of one size: kv_cache_interface.py:1346-1360, 957-964),
// its layers by page size in order of appearance.
type compressedBucket struct {
	block, window int
	pages         []Bytes
	layers        [][]string
}

// most is the most layers of one page size in the bucket
// (get_max_layers_per_page_size).
func (k compressedBucket) most() int {
	n := 0
	for _, l := range k.layers {
		n = max(n, len(l))
	}
	return n
}

// balanced: one layer of each page size per repeat of a pattern
// (kv_cache_planning.py:961-964).
func (k compressedBucket) balanced() bool {
	for _, l := range k.layers {
		if len(l) != len(k.layers[0]) {
			return false
		}
	}
	return true
}

// bucketSpecs puts the cache layers in buckets greedily, as
// _get_packed_kv_cache_groups does (l.946-953).
func bucketSpecs(specs []compressedSpec) []compressedBucket {
	var buckets []compressedBucket
	for _, s := range specs {
		j := slices.IndexFunc(buckets, func(k compressedBucket) bool { return k.block == s.block && k.window == s.window })
		if j < 0 {
			buckets = append(buckets, compressedBucket{block: s.block, window: s.window})
			j = len(buckets) - 1
		}
		k := &buckets[j]
		p := slices.Index(k.pages, s.page)
		if p < 0 {
			k.pages, k.layers = append(k.pages, s.page), append(k.layers, nil)
			p = len(k.pages) - 1
		}
		k.layers[p] = append(k.layers[p], s.cache)
	}
	return buckets
}

// approximateGCD is _approximate_gcd (kv_cache_planning.py:879-911): the
// chunk d in [lower, max(values)] that pads the values least when each is
// rounded up to a multiple of it, the larger on a tie.
func approximateGCD(values []int, lower int) int {
	best, bestPad := max(1, lower), -1
	for d := best; d <= slices.Max(values); d++ {
		pad := 0
		for _, x := range values {
			pad += (d - x%d) % d
		}
		if bestPad < 0 || pad <= bestPad {
			best, bestPad = d, pad
		}
	}
	return best
}

// packGroups cuts the buckets into KV cache groups as
// _get_packed_kv_cache_groups does (kv_cache_planning.py:955-1041): a
// balanced bucket that mixes page sizes stays whole and sets the floor of
// the repeats per group, balanced buckets are split into groups of that
// many repeats (_approximate_gcd), the others stay whole; where no bucket
// mixes page sizes, a sliding-window bucket is a state bucket and splits
// to fit the block the others need. It returns the groups (each with the
// bytes its layers' pages take in a block) and the repeats per group.
func packGroups(buckets []compressedBucket) ([]VLLMGroup, int, error) {
	minRepeats := 0
	for _, k := range buckets {
		if k.balanced() && len(k.pages) > 1 {
			minRepeats = max(minRepeats, k.most())
		}
	}
	repeats := 0
	if minRepeats > 0 {
		var counts []int
		for _, k := range buckets {
			if k.balanced() {
				counts = append(counts, k.most())
			}
		}
		repeats = approximateGCD(counts, minRepeats)
	}
	split := func(k compressedBucket) int {
		if k.balanced() && repeats > 0 {
			return ceilDiv(k.most(), repeats)
		}
		return 1
	}
	state := func(k compressedBucket) bool { return repeats == 0 && k.window > 0 }
	var anchor Bytes
	for _, k := range buckets {
		n := split(k)
		if state(k) {
			n = k.count()
		}
		anchor = max(anchor, k.widest(n))
	}
	var groups []VLLMGroup
	for _, k := range buckets {
		n := split(k)
		if anchor > 0 && state(k) {
			n = max(n, ceilDiv(k.count(), max(int(anchor/k.pages[0]), 1)))
		}
		g, err := k.groups(n)
		if err != nil {
			return nil, 0, err
		}
		groups = append(groups, g...)
	}
	return groups, repeats, nil
}

// count is the bucket's layers.
func (k compressedBucket) count() int {
	n := 0
	for _, l := range k.layers {
		n += len(l)
	}
	return n
}

// widest is the page bytes of the largest of n groups the bucket splits
// into (widest_group_bytes, l.1001-1006).
func (k compressedBucket) widest(n int) Bytes {
	var b Bytes
	for i, l := range k.layers {
		b += Bytes(ceilDiv(len(l), n)) * k.pages[i]
	}
	return b
}

// groups splits the bucket into n groups, the pattern's repeats dealt out
// round-robin (pattern_repeats[i::num_groups], l.1033-1036).
func (k compressedBucket) groups(n int) ([]VLLMGroup, error) {
	g := VLLMGroup{Kind: "full", Block: k.block}
	if k.window > 0 {
		g.Kind, g.Span = "sliding_window", k.window
	}
	if n == 1 {
		g.Layers, g.Bytes = k.count(), k.widest(1)
		return []VLLMGroup{g}, nil
	}
	if !k.balanced() {
		// zip(*page_size_layers.values()) would drop layers, which
		// get_kv_cache_configs then asserts against.
		return nil, fmt.Errorf("vllm: the cache layers' page sizes do not repeat in one pattern (%d groups of %v): vLLM leaves layers out of every group (\"Some layers are not assigned to any group.\")", n, k.pages)
	}
	var per Bytes
	for _, p := range k.pages {
		per += p
	}
	var out []VLLMGroup
	for i := 0; i < n && i < len(k.layers[0]); i++ {
		r := ceilDiv(len(k.layers[0])-i, n)
		g.Layers, g.Bytes = r*len(k.pages), Bytes(r)*per
		out = append(out, g)
	}
	return out, nil
}

// compressedDefaults are the launch's defaults for a model with compressed
// attention: 256-token blocks, and the fp8 rows "auto" resolves to on
// FlashMLA (the default backend on every CUDA GPU but compute capability
// 12.x, whose FlashInfer class keeps the same layout: nvidia/model.py:
// 537-568, attention.py:94-123; nvidia/flashinfer_sparse.py:624).
func (v VLLM) compressedDefaults(m Model) VLLM {
	if m.Compressed == nil {
		return v
	}
	if v.BlockSize == 0 {
		v.BlockSize = compressedBlockSize
	}
	if v.KVCacheDType == DTypeUnset {
		v.KVCacheDType = FP8E4M3 // "fp8" → "fp8_ds_mla"
	}
	return v
}

// checkCompressed refuses what vLLM 0.33 does not run for a model with
// compressed attention, in its words where it has them, and what is not
// modelled.
func (v VLLM) checkCompressed(m Model) error {
	c := m.Compressed
	if c == nil {
		return nil
	}
	rope := int(float64(m.HeadDim) * m.RotaryPct)
	switch {
	case v.KVCacheDType != FP8E4M3 && v.KVCacheDType != FP8E5M2:
		return fmt.Errorf("vllm: ValueError: DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got %s. Please set `--kv-cache-dtype fp8` or select a backend that supports bfloat16 KV cache. (attention.py:112-117; the FlashInfer backend's bf16 rows, FLASHINFER_MLA_SPARSE_DSV4, are not modelled)", v.KVCacheDType)
	case v.BlockSize != compressedBlockSize:
		return fmt.Errorf("vllm: block_size %d: DeepSeek-V4's sparse MLA and indexer backends take only %d-token blocks (models/deepseek_v4/sparse_mla.py:60-61, v1/attention/backends/mla/indexer.py:355-357)", v.BlockSize, compressedBlockSize)
	case m.HeadDim != 512 || rope != 64 || m.IndexHeadDim != 128:
		return fmt.Errorf("vllm: DeepSeek-V4's kernels take head_dim 512 with 64 rotary dims (the 584-byte row, attention.py:880-882) and index_head_dim 128 (compressor.py:295-314), got %d, %d and %d", m.HeadDim, rope, m.IndexHeadDim)
	case c.CSARate != 4 || c.HCARate != 128:
		return fmt.Errorf("vllm: DeepSeek-V4's compressor states take compress rates 4 and 128 (assert compress_ratio in [4, 128], compressor.py:158), got %d and %d", c.CSARate, c.HCARate)
	case m.Heads%v.TP != 0 || c.OGroups%v.TP != 0 || m.Heads/v.TP > 128:
		return fmt.Errorf("vllm: tensor_parallel_size %d must divide DeepSeek-V4's %d heads and %d output groups (attention.py:218-226), and leave at most 128 heads a rank (FlashMLA's h_q of 64 or 128, nvidia/flashmla.py:77-86)", v.TP, m.Heads, c.OGroups)
	case v.PP > 1 || v.Draft != nil || v.DisableHybridKVCache:
		return fmt.Errorf("vllm: DeepSeek-V4's cache is modelled for one pipeline stage, without a draft model (its MTP layer adds a sliding-window layer to the groups) and with the hybrid KV cache manager on")
	}
	return nil
}

// compressedKVCache sizes a DeepSeek-V4 model's cache in available bytes
// (0.33): the groups share one pool whose block ids each cost
// bytes_per_block, the largest group's pages
// (_get_kv_cache_bytes_per_block, kv_cache_planning.py:574-605; no spec
// sets a block stride alignment), num_blocks = available //
// bytes_per_block (l.681); one request of max_model_len holds in every
// group the blocks its layers need (UniformTypeKVCacheSpecs.
// max_memory_usage_pages, kv_cache_interface.py:1364-1368), and costs
// bytes_per_block for each (_max_memory_usage_bytes_from_groups,
// kv_cache_planning.py:1253-1282); the capacity check sets the null
// block aside (l.1532-1543). The cache is replicated on every TP rank:
// every spec has one head and max_tp_shards=1.
func (v VLLM) compressedKVCache(m Model, available Bytes, rel vllmRelease) (VLLMKVCache, error) {
	specs := compressedSpecs(m)
	groups, repeats, err := packGroups(bucketSpecs(specs))
	if err != nil {
		return VLLMKVCache{}, err
	}
	var bpb Bytes
	for _, g := range groups {
		bpb = max(bpb, g.Bytes)
	}
	c := VLLMKVCache{Available: available, PageBytes: bpb, Layers: m.Layers, BlockSize: v.BlockSize, MaxModelLen: v.MaxModelLen,
		Groups: groups, GroupSize: 1, mbt: rel.inFlightBatches * v.MaxNumBatchedTokens}
	c.Compressed = &VLLMCompressedCache{KVCacheDType: "fp8_ds_mla", Specs: specKinds(specs), RepeatsPerGroup: repeats, BytesPerBlock: bpb, InFlightTokens: c.mbt}
	if available > 0 {
		c.Blocks = int64(available) / int64(bpb)
	}
	check := max(0, available-bpb) // the null block
	if c.MaxModelLen == AutoMaxModelLen {
		c.autoFit(m, check)
	}
	c.fill(rel, check, v.fitAdvice(rel))
	c.Compressed.BlocksPerRequest = c.blocksFor(c.MaxModelLen)
	kv, state := c.PerRequestFor(c.MaxModelLen)
	c.Compressed.FixedBlocks = int64(state / bpb)
	c.Notes = append(c.Notes, c.compressedNotes(kv, state)...)
	return c, nil
}

// specKinds counts the cache layers by kind, in order of appearance.
func specKinds(specs []compressedSpec) []VLLMCacheSpec {
	var out []VLLMCacheSpec
	for _, s := range specs {
		j := slices.IndexFunc(out, func(k VLLMCacheSpec) bool { return k.Cache == s.cache })
		if j < 0 {
			out = append(out, VLLMCacheSpec{Cache: s.cache, BlockSize: s.block, Window: s.window, PageBytes: s.page})
			j = len(out) - 1
		}
		out[j].Layers++
	}
	return out
}

// compressedPerRequest splits one request's block ids into those of the
// full-attention group, which grow with its tokens, and those of the
// sliding-window and state groups, which do not, each costing
// bytes_per_block.
func (c VLLMKVCache) compressedPerRequest(tokens int) (kv, state Bytes) {
	for _, g := range c.Groups {
		b := Bytes(g.pagesFor(tokens, c.BlockSize, c.mbt, 0) * int64(c.PageBytes))
		if g.Kind == "full" {
			kv += b
		} else {
			state += b
		}
	}
	return kv, state
}

// compressedNotes say how vLLM pools the cache.
func (c VLLMKVCache) compressedNotes(kv, state Bytes) []string {
	cc := c.Compressed
	var full Bytes
	for _, g := range c.Groups {
		if g.Kind == "full" {
			full += g.Bytes
		}
	}
	layers := 0
	for _, s := range cc.Specs {
		layers += s.Layers
	}
	return []string{
		fmt.Sprintf("DeepSeek-V4's cache (fp8_ds_mla rows of 584 B, pages padded to 576 B): every layer keeps its sliding window in 64-token blocks, a CSA or HCA layer its compressed rows and its compressor's fp32 window, a CSA layer's indexer its keys and window; vLLM packs these %d cache layers into %d groups that draw block ids from one pool, each id costing the largest group's pages, %v (bytes_per_block)",
			layers, len(c.Groups), cc.BytesPerBlock),
		fmt.Sprintf("one request of %d tokens holds %d block ids = %v: %v in the full group's 256-token blocks (%.2f B a token of context), %v in the sliding-window and compressor-state groups, which keep their window and the %d tokens in flight whatever the context",
			c.MaxModelLen, cc.BlocksPerRequest, kv+state, kv, float64(full)/compressedBlockSize, state, cc.InFlightTokens),
		"the cache is replicated on every tensor-parallel rank: each cache layer has one head (max_tp_shards=1), so more ranks do not shrink it",
	}
}
