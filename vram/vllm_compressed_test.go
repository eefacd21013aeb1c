package vram

import (
	"strings"
	"testing"
)

// The numbers below are DeepSeek-V4-Flash's (43 layers: 0 and 1
// sliding-window only, then CSA at the even layers and HCA at the odd
// ones, 21 and 20; head_dim 512 with 64 rotary dims, index_head_dim 128,
// sliding_window 128, rates 4 and 128) as /work/notes/dsv4-serving.md
// derives them from vLLM 0.33.0 and SGLang 0.5.23.

// TestVLLMCompressedPages: each cache layer's page under fp8_ds_mla,
// pad(x) = ⌈x/576⌉·576 (_apply_alignment_padding), a page num_states ×
// state bytes (v1/kv_cache_interface.py:590-594):
//   - SWA: 64 rows × 584 B = 37,376 → 37,440, window 128;
//   - CSA rows: 256/4 = 64 × 584 → 37,440; HCA rows: 256/128 = 2 × 584 =
//     1,168 → 1,728;
//   - index K: 64 × (128 + 128/128·4 = 132) = 8,448 → 8,640;
//   - CSA state: 4 rows × 2·2·512·4 = 8,192 B = 32,768 → 32,832, window
//     2·4 = 8; HCA state: 8 rows × 2·1·512·4 = 4,096 B = 32,768 → 32,832,
//     window 128; indexer state: 4 rows × 2·2·128·4 = 2,048 B = 8,192 →
//     8,640, window 8.
func TestVLLMCompressedPages(t *testing.T) {
	c, err := VLLM{MaxModelLen: 131072}.KVCache(MustPreset("deepseek-v4-flash"), 40*GiB)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]VLLMCacheSpec{
		"swa":         {Layers: 43, BlockSize: 64, Window: 128, PageBytes: 37440},
		"csa_kv":      {Layers: 21, BlockSize: 256, PageBytes: 37440},
		"hca_kv":      {Layers: 20, BlockSize: 256, PageBytes: 1728},
		"index_k":     {Layers: 21, BlockSize: 256, PageBytes: 8640},
		"csa_state":   {Layers: 21, BlockSize: 4, Window: 8, PageBytes: 32832},
		"hca_state":   {Layers: 20, BlockSize: 8, Window: 128, PageBytes: 32832},
		"index_state": {Layers: 21, BlockSize: 4, Window: 8, PageBytes: 8640},
	}
	if len(c.Compressed.Specs) != len(want) {
		t.Fatalf("%d kinds of cache layer, want %d: %+v", len(c.Compressed.Specs), len(want), c.Compressed.Specs)
	}
	for _, s := range c.Compressed.Specs {
		w := want[s.Cache]
		w.Cache = s.Cache
		if s != w {
			t.Errorf("%s: %+v, want %+v", s.Cache, s, w)
		}
	}
	if c.Compressed.KVCacheDType != "fp8_ds_mla" || c.BlockSize != 256 {
		t.Errorf("%s rows in %d-token blocks, want fp8_ds_mla and 256", c.Compressed.KVCacheDType, c.BlockSize)
	}
}

// TestVLLMCompressedGroups: the packed grouping
// (_get_packed_kv_cache_groups). Buckets: full attention at 256 tokens
// (CSA rows 21 × 37,440, HCA rows 20 × 1,728, index K 21 × 8,640: counts
// 21 and 20 differ, so it stays whole), SWA at 64 (43 × 37,440), the
// CSA and indexer states at 4 (21 × 32,832 + 21 × 8,640: balanced, two
// page sizes, so the repeats per group are at least 21), the HCA states
// at 8 (20 × 32,832). _approximate_gcd([43, 21, 20], lower 21) pads 20+0+1
// = 21 at 21 and 1+1+2 = 4 at 22 (the least): 22 repeats, so SWA splits
// into ⌈43/22⌉ = 2 groups of 22 and 21 layers, the others stay whole.
// Group bytes: 21·37,440 + 20·1,728 + 21·8,640 = 1,002,240; 22·37,440 =
// 823,680; 21·37,440 = 786,240; 21·32,832 + 21·8,640 = 870,912;
// 20·32,832 = 656,640; a block id costs the largest, 1,002,240.
func TestVLLMCompressedGroups(t *testing.T) {
	c, err := VLLM{MaxModelLen: 131072}.KVCache(MustPreset("deepseek-v4-flash"), 40*GiB)
	if err != nil {
		t.Fatal(err)
	}
	want := []VLLMGroup{
		{Kind: "sliding_window", Span: 128, Layers: 22, Block: 64, Bytes: 823680},
		{Kind: "sliding_window", Span: 128, Layers: 21, Block: 64, Bytes: 786240},
		{Kind: "full", Layers: 62, Block: 256, Bytes: 1002240},
		{Kind: "sliding_window", Span: 8, Layers: 42, Block: 4, Bytes: 870912},
		{Kind: "sliding_window", Span: 128, Layers: 20, Block: 8, Bytes: 656640},
	}
	if len(c.Groups) != len(want) {
		t.Fatalf("groups %+v, want %+v", c.Groups, want)
	}
	for i := range want {
		if c.Groups[i] != want[i] {
			t.Errorf("group %d: %+v, want %+v", i, c.Groups[i], want[i])
		}
	}
	if c.Compressed.RepeatsPerGroup != 22 || c.Compressed.BytesPerBlock != 1002240 || c.PageBytes != 1002240 {
		t.Errorf("repeats %d, bytes_per_block %v (page %v); want 22 and 1,002,240", c.Compressed.RepeatsPerGroup, c.Compressed.BytesPerBlock, c.PageBytes)
	}
	if got := approximateGCD([]int{43, 21, 20}, 21); got != 22 {
		t.Errorf("_approximate_gcd([43, 21, 20], 21) = %d, want 22", got)
	}
}

// TestVLLMCompressedBlocks: blocks, per-request blocks, concurrency and
// the logged tokens. With max_num_batched_tokens 8192 and 0.33's two
// batches in flight, F = 16,384 tokens: a request of M tokens holds
// cdiv(M, 256) full blocks, 2 × (cdiv(127 + F, 64) + 1) = 2 × 259 SWA
// blocks, cdiv(7 + F, 4) + 1 = 4,099 CSA-state blocks and cdiv(127 + F, 8)
// + 1 = 2,065 HCA-state blocks: 4,096 + 6,682 = 10,778 at M = 1,048,576
// (10,802,142,720 B, 10.06 GiB) and 512 + 6,682 = 7,194 at 131,072.
// 60 GiB = 64,424,509,440 B holds 64,424,509,440 // 1,002,240 = 64,280
// blocks; concurrency 64,280 / 10,778 = 5.964 and tokens
// int(5.964… × 1,048,576) = 6,253,708; at 131,072, 64,280 / 7,194 = 8.935
// and 1,171,157 tokens.
func TestVLLMCompressedBlocks(t *testing.T) {
	m := MustPreset("deepseek-v4-flash")
	for _, c := range []struct {
		maxLen         int
		perRequest     int64
		tokens         int64
		kvBlocks       int64
		concurrency    float64
		estimatedFor10 int
	}{
		{1048576, 10778, 6253708, 4096, 5.964000742252737, 1031680},
		{131072, 7194, 1171157, 512, 8.935223797609119, 0},
	} {
		kv, err := VLLM{MaxModelLen: c.maxLen, MaxNumBatchedTokens: 8192}.KVCache(m, 60*GiB)
		if err != nil {
			t.Fatal(err)
		}
		if kv.Blocks != 64280 || kv.Compressed.BlocksPerRequest != c.perRequest || kv.Compressed.FixedBlocks != 6682 || kv.Tokens != c.tokens || kv.MaxConcurrency != c.concurrency || !kv.Fits {
			t.Errorf("M %d: %d blocks, %d a request (%d fixed), %d tokens, %vx, fits %v; want 64,280, %d (6,682), %d, %vx", c.maxLen, kv.Blocks, kv.Compressed.BlocksPerRequest, kv.Compressed.FixedBlocks, kv.Tokens, kv.MaxConcurrency, kv.Fits, c.perRequest, c.tokens, c.concurrency)
		}
		grow, fixed := kv.PerRequestFor(c.maxLen)
		if grow != Bytes(c.kvBlocks*1002240) || fixed != Bytes(6682*1002240) || kv.PerRequest != Bytes(c.perRequest*1002240) || kv.MaxConcurrencyFor(c.maxLen) != c.concurrency {
			t.Errorf("M %d: per request %v + %v = %v", c.maxLen, grow, fixed, kv.PerRequest)
		}
		// 10 GiB less the null block, 10,736,416,000 B, holds 10,712 block
		// ids: not the 10,778 of 1,048,576 tokens; the longest that fits
		// takes 10,712 − 6,682 = 4,030 full blocks, 1,031,680 tokens.
		small, _ := VLLM{MaxModelLen: c.maxLen, MaxNumBatchedTokens: 8192}.KVCache(m, 10*GiB)
		if small.Fits != (c.estimatedFor10 == 0) || small.EstimatedMaxModelLen != c.estimatedFor10 {
			t.Errorf("M %d in 10 GiB: fits %v, estimated %d; want %d", c.maxLen, small.Fits, small.EstimatedMaxModelLen, c.estimatedFor10)
		}
	}
}

// TestVLLMCompressedTP: the cache is replicated (one head and
// max_tp_shards=1 in every spec): TP 1, 2, 4 and 8 cut the same memory
// into the same blocks.
func TestVLLMCompressedTP(t *testing.T) {
	m := MustPreset("deepseek-v4-flash")
	var first VLLMKVCache
	for _, tp := range []int{1, 2, 4, 8} {
		kv, err := VLLM{MaxModelLen: 131072, TP: tp}.KVCache(m, 60*GiB)
		if err != nil {
			t.Fatal(err)
		}
		if tp == 1 {
			first = kv
		}
		if kv.PageBytes != first.PageBytes || kv.Blocks != first.Blocks || kv.Tokens != first.Tokens || kv.Blocks != 64280 {
			t.Errorf("TP %d: %v a block, %d blocks, %d tokens; TP 1: %v, %d, %d", tp, kv.PageBytes, kv.Blocks, kv.Tokens, first.PageBytes, first.Blocks, first.Tokens)
		}
	}
}

// TestVLLMCompressedRefusals: what the releases and the settings refuse.
func TestVLLMCompressedRefusals(t *testing.T) {
	m := MustPreset("deepseek-v4-flash")
	for _, c := range []struct {
		name string
		v    VLLM
		want string
	}{
		{"0.11.0", VLLM{Version: "0.11.0", MaxModelLen: 8192}, "vLLM 0.11.0 does not run deepseek_v4: its model registry has no DeepseekV4ForCausalLM"},
		{"0.14.1", VLLM{Version: "0.14.1", MaxModelLen: 8192}, "vLLM 0.14.1 does not run deepseek_v4"},
		{"bf16 rows", VLLM{MaxModelLen: 8192, KVCacheDType: BF16}, "fp8_ds_mla layout only supports fp8 kv-cache, got bf16"},
		{"16-token blocks", VLLM{MaxModelLen: 8192, BlockSize: 16}, "take only 256-token blocks"},
		{"TP 16", VLLM{MaxModelLen: 8192, TP: 16}, "must divide DeepSeek-V4's 64 heads and 8 output groups"},
		{"PP 2", VLLM{MaxModelLen: 8192, PP: 2}, "one pipeline stage"},
	} {
		if _, err := c.v.KVCache(m, 40*GiB); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// fp8 (e4m3, vLLM's "fp8") is the default's own row.
	if kv, err := (VLLM{MaxModelLen: 8192, KVCacheDType: FP8E4M3}).KVCache(m, 40*GiB); err != nil || kv.PageBytes != 1002240 {
		t.Errorf("kv_cache_dtype fp8: %v, %v a block", err, kv.PageBytes)
	}
	if _, err := (Inference{Model: m, Batch: 1, PromptTokens: 128}).Estimate(); err == nil {
		t.Error("transformers' generate of DeepSeek-V4 is not refused")
	}
}

// TestVLLMCompressedPlan: the plan carves on an H200 at TP 8 with vLLM
// 0.33's defaults there (8,192 batched tokens and 1,024 sequences below
// 160 GiB; max_model_len the model's 1,048,576). The weights are what the
// engine's released format gives (the catalog stores V4-Flash in bf16;
// its fp8 and fp4 release is not modelled). The profile's peak is a CSA
// layer at the indexer's op, in MiB at T = 8,192: the inputs (4 streams
// and x in bf16, the fp32 mixes: 320.625), the new streams (256) and
// mixes (0.625), the attention's input (64), the output buffer of 64
// padded heads × 512 (512), the fused q latent and key (1,536 wide: 24),
// the indexer's weights (1), the compressor's fp32 kv and score (2,048
// wide: 64), the indexer compressor's (512 wide: 16), qr (16), kv (8), q
// padded to 64 heads (512), the indexer's fp8 q (64 × 128: 64) and fp32
// weights (2), and the op's logits (512) and top-k exchange (2 × 8,192 ×
// 512 × 4 B: 32): 2,404.25 MiB = 2,521,038,848 B, more than the sampler's
// warm-up. Beside it the workspace at FlashMLA's CSA request: 4 ×
// (262,144 + 128 + 8,192) × 512 bf16 = 1,107,820,544, 8,192 × 640 int32 =
// 20,971,520 and 8,192 int32 = 32,768 (the indexer's K gather, 4,194,304 ×
// 132 B + 1 MiB, is smaller), and the top-k buffer 8,192 × 512 int32 =
// 16,777,216.
func TestVLLMCompressedPlan(t *testing.T) {
	p, err := ParsePlan([]byte(`{"model":"deepseek-v4-flash","inference":{"batch":1,"prompt_tokens":4096},"gpu":"H200","vllm":{"tensor_parallel_size":8}}`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := mustGPU(p.GPU)
	c, err := p.VLLM.Carve(*p.Inference, g)
	if err != nil {
		t.Fatal(err)
	}
	in := *p.Inference
	in.TP = 8
	rin, rm, err := in.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if !c.Starts || c.Weights != rin.weightBytes(rm) || c.Weights != 71145622702 || c.ProfileTokens != 8192 || c.KVCache.MaxModelLen != 1048576 {
		t.Errorf("starts %v (%s), weights %v (the engine's: %v), %d profile tokens, max_model_len %d", c.Starts, c.Err, c.Weights, rin.weightBytes(rm), c.ProfileTokens, c.KVCache.MaxModelLen)
	}
	const peak, workspace, topk = 2521038848, 1107820544 + 20971520 + 32768, 16777216
	if c.Activation != peak+workspace+topk {
		t.Errorf("profile %v (%d), want %d", c.Activation, int64(c.Activation), peak+workspace+topk)
	}
	kv := c.KVCache
	if want := int64(kv.Available) / 1002240; kv.Blocks != want || kv.Compressed.BlocksPerRequest != 10778 || kv.Tokens != int64(float64(want)/10778*1048576) {
		t.Errorf("%v available: %d blocks, %d tokens", kv.Available, kv.Blocks, kv.Tokens)
	}
}
