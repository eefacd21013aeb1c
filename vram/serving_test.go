package vram

import (
	"strings"
	"testing"
)

// TestGPTOSSAsReleased: gpt-oss as people run it. On one H100, vLLM keeps
// the MXFP4 experts. In the vllm/vllm-openai image (FlashInfer's sampler)
// with the Triton backend it starts at its defaults and reports its KV
// blocks and concurrency; a pip install's PyTorch sampler sorts 1024 dummy
// requests' logits in the profile run, which leaves too little for one
// 131,072-token request (in vLLM's words, with the length that fits)
// unless --max-num-seqs is lowered; with Marlin as well (a plain pip
// install on Hopper, whose padding took 65.97 GiB in vllm#23278, where the
// KV memory came out at −2.14 GiB) no memory is left for the cache at all.
// gpt-oss-20b fits a 16 GB T4 for a short chat in transformers as
// released, and the output says that without the kernels (or on a V100)
// it is dequantized and does not.
func TestGPTOSSAsReleased(t *testing.T) {
	h100, _ := LookupGPU("H100-80GB")
	serve := Inference{Model: MustPreset("gpt-oss-120b"), Batch: 1, PromptTokens: 1024, NewTokens: 256}
	image := VLLM{Version: "0.11.0", MXFP4Backend: "triton", FlashInferSampler: true}
	tri, err := image.Carve(serve, h100)
	if err != nil {
		t.Fatal(err)
	}
	if !tri.Starts || tri.KVCache.Blocks < 10000 || tri.KVCache.MaxConcurrency < 1 || tri.Weights > 62*GiB || tri.ProfileSeqs != 1024 {
		t.Errorf("triton: starts %v, %d blocks, %.2fx, weights %v: %s", tri.Starts, tri.KVCache.Blocks, tri.KVCache.MaxConcurrency, tri.Weights, tri.Err)
	}
	pip, _ := VLLM{Version: "0.11.0", MXFP4Backend: "triton"}.Carve(serve, h100)
	if pip.Starts || !strings.Contains(pip.Err, "To serve at least one request with the models's max seq len (131072)") ||
		pip.KVCache.EstimatedMaxModelLen <= 0 || pip.KVCache.EstimatedMaxModelLen >= 131072 || !strings.Contains(strings.Join(pip.Notes, " "), "sampler warm-up") {
		t.Errorf("triton, PyTorch sampler: starts %v: %s %q", pip.Starts, pip.Err, pip.Notes)
	}
	if fewer, _ := (VLLM{Version: "0.11.0", MXFP4Backend: "triton", MaxNumSeqs: 256}).Carve(serve, h100); !fewer.Starts {
		t.Errorf("triton, --max-num-seqs 256: %s", fewer.Err)
	}
	mar, err := VLLM{Version: "0.11.0"}.Carve(serve, h100)
	if err != nil {
		t.Fatal(err)
	}
	if mar.Starts || !strings.Contains(mar.Err, "No available memory for the cache blocks") || mar.Weights < 65*GiB || mar.Weights > 66*GiB {
		t.Errorf("marlin: starts %v, weights %v (vllm#23278 logged 65.97 GiB): %s", mar.Starts, mar.Weights, mar.Err)
	}
	if v, err := (Budget{GPU: h100}).JudgePlan(Plan{Inference: &serve, VLLM: &image}); err != nil || !v.Fits || v.Engine != "vLLM" {
		t.Errorf("verdict on vLLM's figure: %+v, %v", v, err)
	}

	chat := Inference{Model: MustPreset("gpt-oss-20b"), Batch: 1, PromptTokens: 512, NewTokens: 512}
	t4, _ := LookupGPU("T4")
	v, err := (Budget{GPU: t4, Headroom: 0.05}).JudgePlan(Plan{Inference: &chat})
	if err != nil || !v.Fits {
		t.Errorf("gpt-oss-20b on a T4: %+v, %v", v, err)
	}
	est, _ := chat.Estimate()
	if notes := strings.Join(est.Notes, " "); !strings.Contains(notes, "weights as released: routed experts in mxfp4") || !strings.Contains(notes, "dequantizes them to bf16") {
		t.Errorf("notes: %q", est.Notes)
	}
	v100, _ := LookupGPU("V100-16GB")
	if v, err := (Budget{GPU: v100, Headroom: 0.05}).JudgePlan(Plan{Inference: &chat}); err != nil || v.Fits || v.DeviceUsed < 38*GiB {
		t.Errorf("gpt-oss-20b on a V100 (compute capability 7.0: dequantized): %+v, %v", v, err)
	}
	deq := chat
	deq.Dequantize = true
	if v, err := (Budget{GPU: t4, Headroom: 0.05}).JudgePlan(Plan{Inference: &deq}); err != nil || v.Fits {
		t.Errorf("gpt-oss-20b dequantized on a T4: %+v, %v", v, err)
	}
	if _, err := (Budget{GPU: t4}).JudgePlan(Plan{Inference: &serve, VLLM: &VLLM{Version: "0.11.0"}}); err != nil {
		t.Fatal(err)
	}
	if v, _ := (Budget{GPU: t4}).JudgePlan(Plan{Inference: &chat, VLLM: &VLLM{Version: "0.11.0"}}); v.Fits || !strings.Contains(v.Why, "The quantization method mxfp4 is not supported for the current GPU. Minimum capability: 80. Current capability: 75.") {
		t.Errorf("vLLM on a T4: %s", v.Why)
	}
}

// TestQuantizingAppliesToExperts: a weight format named by the plan
// quantizes an MoE model's routed experts too (stacked ones included),
// unless quantized_modules says otherwise.
func TestQuantizingAppliesToExperts(t *testing.T) {
	scout := Inference{Model: MustPreset("llama-4-scout-text"), Batch: 1, PromptTokens: 16, Weights: Quant{DType: INT4}}
	est, err := scout.Estimate()
	if err != nil || est.Weights > 60*GiB {
		t.Errorf("Llama-4-Scout int4: %v, %v (the experts were once left in bf16: 188 GiB)", est.Weights, err)
	}
	scout.QuantizedModules = "all_linear_except_experts"
	if e, _ := scout.Estimate(); e.Weights < 180*GiB {
		t.Errorf("int4 except the experts: %v", e.Weights)
	}
	scout.QuantizedModules = "experts"
	if e, _ := scout.Estimate(); e.Weights >= 90*GiB || e.Weights <= est.Weights {
		t.Errorf("int4 experts only: %v, all linear %v", e.Weights, est.Weights)
	}
}

// TestCacheLayerKinds: as the prompt grows, every layer kind's cache holds
// the length it keeps — in transformers' generate a global layer all the
// tokens, a sliding-window or chunked layer the last window − 1
// (DynamicSlidingWindowLayer) or the window (StaticSlidingWindowLayer) —
// and in vLLM the pages its group needs; the hybrid models' caches stop
// growing in their local layers while the global ones grow on.
func TestCacheLayerKinds(t *testing.T) {
	for _, c := range []struct {
		preset string
		span   int // the local layers' window or chunk
	}{
		{"gpt-oss-20b", 128}, {"gemma-2-9b", 4096}, {"gemma-3-27b-text", 1024}, {"llama-4-scout-text", 8192}, {"mistral-7b", 4096},
	} {
		m := MustPreset(c.preset).Normalize()
		var local, global int
		for i := 0; i < m.Layers; i++ {
			if m.LocalLayer(i) {
				local++
			} else {
				global++
			}
		}
		var prev Bytes
		prevN := 0
		for _, n := range []int{64, 1000, 5000, 20000, 100000} {
			for _, cache := range []string{"dynamic", "static"} {
				in := Inference{Model: m, Batch: 2, PromptTokens: n - 1, NewTokens: 1, Cache: cache}
				if cache == "static" {
					in.KVCacheLen = n
				}
				est, err := in.Estimate()
				if err != nil {
					t.Fatalf("%s %d: %v", c.preset, n, err)
				}
				keep := c.span - 1
				if cache == "static" {
					keep = c.span
				}
				want := mulBytes(int64(2*(global*n+local*min(n, keep))), est.KVPerToken/Bytes(m.Layers))
				if est.KVCache != want {
					t.Errorf("%s %s at %d tokens: cache %v, want %v (%d global layers × %d, %d local × %d)", c.preset, cache, n, est.KVCache, want, global, n, local, min(n, keep))
				}
				if cache == "dynamic" {
					if est.KVCache < prev || global == 0 && prevN > c.span && est.KVCache != prev {
						t.Errorf("%s at %d tokens: cache %v after %v", c.preset, n, est.KVCache, prev)
					}
					prev, prevN = est.KVCache, n
				}
			}
		}
		// vLLM: a sliding layer's request needs cdiv(min(window − 1 + a
		// batch, n), 16) + 1 pages, a global layer cdiv(n, 16).
		kv, err := VLLM{Version: "0.11.0", MaxModelLen: 100000, AllowLongMaxModelLen: true}.KVCache(m, 40*GiB)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range kv.Groups {
			want := cdiv64(100000, 16)
			if g.Kind == "sliding_window" {
				want = cdiv64(int64(min(c.span-1+8192, 100000)), 16) + 1
			}
			if got := g.pagesFor(100000, 16, 8192, 1); got != want {
				t.Errorf("%s vLLM %s group: %d pages a request, want %d", c.preset, g.Kind, got, want)
			}
		}
	}
}

// TestEngineBreakdowns: each engine's share, broken down by what holds it,
// totals what nvidia-smi shows once it has started.
func TestEngineBreakdowns(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	in := Inference{Model: MustPreset("llama-3.1-8b"), Batch: 1, PromptTokens: 1024, NewTokens: 256}
	c, err := VLLM{Version: "0.11.0"}.Carve(in, g)
	if err != nil {
		t.Fatal(err)
	}
	p, err := SGLang{}.Carve(in, g)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := TGI{}.Carve(in, g)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct {
		name       string
		b          Breakdown
		deviceUsed Bytes
	}{{"vLLM", c.Breakdown(), c.DeviceUsed}, {"SGLang", p.Breakdown(g), p.DeviceUsed}, {"TGI", tg.Breakdown(g), tg.DeviceUsed}} {
		if e.b.Total() != e.deviceUsed || e.b.Parameters == 0 || e.b.KVCache == 0 {
			t.Errorf("%s: %+v totals %v, device used %v", e.name, e.b, e.b.Total(), e.deviceUsed)
		}
	}
}
