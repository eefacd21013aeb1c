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
		for _, r := range vllmReleases[len(vllmReleases)-2:] { // 0.33.0 and 0.34.0
			if got := r.statePagesFor(m); got != c.v33 {
				t.Errorf("%s %s: %d pages, want %d", c.preset, r.Version, got, c.v33)
			}
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

// TestVLLM0340Resolves: 0.34.0 is the current release and its own row; a
// later patch release is modelled by it, with a note.
func TestVLLM0340Resolves(t *testing.T) {
	if CurrentVLLM != "0.34.0" {
		t.Errorf("current vLLM %s, want 0.34.0", CurrentVLLM)
	}
	for _, c := range []struct {
		asked, row string
		note       bool
	}{{"", "0.34.0", false}, {"0.34.0", "0.34.0", false}, {"0.34.1", "0.34.0", true}, {"0.33.9", "0.33.0", true}} {
		r, m, err := VLLM{Version: c.asked}.release()
		if err != nil || r.Version != c.row || m.Release != c.row || (m.Note != "") != c.note || !strings.HasPrefix(m.Source, "vllm "+c.row+": ") {
			t.Errorf("%q: row %s, %+v, %v; want %s (a note: %v)", c.asked, r.Version, m, err, c.row, c.note)
		}
	}
}

// TestVLLM0340ExtensibleKVCache: 0.34.0 sizes the KV cache after warmup
// and capture from the memory it measures (v1/worker/extensible_kv_cache.py
// :592-618), where 0.33.0 takes it from gpu_memory_utilization × the GPU
// less what the profile saw. Llama 3.1 8B on one H100 80GB, 8192 tokens:
// the weights, the profile's peak, the tables and the graph estimate are
// 0.33's; 0.34 requests the whole GPU (1.0), which is above the free
// memory and not refused; its cache is the free memory at start less what
// vLLM holds after capture (the graphs' pool among it), less the margin
// max(1 GiB, 0.75 × the transient) and the transient itself (the
// profile's peak and the graph estimate): the graphs count twice, and the
// cache differs from 0.33's by (free − margin − graphs) − ⌈0.92 × total⌉.
// An explicit utilization caps the measured cache.
func TestVLLM0340ExtensibleKVCache(t *testing.T) {
	h100 := mustGPU("H100-80GB")
	in := Inference{Model: MustPreset("llama-3.1-8b")}
	carve := func(v VLLM) VLLMCarve {
		t.Helper()
		v.MaxModelLen = 8192
		c, err := v.Carve(in, h100)
		if err != nil || !c.Starts {
			t.Fatalf("%s: %v %s", v.Version, err, c.Err)
		}
		return c
	}
	c33, c34 := carve(VLLM{Version: "0.33.0"}), carve(VLLM{Version: "0.34.0"})
	if c34.Weights != c33.Weights || c34.Activation != c33.Activation || c34.RunnerBuffers != c33.RunnerBuffers || c34.CUDAGraphs != c33.CUDAGraphs || c34.NonTorch != c33.NonTorch {
		t.Fatalf("0.34 weights %v, activation %v, tables %v, graphs %v; 0.33 %v, %v, %v, %v", c34.Weights, c34.Activation, c34.RunnerBuffers, c34.CUDAGraphs, c33.Weights, c33.Activation, c33.RunnerBuffers, c33.CUDAGraphs)
	}
	free := h100.Total() - h100.Context
	transient := c34.Activation + c34.CUDAGraphs
	margin := max(GiB, Bytes(0.75*float64(transient)))
	held := c34.Weights + c34.RunnerBuffers + c34.NonTorch + c34.CUDAGraphs
	if !c34.ExtensibleKVCache || c33.ExtensibleKVCache || c34.Requested != h100.Total() || c34.Requested <= free || c34.TransientReserve != transient || c34.KVMargin != margin {
		t.Errorf("0.34: extensible %v (0.33 %v), requested %v of %v (free %v), reserve %v, margin %v; want %v, %v", c34.ExtensibleKVCache, c33.ExtensibleKVCache, c34.Requested, h100.Total(), free, c34.TransientReserve, c34.KVMargin, transient, margin)
	}
	if want := free - margin - held - transient; c34.KVCache.Available != want {
		t.Errorf("0.34 cache %v, want %v", c34.KVCache.Available, want)
	}
	if d := c34.KVCache.Available - c33.KVCache.Available; d != free-margin-c34.CUDAGraphs-c33.Requested {
		t.Errorf("0.34's cache − 0.33's = %v, want %v", d, free-margin-c34.CUDAGraphs-c33.Requested)
	}
	if want := h100.Context + held + c34.KVCache.Available + transient; c34.DeviceUsed != want || c34.DeviceUsed > h100.Total() {
		t.Errorf("0.34 device used %v, want %v", c34.DeviceUsed, want)
	}
	capped := carve(VLLM{Version: "0.34.0", GPUMemoryUtilization: 0.8})
	if want := Bytes(math.Ceil(0.8*float64(h100.Total()))) - held - transient; capped.KVCache.Available != want {
		t.Errorf("0.34 at 0.8: cache %v, want %v", capped.KVCache.Available, want)
	}
}

// TestVLLM0340BlockSize: 0.34's default block size is 64
// (CacheConfig.DEFAULT_BLOCK_SIZE, config/cache.py:185), which
// FlashAttention keeps, where 0.33's is 16: a request of 8192 tokens takes
// 128 blocks of 64 instead of 512 of 16, the same 8192 tokens' pages, and
// one of 8200 takes 129 (64 more tokens' room) instead of 513 (16). A
// hybrid's attention block is aligned to the block size (platforms/
// interface.py:1078-1094 in 0.34, l.1068-1075 in 0.33), to 16 in 0.14.1.
func TestVLLM0340BlockSize(t *testing.T) {
	m := MustPreset("llama-3.1-8b").Normalize()
	for _, c := range []struct {
		version      string
		block        int
		n8192, n8200 int64
	}{{"0.33.0", 16, 512, 513}, {"0.34.0", 64, 128, 129}} {
		kv, err := VLLM{Version: c.version, MaxModelLen: 8200}.KVCache(m, 10*GiB)
		if err != nil || kv.BlockSize != c.block || kv.blocksFor(8192) != c.n8192 || kv.blocksFor(8200) != c.n8200 {
			t.Errorf("%s: block %d, %d and %d blocks (%v); want %d, %d, %d", c.version, kv.BlockSize, kv.blocksFor(8192), kv.blocksFor(8200), err, c.block, c.n8192, c.n8200)
		}
	}
	// Qwen3-Next's Gated DeltaNet state page (1 MiB) needs 531 tokens of
	// its attention page: 544 (34 × 16) aligned to 16, 576 (9 × 64) to 64.
	h := MustPreset("qwen3-next-80b-a3b").Normalize()
	for _, c := range []struct {
		version       string
		block, hybrid int // block asked (0: the release's), the hybrid's
	}{{"0.14.1", 64, 544}, {"0.33.0", 0, 544}, {"0.33.0", 64, 576}, {"0.34.0", 0, 576}} {
		kv, err := VLLM{Version: c.version, BlockSize: c.block, MaxModelLen: 8192}.KVCache(h, 10*GiB)
		if err != nil || kv.BlockSize != c.hybrid || kv.PageBytes < kv.StatePageBytes {
			t.Errorf("%s block %d: hybrid block %d (page %v, state %v), %v; want %d", c.version, c.block, kv.BlockSize, kv.PageBytes, kv.StatePageBytes, err, c.hybrid)
		}
	}
}

// TestVLLM0340Suffix: Model Runner V1 is gone in 0.34.0, and suffix
// decoding runs on V2's GPU speculator with a corpus the carve does not
// size (suffix/speculator.py:500-600): refused as not modelled, where
// 0.33.0 runs it on V1's CPU trees. The other methods' buffers are 0.33's
// (the speculators' allocations moved, autoregressive/speculator.py:
// 23-33, but are the same tensors).
func TestVLLM0340Suffix(t *testing.T) {
	in := Inference{Model: MustPreset("llama-3.1-8b")}
	head, small := eagleHead(), MustPreset("llama-3.2-1b")
	for _, c := range []struct {
		name string
		m    Model
		v    VLLM
	}{
		{"ngram", in.Model, VLLM{Speculative: &SpeculativeConfig{Method: "ngram", NumSpeculativeTokens: 3}}},
		{"eagle3", in.Model, VLLM{Speculative: &SpeculativeConfig{Method: "eagle3", NumSpeculativeTokens: 3}, Draft: &head}},
		{"draft_model", in.Model, VLLM{Speculative: &SpeculativeConfig{Method: "draft_model", NumSpeculativeTokens: 4}, Draft: &small}},
		{"mtp", MustPreset("qwen3.5-9b"), VLLM{Speculative: &SpeculativeConfig{Method: "mtp", NumSpeculativeTokens: 2}}},
	} {
		var buffers [2]Bytes
		for i, version := range []string{"0.33.0", "0.34.0"} {
			v := c.v
			v.Version, v.MaxModelLen = version, 8192
			cv, err := v.Carve(Inference{Model: c.m}, mustGPU("H100-80GB"))
			if err != nil || cv.Speculative == nil {
				t.Fatalf("%s on %s: %v", c.name, version, err)
			}
			buffers[i] = cv.Speculative.Buffers
		}
		if buffers[0] != buffers[1] || buffers[0] <= 0 {
			t.Errorf("%s: buffers %v in 0.33.0, %v in 0.34.0", c.name, buffers[0], buffers[1])
		}
	}
	for _, c := range []struct {
		version string
		err     string
	}{{"0.33.0", ""}, {"0.34.0", "speculative_config method suffix is not modelled for vLLM 0.34.0"}} {
		v := VLLM{Version: c.version, MaxModelLen: 8192, Speculative: &SpeculativeConfig{Method: "suffix"}}
		_, err := v.Carve(in, mustGPU("H100-80GB"))
		if (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want %q", c.version, err, c.err)
		}
	}
}

// TestVLLM0340WideGraphs: on compute capability 10.x 0.34.0 captures its
// CUDA graphs on vLLM's prefill grid up to min(8192,
// max_num_batched_tokens) tokens ("54 sizes at 8192",
// config/compilation.py:93-95) and its decode grid up to max_num_seqs
// requests ("64 sizes at 1024", l.123-125), where 0.33.0 stops at 1024
// tokens: on a B200 `vllm serve`'s 16384 batched tokens make the largest
// graph 8192 tokens, and the estimate its forward's peak. Off 10.x the
// sizes are 0.33's.
func TestVLLM0340WideGraphs(t *testing.T) {
	prefill := walkGrid(8192, func(t float64) float64 { return min(t, max(8, t/4), 0.07*max(t, 4096)) })
	decode := walkGrid(1024, func(n float64) float64 { return 0.65 * math.Pow(n, 2.0/3) })
	if len(prefill) != 54 || len(decode) != 64 || prefill[len(prefill)-1] != 8192 || decode[len(decode)-1] != 1024 {
		t.Errorf("grids: %d prefill sizes %v, %d decode sizes %v; want 54 and 64", len(prefill), prefill, len(decode), decode)
	}
	for _, c := range []struct {
		version, gpu string
		largest, n   int
	}{{"0.33.0", "B200", 1024, 83}, {"0.34.0", "B200", 8192, 91}, {"0.33.0", "H200", 512, 51}, {"0.34.0", "H200", 512, 51}} {
		v := VLLM{Version: c.version, MaxNumSeqs: 1024, MaxNumBatchedTokens: 16384}
		sizes := v.graphSizes(mustGPU(c.gpu), 1, mustRelease(t, v))
		if len(sizes) != c.n || sizes[len(sizes)-1] != c.largest {
			t.Errorf("%s on %s: %d sizes up to %v, want %d up to %d", c.version, c.gpu, len(sizes), sizes[len(sizes)-1:], c.n, c.largest)
		}
	}
}
