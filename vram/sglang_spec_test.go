package vram

import (
	"math"
	"strings"
	"testing"
)

// The pool the speculative tests size: 140 GiB free, 60 GiB of the
// model's weights, mem_fraction_static 7/8 (17.5 GiB kept free, exact).
const (
	specFree    = 140 * GiB
	specWeights = 60 * GiB
	specFrac    = 0.875
	specKept    = specFree / 8
)

// dsMTPBytes is DeepSeek-V3's MTP layer in bf16 on one GPU, worked out
// from the tensors as vLLM's test does: a decoder layer like the last one,
// enorm, hnorm and shared_head.norm ([7168] each), eh_proj [7168, 14336] and
// the router's fp32 bias [256].
func dsMTPBytes(ds Model) Bytes {
	var last Bytes
	for _, tn := range ds.tensors() {
		if tn.Layer == ds.Layers-1 {
			last += Bytes(2 * tn.Numel())
		}
	}
	h := int64(ds.Hidden)
	return last + Bytes(2*(3*h+2*h*h)+4*256)
}

// bf16At loads m in bf16 at TP 1, as Carve hands the draft's weights
// their target.
func bf16At(t *testing.T, m Model) *Inference {
	rin, _, err := Inference{Model: m, Batch: 1, PromptTokens: 1, TP: 1, Weights: Quant{DType: BF16}, runtime: runSGLang}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	return &rin
}

// TestSGLangSpecPool: the draft's weights, its pool, the target's tokens as
// the draft changes them and the draft graphs' buffers, each worked out by
// hand from SGLang's lines (sglang_spec.go), for 0.5.3 and 0.5.23.
func TestSGLangSpecPool(t *testing.T) {
	ds := MustPreset("deepseek-v3").Normalize()
	llama := MustPreset("llama-3.1-8b").Normalize()
	head := eagleHead()
	small := MustPreset("llama-3.2-1b")
	nextn := &SGLangSpeculative{Algorithm: "NEXTN", NumSteps: 3, EagleTopK: 1, NumDraftTokens: 4}

	mtp := dsMTPBytes(ds)
	own := Bytes(2 * 2 * 129280 * 7168) // the NextN draft's own embedding and output layer, bf16
	const mla = 576 * 61 * 2            // DeepSeek-V3's cell: (kv_lora_rank + rope) × 61 layers × bf16
	var headFull, headEmbed Bytes
	for _, tn := range head.Normalize().tensors() {
		headFull += Bytes(2 * tn.Numel())
		if tn.Role == "embedding" && !tn.head {
			headEmbed += Bytes(2 * tn.Numel())
		}
	}
	const gqa = 8 * 128 * 32 * 2 * 2 // Llama-3.1-8B's cell: 8 KV heads of 128, 32 layers, K and V, bf16
	budget := func(draft Bytes) int64 { return int64(specFree - specWeights - draft - specKept) }

	for _, tc := range []struct {
		name    string
		model   Model
		s       SGLang
		steady  Bytes // the draft's weights once loaded
		sizing  Bytes // held when the pool is sized (0.5.23)
		tokens  int64 // max_total_num_tokens
		cell    Bytes // the draft's bytes a token
		share   Bytes // what 0.5.23 adds to the target's cell
		room    int64 // 0.5.3's headroom slots
		buffers Bytes
	}{
		// 0.5.23: the MTP layer and the draft's own embedding and output
		// layer load before the pool is sized; the cell gains 70,272 / 61
		// = 1,152 bytes; 48 requests: the draft decode graph's inputs
		// (52·B·K + 8·B·K·S + 28·B + 2·B·H) and its extend graph's over
		// B·D = 192 tokens (48·n + 36·B + 2·n·H).
		{"deepseek-v3 NEXTN 0.5.23", ds, SGLang{Version: "0.5.23", Speculative: nextn, specIn: bf16At(t, ds)},
			mtp, mtp + own, budget(mtp+own) / (mla + 1152), 1152, 1152, 0,
			Bytes(52*48 + 8*48*3 + 28*48 + 2*48*7168 + 48*192 + 36*48 + 2*192*7168)},
		// 0.5.3: the pool from the model's weights alone, then 48 × (3 × 1
		// + 4) + 100 = 436 slots more; the extend graph over 48 × (3 + 1)
		// tokens keeps next-token logits of [48, 129,280] fp32.
		{"deepseek-v3 NEXTN 0.5.3", ds, SGLang{Version: "0.5.3", Speculative: nextn, specIn: bf16At(t, ds)},
			mtp, 0, budget(0)/mla + 436, 1152, 0, 436,
			Bytes(52*48 + 8*48*3 + 8*48 + 2*48*7168 + 48*192 + 2*192*7168 + 16*48 + 4*48*129280)},
		// EAGLE-3 on Llama: auto_choose_speculative_params gives 5 steps,
		// topk 4, 8 draft tokens; the head shares the model's embedding.
		// 0.5.23's cell gains 131,072 / 32 = 4,096; the extend graph's
		// hidden states are three layers' (3 × 4,096).
		{"llama EAGLE3 0.5.23", llama, SGLang{Version: "0.5.23", Speculative: &SGLangSpeculative{Algorithm: "EAGLE3"}, Draft: &head},
			headFull - headEmbed, headFull, budget(headFull) / (gqa + 4096), 4096, 4096, 0,
			Bytes(52*48*4 + 8*48*4*5 + 28*48 + 2*48*4096 + 48*384 + 36*48 + 2*384*12288)},
		// 0.5.3: 48 × (5 × 4 + 8) + 100 = 1,444 headroom slots; the extend
		// graph over 48 × 6 tokens, the logits [48, 128,256] fp32.
		{"llama EAGLE3 0.5.3", llama, SGLang{Version: "0.5.3", Speculative: &SGLangSpeculative{Algorithm: "EAGLE3"}, Draft: &head},
			headFull - headEmbed, 0, budget(0)/gqa + 1444, 4096, 0, 1444,
			Bytes(52*48*4 + 8*48*4*5 + 8*48 + 2*48*4096 + 48*288 + 2*288*12288 + 16*48 + 4*48*128256)},
		// STANDALONE: (3, 1, 4); the 1B draft is priced at the model's
		// per-layer size (131,072 × 16 / 32) but pools 8 heads of 64:
		// 32 KiB a token; its graphs carry no hidden states.
		{"llama STANDALONE 1b 0.5.23", llama, SGLang{Version: "0.5.23", Speculative: &SGLangSpeculative{Algorithm: "standalone"}, Draft: &small},
			-1, -1, -2, 8 * 64 * 16 * 2 * 2, 65536, 0,
			Bytes(52*48 + 8*48*3 + 28*48 + 48*192 + 36*48)},
		// NGRAM: no draft, 12 draft tokens, tables for 48 requests (40·B·D
		// + B·D²); 0.5.3 gives no headroom for it.
		{"llama NGRAM 0.5.3", llama, SGLang{Version: "0.5.3", Speculative: &SGLangSpeculative{Algorithm: "NGRAM"}},
			0, 0, budget(0) / gqa, 0, 0, 0, Bytes(40*48*12 + 48*144)},
		{"llama NGRAM 0.5.23", llama, SGLang{Version: "0.5.23", Speculative: &SGLangSpeculative{Algorithm: "ngram"}},
			0, 0, budget(0) / gqa, 0, 0, 0, Bytes(40*48*12 + 48*144)},
	} {
		tc.s.MemFractionStatic = specFrac
		p, err := tc.s.KVPool(tc.model, specFree, specWeights)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		sp := p.Speculative
		if sp == nil {
			t.Errorf("%s: no speculative part", tc.name)
			continue
		}
		if tc.steady >= 0 && (sp.Weights != tc.steady || sp.WeightsAtSizing != tc.sizing) {
			t.Errorf("%s: draft weights %d (%d at sizing), want %d (%d)", tc.name, sp.Weights, sp.WeightsAtSizing, tc.steady, tc.sizing)
		}
		if tc.tokens >= 0 && p.Tokens != tc.tokens {
			t.Errorf("%s: max_total_num_tokens %d, want %d", tc.name, p.Tokens, tc.tokens)
		}
		if sp.CellSize != tc.cell || sp.CellInBudget != tc.share || sp.HeadroomTokens != tc.room || sp.Buffers != tc.buffers {
			t.Errorf("%s: draft cell %d (in the budget %d), headroom %d, buffers %d; want %d (%d), %d, %d", tc.name, sp.CellSize, sp.CellInBudget, sp.HeadroomTokens, sp.Buffers, tc.cell, tc.share, tc.room, tc.buffers)
		}
		if tc.cell > 0 && (sp.KVTokens != p.Tokens || sp.KVBytes != Bytes(p.Tokens)*tc.cell) {
			t.Errorf("%s: the draft pool is %d tokens, %v; want the model's %d at %d a token", tc.name, sp.KVTokens, sp.KVBytes, p.Tokens, tc.cell)
		}
		if p.RunningCap != 48 || sp.MaxRunningRequests != 48 || sp.GraphBS != map[bool]int{true: 0, false: 48}[sp.Algorithm == "NGRAM"] {
			t.Errorf("%s: running %d (%d), graphs of %d", tc.name, p.RunningCap, sp.MaxRunningRequests, sp.GraphBS)
		}
	}
}

// TestSGLangSpecStandalone: STANDALONE's draft is loaded whole and pools its
// own geometry over the model's slots, the budget pricing it at the
// model's per-layer size (0.5.23); what it holds less than priced is left
// unused, so nothing falls outside the budget but the graphs' inputs.
func TestSGLangSpecStandalone(t *testing.T) {
	llama, small := MustPreset("llama-3.1-8b"), MustPreset("llama-3.2-1b")
	s := SGLang{Version: "0.5.23", MemFractionStatic: specFrac, Speculative: &SGLangSpeculative{Algorithm: "STANDALONE"}, Draft: &small}
	p, err := s.KVPool(llama, specFree, specWeights)
	if err != nil {
		t.Fatal(err)
	}
	rin, dm, _ := Inference{Model: small, Batch: 1, PromptTokens: 1, TP: 1, runtime: runSGLang}.resolve()
	full := rin.weightBytes(dm)
	sp := p.Speculative
	want := int64(specFree-specWeights-full-specKept) / (131072 + 65536)
	if sp.Weights != full || sp.WeightsAtSizing != full || p.Tokens != want || sp.NumSteps != 3 || sp.EagleTopK != 1 || sp.NumDraftTokens != 4 || sp.OutsideBudget != sp.Buffers {
		t.Errorf("standalone: %+v, %d tokens; want weights %d, %d tokens, (3, 1, 4)", sp, p.Tokens, full, want)
	}
}

// TestSGLangSpecReleases: what 0.5.3 does differently — the default
// fraction keeps 2 GiB back for an EAGLE draft and 6 GiB for STANDALONE
// (server_args.py:663-669), none for NGRAM, where 0.5.23's default has no
// draft term; auto_choose_speculative_params gives GLM-4.5 (5, 4, 8) in
// 0.5.3 and (3, 1, 4) in 0.5.23; 0.5.3 has no draft KV cache dtype.
func TestSGLangSpecReleases(t *testing.T) {
	h100, _ := LookupGPU("H100-80GB")
	llama, small := MustPreset("llama-3.1-8b"), MustPreset("llama-3.2-1b")
	head := eagleHead()
	in := Inference{Model: llama}
	gpuMiB := float64(h100.Memory) / float64(MiB)
	for _, v := range []string{"0.5.3", "0.5.23"} {
		plain, err := SGLang{Version: v}.Carve(in, h100)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			s        SGLangSpeculative
			draft    *Model
			reserved float64 // MiB, 0.5.3
		}{
			{SGLangSpeculative{Algorithm: "EAGLE3"}, &head, 2048},
			{SGLangSpeculative{Algorithm: "STANDALONE"}, &small, 6144},
			{SGLangSpeculative{Algorithm: "NGRAM"}, nil, 0},
		} {
			c, err := SGLang{Version: v, Speculative: &tc.s, Draft: tc.draft}.Carve(in, h100)
			if err != nil {
				t.Errorf("%s %s: %v", v, tc.s.Algorithm, err)
				continue
			}
			want, reserve := plain.MemFractionStatic, Bytes(0)
			if v == "0.5.3" && tc.reserved > 0 {
				// 512 MiB, 1.5 MiB a token of the 8,192-token chunk, 2 MiB
				// a graph of up to 256 requests, 1/8 GiB for TP 1 (over the
				// 10 GiB floor), and the draft's.
				want, reserve = roundEven3((gpuMiB-(512+8192*1.5+256*2+1024.0/8)-tc.reserved)/gpuMiB), Bytes(tc.reserved)*MiB
			}
			if c.MemFractionStatic != want || c.Speculative.DefaultReserve != reserve {
				t.Errorf("%s %s: mem_fraction_static %v (draft's reserve %v), want %v (%v)", v, tc.s.Algorithm, c.MemFractionStatic, c.Speculative.DefaultReserve, want, reserve)
			}
		}
	}
	glm := MustPreset("glm-4.5")
	for v, want := range map[string][3]int{"0.5.3": {5, 4, 8}, "0.5.23": {3, 1, 4}} {
		p, err := SGLang{Version: v, TP: 8, MemFractionStatic: specFrac, Speculative: &SGLangSpeculative{Algorithm: "EAGLE"}}.KVPool(glm, specFree, specWeights)
		if err != nil {
			t.Errorf("glm-4.5 %s: %v", v, err)
			continue
		}
		if got := [3]int{p.Speculative.NumSteps, p.Speculative.EagleTopK, p.Speculative.NumDraftTokens}; got != want || p.Speculative.KVLayers != 1 {
			t.Errorf("glm-4.5 %s: (steps, topk, draft tokens) %v, %d draft layers; want %v, 1", v, got, p.Speculative.KVLayers, want)
		}
	}
	// topk 1 makes the draft tokens steps + 1, whatever was given.
	p, _ := SGLang{MemFractionStatic: specFrac, Speculative: &SGLangSpeculative{Algorithm: "EAGLE3", NumSteps: 2, EagleTopK: 1, NumDraftTokens: 9}, Draft: &head}.KVPool(llama, specFree, specWeights)
	if p.Speculative == nil || p.Speculative.NumDraftTokens != 3 {
		t.Errorf("topk 1: %+v", p.Speculative)
	}
	// A draft KV cache dtype (0.5.23) halves the draft's pool.
	p8, _ := SGLang{MemFractionStatic: specFrac, Speculative: &SGLangSpeculative{Algorithm: "EAGLE3", DraftKVCacheDType: FP8E4M3}, Draft: &head}.KVPool(llama, specFree, specWeights)
	if p8.Speculative == nil || p8.Speculative.CellSize != 2048 || p8.Speculative.CellInBudget != 4096 {
		t.Errorf("fp8 draft pool: %+v", p8.Speculative)
	}
}

func roundEven3(f float64) float64 { return math.RoundToEven(f*1000) / 1000 }

// TestSGLangSpecRefusals: what SGLang refuses, in its words, and what the
// carve does not model, each naming the field.
func TestSGLangSpecRefusals(t *testing.T) {
	llama, head := MustPreset("llama-3.1-8b"), eagleHead()
	ds := MustPreset("deepseek-v3")
	for name, tc := range map[string]struct {
		m    Model
		s    SGLang
		want string
	}{
		"0.5.3 lower case":  {llama, SGLang{Version: "0.5.3", Speculative: &SGLangSpeculative{Algorithm: "eagle3"}, Draft: &head}, "invalid choice: \"eagle3\" (choose from 'EAGLE', 'EAGLE3', 'NEXTN', 'STANDALONE', 'NGRAM')"},
		"unknown":           {llama, SGLang{Speculative: &SGLangSpeculative{Algorithm: "MEDUSA"}}, `speculative.algorithm "MEDUSA" is not one of SGLang 0.5.23's`},
		"dflash":            {llama, SGLang{Speculative: &SGLangSpeculative{Algorithm: "DFLASH"}, Draft: &head}, "speculative.algorithm DFLASH is not modelled"},
		"0.5.3 draft dtype": {llama, SGLang{Version: "0.5.3", Speculative: &SGLangSpeculative{Algorithm: "EAGLE3", DraftKVCacheDType: FP8E4M3}, Draft: &head}, "speculative.draft_kv_cache_dtype: SGLang 0.5.3 has no"},
		"no head":           {llama, SGLang{Speculative: &SGLangSpeculative{Algorithm: "EAGLE3"}}, "speculative.draft_model_path: EAGLE3 loads a draft model"},
		"llama eagle":       {llama, SGLang{Speculative: &SGLangSpeculative{Algorithm: "EAGLE"}}, "speculative.draft_model_path: EAGLE loads a draft model"},
		"topk alone":        {llama, SGLang{Speculative: &SGLangSpeculative{Algorithm: "EAGLE3", EagleTopK: 4}, Draft: &head}, "speculative.num_steps: left out"},
		"steps alone":       {llama, SGLang{Speculative: &SGLangSpeculative{Algorithm: "EAGLE3", NumSteps: 3}, Draft: &head}, "speculative.eagle_topk: given num_steps"},
		"tree, no tokens":   {llama, SGLang{Speculative: &SGLangSpeculative{Algorithm: "EAGLE3", NumSteps: 3, EagleTopK: 4}, Draft: &head}, "speculative.num_draft_tokens: with eagle_topk 4"},
		"negative":          {llama, SGLang{Speculative: &SGLangSpeculative{Algorithm: "EAGLE3", NumSteps: -1}, Draft: &head}, "speculative.num_steps must be in [1, 64]"},
		"huge tree":         {llama, SGLang{Speculative: &SGLangSpeculative{Algorithm: "EAGLE3", NumSteps: 8, EagleTopK: 100, NumDraftTokens: 64}, Draft: &head}, "speculative.eagle_topk must be in [1, 64]"},
		"ngram draft":       {llama, SGLang{Speculative: &SGLangSpeculative{Algorithm: "NGRAM"}, Draft: &head}, "speculative.draft_model_path: NGRAM loads no model"},
		"draft alone":       {llama, SGLang{Draft: &head}, "needs speculative.algorithm"},
		"mtp and a draft":   {ds, SGLang{TP: 8, Speculative: &SGLangSpeculative{Algorithm: "NEXTN"}, Draft: &head}, "speculative.draft_model_path on \"deepseek_v3\""},
		"qwen3.5":           {MustPreset("qwen3.5-9b"), SGLang{Speculative: &SGLangSpeculative{Algorithm: "NEXTN"}}, "recurrent state is not modelled"},
		"deepseek-v3.2":     {MustPreset("deepseek-v3.2"), SGLang{TP: 8, Speculative: &SGLangSpeculative{Algorithm: "EAGLE"}}, "DeepSeek Sparse Attention model"},
		"mimo-v2-flash":     {MustPreset("mimo-v2-flash"), SGLang{TP: 8, Speculative: &SGLangSpeculative{Algorithm: "EAGLE"}}, "multi-layer EAGLE"},
		"glm-4.7-flash":     {MustPreset("glm-4.7-flash"), SGLang{Speculative: &SGLangSpeculative{Algorithm: "NEXTN"}}, "the carve does not list"},
		"llama nextn 053":   {llama, SGLang{Version: "0.5.3", Speculative: &SGLangSpeculative{Algorithm: "NEXTN"}}, "speculative.draft_model_path: NEXTN loads a draft model"},
	} {
		tc.s.MemFractionStatic = specFrac
		_, err := tc.s.KVPool(tc.m, specFree, specWeights)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	// 0.5.23 with the draft's weights leaving no budget: its ValueError.
	p, err := SGLang{MemFractionStatic: 0.44, Speculative: &SGLangSpeculative{Algorithm: "EAGLE3"}, Draft: &head}.KVPool(MustPreset("llama-3.1-8b"), specFree, specWeights)
	if err != nil || !strings.Contains(p.Err, "If using speculative decoding, draft weights are now counted") {
		t.Errorf("no budget: %q, %v", p.Err, err)
	}
}

// TestSGLangSpecPlan: a plan's sglang.speculative reaches the carve, its
// draft read as a plan's model, and the plan file reads back to the same
// pool.
func TestSGLangSpecPlan(t *testing.T) {
	plan := `{"model": "llama-3.1-8b", "gpu": "H100-80GB", "inference": {"batch": 1, "prompt_tokens": 1024},
		"sglang": {"speculative": {"algorithm": "STANDALONE", "draft_model_path": "llama-3.2-1b", "num_steps": 4, "eagle_topk": 1, "num_draft_tokens": 5}}}`
	p, err := ParsePlanContent([]byte(plan))
	if err != nil {
		t.Fatal(err)
	}
	if p.SGLang.Draft == nil || p.SGLang.Draft.Layers != 16 {
		t.Fatalf("draft %+v", p.SGLang.Draft)
	}
	g, _ := LookupGPU("H100-80GB")
	c, err := p.SGLang.Carve(*p.Inference, g)
	if err != nil || c.Speculative == nil || c.Speculative.NumSteps != 4 || c.Speculative.KVLayers != 16 {
		t.Fatalf("carve %+v, %v", c.Speculative, err)
	}
	f, err := p.File()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParsePlanContent(f)
	if err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	bc, err := back.SGLang.Carve(*back.Inference, g)
	if err != nil || bc.Tokens != c.Tokens || bc.Speculative.Weights != c.Speculative.Weights || bc.DeviceUsed != c.DeviceUsed {
		t.Errorf("read back %s: %+v, %v", f, bc.Speculative, err)
	}
	for _, bad := range []string{
		`{"model": "llama-3.1-8b", "inference": {}, "sglang": {"speculative": {"algorithm": "EAGLE3", "draft_model_path": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}}}`,
		`{"model": "llama-3.1-8b", "inference": {}, "sglang": {"speculative": {"algorithm": "EAGLE3", "draft_model_path": "hf://yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}}}`,
		`{"model": "llama-3.1-8b", "inference": {}, "sglang": {"speculative": {"algorithm": "EAGLE3", "draft_model_path": {"checkpoint": "heads/eagle3"}}}}`,
	} {
		if _, err := ParsePlanContent([]byte(bad)); err == nil || !strings.Contains(err.Error(), "sglang.speculative.draft_model_path") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
