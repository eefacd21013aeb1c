package vram

import (
	"fmt"
	"strings"
	"testing"
)

// A published startup log of vLLM 0.10.2 serving
// Qwen/Qwen3-Next-80B-A3B-Instruct at tensor_parallel_size 2 on H200s
// (defaults otherwise) prints: "Setting attention block size to 544
// tokens", "Padding mamba page size by 1.49%", "Available KV cache
// memory: 44.59 GiB", "GPU KV cache size: 973,760 tokens" and "Maximum
// concurrency for 262,144 tokens per request: 14.77x". Given the logged
// memory, the block arithmetic must reproduce every other figure.
func TestVLLMHybridQwen3NextLog(t *testing.T) {
	c, err := (VLLM{Version: "0.11.0", TP: 2}).KVCache(MustPreset("qwen3-next-80b-a3b"), Bytes(47878552289) /* 44.59 GiB */)
	if err != nil {
		t.Fatal(err)
	}
	if c.BlockSize != 544 || c.StatePageBytes != 548864 || c.PageBytes != 544*1024 {
		t.Errorf("block %d, state page %d, page %d; want 544, 548864 (conv 3 × 4096 + 16 × 128 × 128, bf16), 557056", c.BlockSize, c.StatePageBytes, c.PageBytes)
	}
	if c.Tokens != 973760 || fmt.Sprintf("%.2f", c.MaxConcurrency) != "14.77" {
		t.Errorf("tokens %d, concurrency %.4f; the log: 973,760 and 14.77x", c.Tokens, c.MaxConcurrency)
	}
	if c.GroupSize != 12 || len(c.Groups) != 4 || c.StateLayers != 36 || c.Groups[0].Kind != "full" {
		t.Errorf("groups %+v (size %d), %d state layers; want a full group and three state groups of 12", c.Groups, c.GroupSize, c.StateLayers)
	}
	if notes := strings.Join(c.Notes, "\n"); !strings.Contains(notes, "544 tokens") || !strings.Contains(notes, "1.49%") {
		t.Errorf("notes do not say the block size and the padding: %q", notes)
	}
}

// The state of a request is one page per recurrent layer whatever its
// length; the attention layers' cache grows with it.
func TestVLLMStateDoesNotGrowWithContext(t *testing.T) {
	for _, tc := range []struct {
		preset      string
		block       int
		state, page Bytes
		attn, rec   int
	}{
		// conv (3, 8192 + 2·128) and temporal (128, 64, 128), bf16; one
		// token of attention 2·8·128·2 = 4 KiB, so 16·cdiv(state, 64 KiB).
		{"bamba-9b", 528, 3*8448*2 + 128*64*128*2, 528 * 4096, 3, 29},
		// conv (2, 2048), bf16: under an attention page of 16 tokens.
		{"lfm2-1.2b", 16, 2 * 2048 * 2, 16 * 2048, 6, 10},
		// Jamba's Mamba-1 mixers: conv (3, 8192) and temporal (8192, 16),
		// bf16; 4 attention layers of 8 KV heads × 128.
		{"jamba-v0.1", 80, 3*8192*2 + 8192*16*2, 80 * 4096, 4, 28},
		// every layer both: attention and a Mamba-2 mixer (Falcon-H1).
		{"falcon-h1-0.5b-instruct", 800, 3*(1536+2*128)*2 + 24*64*128*2, 800 * 512, 36, 36},
	} {
		c, err := (VLLM{Version: "0.11.0", MaxModelLen: 16384}).KVCache(MustPreset(tc.preset), 20*GiB)
		if err != nil {
			t.Fatal(tc.preset, err)
		}
		if c.BlockSize != tc.block || c.StatePageBytes != tc.state || c.PageBytes != tc.page || c.StateLayers != tc.rec {
			t.Errorf("%s: block %d, state page %d, page %d, %d state layers; want %d, %d, %d, %d", tc.preset, c.BlockSize, c.StatePageBytes, c.PageBytes, c.StateLayers, tc.block, tc.state, tc.page, tc.rec)
		}
		kv1, st1 := c.PerRequestFor(1024)
		kv2, st2 := c.PerRequestFor(16384)
		if st1 != st2 || st1 != Bytes(tc.rec)*tc.page {
			t.Errorf("%s: state %v at 1k tokens, %v at 16k; want %v both", tc.preset, st1, st2, Bytes(tc.rec)*tc.page)
		}
		want := func(n int) Bytes { return Bytes(int64(tc.attn) * cdiv64(int64(n), int64(tc.block)) * int64(tc.page)) }
		if kv1 != want(1024) || kv2 != want(16384) || kv2 <= kv1 {
			t.Errorf("%s: KV %v at 1k tokens, %v at 16k; want %v and %v", tc.preset, kv1, kv2, want(1024), want(16384))
		}
		if c.PerRequest != kv2+st2 {
			t.Errorf("%s: per request %v, want %v", tc.preset, c.PerRequest, kv2+st2)
		}
		if p, q := c.MaxConcurrencyWithPrefix(4096, 2048), c.MaxConcurrencyFor(4096); p != q {
			t.Errorf("%s: prefix sharing %v ≠ %v: vLLM turns prefix caching off for recurrent models", tc.preset, p, q)
		}
	}
}

// A model of Mamba-2 layers only is not hybrid: its page is the state,
// unpadded, a block is one request, and vLLM's token figure is the blocks
// times max_model_len (the state spec's block size).
func TestVLLMMambaOnly(t *testing.T) {
	page := Bytes(3*(8192+2*8*128)*2 + 128*64*128*2)
	c, err := (VLLM{Version: "0.11.0", MaxModelLen: 4096}).KVCache(MustPreset("mamba-codestral-7b"), 10*GiB)
	if err != nil {
		t.Fatal(err)
	}
	blocks := int64(10*GiB) / int64(page) / 64
	if c.PageBytes != page || c.BlockSize != 16 || c.Blocks != blocks || c.Tokens != blocks*4096 || c.MaxConcurrency != float64(blocks) {
		t.Errorf("page %d, block %d, blocks %d, tokens %d, concurrency %v; want %d, 16, %d, %d, %d", c.PageBytes, c.BlockSize, c.Blocks, c.Tokens, c.MaxConcurrency, page, blocks, blocks*4096, blocks)
	}
	if len(c.Groups) != 1 || c.Groups[0].Kind != "mamba" || c.hybrid() {
		t.Errorf("groups %+v", c.Groups)
	}
	// fp32 states double the page.
	c32, err := (VLLM{Version: "0.11.0", MaxModelLen: 4096, MambaCacheDType: FP32}).KVCache(MustPreset("mamba-codestral-7b"), 10*GiB)
	if err != nil || c32.PageBytes != 2*page {
		t.Errorf("fp32 state: page %d, %v; want %d", c32.PageBytes, err, 2*page)
	}
	// Only the temporal state in fp32.
	cs, err := (VLLM{Version: "0.11.0", MaxModelLen: 4096, MambaSSMCacheDType: FP32}).KVCache(MustPreset("mamba-codestral-7b"), 10*GiB)
	if want := Bytes(3*(8192+2*8*128)*2 + 128*64*128*4); err != nil || cs.PageBytes != want {
		t.Errorf("fp32 temporal state: page %d, %v; want %d", cs.PageBytes, err, want)
	}
}

// Tensor parallelism shards the state; settings vLLM refuses are refused
// with the field and the rule.
func TestVLLMStateSettings(t *testing.T) {
	bamba := MustPreset("bamba-9b")
	c, err := (VLLM{Version: "0.11.0", TP: 2, MaxModelLen: 4096}).KVCache(bamba, 10*GiB)
	// n_groups 1 is raised to 2: conv (3, (8192 + 2·2·128)/2), temporal (64, 64, 128).
	if want := Bytes(3*4352*2 + 64*64*128*2); err != nil || c.StatePageBytes != want {
		t.Errorf("tp 2: state page %d, %v; want %d", c.StatePageBytes, err, want)
	}
	llama := MustPreset("llama-3-8b")
	for name, tc := range map[string]struct {
		v    VLLM
		want string
	}{
		"tp":     {VLLM{Version: "0.11.0", TP: 3, MaxModelLen: 4096}, "tensor_parallel_size 3 must divide"},
		"dtype":  {VLLM{Version: "0.11.0", MaxModelLen: 4096, MambaCacheDType: FP8E4M3}, "mamba_cache_dtype must be bf16"},
		"ssm":    {VLLM{Version: "0.11.0", MaxModelLen: 4096, MambaSSMCacheDType: FP16}, "mamba_ssm_cache_dtype must be bf16"},
		"draft":  {VLLM{Version: "0.11.0", MaxModelLen: 4096, Speculative: &SpeculativeConfig{Method: "eagle", NumSpeculativeTokens: 2}, Draft: &llama}, "Mamba with speculative decoding is not supported"},
		"hybrid": {VLLM{Version: "0.11.0", MaxModelLen: 4096, DisableHybridKVCache: true}, "disable_hybrid_kv_cache_manager"},
	} {
		if _, err := tc.v.KVCache(bamba, 10*GiB); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// The profile run takes vLLM's profile path of the recurrent layers, not
// transformers' chunked scan (which at 8,192 tokens would hold over a
// hundred GiB for Bamba-9B).
func TestVLLMCarveHybrid(t *testing.T) {
	g, _ := LookupGPU("h100")
	in := Inference{Model: MustPreset("bamba-9b"), Weights: Quant{DType: BF16}, Batch: 1, PromptTokens: 128, NewTokens: 16}
	c, err := (VLLM{Version: "0.11.0", MaxModelLen: 32768}).Carve(in, g)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Starts || c.Activation > 8*GiB || c.KVCache.StateLayers != 29 {
		t.Errorf("starts %v (%s), profile %v, %d state layers", c.Starts, c.Err, c.Activation, c.KVCache.StateLayers)
	}
	if notes := strings.Join(c.Notes, "\n"); !strings.Contains(notes, "profile path") {
		t.Errorf("the carve does not say how the profile runs the mixers: %q", notes)
	}
}

// vLLM 0.11.0 cuts every kind into groups of the smallest kind's count
// (kv_cache_utils.py l.974: group_size = min(...)), padding the last, and
// checks one request against the real layers' needs, not the padded ones
// (check_enough_kv_cache_memory over the layers' specs).
func TestVLLMGroupSizeSmallestKind(t *testing.T) {
	m := MustPreset("gemma-2-9b")
	m.Layers = 7 // global layers 1, 3, 5; sliding 0, 2, 4, 6
	c, err := (VLLM{Version: "0.11.0", MaxModelLen: 8192}).KVCache(m, 20*GiB)
	if err != nil {
		t.Fatal(err)
	}
	// Kinds in order of their first layer: sliding (layer 0), then global.
	if c.GroupSize != 3 || len(c.Groups) != 3 || c.Groups[0].Kind != "sliding_window" || c.Groups[1].Layers != 1 || c.Groups[2].Kind != "full" {
		t.Fatalf("group size %d, groups %+v; want 3: sliding groups of 3 and 1 (padded), one global group", c.GroupSize, c.Groups)
	}
	full := int64(3) * cdiv64(8192, 16)
	sliding := int64(4) * (cdiv64(int64(min(4096-1+8192, 8192)), 16) + 1)
	if want := Bytes((full + sliding) * int64(c.PageBytes)); c.PerRequest != want {
		t.Errorf("per request %v, want %v: the 7 real layers' pages", c.PerRequest, want)
	}
}
