package vram

import (
	"math"
	"strings"
	"testing"
)

// TestParseVersion: releases as their projects tag them, and what is
// refused.
func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		lib, s string
		want   Version
		err    string
	}{
		{"vllm", "0.33.0", Version{0, 33, 0}, ""},
		{"vllm", "v0.33.0", Version{0, 33, 0}, ""},
		{"vllm", "0.11", Version{0, 11, 0}, ""},
		{"vllm", "0.11.0rc1", Version{0, 11, 0}, ""},
		{"vllm", "0.10.1+gptoss", Version{0, 10, 1}, ""},
		{"vllm", "0.7.3.dev233", Version{0, 7, 3}, ""},
		{"vllm", "0.10.1.1", Version{0, 10, 1}, ""}, // a hotfix: 0.10.1's rules
		{"flashinfer", "0.7.2.post1", Version{0, 7, 2}, ""},
		{"torch", "2.15.0+cu132", Version{2, 15, 0}, ""},
		{"llama_cpp", "b6123", Version{6123}, ""},
		{"vllm", "latest", Version{}, `versions.vllm "latest": want a release such as "0.33.0"`},
		{"vllm", "0.x.1", Version{}, "want a release"},
		{"vllm", "1", Version{}, "want a release"},
		{"llama_cpp", "6123", Version{}, `want a build tag such as "b6123"`},
		{"vllm", "0.11.0<script>", Version{}, "want a release"},
		{"vllm", " 0.11.0", Version{}, "want a release"},
		{"vllm", "0.11.0.1.2", Version{}, "want a release"},
	} {
		got, err := ParseVersion(c.lib, c.s)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %q: %v, want %q", c.lib, c.s, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s %q: %v %v, want %v", c.lib, c.s, got, err, c.want)
		}
	}
}

// TestPickRelease: a named release is its row, one between rows the older
// row's with a note, one outside the table the nearest end with a note,
// none the newest.
func TestPickRelease(t *testing.T) {
	rows := []releaseRow{{Version: "0.11.0", Source: "a"}, {Version: "0.33.0", Source: "b"}}
	for _, c := range []struct {
		asked, release, note string
	}{
		{"", "0.33.0", ""},
		{"0.33.0", "0.33.0", ""},
		{"0.11", "0.11.0", ""},
		{"0.19.0", "0.11.0", "vllm 0.19.0 is not modelled; modelled with the rules of 0.11.0, the newest modelled release before it (0.33.0 is the next)"},
		{"0.6.4", "0.11.0", "older than every modelled release; modelled as 0.11.0"},
		{"0.40.1", "0.33.0", "newer than the newest modelled release; modelled as 0.33.0"},
	} {
		_, m, err := pickRelease("vllm", c.asked, rows)
		if err != nil || m.Release != c.release || !strings.Contains(m.Note, c.note) || (c.note == "") != (m.Note == "") {
			t.Errorf("%q: %+v %v, want %s (%q)", c.asked, m, err, c.release, c.note)
		}
	}
}

// TestVLLMReleaseTable walks vLLM's release table: every row parses, cites
// its sources, comes in order, and carves a launch as that release.
func TestVLLMReleaseTable(t *testing.T) {
	g := mustGPU("H100-80GB")
	in := Inference{Model: MustPreset("llama-3.1-8b"), Weights: Quant{DType: BF16}}
	var prev Version
	for i, r := range vllmReleases {
		v, err := ParseVersion("vllm", r.Version)
		if err != nil || !strings.Contains(r.Source, "vllm "+r.Version) || r.utilization <= 0 || r.inFlightBatches < 1 {
			t.Errorf("row %d %+v: %v", i, r, err)
		}
		if i > 0 && !prev.Less(v) {
			t.Errorf("row %d (%s) is not newer than the row before it", i, r.Version)
		}
		prev = v
		c, err := VLLM{Version: r.Version, MaxModelLen: 8192}.Carve(in, g)
		if err != nil || c.Release.Release != r.Version || c.Release.Note != "" || !c.Starts {
			t.Errorf("%s: carve %+v, %v", r.Version, c.Release, err)
		}
		if want := Bytes(float64(g.Total()) * r.utilization); c.Requested < want || c.Requested > want+1 {
			t.Errorf("%s: requested %v, want %v of the GPU (the release's default)", r.Version, c.Requested, r.utilization)
		}
	}
	if CurrentVLLM != "0.34.0" {
		t.Errorf("current vLLM %s", CurrentVLLM)
	}
}

// TestVLLM033: what vLLM 0.33 does differently from 0.11, rule by rule
// (vllm_releases.go cites each).
func TestVLLM033(t *testing.T) {
	h100 := mustGPU("H100-80GB")
	gpt := Inference{Model: MustPreset("gpt-oss-120b")}
	old, err := VLLM{Version: "0.11.0", MaxModelLen: 32768}.Carve(gpt, h100)
	if err != nil {
		t.Fatal(err)
	}
	now, err := VLLM{Version: "0.33.0", MaxModelLen: 32768}.Carve(gpt, h100)
	if err != nil {
		t.Fatal(err)
	}
	// gpt-oss's experts: Marlin pads them to 3072 × 2944 in 0.11's pip
	// install, Triton (vendored in 0.33) keeps 2880 × 2880.
	if saved := old.Weights - now.Weights; saved < 4*GiB || saved > 6*GiB {
		t.Errorf("gpt-oss-120b weights %v (0.11, Marlin) and %v (0.33, Triton): want about 8 %% of the experts apart", old.Weights, now.Weights)
	}
	// Model Runner V2's sampler tables, kept: 1024 requests × the
	// vocabulary in int32, and two bitmasks.
	if want := Bytes(4 * 1024 * (201088 + 2*6284)); now.RunnerBuffers != want || old.RunnerBuffers != 0 {
		t.Errorf("runner buffers %v (0.33), %v (0.11); want %v and none", now.RunnerBuffers, old.RunnerBuffers, want)
	}
	// The CUDA graphs come off the cache in 0.33, inside the requested
	// memory; 0.11 leaves them out (unknown until captured).
	avail := now.Requested - now.Weights - now.RunnerBuffers - now.Activation - now.NonTorch - now.CUDAGraphs
	if now.CUDAGraphs <= 0 || now.KVCache.Available != avail || now.DeviceUsed != now.Requested+now.NonTorch || old.CUDAGraphs != 0 {
		t.Errorf("0.33 graphs %v, cache %v (want %v), device %v; 0.11 graphs %v", now.CUDAGraphs, now.KVCache.Available, avail, now.DeviceUsed, old.CUDAGraphs)
	}
	// vLLM's --kv-cache-memory suggestion counts the graphs twice in 0.33.
	if want := avail - now.CUDAGraphs - 150*MiB; now.SuggestedKVCacheMemory != want {
		t.Errorf("suggestion %v, want %v", now.SuggestedKVCacheMemory, want)
	}
	// Sliding-window layers keep room for two batches in flight (async
	// scheduling): 127 + 2 × 8192 tokens (a block of each group holds a
	// page of each of its layers).
	if got, want := now.KVCache.blocksFor(32768), cdiv64(32768, 16)+cdiv64(127+2*8192, 16)+1; got != want {
		t.Errorf("0.33 gpt-oss blocks a request %d, want %d", got, want)
	}
	// Tokens logged: max concurrency × max_model_len.
	if want := int64(now.KVCache.MaxConcurrency * 32768); now.KVCache.Tokens != want {
		t.Errorf("0.33 tokens %d, want %d", now.KVCache.Tokens, want)
	}
}

// TestVLLM033Cache: the cache rules of 0.33 on their own — three state
// pages a recurrent layer with prefix caching, the larger group size for
// near-equal kinds, the null block kept out of the capacity check, and
// --max-model-len auto.
func TestVLLM033Cache(t *testing.T) {
	next := MustPreset("qwen3-next-80b-a3b")
	c11, err := VLLM{Version: "0.11.0", MaxModelLen: 32768}.KVCache(next, 40*GiB)
	if err != nil {
		t.Fatal(err)
	}
	c33, err := VLLM{Version: "0.33.0", MaxModelLen: 32768}.KVCache(next, 40*GiB)
	if err != nil {
		t.Fatal(err)
	}
	_, s11 := c11.PerRequestFor(32768)
	_, s33 := c33.PerRequestFor(32768)
	if s11 <= 0 || s33 != 3*s11 {
		t.Errorf("qwen3-next state a request %v (0.11), %v (0.33): want three pages for one", s11, s33)
	}
	kinds := []VLLMGroup{{Kind: "sliding_window", Span: 128, Layers: 12}, {Kind: "full", Layers: 13}}
	if _, n := groupKinds(kinds, false); n != 12 {
		t.Errorf("0.11 group size %d, want the smallest kind's 12", n)
	}
	if _, n := groupKinds(kinds, true); n != 13 {
		t.Errorf("0.33 group size %d, want 13 (13 < 1.5 × 12)", n)
	}
	llama := MustPreset("llama-3.1-8b")
	exact, _ := VLLM{Version: "0.11.0", MaxModelLen: 8192}.KVCache(llama, GiB)
	tight := exact.PerRequest
	if c, _ := (VLLM{Version: "0.11.0", MaxModelLen: 8192}).KVCache(llama, tight); !c.Fits {
		t.Error("0.11: one request in exactly its memory does not fit")
	}
	if c, _ := (VLLM{Version: "0.33.0", MaxModelLen: 8192}).KVCache(llama, tight); c.Fits || !strings.Contains(c.Err, "model's max seq len (8192)") {
		t.Errorf("0.33: one request in exactly its memory fits (the null block is set aside first): %q", c.Err)
	}
	auto, err := VLLM{Version: "0.33.0", MaxModelLen: AutoMaxModelLen}.KVCache(llama, 2*GiB)
	if err != nil || auto.MaxModelLen >= llama.MaxPosition || auto.MaxModelLen < 8192 || !auto.Fits || !strings.Contains(strings.Join(auto.Notes, " "), "reduced from 131072") {
		t.Errorf("auto max_model_len in 2 GiB: %d, fits %v, notes %q, %v", auto.MaxModelLen, auto.Fits, auto.Notes, err)
	}
	if _, err := (VLLM{Version: "0.11.0", MaxModelLen: AutoMaxModelLen}).KVCache(llama, 2*GiB); err == nil || !strings.Contains(err.Error(), "no --max-model-len auto") {
		t.Errorf("0.11 auto: %v", err)
	}
}

// TestVLLM0141: vLLM 0.14.1 between the two rows, rule by rule
// (vllm_releases.go cites each): 0.33's rounding up, Triton on Hopper and
// --max-model-len auto; 0.11's 0.9, graphs captured after the cache, Model
// Runner V1 and the PyTorch sampler (FlashInfer is installed but its
// sampler is opt-in), one batch in flight, one state page, no null block,
// the token log by blocks, no 160 GiB batch default. Three rules of 0.14.1
// the row cannot hold, so not asserted here: the group size is the largest
// kind's under 1.25 × the smallest's (kv_cache_utils.py:1036; the row's
// flag is 0.33's 1.5, so a ratio in [1.25, 1.5) is grouped as 0.33 does);
// a hybrid's capacity check and estimate count only its first group's
// blocks (l.1339-1351, 1511-1522: for gpt-oss, whose first group is a
// sliding window, the window's, so 0.14.1 starts where the carve's check
// of every layer refuses); Triton's MXFP4 path keeps the checkpoint's
// block scales (TestVLLMIssue33155).
func TestVLLM0141(t *testing.T) {
	h100 := mustGPU("H100-80GB")
	gpt := Inference{Model: MustPreset("gpt-oss-120b")}
	var c [3]VLLMCarve
	for i, r := range []string{"0.11.0", "0.14.1", "0.33.0"} {
		var err error
		if c[i], err = (VLLM{Version: r, MaxModelLen: 32768}).Carve(gpt, h100); err != nil {
			t.Fatal(err)
		}
	}
	old, now, c14 := c[0], c[2], c[1]
	if c14.Release.Release != "0.14.1" || c14.Release.Note != "" {
		t.Errorf("modelled as %+v", c14.Release)
	}
	if want := Bytes(math.Ceil(float64(h100.Total()) * 0.9)); c14.Requested != want {
		t.Errorf("requested %v, want ⌈0.9 × %v⌉", c14.Requested, h100.Total())
	}
	// Triton on Hopper, as 0.33.
	if c14.Weights != now.Weights || c14.Weights >= old.Weights {
		t.Errorf("weights %v; 0.11 (Marlin) %v, 0.33 (Triton) %v", c14.Weights, old.Weights, now.Weights)
	}
	// No graph estimate, no Model Runner V2 tables; graphs given go beside
	// the requested memory, as in 0.11.
	given, _ := VLLM{Version: "0.14.1", MaxModelLen: 32768, CUDAGraphMemory: GiB}.Carve(gpt, h100)
	if c14.CUDAGraphs != 0 || c14.RunnerBuffers != 0 || given.KVCache.Available != c14.KVCache.Available || given.DeviceUsed != c14.DeviceUsed+GiB {
		t.Errorf("graphs %v, runner %v; with 1 GiB of graphs: cache %v, device %v", c14.CUDAGraphs, c14.RunnerBuffers, given.KVCache.Available, given.DeviceUsed)
	}
	// The PyTorch sampler's warm-up is the profile's peak: 1024 requests ×
	// the vocabulary × 38 bytes (its sort), and the hidden states.
	if want := Bytes(1024*201088*38) + BF16.Size(8192*2880); c14.Activation != want || !strings.Contains(strings.Join(c14.Notes, " "), "38 bytes a logit") {
		t.Errorf("activation %v, want %v", c14.Activation, want)
	}
	// One batch in flight; tokens logged by blocks.
	if got, want := c14.KVCache.blocksFor(32768), cdiv64(32768, 16)+cdiv64(127+8192, 16)+1; got != want {
		t.Errorf("blocks a request %d, want %d", got, want)
	}
	if want := c14.KVCache.Blocks / int64(len(c14.KVCache.Groups)) * 16; c14.KVCache.Tokens != want {
		t.Errorf("tokens %d, want %d", c14.KVCache.Tokens, want)
	}
	// No null block set aside: one request fits in exactly its memory.
	llama := MustPreset("llama-3.1-8b")
	exact, _ := VLLM{Version: "0.14.1", MaxModelLen: 8192}.KVCache(llama, GiB)
	if kv, _ := (VLLM{Version: "0.14.1", MaxModelLen: 8192}).KVCache(llama, exact.PerRequest); !kv.Fits {
		t.Error("one request in exactly its memory does not fit")
	}
	if kv, _ := (VLLM{Version: "0.14.1", MaxModelLen: 8192}).KVCache(llama, exact.PerRequest-1); kv.Fits || !strings.Contains(kv.Err, "models's max seq len (8192)") {
		t.Errorf("a byte short: %q", kv.Err)
	}
	// --max-model-len auto.
	if auto, err := (VLLM{Version: "0.14.1", MaxModelLen: AutoMaxModelLen}).KVCache(llama, 2*GiB); err != nil || !auto.Fits || auto.MaxModelLen >= llama.MaxPosition {
		t.Errorf("auto: %d, fits %v, %v", auto.MaxModelLen, auto.Fits, err)
	}
	// One state page a recurrent layer, as 0.11 (no prefix caching for
	// hybrids by default).
	next := MustPreset("qwen3-next-80b-a3b")
	s11, _ := VLLM{Version: "0.11.0", MaxModelLen: 32768}.KVCache(next, 40*GiB)
	s14, _ := VLLM{Version: "0.14.1", MaxModelLen: 32768}.KVCache(next, 40*GiB)
	if _, a := s11.PerRequestFor(32768); a <= 0 {
		t.Error("qwen3-next: no state")
	} else if _, b := s14.PerRequestFor(32768); b != a {
		t.Errorf("qwen3-next state a request %v (0.14.1), %v (0.11)", b, a)
	}
	// No 160 GiB batch default: a B200 profiles 8192 tokens.
	b200 := mustGPU("B200")
	in := Inference{Model: llama, Weights: Quant{DType: BF16}}
	if b, _ := (VLLM{Version: "0.14.1", MaxModelLen: 8192}).Carve(in, b200); b.ProfileTokens != 8192 || b.ProfileSeqs != 1024 {
		t.Errorf("B200: %d tokens, %d sequences", b.ProfileTokens, b.ProfileSeqs)
	}
	// The group size for near-equal kinds (12 and 13 layers: 13 < 1.25 × 12).
	if _, n := groupKinds([]VLLMGroup{{Kind: "sliding_window", Span: 128, Layers: 12}, {Kind: "full", Layers: 13}}, mustRelease(t, VLLM{Version: "0.14.1"}).groupLargest); n != 13 {
		t.Errorf("group size %d, want 13", n)
	}
}

// TestPlanVersions: a plan's versions reach the engine they name, are
// checked field by field, and agree with a release named inside "train".
func TestPlanVersions(t *testing.T) {
	p, err := ParsePlan([]byte(`{"model": "llama-3.1-8b", "gpu": "H100-80GB", "inference": {"batch": 1, "prompt_tokens": 512}, "vllm": {"max_model_len": 8192}, "versions": {"vllm": "0.11.0"}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := p.Releases()
	if err != nil || len(rel) != 1 || rel[0].Library != "vllm" || rel[0].Release != "0.11.0" || p.VLLM.Version != "0.11.0" {
		t.Errorf("releases %+v, %v", rel, err)
	}
	unnamed, _ := ParsePlan([]byte(`{"model": "llama-3.1-8b", "inference": {"batch": 1, "prompt_tokens": 512}, "vllm": {}}`), "")
	if rel, _ := unnamed.Releases(); len(rel) != 1 || rel[0].Release != CurrentVLLM || rel[0].Asked != "" {
		t.Errorf("no release named: %+v", rel)
	}
	for _, c := range []struct{ plan, want string }{
		{`{"model": "gpt2", "inference": {"batch": 1}, "versions": {"vlm": "0.11.0"}}`, `versions.vlm`},
		{`{"model": "gpt2", "inference": {"batch": 1}, "versions": {"vllm": "newest"}}`, `versions.vllm "newest": want a release such as "0.33.0"`},
		{`{"model": "gpt2", "train": {"seq_len": 8, "micro_batch": 1, "transformers": "4.46.3"}, "versions": {"transformers": "4.57.6"}}`, `versions.transformers "4.57.6" and train.transformers "4.46.3" differ`},
	} {
		if _, err := ParsePlan([]byte(c.plan), ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.plan, err, c.want)
		}
	}
	tp, err := ParsePlan([]byte(`{"model": "gpt2", "train": {"seq_len": 8, "micro_batch": 1}, "versions": {"transformers": "4.46.3"}}`), "")
	if err != nil || tp.Training.Transformers != "4.46.3" {
		t.Errorf("train's transformers %q, %v", tp.Training.Transformers, err)
	}
}

// TestSGLangReleaseTable walks SGLang's release table.
func TestSGLangReleaseTable(t *testing.T) {
	g := mustGPU("H100-80GB")
	in := Inference{Model: MustPreset("llama-3.1-8b"), Weights: Quant{DType: BF16}}
	var prev Version
	for i, r := range sglangReleases {
		v, err := ParseVersion("sglang", r.Version)
		if err != nil || !strings.Contains(r.Source, "sglang "+r.Version) || r.fallback <= 0 || (r.fraction == fractionByGPU) != (r.smallChunk > 0) {
			t.Errorf("row %d %+v: %v", i, r, err)
		}
		if i > 0 && !prev.Less(v) {
			t.Errorf("row %d (%s) is not newer than the row before it", i, r.Version)
		}
		prev = v
		p, err := SGLang{Version: r.Version}.Carve(in, g)
		if err != nil || p.Release.Release != r.Version || p.Tokens <= 0 {
			t.Errorf("%s: pool %+v, %v", r.Version, p.Release, err)
		}
	}
	if CurrentSGLang != "0.5.23" {
		t.Errorf("current SGLang %s", CurrentSGLang)
	}
}

// sglangRow is the row of release v.
func sglangRow(v string, t *testing.T) sglangRelease {
	t.Helper()
	for _, r := range sglangReleases {
		if r.Version == v {
			return r
		}
	}
	t.Fatalf("no SGLang row %s", v)
	return sglangRelease{}
}

// TestSGLang0523: the default fraction of 0.5.23 on an H100 (0.830 for a
// dense model, its 58 prefill graphs at 8 MiB each; 0.816 with an MLA
// backend; a multimodal model off the prefill-graph list keeps 0.5.3's
// reserve and loses 100 MiB to its cache), a 24 GiB card's 4096-token
// chunk, the fallback without a GPU, and a hybrid's state slots from
// 0.9/1.9 of the budget.
func TestSGLang0523(t *testing.T) {
	h100, rtx := mustGPU("H100-80GB"), mustGPU("RTX-4090")
	gpuMiB := func(g GPU) float64 { return float64(g.Memory) / float64(MiB) }
	rel := sglangRow("0.5.23", t)
	for _, c := range []struct {
		preset string
		g      GPU
		want   float64
	}{
		{"llama-3.1-8b", h100, 0.830},
		{"deepseek-v2-lite", h100, 0.816},
		{"llama-3.1-8b", rtx, math.RoundToEven((gpuMiB(rtx)-(512+4096*1.5+48*2+128+8*50))/gpuMiB(rtx)*1000) / 1000},
	} {
		if got, why := (SGLang{TP: 1}).memFraction(MustPreset(c.preset), gpuMiB(c.g), rel); got != c.want {
			t.Errorf("%s on %s: %v (%s), want %v", c.preset, c.g.Name, got, why, c.want)
		}
	}
	if got, _ := (SGLang{}).memFraction(MustPreset("llama-3.1-8b"), 0, rel); got != 0.95 {
		t.Errorf("no GPU: %v, want 0.95", got)
	}
	vl := Inference{Model: MustPreset("qwen2.5-vl-7b"), Weights: Quant{DType: BF16}}
	p, err := SGLang{}.Carve(vl, h100)
	if err != nil || p.MMReservation != 100*MiB || p.Rest != p.Free-p.Weights-p.Reserved-100*MiB {
		t.Errorf("qwen2.5-vl-7b: reservation %v, rest %v, %v", p.MMReservation, p.Rest, err)
	}
	next := Inference{Model: MustPreset("qwen3-next-80b-a3b"), Weights: Quant{DType: BF16}}
	q, err := SGLang{TP: 4}.Carve(next, h100)
	if err != nil {
		t.Fatal(err)
	}
	budget := q.Free - q.Weights - q.Reserved
	slots := int(float64(budget)*0.9/1.9/float64(q.StatePerRequest)) - 1
	if q.MambaSlots != slots || q.RunningCap != slots/5 || q.StateReserved != q.StatePerRequest*Bytes(slots+1) || q.Rest != budget-q.StateReserved {
		t.Errorf("qwen3-next at TP 4: %d slots (want %d), cap %d, state %v, rest %v of %v", q.MambaSlots, slots, q.RunningCap, q.StateReserved, q.Rest, budget)
	}
	if c := q.MaxConcurrencyFor(16); c != float64(slots/5) {
		t.Errorf("short requests at once %v, want the cap %d", c, slots/5)
	}
}

// TestTRLReleases: TRL's table is ordered and cited; a release picks the
// newest row at or before it, the current release the newest row; versions
// read as the CLI's -versions writes them, refusing what is not a release
// of a known library.
func TestTRLReleases(t *testing.T) {
	var prev Version
	for i, r := range trlReleases {
		v, err := ParseVersion("trl", r.Version)
		if err != nil || !strings.Contains(r.Source, "trl "+r.Version) || r.CompletionLen < 1 || i > 0 && !prev.Less(v) {
			t.Errorf("row %d %+v: %v", i, r, err)
		}
		prev = v
	}
	for _, c := range []struct {
		asked              string
		completion, prompt int
		release            string
	}{{"", 512, 0, CurrentTRL}, {"0.25.1", 256, 512, "0.25.0"}, {"0.28.0", 256, 0, "0.27.0"}, {"1.9.2", 256, 0, "0.27.0"}, {"1.10.0", 512, 0, "1.10.0"}} {
		r, m, err := TRLReleaseFor(c.asked)
		if err != nil || r.CompletionLen != c.completion || r.PromptLen != c.prompt || m.Release != c.release {
			t.Errorf("trl %q: %d/%d modelled as %s (%v), want %d/%d as %s", c.asked, r.CompletionLen, r.PromptLen, m.Release, err, c.completion, c.prompt, c.release)
		}
	}
	v, err := ParseVersions("trl=0.25.0, vllm=0.14.1")
	if err != nil || v.TRL != "0.25.0" || v.VLLM != "0.14.1" {
		t.Errorf("ParseVersions: %+v, %v", v, err)
	}
	if v, err := ParseVersions("trl=0.25.0,trl=1.10.0"); err != nil || v.TRL != "1.10.0" {
		t.Errorf("a library named twice: %+v, %v; want the last", v, err)
	}
	for _, bad := range []string{"trl", "trl=", "pytorch=2.15.0", "trl=latest", strings.Repeat("trl=1.0.0,", 1000) + "x"} {
		if _, err := ParseVersions(bad); err == nil {
			t.Errorf("ParseVersions(%q) read", bad)
		}
	}
}
