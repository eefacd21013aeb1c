package vram

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// m3Text and m3Vision are a small MiniMaxM3VLTextConfig and
// MiniMaxM3VLVisionConfig as config.json fragments.
const (
	m3Text   = `"vocab_size": 1000, "hidden_size": 64, "intermediate_size": 24, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "num_local_experts": 4, "num_experts_per_tok": 2, "dense_intermediate_size": 48, "shared_intermediate_size": 16, "index_n_heads": 2, "index_head_dim": 16`
	m3Vision = `"vision_config": {"hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 2, "patch_size": 4, "image_size": 32}, "projector_hidden_size": 64`
)

// m3Config is a small MiniMaxM3VLConfig with text keys extra.
func m3Config(extra string) string {
	return `{"model_type": "minimax_m3_vl", "text_config": {` + m3Text + extra + `}, ` + m3Vision + `}`
}

// TestMiniMaxM3: MiniMax-M3 as transformers 5.23 builds it — the parameter
// and buffer counts of its meta-device models (small configs; the classes'
// defaults), the layer and MLP kinds from either spelling, and what is
// refused.
func TestMiniMaxM3(t *testing.T) {
	for _, c := range []struct {
		name, json      string
		params, buffers int64
		sparse          []int
		dense           int
		tied            bool
	}{
		// transformers 5.23.0: AutoConfig.for_model("minimax_m3_vl",
		// **json), AutoModelForImageTextToText.from_config under
		// torch.device("meta"), sum(p.numel() for p in
		// model.parameters()) and the same over model.buffers().
		{"layer_types, mlp_layer_types", m3Config(`, "layer_types": ["full_attention", "minimax_m3_sparse", "full_attention", "minimax_m3_sparse"], "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"]`), 351824, 48, []int{1, 3}, 1, false},
		{"the checkpoint's sparse_attention_config and moe_layer_freq, num_experts, a partial rotary factor", m3Config(`, "sparse_attention_config": {"sparse_attention_freq": [0, 1, 1, 0], "sparse_num_index_heads": 3, "sparse_index_dim": 8}, "moe_layer_freq": [0, 0, 1, 1], "num_experts": 6, "partial_rotary_factor": 0.5`), 355888, 32, []int{1, 2}, 2, false},
		{"the text config's tie_word_embeddings ties", m3Config(`, "tie_word_embeddings": true`), 294160, 52, nil, 0, true},
		{"the classes' defaults", `{"model_type": "minimax_m3_vl"}`, 448052008448, 7834, nil, 0, false},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil || m.ParamCount() != c.params {
			t.Errorf("%s: %d parameters, %v; transformers 5.23 builds %d", c.name, m.ParamCount(), err, c.params)
			continue
		}
		var buf int64
		for _, b := range m.Buffers() {
			n := int64(1)
			for _, d := range b.Shape {
				n *= d
			}
			buf += n
		}
		var sparse []int
		if m.BlockSparse != nil {
			sparse = m.BlockSparse.Layers
		}
		if buf != c.buffers || !slices.Equal(sparse, c.sparse) || m.DenseLayers != c.dense || m.TiedEmbeddings != c.tied {
			t.Errorf("%s: %d buffer elements, sparse at %v, %d dense, tied %v; transformers: %d, %v, %d, %v", c.name, buf, sparse, m.DenseLayers, m.TiedEmbeddings, c.buffers, c.sparse, c.dense, c.tied)
		}
	}
	// A key config.json leaves out takes the classes' defaults
	// (configuration_minimax_m3_vl.py:81-118, 169-182).
	m, _ := FromHFConfig([]byte(`{"model_type": "minimax_m3_vl"}`))
	want := Model{Family: "minimax_m3_vl_text", Layers: 60, Hidden: 6144, Heads: 64, KVHeads: 4, HeadDim: 128, FFN: 12288, Vocab: 200064, MaxPosition: 524288,
		Experts: 128, ExpertsPerToken: 4, ExpertFFN: 3072, SharedExperts: 1, SharedExpertFFN: 3072, RotaryPct: 1}
	got := m
	got.Vision, got.Origin, got.Release = nil, nil, nil
	tw := m.Vision.Tower
	if fmt.Sprint(got) != fmt.Sprint(want) || tw.Layers != 32 || tw.Hidden != 1280 || tw.Heads != 16 || tw.FFN != 5120 ||
		*tw.Image != (Image{Size: 2016, Patch: 14, Channels: 3, TemporalPatch: 2, Merge: 2}) {
		t.Errorf("class defaults: %+v, tower %+v %+v", got, tw, *tw.Image)
	}
	for _, c := range []struct{ json, want string }{
		{m3Config(`, "layer_types": ["full_attention", "sliding_attention", "full_attention", "full_attention"]`), "layer_types[1]"},
		{m3Config(`, "mlp_layer_types": ["sparse", "dense", "sparse", "sparse"]`), "mlp_layer_types[1]"},
		{m3Config(`, "moe_layer_freq": [1, 0, 1, 1]`), "moe_layer_freq[1]"},
		{m3Config(`, "sparse_attention_config": {"sparse_attention_freq": [1, 0]}`), "sparse_attention_freq lists 2 layers"},
		{m3Config(`, "shared_intermediate_size": 0`), "shared_intermediate_size = 0"},
		{strings.Replace(m3Config(""), `"projector_hidden_size": 64`, `"projector_hidden_size": 48`, 1), "projector_hidden_size = 48"},
		{strings.Replace(m3Config(""), `"num_attention_heads": 2, "patch_size"`, `"num_attention_heads": 3, "patch_size"`, 1), "multiple of heads = 3"},
		{strings.Replace(m3Config(""), `"hidden_size": 32,`, `"hidden_size": 32, "hidden_act": "quick_gelu",`, 1), "hidden_act"},
	} {
		if _, err := FromHFConfig([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error naming %q", c.json, err, c.want)
		}
	}
	other := MustPreset("minimax-m2")
	other.BlockSparse = &BlockSparse{Heads: 2, HeadDim: 16, Layers: []int{0}}
	if err := other.Validate(); err == nil || !strings.Contains(err.Error(), "block-sparse attention (families minimax_m3_vl_text)") {
		t.Errorf("block_sparse on minimax_m2: %v", err)
	}
}

// TestMiniMaxM3Preset: MiniMax-M3 with the classes' defaults (every layer
// full attention and MoE, as the class builds without the release's
// sparse_attention_config and moe_layer_freq): its parameters as
// transformers 5.23 builds them, the HFConfig round trip, what a
// block-sparse layer caches per token beside K and V (a 5.23 forward with
// use_cache on a small bf16 model: MiniMaxM3VLSparseCacheLayer keeps
// keys and values of (batch, kv_heads, tokens, head_dim) and idx_keys of
// (batch, 1, tokens, index_head_dim), all bf16, after the prefill and
// after a decode step; a full_attention layer's DynamicLayer keeps keys and
// values only), and what is refused in words.
func TestMiniMaxM3Preset(t *testing.T) {
	m := MustPreset("minimax-m3")
	if m.ParamCount() != 448052008448 || m.Vision.ImageTokens() != 5184 {
		t.Errorf("%d parameters, %d tokens an image; transformers 5.23: 448,052,008,448, (2016/14)² / 2² = 5,184", m.ParamCount(), m.Vision.ImageTokens())
	}
	b, _ := json.Marshal(m.HFConfig())
	back, err := FromHFConfig(b)
	if err != nil || back.ParamCount() != m.ParamCount() || back.Vision.Tower.Image.Size != 2016 || back.BlockSparse != nil {
		t.Errorf("HFConfig round trip: %v, %d parameters", err, back.ParamCount())
	}
	sparse, _ := FromHFConfig([]byte(m3Config(`, "layer_types": ["full_attention", "minimax_m3_sparse", "full_attention", "minimax_m3_sparse"]`)))
	if got := sparse.BlockSparse.IndexKeyBytes(BF16); got != BF16.Size(16) {
		t.Errorf("indexer key per token per sparse layer: %v", got)
	}
	b, _ = json.Marshal(sparse.HFConfig())
	if back, err := FromHFConfig(b); err != nil || back.ParamCount() != sparse.ParamCount() || !slices.Equal(back.BlockSparse.Layers, []int{1, 3}) {
		t.Errorf("sparse HFConfig round trip: %v, %d parameters", err, back.ParamCount())
	}
	if _, err := (Training{Model: m, SeqLen: 8192, MicroBatch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") {
		t.Errorf("training: %v", err)
	}
	// vLLM's profile runs the tower, whose forward is not modelled; SGLang
	// and llama.cpp would size K and V without the indexer's keys.
	if _, err := (VLLM{MaxModelLen: 32768, TP: 8}).Carve(Inference{Model: m, TP: 8}, mustGPU("H200")); err == nil || !strings.Contains(err.Error(), "tower's forward is not modelled yet") {
		t.Errorf("vLLM: %v", err)
	}
	if _, err := (SGLang{}).Carve(Inference{Model: sparse}, mustGPU("H200")); err == nil || !strings.Contains(err.Error(), "block-sparse attention layers") {
		t.Errorf("SGLang, sparse layers: %v", err)
	}
	if _, err := (LlamaCpp{}).KVCache(sparse); err == nil || !strings.Contains(err.Error(), "block-sparse attention layers") {
		t.Errorf("llama.cpp, sparse layers: %v", err)
	}
	if _, err := (LlamaCpp{}).KVCache(MustPreset("minimax-text-01")); err == nil || !strings.Contains(err.Error(), "lightning attention state") {
		t.Errorf("llama.cpp, lightning layers: %v", err)
	}
}

// TestMiniMaxM3BlockSparseTraining: what a training step of the language
// model needs of its block-sparse layers — the blocks' size and the
// blocks kept, from either spelling (configuration_minimax_m3_vl.py:
// 113-114, 127-136) and written back; a block-sparse layer a block kind of
// its own (its indexer's parameters are the other layers' too otherwise);
// the indexer's parameters without a gradient (its only output is int64
// block indices; a 5.23 trace's optimizer states leave them out).
func TestMiniMaxM3BlockSparseTraining(t *testing.T) {
	kinds := `, "layer_types": ["full_attention", "minimax_m3_sparse", "full_attention", "minimax_m3_sparse"], "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"]`
	for _, c := range []struct {
		name, extra string
		block, topk int
	}{
		{"the flat keys", kinds + `, "index_block_size": 16, "index_topk_blocks": 4`, 16, 4},
		{"sparse_attention_config's names", kinds + `, "sparse_attention_config": {"sparse_block_size": 32, "sparse_topk_blocks": 8}`, 32, 8},
		{"the class's defaults (zero)", kinds, 0, 0},
	} {
		m, err := FromHFConfig([]byte(`{"model_type": "minimax_m3_vl_text", ` + m3Text + c.extra + `}`))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		s := m.BlockSparse
		if s.BlockSize != c.block || s.TopKBlocks != c.topk {
			t.Errorf("%s: block_size %d, topk_blocks %d; want %d, %d", c.name, s.BlockSize, s.TopKBlocks, c.block, c.topk)
		}
		src, _ := json.Marshal(m.HFConfig())
		back, err := FromHFConfig(src)
		if err != nil || back.BlockSparse.BlockSize != s.BlockSize || back.BlockSparse.TopKBlocks != s.TopKBlocks {
			t.Errorf("%s: written and read back %+v, %v; want %+v", c.name, back.BlockSparse, err, s)
		}
		if m.blockKind(1) == m.blockKind(2) || m.blockKind(1) != m.blockKind(3) {
			t.Errorf("%s: block kinds %d %d %d of layers 1-3 (sparse, full, sparse MoE)", c.name, m.blockKind(1), m.blockKind(2), m.blockKind(3))
		}
		r := resolved{m: m.Normalize()}
		indexer, trained := 0, 0
		for _, ts := range m.Tensors() {
			if strings.Contains(ts.Name, ".indexer.") {
				indexer++
				if r.trains(ts) {
					trained++
				}
			}
		}
		if indexer != 8 || trained != 0 {
			t.Errorf("%s: %d indexer tensors, %d of them trained; want 8 (two layers' q_proj, k_proj, q_norm, k_norm), none", c.name, indexer, trained)
		}
	}
}

// TestBlockSparseBounds: model.block_sparse's values out of range are
// refused naming the field and the range, before anything is sized.
func TestBlockSparseBounds(t *testing.T) {
	base := MustPreset("minimax-m3")
	base.BlockSparse = &BlockSparse{Heads: 4, HeadDim: 128, Layers: []int{1, 3}}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*BlockSparse)
		want string
	}{
		{"negative block", func(s *BlockSparse) { s.BlockSize = -1 }, "block_size = -1"},
		{"huge block", func(s *BlockSparse) { s.BlockSize = 1 << 40 }, "must be in [0, 67108864]"},
		{"huge top-k", func(s *BlockSparse) { s.TopKBlocks = 1 << 40 }, "topk_blocks = 1099511627776"},
		{"no heads", func(s *BlockSparse) { s.Heads = 0 }, "model.block_sparse: heads = 0"},
		{"layers out of order", func(s *BlockSparse) { s.Layers = []int{3, 1} }, "model.block_sparse.layers[1] = 1"},
	} {
		m := base.clone()
		c.edit(m.BlockSparse)
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
