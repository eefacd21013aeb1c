package vram

import (
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestVLLMIssue33155 sets vllm-project/vllm#33155 ("gptoss120B is OOM on
// one H100 after upgrading from v0.11.2 to v0.14.1") against the release
// table: openai/gpt-oss-120b on one H100 80GB, `vllm serve` with the
// issue's memory flags (--gpu-memory-utilization 0.97, --max_num_seqs,
// --max-model-len) and vLLM's defaults otherwise (its -O3 is 0.14.1's
// default -O2, config/vllm.py:74-75; chunked prefill, prefix caching and
// async scheduling change no figure the carve reads). The issue reports
// that 0.11.2 serves 85 × 1024 tokens with 100 sequences, and that 0.14.1
// ("[mxfp4.py:165] Using Triton backend", "Model loading took 64.38 GiB")
// runs out of memory even at 5 × 1024 tokens and one sequence.
//
// The carve reproduces 0.11.2 starting and 0.14.1's Triton backend, but
// not 0.14.1's out-of-memory error: with 0.14.1's row both launches
// start. Why, as far as the carve can tell:
//   - The weights: the carve keeps Triton's experts as the checkpoint
//     stores them (60.77 GiB, as 0.33 does); 0.14.1's Triton path
//     (mxfp4.py:746-790) deletes the checkpoint's expert weights once
//     swizzled but not their block scales (0.33 deletes both,
//     fused_moe/oracle/mxfp4.py:1467-1472), and keeps the biases in fp32:
//     by the tensors' shapes about 3.54 GiB more, 64.30 GiB, near the
//     64.38 logged. The row cannot say that: weights do not depend on
//     the release.
//   - Even with the logged 64.38 GiB the profile leaves the cache about
//     11 GiB, plenty for one request of 5120 tokens: 0.14.1's
//     determine_available_memory does not fail here. What 0.14.1 does
//     after sizing the cache (CUDA graphs, kernel_warmup's FlashInfer
//     autotune, FlashInfer being installed with 0.14.1, the sampler's
//     warm-up: gpu_worker.py:417-530) must fit in the 2.38 GiB that 0.97
//     leaves of the GPU, and the carve does not model it for a release
//     that captures its graphs after the cache. The part of the issue's
//     log searched here stops before the profile, so where it ran out of
//     memory is not known.
func TestVLLMIssue33155(t *testing.T) {
	h100 := mustGPU("H100-80GB")
	gpt := Inference{Model: MustPreset("gpt-oss-120b")}
	m := gpt.Model.Normalize()
	loggedGiB := 64.38 // "Model loading took 64.38 GiB", 0.14.1 with Triton
	logged := Bytes(loggedGiB * float64(GiB))
	for _, c := range []struct {
		name      string
		v         VLLM
		release   string // the row that models it
		backend   string
		reported  string // what the issue says: "starts", "OOM", or "" (not run there)
		starts    bool   // what the carve says
		reproduce bool   // whether the carve agrees with what the issue reports
	}{
		{"0.11.2, 85K, 100 sequences", VLLM{Version: "0.11.2", GPUMemoryUtilization: 0.97, MaxNumSeqs: 100, MaxModelLen: 85 * 1024}, "0.11.0", "marlin", "starts", true, true},
		{"0.14.1, 5K, one sequence", VLLM{Version: "0.14.1", GPUMemoryUtilization: 0.97, MaxNumSeqs: 1, MaxModelLen: 5 * 1024}, "0.14.1", "triton", "OOM", true, false},
		{"0.33.0, 5K, one sequence", VLLM{Version: "0.33.0", GPUMemoryUtilization: 0.97, MaxNumSeqs: 1, MaxModelLen: 5 * 1024}, "0.33.0", "triton", "", true, false},
	} {
		cv, err := c.v.Carve(gpt, h100)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		backend, _ := c.v.mxfp4Backend(h100, mustRelease(t, c.v))
		if cv.Release.Release != c.release || (c.v.Version != c.release) != (cv.Release.Note != "") || backend != c.backend {
			t.Errorf("%s: modelled as %+v with %s; want %s with %s", c.name, cv.Release, backend, c.release, c.backend)
		}
		if agree := (c.reported == "starts") == cv.Starts; cv.Starts != c.starts || c.reported != "" && agree != c.reproduce {
			t.Errorf("%s: starts %v (want %v; the issue: %q): %s", c.name, cv.Starts, c.starts, c.reported, cv.Err)
		}
		// 0.97 of the GPU: rounded up by 0.14.1 and 0.33, truncated by
		// 0.11, a byte apart.
		if want := math.Ceil(float64(h100.Total()) * 0.97); math.Abs(float64(cv.Requested)-want) > 1 {
			t.Errorf("%s: requested %v, want ⌈0.97 × %v⌉", c.name, cv.Requested, h100.Total())
		}
	}

	v14 := VLLM{Version: "0.14.1", GPUMemoryUtilization: 0.97, MaxNumSeqs: 1, MaxModelLen: 5 * 1024}
	c14, _ := v14.Carve(gpt, h100)
	// The carve's Triton weights are below the logged load (see above).
	if c14.Weights >= logged {
		t.Errorf("0.14.1 weights %v, logged %v", c14.Weights, logged)
	}
	// 0.14.1 captures its graphs after the cache: nothing of them in the
	// carve, and what it shows in use is the requested memory.
	if c14.GraphsInBudget || c14.CUDAGraphs != 0 || c14.RunnerBuffers != 0 || c14.DeviceUsed != c14.Requested+c14.NonTorch {
		t.Errorf("0.14.1: graphs %v (in budget %v), runner %v, device %v", c14.CUDAGraphs, c14.GraphsInBudget, c14.RunnerBuffers, c14.DeviceUsed)
	}
	// With the logged weights in place of the carve's, the cache still
	// holds a request of 5120 tokens many times over.
	left := c14.Requested - logged - c14.Activation - c14.NonTorch
	if kv, err := v14.KVCache(m, left); err != nil || !kv.Fits || kv.MaxConcurrency < 10 {
		t.Errorf("0.14.1 with the logged weights: %v left, fits %v, %.2fx, %v", left, kv.Fits, kv.MaxConcurrency, err)
	}
	// 0.14.1 caps its default batched tokens at max_num_seqs ×
	// max_model_len = 5120 (engine/arg_utils.py:2010-2015, the log's
	// "compile range (1, 5120)"): the profile runs 5120 tokens.
	if c14.ProfileTokens != 5120 || c14.ProfileSeqs != 1 {
		t.Errorf("0.14.1 profile: %d tokens, %d sequences", c14.ProfileTokens, c14.ProfileSeqs)
	}

	// 0.33.0 on the same launch, from its row: the same Triton weights and
	// profile; Model Runner V2's tables for one sequence; graphs for
	// capture sizes 1 and 2 (min(2 × max_num_seqs, 512, 8192)) taken off
	// the cache; a sliding layer's room for two batches, capped at 5120
	// tokens like 0.14.1's one: 320 + 321 blocks a request either way.
	v33 := v14
	v33.Version = "0.33.0"
	c33, _ := v33.Carve(gpt, h100)
	if c33.Weights != c14.Weights || c33.Activation != c14.Activation || c33.NonTorch != c14.NonTorch {
		t.Errorf("0.33 weights %v, activation %v; 0.14.1 %v, %v", c33.Weights, c33.Activation, c14.Weights, c14.Activation)
	}
	if want := Bytes(4 * 1 * (201088 + 2*6284)); c33.RunnerBuffers != want {
		t.Errorf("0.33 runner buffers %v, want %v", c33.RunnerBuffers, want)
	}
	vs := v33
	vs.MaxNumBatchedTokens = c33.ProfileTokens
	if sizes := vs.captureSizes(h100, 1); !slices.Equal(sizes, []int{1, 2}) || !c33.GraphsInBudget || c33.CUDAGraphs <= minPerGraph {
		t.Errorf("0.33 graphs: sizes %v, %v (in budget %v)", sizes, c33.CUDAGraphs, c33.GraphsInBudget)
	}
	if want := c14.KVCache.Available - c33.RunnerBuffers - c33.CUDAGraphs; c33.KVCache.Available != want || c33.DeviceUsed != c33.Requested+c33.NonTorch {
		t.Errorf("0.33 cache %v, want 0.14.1's %v less the runner's tables and the graphs (%v); device %v", c33.KVCache.Available, c14.KVCache.Available, want, c33.DeviceUsed)
	}
	for _, c := range []VLLMCarve{c14, c33} {
		if got := c.KVCache.blocksFor(5120); got != 320+321 {
			t.Errorf("%s: %d blocks a request of 5120 tokens, want 641", c.Release.Release, got)
		}
	}
	if want := int64(c33.KVCache.MaxConcurrency * 5120); c33.KVCache.Tokens != want || c14.KVCache.Tokens != c14.KVCache.Blocks/2*16 {
		t.Errorf("tokens logged: 0.33 %d (want %d), 0.14.1 %d (want %d)", c33.KVCache.Tokens, want, c14.KVCache.Tokens, c14.KVCache.Blocks/2*16)
	}
}

// mustRelease is the row v's release resolves to.
func mustRelease(t *testing.T, v VLLM) vllmRelease {
	t.Helper()
	r, _, err := v.release()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestVLLMServerDefaultsByRelease: `vllm serve`'s batch defaults as each
// release sets them — a defaulted max_num_batched_tokens capped at
// max_num_seqs × max_model_len from 0.14.1 on (not in 0.11.0), and the
// DGX Spark's GB10 kept on the small tier by 0.33.0 alone.
func TestVLLMServerDefaultsByRelease(t *testing.T) {
	for _, c := range []struct {
		version, gpu          string
		seqs, maxLen, planned int
		tokens, wantSeqs      int
	}{
		{"0.11.0", "H100-80GB", 1, 2048, 0, 8192, 1},
		{"0.14.1", "H100-80GB", 1, 2048, 0, 2048, 1},
		{"0.33.0", "H100-80GB", 2, 2048, 0, 4096, 2},
		{"0.33.0", "H100-80GB", 2, 2048, 6000, 6000, 2}, // named: no cap
		{"0.33.0", "H100-80GB", 0, 0, 0, 8192, 1024},    // the model's 131072 positions
		{"0.14.1", "DGX-Spark", 0, 0, 0, 8192, 1024},
		{"0.33.0", "DGX-Spark", 0, 0, 0, 2048, 256},
	} {
		v := VLLM{Version: c.version, MaxNumSeqs: c.seqs, MaxModelLen: c.maxLen}
		got := v.serverDefaults(c.planned, 131072, mustGPU(c.gpu), mustRelease(t, v))
		if got.MaxNumBatchedTokens != c.tokens || got.MaxNumSeqs != c.wantSeqs {
			t.Errorf("%s on %s (seqs %d, len %d, planned %d): %d tokens, %d sequences; want %d, %d",
				c.version, c.gpu, c.seqs, c.maxLen, c.planned, got.MaxNumBatchedTokens, got.MaxNumSeqs, c.tokens, c.wantSeqs)
		}
	}
}

// TestVLLMStatePages: the pages of recurrent state one request keeps per
// layer, by release and kind — one before align mode; in 0.33's align mode
// two (v1/kv_cache_interface.py:1135-1141), and three for the layers that
// export prefill checkpoints (Mamba-2 mixers, Gated DeltaNet).
func TestVLLMStatePages(t *testing.T) {
	for _, c := range []struct {
		preset    string
		v011, v33 int
	}{
		{"qwen3-next-80b-a3b", 1, 3},      // Gated DeltaNet
		{"falcon-h1-0.5b-instruct", 1, 3}, // Mamba-2
		{"lfm2-1.2b", 1, 2},               // short convolutions
		{"jamba-v0.1", 1, 2},              // Mamba-1
		{"kimi-linear-48b-a3b", 1, 2},     // KDA
	} {
		m := MustPreset(c.preset).Normalize()
		if got := vllmReleases[0].statePagesFor(m); got != c.v011 {
			t.Errorf("%s 0.11.0: %d pages, want %d", c.preset, got, c.v011)
		}
		if got := vllmReleases[len(vllmReleases)-1].statePagesFor(m); got != c.v33 {
			t.Errorf("%s 0.33.0: %d pages, want %d", c.preset, got, c.v33)
		}
	}
}

// TestVLLMArchitectures walks vllmArchitectures: a plan of each listed
// family, at each modelled release and at the release that first
// registers it or last ran it, is refused in words naming the family, the
// release and that first release exactly when the release's registry
// lacks the architecture, and carved (or refused for another reason)
// otherwise.
func TestVLLMArchitectures(t *testing.T) {
	g := mustGPU("H200")
	for family, a := range vllmArchitectures {
		m, ok := presetOfFamily(family)
		if !ok {
			t.Errorf("%s: no preset of the family", family)
			continue
		}
		releases := []string{}
		for _, r := range vllmReleases {
			releases = append(releases, r.Version)
		}
		releases = append(releases, a.since, a.until)
		for _, rel := range releases {
			if rel == "" {
				continue
			}
			v, err := ParseVersion("vllm", rel)
			if err != nil {
				t.Fatalf("%s: %v", family, err)
			}
			first, _ := ParseVersion("vllm", orDefault(a.since, "0.0.0"))
			last, _ := ParseVersion("vllm", orDefault(a.until, "999.0.0"))
			_, err = (VLLM{Version: rel, MaxModelLen: 8192}).Carve(Inference{Model: m}, g)
			var want string
			switch {
			case a.never:
				want = "vLLM " + rel + " does not run " + family + ": its model registry has no " + a.names + " (no registry read"
			case v.Less(first):
				want = "vLLM " + rel + " does not run " + family + ": its model registry has no " + a.names + ", which vLLM " + a.since + " first registers"
			case last.Less(v):
				want = "was supported in vLLM until v" + a.until
			}
			switch {
			case want == "" && err != nil && strings.Contains(err.Error(), "registry"):
				t.Errorf("%s on vLLM %s: %v", family, rel, err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Errorf("%s on vLLM %s: %v, want %q", family, rel, err, want)
			}
		}
	}
}

// presetOfFamily is a model whose checkpoint names the family's
// architecture: the first preset by name of the family (for a
// vision-language wrapper, its wrapper's), else the language model of a
// wrapper's preset, alone.
func presetOfFamily(family string) (Model, bool) {
	names := slices.Sorted(maps.Keys(presets))
	for _, name := range names {
		m := MustPreset(name)
		if m.Vision != nil && m.Vision.Family == family || m.Vision == nil && m.Family == family {
			return m, true
		}
	}
	for _, name := range names {
		if m := MustPreset(name); m.Family == family {
			m.Vision = nil
			return m, true
		}
	}
	return Model{}, false
}

// TestVLLMV0Fallback: up to 0.10.1.1 vLLM's oracle falls back to its V0
// engine (not modelled) for a model with recurrent state, a SupportsV0Only
// architecture, a GPU below compute capability 8.0 and an fp8 KV cache off
// Hopper; each is refused in vLLM's words. VLLM_USE_V1=1 runs the
// recurrent model on V1 (carved) and stops on the others with vLLM's
// NotImplementedError; from 0.10.2 none falls back.
func TestVLLMV0Fallback(t *testing.T) {
	h200, t4, a100 := mustGPU("H200"), mustGPU("T4"), mustGPU("A100-80GB")
	const (
		carved    = ""
		recurrent = "a model with recurrent state, on its V0 engine"
		fallback  = "is not supported by the V1 Engine. Falling back to V0."
		stops     = "NotImplementedError: VLLM_USE_V1=1 is not supported with"
	)
	for _, c := range []struct {
		preset, release string
		g               GPU
		v               VLLM
		want            string
	}{
		{"bamba-9b", "0.9.2", h200, VLLM{}, recurrent},
		{"bamba-9b", "0.10.1", h200, VLLM{}, recurrent},
		{"bamba-9b", "0.10.1.1", h200, VLLM{}, recurrent},
		{"bamba-9b", "0.10.1", h200, VLLM{UseV1: true}, carved},
		{"bamba-9b", "0.10.2", h200, VLLM{}, carved},
		{"bamba-9b", "0.11.0", h200, VLLM{}, carved},
		{"jamba-v0.1", "0.10.0", h200, VLLM{}, "['JambaForCausalLM'] " + fallback},
		{"jamba-v0.1", "0.10.0", h200, VLLM{UseV1: true}, stops + " ['JambaForCausalLM']"},
		{"falcon-h1-0.5b-instruct", "0.10.1", h200, VLLM{}, recurrent},
		{"falcon-h1-0.5b-instruct", "0.14.1", h200, VLLM{}, carved},
		{"minimax-text-01", "0.9.2", h200, VLLM{}, "['MiniMaxText01ForCausalLM'] " + fallback},
		{"llama-3.1-8b", "0.9.2", h200, VLLM{}, carved},
		{"llama-3.1-8b", "0.10.1", h200, VLLM{}, carved},
		{"llama-3.1-8b", "0.9.2", t4, VLLM{}, "Compute Capability < 8.0 " + fallback},
		{"llama-3.1-8b", "0.9.2", t4, VLLM{UseV1: true}, stops + " Compute Capability < 8.0"},
		{"llama-3.1-8b", "0.11.0", t4, VLLM{}, carved},
		{"llama-3.1-8b", "0.10.1", a100, VLLM{KVCacheDType: FP8E4M3}, "--kv-cache-dtype " + fallback},
		{"llama-3.1-8b", "0.10.1", h200, VLLM{KVCacheDType: FP8E4M3}, carved}, // FlashAttention 3 on Hopper
		{"llama-3.1-8b", "0.11.0", a100, VLLM{KVCacheDType: FP8E4M3}, carved},
	} {
		v := c.v
		v.Version, v.TP, v.MaxModelLen = c.release, 8, 4096
		_, err := v.Carve(Inference{Model: MustPreset(c.preset)}, c.g)
		switch {
		case c.want == carved && err != nil && (strings.Contains(err.Error(), "V0") || strings.Contains(err.Error(), "VLLM_USE_V1")):
			t.Errorf("%s on vLLM %s, %s: %v; want it carved", c.preset, c.release, c.g.Name, err)
		case c.want != carved && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s on vLLM %s, %s: %v; want %q", c.preset, c.release, c.g.Name, err, c.want)
		}
	}
}

// TestVLLMTransformersBackend: a family vLLM serves through its
// Transformers backend is carved with a note saying so from the release
// its registry moved it there, and without one before (its native class);
// a native family never has it.
func TestVLLMTransformersBackend(t *testing.T) {
	g := mustGPU("H100-80GB")
	for family, a := range vllmTransformersBackend {
		m, ok := presetOfFamily(family)
		if !ok {
			t.Errorf("%s: no preset of the family", family)
			continue
		}
		for _, c := range []struct {
			release string
			want    bool
		}{{a.since, true}, {CurrentVLLM, true}, {"0.10.0", false}} {
			v := VLLM{Version: c.release, TP: 1, MaxModelLen: 2048}
			if m.Params > 60e9 || m.Experts > 0 {
				v.TP = 8
			}
			carve, err := v.Carve(Inference{Model: m}, g)
			if err != nil {
				if c.want {
					t.Errorf("%s on vLLM %s: %v", family, c.release, err)
				}
				continue
			}
			got := slices.ContainsFunc(carve.Notes, func(n string) bool { return strings.Contains(n, "through its Transformers backend") })
			if got != c.want {
				t.Errorf("%s on vLLM %s: the backend note %v, want %v (notes %q)", family, c.release, got, c.want, carve.Notes)
			}
		}
	}
	carve, err := VLLM{TP: 1, MaxModelLen: 2048}.Carve(Inference{Model: MustPreset("llama-3.1-8b")}, g)
	if err != nil || slices.ContainsFunc(carve.Notes, func(n string) bool { return strings.Contains(n, "Transformers backend") }) {
		t.Errorf("llama-3.1-8b: %v, %q", err, carve.Notes)
	}
}
