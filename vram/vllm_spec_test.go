package vram

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// eagleHead is an EAGLE-3 head for Llama-3.1-8B given as a model: one
// Llama-3.1-8B decoder layer, the final norm and an output layer of the
// full vocabulary (the carve holds no EAGLE-3 preset).
func eagleHead() Model {
	h := MustPreset("llama-3.1-8b")
	h.Name, h.Layers, h.Params = "eagle3-head", 1, 0
	return h
}

// TestVLLMSpecKV: the draft's attention layers join the pool, each worked
// out by hand from the pages (v1/kv_cache_interface.py).
func TestVLLMSpecKV(t *testing.T) {
	head, small := eagleHead(), MustPreset("llama-3.2-1b")
	qwen := MustPreset("qwen3.5-9b")
	mla := int64(16 * (512 + 64) * 2)  // DeepSeek-V3's MLA page: 16 tokens × (kv_lora_rank + rope) × bf16
	gqa := int64(2 * 16 * 8 * 128 * 2) // Llama-3.1-8B's: K and V, 16 tokens, 8 heads of 128, bf16
	for _, tc := range []struct {
		name        string
		model       Model
		v           VLLM
		avail       Bytes
		layers      int
		draftLayers int
		blocks      int64
		draftPage   Bytes
	}{
		// One more MLA layer: 61 + 1 layers of 18,432 bytes a block.
		{"deepseek-v3 mtp 1", MustPreset("deepseek-v3"), VLLM{Version: "0.33.0", MaxModelLen: 8192, Speculative: &SpeculativeConfig{Method: "mtp", NumSpeculativeTokens: 1}},
			10 * GiB, 62, 1, int64(10*GiB) / (62 * mla), 0},
		// The per-model name is mtp (config/speculative.py:1246-1251); 3
		// tokens reuse the one layer (3 % 1 == 0).
		{"deepseek-v3 deepseek_mtp 3", MustPreset("deepseek-v3"), VLLM{Version: "0.33.0", MaxModelLen: 8192, Speculative: &SpeculativeConfig{Method: "deepseek_mtp", NumSpeculativeTokens: 3}},
			10 * GiB, 62, 1, int64(10*GiB) / (62 * mla), 0},
		{"deepseek-v3 none", MustPreset("deepseek-v3"), VLLM{Version: "0.33.0", MaxModelLen: 8192}, 10 * GiB, 61, 0, int64(10*GiB) / (61 * mla), 0},
		// n-gram lookup adds no layer.
		{"deepseek-v3 ngram", MustPreset("deepseek-v3"), VLLM{Version: "0.33.0", MaxModelLen: 8192, Speculative: &SpeculativeConfig{Method: "ngram", NumSpeculativeTokens: 3}},
			10 * GiB, 61, 0, int64(10*GiB) / (61 * mla), 0},
		// An EAGLE-3 head of the target's shape: 32 + 1 layers of 64 KiB.
		{"llama eagle3", MustPreset("llama-3.1-8b"), VLLM{Version: "0.33.0", MaxModelLen: 8192, Speculative: &SpeculativeConfig{Method: "eagle3", NumSpeculativeTokens: 3}, Draft: &head},
			20 * GiB, 33, 1, int64(20*GiB) / (33 * gqa), 0},
		// A draft of another page (Llama-3.2-1B: 8 heads of 64, 32 KiB)
		// pools in the one full-attention group: a block is 32 × 64 KiB +
		// 16 × 32 KiB = 2,560 KiB.
		{"llama draft_model 1b", MustPreset("llama-3.1-8b"), VLLM{Version: "0.33.0", MaxModelLen: 8192, Speculative: &SpeculativeConfig{Method: "draft_model", NumSpeculativeTokens: 4}, Draft: &small},
			20 * GiB, 48, 16, int64(20*GiB) / (32*gqa + 16*gqa/2), Bytes(gqa / 2)},
		// Qwen3.5's MTP layer is one more gated-attention layer.
		{"qwen3.5 mtp", qwen, VLLM{Version: "0.33.0", MaxModelLen: 8192, Speculative: &SpeculativeConfig{Method: "mtp", NumSpeculativeTokens: 2}},
			10 * GiB, 33, 1, -1, 0},
	} {
		kv, err := tc.v.KVCache(tc.model, tc.avail)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if kv.Layers != tc.layers || kv.DraftLayers != tc.draftLayers || tc.blocks >= 0 && kv.Blocks != tc.blocks || kv.DraftPageBytes != tc.draftPage {
			t.Errorf("%s: %d layers (%d draft), %d blocks, draft page %v; want %d (%d), %d, %v", tc.name, kv.Layers, kv.DraftLayers, kv.Blocks, kv.DraftPageBytes, tc.layers, tc.draftLayers, tc.blocks, tc.draftPage)
		}
	}
	// The 1B draft's pages count in what one request takes: 32 layers of
	// 64 KiB and 16 of 32 KiB for each of its 512 blocks.
	kv, _ := VLLM{Version: "0.33.0", MaxModelLen: 8192, Speculative: &SpeculativeConfig{Method: "draft_model", NumSpeculativeTokens: 4}, Draft: &small}.KVCache(MustPreset("llama-3.1-8b"), 20*GiB)
	if want := Bytes(512 * (32*gqa + 16*gqa/2)); kv.PerRequest != want {
		t.Errorf("draft_model per request %v, want %v", kv.PerRequest, want)
	}
	// Qwen3.5's recurrent layers keep num_speculative_tokens more state
	// pages a request (layers/mamba/abstract.py:72-91): 3 + 2.
	base, _ := VLLM{Version: "0.33.0", MaxModelLen: 8192}.KVCache(qwen, 10*GiB)
	spec, _ := VLLM{Version: "0.33.0", MaxModelLen: 8192, Speculative: &SpeculativeConfig{Method: "mtp", NumSpeculativeTokens: 2}}.KVCache(qwen, 10*GiB)
	if base.statePages != 3 || spec.statePages != 5 {
		t.Errorf("qwen3.5 state pages %d without, %d with 2 speculative tokens; want 3 and 5", base.statePages, spec.statePages)
	}
}

// TestVLLMSpecCarve: the draft's weights, its buffers and its forward,
// each as the carve shows it, worked out from the tensors and the
// proposers' buffers.
func TestVLLMSpecCarve(t *testing.T) {
	h100, _ := LookupGPU("H100-80GB")
	h200, _ := LookupGPU("H200")

	// DeepSeek-V3 in bf16 on one GPU (it does not start, but the carve
	// still counts): the MTP layer vLLM loads is a decoder layer like the
	// last one, plus enorm, hnorm and shared_head.norm ([7168] each),
	// eh_proj [7168, 14336] and its router's fp32 bias [256]; the
	// embedding and shared_head.head are the model's.
	ds := MustPreset("deepseek-v3").Normalize()
	in := Inference{Model: ds, Weights: Quant{DType: BF16}}
	var last Bytes
	for _, tn := range ds.tensors() {
		if tn.Layer == ds.Layers-1 {
			last += Bytes(2 * tn.Numel())
		}
	}
	h := int64(ds.Hidden)
	wantMTP := last + Bytes(2*(3*h+2*h*h)+4*256)
	v := VLLM{Version: "0.33.0", MaxModelLen: 8192, Speculative: &SpeculativeConfig{Method: "mtp", NumSpeculativeTokens: 1}}
	c, err := v.Carve(in, h200)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := VLLM{Version: "0.33.0", MaxModelLen: 8192}.Carve(in, h200)
	sp := c.Speculative
	if sp == nil || sp.Weights != wantMTP || c.Weights != plain.Weights+wantMTP || sp.KVLayers != 1 || c.KVCache.Layers != 62 {
		t.Fatalf("mtp: %+v, weights %d (plain %d); want the MTP layer's %d (got %d)", sp, c.Weights, plain.Weights, wantMTP, sp.Weights)
	}
	// The MTP proposer (Model Runner V2): InputBuffers, the speculator's
	// per-request tables, the runner's draft tokens, hidden_states
	// [T, 7168] bf16 and two int64 [R] tables: T = 8192, R = 1024 on a
	// 141 GB H200 (under 160 GiB), K = 1.
	T, R, K := int64(8192), int64(1024), int64(1)
	wantBuf := Bytes(T*13 + 4*(R+1) + (8+8+4+8)*R + (8+4+8)*R*K + 2*T*h + 16*R)
	if sp.Buffers != wantBuf || c.ProfileTokens != int(T) || c.ProfileSeqs != int(R) {
		t.Errorf("mtp buffers %v, want %v (T %d, R %d)", sp.Buffers, wantBuf, c.ProfileTokens, c.ProfileSeqs)
	}

	// MiMo-V2-Flash's checkpoint stores 3 MTP layers; vLLM builds the
	// first (mimo_v2_mtp.py:51-54), a sliding-window layer.
	mimo := MustPreset("mimo-v2-flash")
	one := mimo
	one.MTPLayers = 1
	mv := VLLM{Version: "0.33.0", MaxModelLen: 8192, TP: 8, Speculative: &SpeculativeConfig{Method: "mtp", NumSpeculativeTokens: 1}}
	m3, err := mv.Carve(Inference{Model: mimo}, h200)
	if err != nil {
		t.Fatal(err)
	}
	m1, _ := mv.Carve(Inference{Model: one}, h200)
	mplain, _ := VLLM{Version: "0.33.0", MaxModelLen: 8192, TP: 8}.Carve(Inference{Model: mimo}, h200)
	if m3.Speculative.Weights == 0 || m3.Speculative.Weights != m1.Speculative.Weights || m3.Speculative.KVLayers != 1 {
		t.Errorf("mimo: %v with 3 stored MTP layers, %v with 1", m3.Speculative.Weights, m1.Speculative.Weights)
	}
	sliding := func(kv VLLMKVCache) int {
		for _, k := range kv.kinds {
			if k.Kind == "sliding_window" {
				return k.Layers
			}
		}
		return 0
	}
	if sliding(m3.KVCache) != sliding(mplain.KVCache)+1 || sliding(mplain.KVCache) == 0 {
		t.Errorf("mimo: %d sliding-window layers with the MTP layer, %d without", sliding(m3.KVCache), sliding(mplain.KVCache))
	}

	// Llama-3.1-8B with an EAGLE-3 head given as a model (bf16, H100):
	// one decoder layer (q, o 4096²; k, v 1024 × 4096; gate, up, down
	// 14336 × 4096; two norms), the final norm and lm_head 128,256 ×
	// 4096; the embedding is the target's.
	head := eagleHead()
	lin := Inference{Model: MustPreset("llama-3.1-8b")}
	layer := int64(2*4096*4096 + 2*1024*4096 + 3*14336*4096 + 2*4096)
	wantHead := Bytes(2 * (layer + 4096 + 128256*4096))
	ev := VLLM{Version: "0.33.0", MaxModelLen: 8192, Speculative: &SpeculativeConfig{Method: "eagle3", NumSpeculativeTokens: 3}, Draft: &head}
	ec, err := ev.Carve(lin, h100)
	if err != nil {
		t.Fatal(err)
	}
	lplain, _ := VLLM{Version: "0.33.0", MaxModelLen: 8192}.Carve(lin, h100)
	esp := ec.Speculative
	T, R, K, h = 8192, 1024, 3, 4096
	wantBuf = Bytes(T*13 + 4*(R+1) + (8+8+4+8)*R + (8+4+8)*R*K + 2*T*h + 16*R)
	if esp == nil || esp.Weights != wantHead || ec.Weights != lplain.Weights+wantHead || esp.KVLayers != 1 || ec.KVCache.Layers != 33 || esp.Buffers != wantBuf {
		t.Fatalf("eagle3: %+v, weights %v (plain %v); want head %v, buffers %v", esp, ec.Weights, lplain.Weights, wantHead, wantBuf)
	}
	// The buffers come off the KV cache.
	if ec.KVCache.Available != ec.Requested-ec.Weights-ec.RunnerBuffers-esp.Buffers-ec.Activation-ec.NonTorch-ec.CUDAGraphs {
		t.Errorf("eagle3: available %v", ec.KVCache.Available)
	}
	if esp.DraftForward <= Bytes(2*T*h) || ec.Activation < esp.DraftForward || ec.KVCache.Blocks >= lplain.KVCache.Blocks || !ec.Starts {
		t.Errorf("eagle3: draft forward %v, activation %v, blocks %d vs %d, starts %v", esp.DraftForward, ec.Activation, ec.KVCache.Blocks, lplain.KVCache.Blocks, ec.Starts)
	}

	// With no method, a draft named like an EAGLE-3 head is one
	// (config/speculative.py:1243-1244, 1447-1448).
	named := VLLM{Version: "0.33.0", MaxModelLen: 8192, Speculative: &SpeculativeConfig{NumSpeculativeTokens: 3, Model: ModelRef(`"org/Llama-3.1-8B-eagle3-head"`)}, Draft: &head}
	if nc, err := named.Carve(lin, h100); err != nil || nc.Speculative.Method != "eagle3" || nc.Speculative.Weights != wantHead {
		t.Errorf("a head by its name: %+v, %v", nc.Speculative, err)
	}

	// n-gram: no weights, no layers; the GPU proposer's scratch int64
	// [R, cdiv(8192, 256)] and drafts and the runner's draft tokens int64
	// [R, 3].
	nv := VLLM{Version: "0.33.0", MaxModelLen: 8192, Speculative: &SpeculativeConfig{Method: "ngram", NumSpeculativeTokens: 3}}
	nc, err := nv.Carve(lin, h100)
	if err != nil {
		t.Fatal(err)
	}
	if nsp := nc.Speculative; nsp.Weights != 0 || nsp.KVLayers != 0 || nsp.Buffers != Bytes(8*R*32+16*R*3) || nc.Weights != lplain.Weights || nc.KVCache.Layers != 32 {
		t.Errorf("ngram: %+v, weights %v", nsp, nc.Weights)
	}
	// suffix: the CPU's; Model Runner V1 runs, without V2's tables.
	sc, err := VLLM{Version: "0.33.0", MaxModelLen: 8192, Speculative: &SpeculativeConfig{Method: "suffix"}}.Carve(lin, h100)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Speculative.NumSpeculativeTokens != 24 || sc.Speculative.Buffers != 0 || sc.RunnerBuffers != 0 || lplain.RunnerBuffers == 0 {
		t.Errorf("suffix: %+v, runner %v", sc.Speculative, sc.RunnerBuffers)
	}
	// 0.14.1's EagleProposer (v1/spec_decode/eagle.py:116-160).
	ov := ev
	ov.Version = "0.14.1"
	oc, err := ov.Carve(lin, h100)
	if err != nil {
		t.Fatal(err)
	}
	if want := Bytes(T*12 + 2*2*T*h + 4*T + 4*R); oc.Speculative.Buffers != want {
		t.Errorf("0.14.1 eagle buffers %v, want %v", oc.Speculative.Buffers, want)
	}
	// A draft model on Model Runner V2 profiles T − R tokens
	// (model_runner.py:871-879).
	small := MustPreset("llama-3.2-1b")
	dc, err := VLLM{Version: "0.33.0", MaxModelLen: 8192, Speculative: &SpeculativeConfig{Method: "draft_model", NumSpeculativeTokens: 4}, Draft: &small}.Carve(lin, h100)
	if err != nil {
		t.Fatal(err)
	}
	if dc.Speculative.DraftForward == 0 || dc.Speculative.KVPageBytes != 16*KiB*2 || dc.KVCache.DraftLayers != 16 {
		t.Errorf("draft_model: %+v", dc.Speculative)
	}
}

// TestVLLMSpecCaptureSizes: uniform decode batches of 1 + K tokens a
// request are captured (config/vllm.py:2487-2606).
func TestVLLMSpecCaptureSizes(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	v := VLLM{Version: "0.33.0", MaxNumSeqs: 3, MaxNumBatchedTokens: 8192}
	// Without speculation: up to 2 × 3 = 6, and max_num_seqs.
	if got := v.captureSizes(g, 1); !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Errorf("q 1: %v", got)
	}
	// q 2: up to 12; 1, 2 and 3 requests of 2 tokens.
	if got := v.captureSizes(g, 2); !slices.Equal(got, []int{1, 2, 4, 6, 8}) {
		t.Errorf("q 2: %v", got)
	}
}

// TestVLLMSpecRefusals: what vLLM refuses, in its words, and what the
// carve does not model, each naming the field.
func TestVLLMSpecRefusals(t *testing.T) {
	llama, ds := MustPreset("llama-3.1-8b"), MustPreset("deepseek-v3")
	head := eagleHead()
	two := MustPreset("deepseek-v3")
	two.MTPLayers = 2
	other := MustPreset("qwen3-8b")
	bamba := MustPreset("bamba-9b")
	for name, tc := range map[string]struct {
		m    Model
		v    VLLM
		want string
	}{
		"method":      {llama, VLLM{Version: "0.33.0", Speculative: &SpeculativeConfig{Method: "magic", NumSpeculativeTokens: 1}}, `speculative_config.method "magic"`},
		"negative":    {llama, VLLM{Version: "0.33.0", Speculative: &SpeculativeConfig{Method: "ngram", NumSpeculativeTokens: -1}}, "num_speculative_tokens must be greater than 0"},
		"ngram no k":  {llama, VLLM{Version: "0.33.0", Speculative: &SpeculativeConfig{Method: "ngram"}}, "num_speculative_tokens must be provided"},
		"no draft":    {llama, VLLM{Version: "0.33.0", Speculative: &SpeculativeConfig{Method: "eagle3", NumSpeculativeTokens: 3}}, "speculative_config.model: method eagle3 loads a draft model"},
		"draft alone": {llama, VLLM{Version: "0.33.0", Draft: &head}, "needs speculative_config"},
		"mtp llama":   {llama, VLLM{Version: "0.33.0", Speculative: &SpeculativeConfig{Method: "mtp", NumSpeculativeTokens: 1}}, "NotImplementedError: Unsupported speculative method: 'mtp'"},
		"mtp 0.14.1":  {llama, VLLM{Version: "0.14.1", Speculative: &SpeculativeConfig{Method: "mtp", NumSpeculativeTokens: 1}}, "Speculative decoding with draft model is not supported yet"},
		"mtp 0.11.0":  {ds, VLLM{Version: "0.11.0", Speculative: &SpeculativeConfig{Method: "mtp", NumSpeculativeTokens: 1}}, "not modelled for vLLM 0.11.0"},
		"divisible":   {two, VLLM{Version: "0.33.0", Speculative: &SpeculativeConfig{Method: "mtp", NumSpeculativeTokens: 3}}, "num_speculative_tokens:3 must be divisible by n_predict=2"},
		"mtp model":   {ds, VLLM{Version: "0.33.0", Speculative: &SpeculativeConfig{Method: "mtp", NumSpeculativeTokens: 1, Model: ModelRef(`"deepseek-v3"`)}}, "leave model out"},
		"vocab":       {llama, VLLM{Version: "0.33.0", Speculative: &SpeculativeConfig{Method: "draft_model", NumSpeculativeTokens: 2}, Draft: &other}, "Target and draft model should have the same vocabulary size"},
		"draft 0.14":  {llama, VLLM{Version: "0.14.1", Speculative: &SpeculativeConfig{Method: "draft_model", NumSpeculativeTokens: 2}, Draft: &head}, "Draft model speculative decoding is not supported yet"},
		"pp":          {llama, VLLM{Version: "0.33.0", PP: 2, Speculative: &SpeculativeConfig{Method: "eagle3", NumSpeculativeTokens: 2}, Draft: &head}, "pipeline_parallel_size 2"},
		"mamba 0.11":  {bamba, VLLM{Version: "0.11.0", MaxModelLen: 4096, Speculative: &SpeculativeConfig{Method: "ngram", NumSpeculativeTokens: 2}}, "Mamba with speculative decoding is not supported"},
		"slots":       {llama, VLLM{Version: "0.33.0", MaxNumBatchedTokens: 2, Speculative: &SpeculativeConfig{Method: "eagle3", NumSpeculativeTokens: 2}, Draft: &head}, "does not have enough slots"},
	} {
		if _, err := tc.v.KVCache(tc.m, 10*GiB); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// TestVLLMSpecPlan: a plan's vllm.speculative_config, read and written
// back; a bad one names its field.
func TestVLLMSpecPlan(t *testing.T) {
	p, err := ParsePlanContent([]byte(`{"model": "llama-3.1-8b", "inference": {"batch": 1, "prompt_tokens": 16},
		"vllm": {"speculative_config": {"method": "draft_model", "num_speculative_tokens": 4, "model": "llama-3.2-1b"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := p.VLLM.Speculative; s == nil || s.Method != "draft_model" || s.NumSpeculativeTokens != 4 || p.VLLM.Draft == nil || p.VLLM.Draft.Name != MustPreset("llama-3.2-1b").Name {
		t.Fatalf("read: %+v, draft %v", p.VLLM.Speculative, p.VLLM.Draft)
	}
	f, err := p.File()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParsePlanContent(f)
	if err != nil || back.VLLM.Draft == nil || string(back.VLLM.Speculative.Model) != `"llama-3.2-1b"` {
		t.Fatalf("written back: %s, %v", f, err)
	}
	// A draft given as the model's fields.
	head := eagleHead()
	raw, _ := json.Marshal(head)
	p2, err := ParsePlanContent([]byte(`{"model": "llama-3.1-8b", "inference": {"batch": 1, "prompt_tokens": 16}, "vllm": {"speculative_config": {"method": "eagle3", "num_speculative_tokens": 3, "model": ` + string(raw) + `}}}`))
	if err != nil || p2.VLLM.Draft == nil || p2.VLLM.Draft.Layers != 1 {
		t.Fatalf("a draft's fields: %v", err)
	}
	// The Go API's draft is written as its fields.
	m := p.Model
	p.VLLM.Speculative.Model = nil
	p.VLLM.Draft = &m
	if f, err := p.File(); err != nil || !strings.Contains(string(f), `"speculative_config"`) {
		t.Errorf("a Go API draft: %s, %v", f, err)
	}
	for _, tc := range []struct{ plan, want string }{
		{`{"prompt_lookup_max": 4}`, "vllm.speculative_config.prompt_lookup_max"},
		{`{"method": "eagle3", "num_speculative_tokens": 3, "model": "no-such-head"}`, "vllm.speculative_config.model"},
		{`{"method": "eagle3", "num_speculative_tokens": 3, "model": "hf://yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}`, "vllm.speculative_config.model: hf://yuhuili/EAGLE3-LLaMA3.1-Instruct-8B needs the network"},
		{`{"num_speculative_tokens": "three"}`, "vllm.speculative_config.num_speculative_tokens"},
	} {
		_, err := ParsePlanContent([]byte(`{"model": "llama-3.1-8b", "inference": {"batch": 1, "prompt_tokens": 16}, "vllm": {"speculative_config": ` + tc.plan + `}}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.plan, err, tc.want)
		}
	}
}
