package vram

import (
	"fmt"
	"testing"
)

// qwen3_14b is Qwen/Qwen3-14B's attention (config.json: 40 layers, 8 KV
// heads of 128), the model of the first log below.
func qwen3_14b() Model {
	return Model{Name: "Qwen3-14B", Family: "qwen3", Layers: 40, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128,
		FFN: 17408, Vocab: 151936, MaxPosition: 40960, TiedEmbeddings: false}
}

// TestVLLMLogs reproduces vLLM's own startup figures from logs users
// posted, each with the model's config and the flags it ran with. The log
// prints the available KV cache memory in GiB with two decimals, so the
// block count is checked to be one that memory rounds to, and every figure
// vLLM derives from the block count (tokens, concurrency, the ValueError
// and its estimate) is reproduced exactly from it. How each was obtained:
//
//  1. Qwen3-14B, bf16 cache, max_model_len 32768 (LMCache issue #1739,
//     vLLM V1 log): "Available KV cache memory: 6.51 GiB", "GPU KV cache
//     size: 42,656 tokens", "Maximum concurrency for 32,768 tokens per
//     request: 1.30x".
//  2. Llama-3.1-8B-Instruct on an RTX 3090, max_model_len 20000 (vLLM
//     issue #10517): "kv_cache_size=3.81GiB", "GPU blocks: 1952",
//     "Maximum concurrency for 20000 tokens per request: 1.56x".
//  3. The same at max_model_len 29000: "kv_cache_size=2.89GiB", "GPU
//     blocks: 1478", and the error "the maximum number of tokens that can
//     be stored in KV cache (23648)".
//  4. Qwen3-30B-A3B (48 layers, 4 KV heads of 128), kv_cache_dtype fp8,
//     max_model_len 100000, past the config's 40960 (RoPE scaling or
//     VLLM_ALLOW_LONG_MAX_MODEL_LEN; vLLM issue #25350): "Available KV cache
//     memory: 10.55 GiB", "GPU KV cache size: 230,528 tokens", "Maximum
//     concurrency for 100,000 tokens per request: 2.31x".
//  5. The same at max_model_len 221000: the ValueError quoted in full
//     below (10.12 GiB needed, 5.59 GiB available, estimated 122080).
//  6. Qwen2.5-7B-Instruct on an 8 GiB RTX 4060 at gpu_memory_utilization
//     0.7 (vLLM issue #13882): 8.00 GiB × 0.70 = 5.60 GiB, weights 5.20,
//     non-torch 0.03, activation peak 1.42: "the rest of the memory
//     reserved for KV Cache is -1.05GiB", "# cuda blocks: 0", "Maximum
//     concurrency for 4096 tokens per request: 0.00x".
func TestVLLMLogs(t *testing.T) {
	gib := func(x float64) Bytes { return Bytes(x * float64(GiB)) }
	for _, c := range []struct {
		name     string
		m        Model
		v        VLLM
		availGiB float64 // as logged, two decimals
		blocks   int64   // as logged (tokens / block size)
		concLen  int
		conc     string // as logged
		fits     bool
	}{
		{"Qwen3-14B", qwen3_14b(), VLLM{Version: "0.11.0", MaxModelLen: 32768}, 6.51, 42656 / 16, 32768, "1.30", true},
		{"Llama-3.1-8B 20k", MustPreset("llama-3.1-8b"), VLLM{Version: "0.11.0", MaxModelLen: 20000}, 3.81, 1952, 20000, "1.56", true},
		{"Llama-3.1-8B 29k", MustPreset("llama-3.1-8b"), VLLM{Version: "0.11.0", MaxModelLen: 29000}, 2.89, 1478, 29000, "0.82", false},
		{"Qwen3-30B-A3B fp8", MustPreset("qwen3-30b-a3b"), VLLM{Version: "0.11.0", MaxModelLen: 100000, KVCacheDType: FP8E4M3, AllowLongMaxModelLen: true}, 10.55, 230528 / 16, 100000, "2.31", true},
	} {
		lo, err := c.v.KVCache(c.m, gib(c.availGiB-0.005))
		if err != nil {
			t.Fatal(err)
		}
		hi, _ := c.v.KVCache(c.m, gib(c.availGiB+0.005))
		if c.blocks < lo.Blocks || c.blocks > hi.Blocks {
			t.Errorf("%s: %.2f GiB gives %d–%d blocks, the log says %d", c.name, c.availGiB, lo.Blocks, hi.Blocks, c.blocks)
			continue
		}
		// The memory that gives exactly the logged blocks.
		exact := Bytes(c.blocks*int64(lo.PageBytes)*int64(lo.Layers)) + 1
		kv, _ := c.v.KVCache(c.m, exact)
		if kv.Blocks != c.blocks || kv.Tokens != c.blocks*16 || fmt.Sprintf("%.2f", kv.MaxConcurrencyFor(c.concLen)) != c.conc || kv.Fits != c.fits {
			t.Errorf("%s: %d blocks, %d tokens, concurrency %.2f (log %s), fits %v", c.name, kv.Blocks, kv.Tokens, kv.MaxConcurrencyFor(c.concLen), c.conc, kv.Fits)
		}
	}
	// 3: the tokens the cache holds, as vLLM 0.6's error names them.
	kv, _ := VLLM{Version: "0.11.0", MaxModelLen: 29000}.KVCache(MustPreset("llama-3.1-8b"), 1478*2*MiB)
	if kv.Tokens != 23648 || kv.Fits {
		t.Errorf("29k: %d tokens, fits %v", kv.Tokens, kv.Fits)
	}
	// 5: the ValueError, word for word, from the block count its estimate implies.
	v := VLLM{Version: "0.11.0", MaxModelLen: 221000, KVCacheDType: FP8E4M3, AllowLongMaxModelLen: true}
	m := MustPreset("qwen3-30b-a3b")
	kv, err := v.KVCache(m, 7630*786432+1000)
	if err != nil {
		t.Fatal(err)
	}
	want := "To serve at least one request with the models's max seq len (221000), (10.12 GiB KV cache is needed, which is larger than the available KV cache memory (5.59 GiB). Based on the available memory, the estimated maximum model length is 122080. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
	if kv.Err != want || kv.Fits || kv.EstimatedMaxModelLen != 122080 {
		t.Errorf("221000 tokens:\n got %s\nwant %s", kv.Err, want)
	}
	// 6: the carve from the logged parts leaves nothing for the cache.
	avail := gib(8.00*0.70) - gib(5.20) - gib(0.03) - gib(1.42)
	kv, _ = VLLM{Version: "0.11.0", MaxModelLen: 4096}.KVCache(MustPreset("qwen2.5-7b"), avail)
	if fmt.Sprintf("%.2f", float64(avail)/float64(GiB)) != "-1.05" || kv.Blocks != 0 || fmt.Sprintf("%.2f", kv.MaxConcurrencyFor(4096)) != "0.00" {
		t.Errorf("RTX 4060: %v available, %d blocks", avail, kv.Blocks)
	}
}

// TestVLLMSolvers: concurrency for a context and context for a
// concurrency answer each other; MLA pages hold one latent; TP splits the
// KV heads and PP the layers.
func TestVLLMSolvers(t *testing.T) {
	kv, err := VLLM{Version: "0.11.0", MaxModelLen: 8192}.KVCache(MustPreset("llama-3.1-8b"), 20*GiB)
	if err != nil {
		t.Fatal(err)
	}
	if kv.PageBytes != 64*KiB || kv.Layers != 32 || kv.Blocks != 10240 || kv.Tokens != 163840 {
		t.Fatalf("llama-3.1-8b on 20 GiB: %+v", kv)
	}
	for _, n := range []int{1, 3, 20, 160} {
		ctx := kv.MaxContextFor(n)
		if kv.MaxConcurrencyFor(int(ctx)) < float64(n) || ctx < int64(kv.MaxModelLen) && kv.MaxConcurrencyFor(int(ctx)+kv.BlockSize) >= float64(n) {
			t.Errorf("%d requests: context %d, concurrency there %.2f", n, ctx, kv.MaxConcurrencyFor(int(ctx)))
		}
	}
	tp, _ := VLLM{Version: "0.11.0", MaxModelLen: 8192, TP: 2}.KVCache(MustPreset("llama-3.1-8b"), 20*GiB)
	pp, _ := VLLM{Version: "0.11.0", MaxModelLen: 8192, PP: 2}.KVCache(MustPreset("llama-3.1-8b"), 20*GiB)
	if tp.Blocks != 2*kv.Blocks || pp.Blocks != 2*kv.Blocks {
		t.Errorf("TP=2: %d blocks, PP=2: %d, TP=1: %d", tp.Blocks, pp.Blocks, kv.Blocks)
	}
	ds, err := VLLM{Version: "0.11.0", MaxModelLen: 8192}.KVCache(MustPreset("deepseek-v3"), 20*GiB)
	if err != nil {
		t.Fatal(err)
	}
	if ds.PageBytes != 16*(512+64)*2 {
		t.Errorf("MLA page %v, want 16 × (512 + 64) × 2 bytes", ds.PageBytes)
	}
	for name, c := range map[string]struct {
		v VLLM
		m Model
	}{
		"utilization": {VLLM{Version: "0.11.0", GPUMemoryUtilization: 1.5}, MustPreset("llama-3.1-8b")},
		"kv dtype":    {VLLM{Version: "0.11.0", KVCacheDType: INT4}, MustPreset("llama-3.1-8b")},
		"encoder":     {VLLM{Version: "0.11.0", MaxModelLen: 512}, MustPreset("bert-base-uncased")},
	} {
		if _, err := c.v.KVCache(c.m, GiB); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestVLLMCarve: the carve of a GPU follows determine_available_memory,
// and its parts are the engine's own figures.
func TestVLLMCarve(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	in := Inference{Model: MustPreset("llama-3.1-8b"), Weights: Quant{DType: BF16}}
	c, err := VLLM{Version: "0.11.0", MaxModelLen: 8192}.Carve(in, g)
	if err != nil {
		t.Fatal(err)
	}
	if c.Requested != Bytes(float64(g.Total())*0.9) || c.Weights < 14*GiB || c.Weights > 16*GiB || c.Activation <= 0 || c.NonTorch != g.Context {
		t.Errorf("carve %+v", c)
	}
	if c.KVCache.Available != c.Requested-c.Weights-c.Activation-c.NonTorch || !c.KVCache.Fits || c.KVCache.MaxConcurrency < 10 {
		t.Errorf("kv %+v", c.KVCache)
	}
	// The CUDA graphs vLLM 0.11 captures once the cache is sized
	// (gpu_worker.py:341-344) leave the cache alone and add to what
	// nvidia-smi shows; 0.33 profiles them first and takes them off the
	// cache (gpu_worker.py:747-757), inside the requested memory.
	cg, _ := VLLM{Version: "0.11.0", MaxModelLen: 8192, CUDAGraphMemory: GiB}.Carve(in, g)
	if cg.KVCache.Available != c.KVCache.Available || cg.DeviceUsed != c.DeviceUsed+GiB {
		t.Errorf("0.11 with 1 GiB of graphs: cache %v, device %v; without %v, %v", cg.KVCache.Available, cg.DeviceUsed, c.KVCache.Available, c.DeviceUsed)
	}
	now, _ := VLLM{Version: "0.33.0", MaxModelLen: 8192}.Carve(in, g)
	nowGraphs, _ := VLLM{Version: "0.33.0", MaxModelLen: 8192, CUDAGraphMemory: GiB}.Carve(in, g)
	if nowGraphs.KVCache.Available != now.KVCache.Available+now.CUDAGraphs-GiB || nowGraphs.DeviceUsed != now.DeviceUsed || now.CUDAGraphs <= 0 {
		t.Errorf("0.33 with 1 GiB of graphs: cache %v, device %v; with its estimate (%v) %v, %v", nowGraphs.KVCache.Available, nowGraphs.DeviceUsed, now.CUDAGraphs, now.KVCache.Available, now.DeviceUsed)
	}
}

// TestVLLMCarveLogs: the carve set against vLLM's own profile (issue
// #10517: Llama-3.1-8B-Instruct, bf16, RTX 3090 reporting 23.58 GiB,
// non-torch 0.35 GiB, gpu_memory_utilization 0.9, the profile run at
// max_num_batched_tokens = max_model_len). Logged: weights 14.99 GiB, peak
// torch memory 17.06 / 17.98 GiB, KV cache 3.81 / 2.89 GiB at 20000 /
// 29000 tokens. The engine's prefill activations for those lengths and the
// KV memory left are within 0.1 GiB of them.
func TestVLLMCarveLogs(t *testing.T) {
	mem, ctx := 23.58, 0.35
	g := GPU{Name: "RTX 3090 (as logged)", Memory: Bytes(mem * float64(GiB)), Context: Bytes(ctx * float64(GiB))}
	gib := func(b Bytes) float64 { return float64(b) / float64(GiB) }
	for _, c := range []struct {
		tokens          int
		activation, kvs float64
	}{{20000, 17.06 - 14.9888, 3.81}, {29000, 17.98 - 14.9888, 2.89}} {
		cv, err := VLLM{Version: "0.11.0", MaxModelLen: c.tokens}.Carve(Inference{Model: MustPreset("llama-3.1-8b"), Weights: Quant{DType: BF16}, MaxBatchedTokens: c.tokens}, g)
		if err != nil {
			t.Fatal(err)
		}
		if d := gib(cv.Activation) - c.activation; d < -0.1 || d > 0.1 {
			t.Errorf("%d tokens: activation %.2f GiB, logged %.2f", c.tokens, gib(cv.Activation), c.activation)
		}
		if d := gib(cv.KVCache.Available) - c.kvs; d < -0.1 || d > 0.1 {
			t.Errorf("%d tokens: KV cache %.2f GiB, logged %.2f", c.tokens, gib(cv.KVCache.Available), c.kvs)
		}
	}
}

// TestVLLMMinTP: Llama-3.1-70B in bf16 does not load on one H100; the
// smallest degree that holds 64 requests of 8k tokens is the first whose
// carve says so, and the one below it does not.
func TestVLLMMinTP(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	in := Inference{Model: MustPreset("llama-3.1-70b"), Weights: Quant{DType: BF16}}
	v := VLLM{Version: "0.11.0", MaxModelLen: 8192}
	tp, c, err := v.MinTP(in, g, 8192, 64, 8)
	if err != nil {
		t.Fatal(err)
	}
	if tp < 2 || c.KVCache.MaxConcurrencyFor(8192) < 64 {
		t.Fatalf("TP %d: %+v", tp, c.KVCache)
	}
	below := v
	below.TP = tp / 2
	cb, err := below.Carve(in, g)
	if err != nil {
		t.Fatal(err)
	}
	if cb.KVCache.Fits && cb.KVCache.MaxConcurrencyFor(8192) >= 64 {
		t.Errorf("TP %d already holds 64 × 8k: %+v", tp/2, cb.KVCache)
	}
	if n, _, err := v.MinTP(in, g, 8192, 100000, 8); err != nil || n != 0 {
		t.Errorf("100,000 requests: TP %d, %v", n, err)
	}
	if _, _, err := v.MinTP(in, g, 0, 1, 8); err == nil {
		t.Error("context 0: no error")
	}
}

// TestVLLMHybridGroups: models with local layers are grouped as vLLM's
// _get_kv_cache_groups_uniform_page_size groups them, and a request needs
// only the window (plus a batch and a block) in a sliding-window layer.
func TestVLLMHybridGroups(t *testing.T) {
	v := VLLM{Version: "0.11.0", MaxModelLen: 8192, AllowLongMaxModelLen: true}
	for _, c := range []struct {
		preset    string
		groups    int
		groupSize int
		kinds     map[string]int // real layers per kind
	}{
		// Gemma 3 27B: 52 sliding-window (1024) and 10 global layers, 5:1.
		{"gemma-3-27b", 7, 10, map[string]int{"sliding_window": 52, "full": 10}},
		// gpt-oss-20b: 12 sliding-window (128) and 12 full layers, alternating.
		{"gpt-oss-20b", 2, 12, map[string]int{"sliding_window": 12, "full": 12}},
		// Llama 4 Scout: 36 chunked-local (8192) and 12 global layers, but
		// vLLM turns the hybrid manager off for chunked local attention by
		// default: every layer sized as full attention.
		{"llama-4-scout", 1, 48, map[string]int{"full": 48}},
		// Mistral 7B: every layer in a 4096 window: one group.
		{"mistral-7b", 1, 32, map[string]int{"sliding_window": 32}},
		{"llama-3.1-8b", 1, 32, map[string]int{"full": 32}},
	} {
		kv, err := v.KVCache(MustPreset(c.preset), 40*GiB)
		if err != nil {
			t.Fatalf("%s: %v", c.preset, err)
		}
		got := map[string]int{}
		for _, g := range kv.Groups {
			got[g.Kind] += g.Layers
			if g.Layers > kv.GroupSize {
				t.Errorf("%s: a group of %d layers, group size %d", c.preset, g.Layers, kv.GroupSize)
			}
		}
		if len(kv.Groups) != c.groups || kv.GroupSize != c.groupSize || fmt.Sprint(got) != fmt.Sprint(c.kinds) {
			t.Errorf("%s: %d groups of %d, kinds %v; want %d of %d, %v", c.preset, len(kv.Groups), kv.GroupSize, got, c.groups, c.groupSize, c.kinds)
		}
		// get_num_blocks over the group size, tokens per group.
		if kv.Blocks != int64(40*GiB)/int64(kv.PageBytes)/int64(kv.GroupSize) || kv.Tokens != kv.Blocks/int64(len(kv.Groups))*16 {
			t.Errorf("%s: %d blocks, %d tokens", c.preset, kv.Blocks, kv.Tokens)
		}
	}
	// With VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 Scout's
	// chunked layers form groups of their own, 3:1.
	vc := v
	vc.AllowChunkedHybrid = true
	if kv, _ := vc.KVCache(MustPreset("llama-4-scout"), 40*GiB); len(kv.Groups) != 4 || kv.GroupSize != 12 {
		t.Errorf("llama-4-scout with chunked hybrid: %d groups of %d", len(kv.Groups), kv.GroupSize)
	}
	// --disable-hybrid-kv-cache-manager: one group for Gemma 3 too.
	vd := v
	vd.DisableHybridKVCache = true
	if kv, _ := vd.KVCache(MustPreset("gemma-3-27b"), 40*GiB); len(kv.Groups) != 1 || kv.Groups[0].Kind != "full" {
		t.Errorf("gemma-3-27b without the hybrid manager: %+v", kv.Groups)
	}
	// Gemma 3 27B at 8192 tokens, a batch of 8192: a sliding layer needs
	// cdiv(min(1023 + 8192, 8192), 16) + 1 = 513 pages, a global one 512;
	// a request 6 × 513 + 512 blocks.
	kv, _ := v.KVCache(MustPreset("gemma-3-27b"), 40*GiB)
	if b := kv.blocksFor(8192); b != 6*513+512 {
		t.Errorf("gemma-3-27b: %d blocks a request, want %d", b, 6*513+512)
	}
	if kv.MaxConcurrency != float64(kv.Blocks)/float64(6*513+512) {
		t.Errorf("gemma-3-27b: concurrency %v", kv.MaxConcurrency)
	}
	// Long contexts cost a sliding-window model far less than a global one.
	long := VLLM{Version: "0.11.0", MaxModelLen: 131072, AllowLongMaxModelLen: true}
	sw, _ := long.KVCache(MustPreset("gemma-3-27b"), 40*GiB)
	full := MustPreset("gemma-3-27b")
	full.SlidingWindow, full.GlobalEvery = 0, 0
	fl, _ := long.KVCache(full, 40*GiB)
	if sw.MaxConcurrency < 3*fl.MaxConcurrency {
		t.Errorf("131k tokens: %.2f requests with sliding windows, %.2f without", sw.MaxConcurrency, fl.MaxConcurrency)
	}
	if n := sw.MaxContextFor(4); n < 1 || sw.MaxConcurrencyFor(int(n)) < 4 || (n < int64(sw.MaxModelLen) && sw.MaxConcurrencyFor(int(n)+1) >= 4) {
		t.Errorf("gemma-3-27b: longest context for 4 requests %d", n)
	}
}

// TestVLLMPrefixAndDraft: a shared system prompt is stored once (whole
// blocks), so more requests fit; a draft model's layers take pages in
// every block and its weights come off first.
func TestVLLMPrefixAndDraft(t *testing.T) {
	v := VLLM{Version: "0.11.0", MaxModelLen: 8192}
	kv, err := v.KVCache(MustPreset("llama-3.1-8b"), 20*GiB)
	if err != nil {
		t.Fatal(err)
	}
	none := kv.MaxConcurrencyWithPrefix(8192, 0)
	if none != kv.MaxConcurrencyFor(8192) {
		t.Errorf("no prefix: %.2f, plain %.2f", none, kv.MaxConcurrencyFor(8192))
	}
	// 10240 blocks; a 4096-token shared prefix is 256 blocks once, each
	// request 512 − 256 of its own.
	if got, want := kv.MaxConcurrencyWithPrefix(8192, 4096), float64(10240-256)/256; got != want {
		t.Errorf("4096 shared of 8192: %.3f, want %.3f", got, want)
	}
	if got := kv.MaxConcurrencyWithPrefix(8192, 4100); got != kv.MaxConcurrencyWithPrefix(8192, 4096) {
		t.Errorf("a partial block is not shared: %.3f", got)
	}
	draft := MustPreset("llama-3.2-1b") // 16 layers, 8 KV heads of 64: another page size
	eagle := &SpeculativeConfig{Method: "eagle", NumSpeculativeTokens: 2}
	// All full attention: one group whose block is every layer's page,
	// 32 × 64 KiB + 16 × 32 KiB (UniformTypeKVCacheSpecs, 0.11.0
	// v1/kv_cache_interface.py:287-312).
	if kv, err := (VLLM{Version: "0.11.0", MaxModelLen: 8192, Speculative: eagle, Draft: &draft}).KVCache(MustPreset("llama-3.1-8b"), 20*GiB); err != nil || kv.Blocks != int64(20*GiB)/int64(32*64*KiB+16*32*KiB) {
		t.Errorf("a draft with another page size: %d blocks, %v", kv.Blocks, err)
	}
	small := MustPreset("llama-3.1-8b")
	small.Layers, small.Params = 4, 0 // an 8B-shaped 4-layer draft (EAGLE-like heads share the page)
	dv := VLLM{Version: "0.11.0", MaxModelLen: 8192, Speculative: eagle, Draft: &small}
	dkv, err := dv.KVCache(MustPreset("llama-3.1-8b"), 20*GiB)
	if err != nil {
		t.Fatal(err)
	}
	if dkv.Layers != 36 || dkv.Blocks != int64(20*GiB)/int64(64*KiB)/36 {
		t.Errorf("with the draft: %d layers, %d blocks", dkv.Layers, dkv.Blocks)
	}
	g, _ := LookupGPU("H100-80GB")
	in := Inference{Model: MustPreset("llama-3.1-8b"), Weights: Quant{DType: BF16}}
	with, err := dv.Carve(in, g)
	if err != nil {
		t.Fatal(err)
	}
	without, _ := VLLM{Version: "0.11.0", MaxModelLen: 8192}.Carve(in, g)
	if with.Weights <= without.Weights || with.KVCache.Blocks >= without.KVCache.Blocks {
		t.Errorf("draft: weights %v vs %v, blocks %d vs %d", with.Weights, without.Weights, with.KVCache.Blocks, without.KVCache.Blocks)
	}
}

// FuzzServingSettings: any settings give a cache or an error naming the
// setting, never a panic; what comes back is consistent.
func FuzzServingSettings(f *testing.F) {
	f.Add(0.9, 16, 8192, 8192, 1, 1, int64(20<<30), int64(0))
	f.Add(-1.0, 0, -5, -1, -2, 0, int64(-1), int64(-1))
	f.Add(1.0, 1<<20, 1<<30, 1<<30, 1<<10, 1<<10, int64(1)<<62, int64(1)<<62)
	models := []Model{MustPreset("llama-3.1-8b"), MustPreset("gemma-3-27b"), MustPreset("deepseek-v3")}
	f.Fuzz(func(t *testing.T, util float64, block, maxLen, mbt, tp, pp int, avail, graphs int64) {
		v := VLLM{Version: "0.11.0", GPUMemoryUtilization: util, BlockSize: block, MaxModelLen: maxLen, MaxNumBatchedTokens: mbt, TP: tp, PP: pp,
			CUDAGraphMemory: Bytes(graphs), AllowLongMaxModelLen: true}
		for _, m := range models {
			kv, err := v.KVCache(m, Bytes(avail))
			if err != nil {
				continue
			}
			if kv.Blocks < 0 || kv.Tokens < 0 || kv.MaxConcurrency < 0 || (kv.Fits && kv.Err != "") || (!kv.Fits && kv.Err == "") {
				t.Fatalf("%+v on %s: %+v", v, m.Name, kv)
			}
			if n := kv.MaxContextFor(3); n < 0 || n > int64(kv.MaxModelLen) {
				t.Fatalf("context for 3: %d", n)
			}
		}
		_, _ = SGLang{MemFractionStatic: util, TP: tp}.KVPool(models[0], Bytes(avail), Bytes(graphs))
	})
}

// TestVLLMServerDefaults: the carve runs the profile as `vllm serve` does
// on the plan's GPU (engine/arg_utils.py _set_default_args): 8192 tokens
// and 1024 sequences on 70 GiB or more but an A100, else 2048 and 256;
// and its sampler warm-up holds 38 bytes per logit of those requests with
// PyTorch's sampler (its sort of 128 rows or more, samplerSortBytes), 14
// with FlashInfer's, beside the hidden states.
func TestVLLMServerDefaults(t *testing.T) {
	in := Inference{Model: MustPreset("llama-3.1-8b"), Weights: Quant{DType: BF16}}
	m := in.Model.Normalize()
	for _, c := range []struct {
		gpu          string
		tokens, seqs int
	}{{"H100-80GB", 8192, 1024}, {"H200", 8192, 1024}, {"A100-80GB", 2048, 256}, {"RTX-4090", 2048, 256}, {"L40S", 2048, 256}} {
		g, _ := LookupGPU(c.gpu)
		carve, err := VLLM{Version: "0.11.0", MaxModelLen: 8192}.Carve(in, g)
		if err != nil {
			t.Fatal(err)
		}
		if carve.ProfileTokens != c.tokens || carve.ProfileSeqs != c.seqs {
			t.Errorf("%s: profiled at %d tokens, %d sequences; want %d, %d", c.gpu, carve.ProfileTokens, carve.ProfileSeqs, c.tokens, c.seqs)
		}
		v := VLLM{Version: "0.11.0", MaxNumBatchedTokens: c.tokens, MaxNumSeqs: c.seqs}
		want := Bytes(int64(c.seqs)*int64(m.Vocab)*38) + BF16.Size(int64(c.tokens)*int64(m.Hidden))
		if got := v.samplerWarmup(m, vllmReleases[0]); got != want || carve.Activation < want {
			t.Errorf("%s: sampler warm-up %v, want %v; activation %v", c.gpu, got, want, carve.Activation)
		}
		v.FlashInferSampler = true
		if got := v.samplerWarmup(m, vllmReleases[0]); got != Bytes(int64(c.seqs)*int64(m.Vocab)*14)+BF16.Size(int64(c.tokens)*int64(m.Hidden)) {
			t.Errorf("%s: FlashInfer sampler %v", c.gpu, got)
		}
	}
	// A launch's own settings stand; max_num_seqs stays within the tokens.
	g, _ := LookupGPU("H100-80GB")
	if c, _ := (VLLM{Version: "0.11.0", MaxModelLen: 8192, MaxNumBatchedTokens: 512}).Carve(in, g); c.ProfileTokens != 512 || c.ProfileSeqs != 512 {
		t.Errorf("--max-num-batched-tokens 512: %d tokens, %d sequences", c.ProfileTokens, c.ProfileSeqs)
	}
	if _, err := (VLLM{Version: "0.11.0", MaxNumSeqs: -1}).Carve(in, g); err == nil {
		t.Error("max_num_seqs -1 accepted")
	}
}

// TestGPUTotal: what a process can allocate is CUDA's total, below what
// nvidia-smi lists (H100: 79.19 of 79.65 GiB); a plan that sets the
// memory lower (a share of the card) keeps its figure.
func TestGPUTotal(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	if g.Total() != 81091*MiB || g.Usable() != g.Total()-g.Context || g.Memory != 81559*MiB {
		t.Errorf("H100: total %v, usable %v, memory %v", g.Total(), g.Usable(), g.Memory)
	}
	g.Memory = 40 * GiB
	if g.Total() != 40*GiB {
		t.Errorf("a 40 GiB share: total %v", g.Total())
	}
	if (GPU{Memory: 24 * GiB}).Total() != 24*GiB {
		t.Error("a bare capacity is its own total")
	}
}

// TestSamplerSortBytes: what a logit takes in PyTorch's sampler warm-up
// by the rows it sorts (SortStable.cu's three paths): one row sorts in
// place of its segment, so the scatter's 28 bytes decide; 2 to 127 rows
// sort whole, by value then by segment, over two int2 buffers and a keys
// output (50); 128 and more by segments over int64 reverse indices (38).
func TestSamplerSortBytes(t *testing.T) {
	for _, c := range []struct{ reqs, want int64 }{{1, 28}, {2, 50}, {127, 50}, {128, 38}, {1024, 38}} {
		if got := max(28, samplerSortBytes(c.reqs)); got != c.want {
			t.Errorf("%d requests: %d bytes a logit, want %d", c.reqs, got, c.want)
		}
	}
}
