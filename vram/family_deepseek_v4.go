package vram

import (
	"fmt"
	"slices"
)

// DeepSeek-V4 (transformers 5.23 models/deepseek_v4/modeling_deepseek_v4.py;
// configuration_deepseek_v4.py): multi-query attention with one key-value
// head read as key and value, a low-rank q, learned per-head sinks and a
// grouped low-rank output projection (DeepseekV4Attention, l.781-810); a
// compressor beside it in the CSA layers (with a lightning indexer) and
// the HCA layers (l.373-713); manifold-constrained hyper-connections,
// hc_mult residual streams mixed around every attention and MLP
// (DeepseekV4HyperConnection, l.940-952) and collapsed once before the
// final norm (DeepseekV4HyperHead, l.1004-1011); and a mixture of experts
// in every layer — a router whose first layers choose experts by a frozen
// token-id table (DeepseekV4HashRouter, l.1109-1117) and whose others
// take the top k of the scores plus a correction bias (l.1080-1088),
// transformers 5's fused experts, and one shared expert of
// moe_intermediate_size (l.1131-1137). The block's shape is
// Model.Compressed; transformers' forward of it is refused
// (resolveCompressed), a serving engine's is compressedBlock, and the
// serving engines size its cache with their own pools. A key config.json leaves out takes the class's
// default (configuration_deepseek_v4.py:128-180); lines cited are
// modeling_deepseek_v4.py's (l.N) and the configuration's (config l.N).
// deepseekV4ModelType is the family's model_type, for the engines that
// name it.
const deepseekV4ModelType = "deepseek_v4"

func init() {
	register(&family{
		name: deepseekV4ModelType, source: "transformers/models/deepseek_v4/modeling_deepseek_v4.py (transformers 5.23.0)",
		// The router's scoring_func is sqrtsoftplus (config l.140), not a
		// sigmoid; sigmoid_topk_norm is the nearest the engine names (a
		// score, the top k with a correction bias, renormalized, scaled):
		// a serving engine's fused router keeps [tokens, k] weights
		// either way.
		defaults:        Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Router: "sigmoid_topk_norm"},
		latentAttention: true, // q_lora_rank: the low-rank q (q_a_proj, q_a_norm, q_b_proj)
		indexer:         true, // index_n_heads, index_head_dim: the CSA layers' indexer
		compressed:      true,
		servingOnly:     "its modeling code is transformers 5's (grouped_mm experts, hyper-connected residual streams, compressed attention with its own cache layers), which the training rules do not follow yet",
		only5:           true,
		// _supports_flash_attn, _supports_sdpa and _supports_flex_attn are
		// False (l.1225-1227): head_dim 512 and the sinks.
		attention: []string{"eager"},
		// A serving engine's forward of one layer (compressed.go).
		block:      compressedBlock,
		fromConfig: readDeepseekV4,
		toConfig:   writeDeepseekV4,
		check:      checkDeepseekV4,
		tensors:    deepseekV4Tensors,
		buffers:    deepseekV4Buffers,
		storedOnly: deepseekV4Stored,
		// DeepSeek-V4-Flash: DeepseekV4Config's defaults, which are
		// V4-Flash's (the class's docstring checkpoint is
		// DeepSeek-V4-Flash-Base, config l.38; DeepseekV4GroupedLinear's
		// docstring gives V4-Flash's 64 heads of 512, 8 output groups of
		// 1024 and hidden 4096, l.326-330), but for the layer kinds: the
		// class's fallback (three HCA layers, then CSA and HCA by turns,
		// config l.269-274) is, its own comment says, V4-Pro's, while the
		// Flash checkpoint's config.json lists compress_ratios [0, 0, 4,
		// 128, 4, …, 128, 4] and a 0 for its MTP layer: two sliding-window
		// layers, then CSA at the even layers and HCA at the odd ones (as
		// DeepSeek-V4-Flash's model card and the config copies of
		// third-party engines give it; transformers reads compress_ratios,
		// config l.267-268). 284,332,230,231 parameters as transformers
		// 5.23 builds it on the meta device, with the checkpoint's one MTP
		// layer stored (deepseekV4Stored). Released in fp8 with fp4
		// experts (its quantization_config's expert_dtype, config
		// l.247-255), which the catalog does not model: it stores bf16
		// here. V4-Pro is not in the catalog: transformers' source gives
		// only its heads, output groups and hidden size (l.328-330).
		presets: map[string]Preset{
			"deepseek-v4-flash": {deepseekV4Flash(), hf("deepseek-ai/DeepSeek-V4-Flash")},
		},
	})
}

// deepseekV4Defaults are DeepseekV4Config's defaults (config l.128-180),
// the layer kinds its __post_init__ falls back to (l.269-281) for layers
// layers.
func deepseekV4Defaults(layers int) Model {
	m := Model{Layers: layers, Hidden: 4096, Heads: 64, KVHeads: 1, HeadDim: 512, FFN: 2048, Vocab: 129280, MaxPosition: 1048576,
		Experts: 256, ExpertsPerToken: 6, SharedExperts: 1, ExpertFFN: 2048, SharedExpertFFN: 2048,
		QLoRARank: 1024, IndexHeads: 64, IndexHeadDim: 128, SlidingWindow: 128, RotaryPct: 64.0 / 512, MTPLayers: 1}
	c := &Compressed{CSARate: 4, HCARate: 128, Streams: 4, OGroups: 8, OLoRARank: 1024}
	for i := range layers {
		if i >= 2 && (i-2)%2 == 1 {
			c.CSA = append(c.CSA, i)
		} else {
			c.HCA = append(c.HCA, i)
		}
	}
	for i := range min(3, layers) {
		c.Hash = append(c.Hash, i)
	}
	m.Compressed = c
	return m
}

// deepseekV4Flash is the class's defaults with the Flash checkpoint's
// layer kinds: layers 0 and 1 sliding only, then CSA at even layers and
// HCA at odd ones.
func deepseekV4Flash() Model {
	m := deepseekV4Defaults(43)
	m.Name = "deepseek-ai/DeepSeek-V4-Flash"
	c := m.Compressed
	c.CSA, c.HCA = nil, nil
	for i := 2; i < m.Layers; i++ {
		if i%2 == 0 {
			c.CSA = append(c.CSA, i)
		} else {
			c.HCA = append(c.HCA, i)
		}
	}
	return m
}

// readDeepseekV4 reads a config.json as DeepseekV4Config does: a missing
// key takes the class's default; attribute_map's names (num_local_experts
// for n_routed_experts, intermediate_size for moe_intermediate_size, config
// l.104-107) win over the class's when both are given, as transformers
// 5.23 resolves them. num_key_value_heads, n_shared_experts and
// attention_bias build nothing: kv_proj is one head (l.790, 801), the
// shared expert is one DeepseekV4MLP (l.1137) and no attention projection
// has a bias.
func readDeepseekV4(c *hfReader, m *Model) {
	d := deepseekV4Defaults(c.optInt("num_hidden_layers", 43))
	d.Family, d.Name = m.Family, m.Name
	*m = d
	m.Hidden, m.Heads = c.optInt("hidden_size", m.Hidden), c.optInt("num_attention_heads", m.Heads)
	m.HeadDim, m.Vocab = c.optInt("head_dim", m.HeadDim), c.optInt("vocab_size", m.Vocab)
	m.MaxPosition = c.optInt("max_position_embeddings", m.MaxPosition)
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
	if c.optBool("mlp_bias", false) {
		m.Bias = BiasMLPOnly // the shared expert's three projections (l.1026-1028)
	}
	m.Experts = c.optInt("num_local_experts", c.optInt("n_routed_experts", m.Experts))
	m.ExpertsPerToken = c.optInt("num_experts_per_tok", m.ExpertsPerToken)
	m.ExpertFFN = c.optInt("intermediate_size", c.optInt("moe_intermediate_size", m.ExpertFFN))
	m.FFN, m.SharedExpertFFN = m.ExpertFFN, m.ExpertFFN
	m.QLoRARank = c.optInt("q_lora_rank", m.QLoRARank)
	m.IndexHeads, m.IndexHeadDim = c.optInt("index_n_heads", m.IndexHeads), c.optInt("index_head_dim", m.IndexHeadDim)
	m.SlidingWindow = c.optInt("sliding_window", m.SlidingWindow)
	m.MTPLayers = c.optInt("num_nextn_predict_layers", m.MTPLayers)
	m.RotaryPct = c.deepseekV4Rotary(m.HeadDim)
	cm := m.Compressed
	cm.Streams, cm.OGroups, cm.OLoRARank = c.optInt("hc_mult", cm.Streams), c.optInt("o_groups", cm.OGroups), c.optInt("o_lora_rank", cm.OLoRARank)
	c.deepseekV4Rates(cm)
	c.deepseekV4Kinds(cm, m.Layers)
	c.deepseekV4Hash(cm, m.Layers)
	// The shared expert and the experts apply ACT2FN[hidden_act] to the
	// clamped gate (l.1029-1035, 1069-1076); the router ACT2FN[scoring_func]
	// (l.1086), which has sqrtsoftplus and sigmoid, not softmax.
	if act := c.optString("hidden_act", "silu"); act != "silu" {
		c.fail(fmt.Sprintf("hidden_act %q: deepseek_v4's clamped SwiGLU is modelled with silu only", act))
	}
	if s := c.optString("scoring_func", "sqrtsoftplus"); s != "sqrtsoftplus" && s != "sigmoid" {
		c.fail(fmt.Sprintf("scoring_func %q: transformers 5.23 builds the router with ACT2FN[scoring_func], which has sqrtsoftplus and sigmoid (not softmax)", s))
	}
}

// deepseekV4Rotary is the fraction of head_dim the rotary embeddings
// rotate: partial_rotary_factor, else the legacy qk_rope_head_dim over
// head_dim, else 64 / 512 (config l.285-291); a config already nested into
// rope_parameters' main and compress (as transformers 5 saves it, config
// l.302-304) gives each its own, 1 where it names none (l.130).
func (c *hfReader) deepseekV4Rotary(headDim int) float64 {
	if rp, ok := c.c["rope_parameters"].(map[string]any); ok {
		main, mok := rp["main"].(map[string]any)
		comp, cok := rp["compress"].(map[string]any)
		if mok && cok {
			f := func(d map[string]any) any {
				if v, ok := d["partial_rotary_factor"]; ok && v != nil {
					return v
				}
				return 1.0
			}
			mf, cf := f(main), f(comp)
			v, isNum := mf.(float64)
			if !isNum || mf != cf {
				c.fail(fmt.Sprintf("rope_parameters: main's partial_rotary_factor %v and compress's %v: one rotary width for both is modelled", mf, cf))
				return 0
			}
			return v
		}
	}
	if v, ok := c.c["partial_rotary_factor"]; ok && v != nil {
		return c.optFloat("partial_rotary_factor", 0)
	}
	if v, ok := c.c["qk_rope_head_dim"]; ok && v != nil && headDim > 0 {
		return float64(c.optInt("qk_rope_head_dim", 0)) / float64(headDim)
	}
	return 64.0 / 512
}

// deepseekV4Rates reads compress_rates (the class's {4, 128} when absent,
// config l.258-259), then the legacy compress_rate_csa and
// compress_rate_hca over it (l.260-263). A dict must name both kinds:
// DeepseekV4CSACache builds on DeepseekV4HCACache, which reads the HCA
// rate (l.183, 276-277).
func (c *hfReader) deepseekV4Rates(cm *Compressed) {
	if raw, ok := c.c["compress_rates"]; ok && raw != nil {
		d, ok := raw.(map[string]any)
		if !ok {
			c.fail("compress_rates must be a dict of compressed_sparse_attention and heavily_compressed_attention rates")
			return
		}
		sub := hfReader{c: d}
		cm.CSARate, cm.HCARate = sub.int("compressed_sparse_attention"), sub.int("heavily_compressed_attention")
		if sub.err != nil {
			c.fail("compress_rates: " + sub.err.Error())
			return
		}
	}
	cm.CSARate = c.optInt("compress_rate_csa", cm.CSARate)
	cm.HCARate = c.optInt("compress_rate_hca", cm.HCARate)
}

// deepseekV4Kinds reads the layer kinds: layer_types, else the legacy
// per-layer compress_ratios (0, 4 and 128 only: _COMPRESS_RATIO_TO_LAYER_TYPE,
// config l.28-32), else the class's fallback (kept); either list is cut
// to num_hidden_layers and may not be shorter (config l.265-275, 227-233).
func (c *hfReader) deepseekV4Kinds(cm *Compressed, layers int) {
	key, raw := "layer_types", c.optList("layer_types")
	if raw == nil {
		key, raw = "compress_ratios", c.optList("compress_ratios")
	}
	if raw == nil || c.err != nil {
		return
	}
	if len(raw) < layers {
		c.fail(fmt.Sprintf("%s lists %d layers for num_hidden_layers = %d", key, len(raw), layers))
		return
	}
	ratio := map[float64]string{0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}
	cm.CSA, cm.HCA = nil, nil
	for i, v := range raw[:layers] {
		if f, ok := v.(float64); ok && key == "compress_ratios" {
			v = ratio[f]
		}
		switch v {
		case "sliding_attention":
		case "compressed_sparse_attention":
			cm.CSA = append(cm.CSA, i)
		case "heavily_compressed_attention":
			cm.HCA = append(cm.HCA, i)
		default:
			c.fail(fmt.Sprintf("%s[%d] = %v: want sliding_attention, compressed_sparse_attention or heavily_compressed_attention (compress_ratios: 0, 4 or 128)", key, i, raw[i]))
			return
		}
	}
}

// deepseekV4Hash reads the hash-routed layers: mlp_layer_types (cut to
// num_hidden_layers), else the first num_hash_layers, 3 by default
// (config l.277-281).
func (c *hfReader) deepseekV4Hash(cm *Compressed, layers int) {
	raw := c.optList("mlp_layer_types")
	if raw == nil {
		n := min(c.optInt("num_hash_layers", 3), layers)
		cm.Hash = nil
		for i := range n {
			cm.Hash = append(cm.Hash, i)
		}
		return
	}
	if len(raw) < layers {
		c.fail(fmt.Sprintf("mlp_layer_types lists %d layers for num_hidden_layers = %d", len(raw), layers))
		return
	}
	cm.Hash = nil
	for i, v := range raw[:layers] {
		switch v {
		case "hash_moe":
			cm.Hash = append(cm.Hash, i)
		case "moe":
		default:
			c.fail(fmt.Sprintf("mlp_layer_types[%d] = %v: want hash_moe or moe", i, v))
			return
		}
	}
}

// writeDeepseekV4 writes the keys that make transformers build m: every
// layer's kind, the rates, the rotary fraction (one for both rotary
// embeddings). intermediate_size is left out: attribute_map would take it
// for moe_intermediate_size.
func writeDeepseekV4(m Model, c map[string]any) {
	writeCommonConfig(m, c)
	delete(c, "intermediate_size")
	cm := m.Compressed
	c["moe_intermediate_size"], c["n_routed_experts"], c["num_experts_per_tok"] = m.ExpertFFN, m.Experts, m.ExpertsPerToken
	c["q_lora_rank"], c["index_n_heads"], c["index_head_dim"] = m.QLoRARank, m.IndexHeads, m.IndexHeadDim
	c["sliding_window"], c["partial_rotary_factor"], c["mlp_bias"] = m.SlidingWindow, m.RotaryPct, m.Bias == BiasMLPOnly
	c["num_nextn_predict_layers"] = m.MTPLayers
	if cm == nil {
		return
	}
	c["hc_mult"], c["o_groups"], c["o_lora_rank"] = cm.Streams, cm.OGroups, cm.OLoRARank
	c["compress_rates"] = map[string]any{"compressed_sparse_attention": cm.CSARate, "heavily_compressed_attention": cm.HCARate}
	kinds, mlp := make([]string, m.Layers), make([]string, m.Layers)
	for i := range kinds {
		kinds[i], mlp[i] = cm.kind(i), "moe"
		if slices.Contains(cm.Hash, i) {
			mlp[i] = "hash_moe"
		}
	}
	c["layer_types"], c["mlp_layer_types"] = kinds, mlp
}

// kind is layer i's layer_types entry.
func (c *Compressed) kind(i int) string {
	switch {
	case slices.Contains(c.CSA, i):
		return "compressed_sparse_attention"
	case slices.Contains(c.HCA, i):
		return "heavily_compressed_attention"
	}
	return "sliding_attention"
}

// checkDeepseekV4 is what the modeling code builds: one key-value head, a
// low-rank q, the indexer, groups that split the heads, and the MLP
// checkDeepseekV4MoE says.
func checkDeepseekV4(m Model) error {
	rope := int(float64(m.HeadDim) * m.RotaryPct)
	switch {
	case m.Compressed == nil:
		return fmt.Errorf("model: deepseek_v4 needs model.compressed (its layer kinds, compress rates, hc_mult, o_groups and o_lora_rank)")
	case m.KVHeads != 1:
		return fmt.Errorf("model.kv_heads = %d: deepseek_v4's attention has one key-value head (kv_proj to head_dim, l.790, 801)", m.KVHeads)
	case m.QLoRARank < 1:
		return fmt.Errorf("model.q_lora_rank = %d: deepseek_v4's q is always low-rank (q_a_proj, q_a_norm, q_b_proj, l.797-799)", m.QLoRARank)
	case m.KVLoRARank != 0 || m.QKNopeDim != 0 || m.QKRopeDim != 0 || m.VHeadDim != 0:
		return fmt.Errorf("model: kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim describe latent attention, which deepseek_v4 has not: its rotary part is rotary_pct of head_dim")
	case m.IndexHeads < 1 || m.IndexHeadDim < 1:
		return fmt.Errorf("model: deepseek_v4 needs index_heads and index_head_dim ≥ 1 (index_n_heads, index_head_dim: the CSA layers' indexer)")
	case m.IndexHeadDim < rope:
		return fmt.Errorf("model.index_head_dim = %d: deepseek_v4's indexer rotates the last rotary_pct × head_dim = %d of it, so it must be at least that wide", m.IndexHeadDim, rope)
	case m.Heads*m.HeadDim%m.Compressed.OGroups != 0:
		return fmt.Errorf("model.compressed.o_groups = %d must divide heads × head_dim = %d (the grouped output projection, l.803-805, 881)", m.Compressed.OGroups, m.Heads*m.HeadDim)
	case m.SlidingWindow < 1 || m.AttentionChunk != 0 || m.GlobalEvery != 0:
		return fmt.Errorf("model: deepseek_v4 attends over a sliding window of sliding_window ≥ 1 tokens in every layer (no attention_chunk, no global_every)")
	case m.MLP != "swiglu" || m.Norm != "rmsnorm" || m.NormPosition != "" || m.QKNorm != "" || m.Position != "rope":
		return fmt.Errorf("model: deepseek_v4 is pre-norm RMSNorm blocks with a clamped SwiGLU, rotary positions and no q/k norm (mlp swiglu, norm rmsnorm, position rope)")
	}
	return checkDeepseekV4MoE(m)
}

// checkDeepseekV4MoE: a mixture of experts in every layer, with one shared
// expert of moe_intermediate_size (DeepseekV4MLP reads intermediate_size,
// attribute_map's moe_intermediate_size, l.1025), and no biases but the
// shared expert's.
func checkDeepseekV4MoE(m Model) error {
	switch {
	case m.Experts < 1 || m.ExpertsPerToken < 1:
		return fmt.Errorf("model: deepseek_v4 needs experts and experts_per_token ≥ 1")
	case m.SharedExperts != 1 || m.SharedExpertFFN != m.ExpertFFN || m.FFN != m.ExpertFFN || m.DenseLayers != 0 || m.MoEEvery > 1:
		return fmt.Errorf("model: deepseek_v4 has experts in every layer (dense_layers 0, moe_every 0) and one shared expert as wide as each expert (shared_experts 1, ffn = shared_expert_ffn = expert_ffn): n_shared_experts builds nothing")
	case m.Bias != BiasNone && m.Bias != BiasMLPOnly:
		return fmt.Errorf("model.bias %q: deepseek_v4's only biases are the shared expert's (mlp_bias: mlp_only)", m.Bias)
	}
	return nil
}

// deepseekV4Tensors lists the model in registration order: the embedding;
// each layer's attention, MLP, two norms and two hyper-connections
// (DeepseekV4DecoderLayer, l.1168-1173); the final norm, the
// hyper-connection head and the output layer (l.1316-1323, 1468).
func deepseekV4Tensors(m Model, l *tensorList) {
	h, v := int64(m.Hidden), int64(m.Vocab)
	l.add("model.embed_tokens.weight", "embedding", v, h)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("model.layers.%d.", i)
		deepseekV4Attention(m, l, p+"self_attn.")
		if m.Compressed != nil {
			deepseekV4Compressor(m, l, p+"self_attn.compressor.", m.Compressed.kind(i))
		}
		deepseekV4MoE(m, l, p+"mlp.")
		l.norm(p+"input_layernorm", false, h)
		l.norm(p+"post_attention_layernorm", false, h)
		hyperConnection(m, l, p+"attn_hc.", "fn", "base", "scale")
		hyperConnection(m, l, p+"ffn_hc.", "fn", "base", "scale")
	}
	l.headSide()
	l.norm("model.norm", false, h)
	hyperHead(m, l, "model.hc_head.hc_")
	lmHead(m, l, "lm_head", "score")
}

// deepseekV4Attention is one layer's attention under p (l.797-807; sinks,
// an nn.Parameter of the module itself, comes first in named_parameters):
// q_a_proj to q_lora_rank, its norm, q_b_proj to every head (q_b_norm has
// no weight), kv_proj to one head and its norm, o_a_proj from each of
// o_groups groups of heads to o_lora_rank (one nn.Linear weight the groups
// share the rows of, l.314-343), o_b_proj to hidden.
func deepseekV4Attention(m Model, l *tensorList, p string) {
	h, q, hd := int64(m.Hidden), int64(m.Heads)*int64(m.HeadDim), int64(m.HeadDim)
	l.add(p+"sinks", "other", int64(m.Heads))
	r := int64(m.QLoRARank)
	l.linear(p+"q_a_proj", "q_proj", h, r, false)
	l.norm(p+"q_a_norm", false, r)
	l.linear(p+"q_b_proj", "q_proj", r, q, false)
	l.linear(p+"kv_proj", "k_proj", h, hd, false)
	l.norm(p+"kv_norm", false, hd)
	var g, o int64 = 1, 1
	if c := m.Compressed; c != nil {
		g, o = int64(c.OGroups), int64(c.OLoRARank)
	}
	l.linear(p+"o_a_proj", "o_proj", q/g, g*o, false)
	l.linear(p+"o_b_proj", "o_proj", g*o, h, false)
}

// deepseekV4Compressor is a CSA or HCA layer's compressor under p (none in
// a sliding layer, l.808-810): position_bias over one window, kv_proj and
// gate_proj from hidden (two series, 2 × head_dim, in a CSA layer: l.627-629;
// one in an HCA layer: l.399-401), kv_norm, and a CSA layer's indexer — the
// same at index_head_dim, then q_b_proj from the q latent to its heads
// and the scorer's weights_proj (l.510-516). The projections from hidden
// ship unquantized in the fp8 checkpoints (_keep_in_fp32_modules,
// l.1259-1265): the router's role keeps quantization off them.
func deepseekV4Compressor(m Model, l *tensorList, p, kind string) {
	c, h := m.Compressed, int64(m.Hidden)
	series, rate := int64(1), int64(c.HCARate)
	switch kind {
	case "sliding_attention":
		return
	case "compressed_sparse_attention":
		series, rate = 2, int64(c.CSARate)
	}
	compress := func(p string, d int64) {
		l.add(p+"position_bias", "other", rate, series*d)
		l.linear(p+"kv_proj", "router", h, series*d, false)
		l.linear(p+"gate_proj", "router", h, series*d, false)
		l.norm(p+"kv_norm", false, d)
	}
	compress(p, int64(m.HeadDim))
	if series == 1 {
		return
	}
	n, d := int64(m.IndexHeads), int64(m.IndexHeadDim)
	compress(p+"indexer.", d)
	l.linear(p+"indexer.q_b_proj", "q_proj", int64(m.QLoRARank), n*d, false)
	l.linear(p+"indexer.scorer.weights_proj", "router", h, n, false)
}

// deepseekV4MoE is one layer's MoE block under p (l.1135-1137): the router
// (its table or bias is a buffer), the fused experts, the shared expert.
func deepseekV4MoE(m Model, l *tensorList, p string) {
	l.linear(p+"gate", "router", int64(m.Hidden), int64(m.Experts), false)
	fusedExperts(m, l, p+"experts.")
	mlpGated(m, l, p+"shared_experts.", int64(m.ExpertFFN), -1)
}

// hyperConnection adds one mHC mapping under p: the projection of the
// hc_mult streams (flattened, hc_mult × hidden) to the pre, post and comb
// weights ((2 + hc_mult) × hc_mult), their biases and three scales
// (l.948-952), under the names given (the checkpoint's differ).
func hyperConnection(m Model, l *tensorList, p, fn, base, scale string) {
	n := int64(1)
	if m.Compressed != nil {
		n = int64(m.Compressed.Streams)
	}
	l.add(p+fn, "other", (2+n)*n, n*int64(m.Hidden))
	l.add(p+base, "other", (2+n)*n)
	l.add(p+scale, "other", 3)
}

// hyperHead adds the final stream collapse under p: hc_fn, hc_base and
// hc_scale (l.1009-1011).
func hyperHead(m Model, l *tensorList, p string) {
	n := int64(1)
	if m.Compressed != nil {
		n = int64(m.Compressed.Streams)
	}
	l.add(p+"fn", "other", n, n*int64(m.Hidden))
	l.add(p+"base", "other", n)
	l.add(p+"scale", "other", 1)
}

// deepseekV4Buffers are the rotary embeddings' buffers — the model's and
// each compressor's and indexer's, every one built for both rope kinds
// (main, compress) with inv_freq and original_inv_freq of half the rotated
// width, rounded up (arange(0, dim, 2), l.99-110, 137) — and each router's:
// a hash layer's tid2eid table (vocab × top-k, int64, l.1117), another's
// fp32 e_score_correction_bias (l.1088).
func deepseekV4Buffers(m Model, b *bufferList) {
	half := (int64(float64(m.HeadDim)*m.RotaryPct) + 1) / 2
	rotary := func(p string, layer int) {
		for _, k := range []string{"main", "compress"} {
			b.add(p+"rotary_emb."+k+"_inv_freq", layer, FP32, half)
			b.add(p+"rotary_emb."+k+"_original_inv_freq", layer, FP32, half)
		}
	}
	c := m.Compressed
	for i := 0; i < m.Layers && c != nil; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		if k := c.kind(i); k != "sliding_attention" {
			rotary(p+"self_attn.compressor.", i)
			if k == "compressed_sparse_attention" {
				rotary(p+"self_attn.compressor.indexer.", i)
			}
		}
		if slices.Contains(c.Hash, i) {
			b.add(p+"mlp.gate.tid2eid", i, INT64, int64(m.Vocab), int64(m.ExpertsPerToken))
		} else {
			b.add(p+"mlp.gate.e_score_correction_bias", i, FP32, int64(m.Experts))
		}
	}
	rotary("model.", -1)
}

// deepseekV4Stored is what the checkpoint stores beside the parameters:
// each router's persistent buffer (a hash layer's tid2eid, sized as
// transformers' int64 table; another's fp32 bias), and its
// multi-token-prediction layers, which the model does not build
// (_keys_to_ignore_on_load_unexpected = [r"(^|\.)mtp\..*"], l.1266), under
// the checkpoint's own names (mtp.N., as conversion_mapping.py's
// deepseek_v4 renames read them): e_proj and h_proj from the embedding and
// the hidden state, enorm, hnorm, a final norm, a hyper-connection head,
// and one block of sliding-window attention (the 0 that ends the
// checkpoint's compress_ratios) with its hyper-connections and a
// bias-routed MoE of per-expert w1, w2, w3; it shares the embedding and the
// output layer.
func deepseekV4Stored(m Model, l *tensorList) {
	c := m.Compressed
	for i := 0; i < m.Layers && c != nil; i++ {
		l.block(i)
		p := fmt.Sprintf("model.layers.%d.mlp.gate.", i)
		if slices.Contains(c.Hash, i) {
			l.add(p+"tid2eid", "other", int64(m.Vocab), int64(m.ExpertsPerToken))
			l.ts[len(l.ts)-1].DType = INT64
		} else {
			l.add(p+"e_score_correction_bias", "bias", int64(m.Experts))
			l.ts[len(l.ts)-1].DType = FP32
		}
	}
	h := int64(m.Hidden)
	for k := 0; k < m.MTPLayers; k++ {
		l.block(m.Layers + k)
		p := fmt.Sprintf("mtp.%d.", k)
		l.linear(p+"e_proj", "other", h, h, false)
		l.linear(p+"h_proj", "other", h, h, false)
		for _, n := range []string{"enorm", "hnorm", "norm", "attn_norm", "ffn_norm"} {
			l.norm(p+n, false, h)
		}
		hyperHead(m, l, p+"hc_head_")
		hyperConnection(m, l, p, "hc_attn_fn", "hc_attn_base", "hc_attn_scale")
		hyperConnection(m, l, p, "hc_ffn_fn", "hc_ffn_base", "hc_ffn_scale")
		deepseekV4StoredBlock(m, l, p)
	}
}

// deepseekV4StoredBlock is an MTP layer's attention and MoE under the
// checkpoint's names (the renames of conversion_mapping.py's deepseek_v4,
// read backwards).
func deepseekV4StoredBlock(m Model, l *tensorList, p string) {
	h, q, hd, r := int64(m.Hidden), int64(m.Heads)*int64(m.HeadDim), int64(m.HeadDim), int64(m.QLoRARank)
	g, o := int64(m.Compressed.OGroups), int64(m.Compressed.OLoRARank)
	l.add(p+"attn.attn_sink", "other", int64(m.Heads))
	l.linear(p+"attn.wq_a", "q_proj", h, r, false)
	l.norm(p+"attn.q_norm", false, r)
	l.linear(p+"attn.wq_b", "q_proj", r, q, false)
	l.linear(p+"attn.wkv", "k_proj", h, hd, false)
	l.norm(p+"attn.kv_norm", false, hd)
	l.linear(p+"attn.wo_a", "o_proj", q/g, g*o, false)
	l.linear(p+"attn.wo_b", "o_proj", g*o, h, false)
	l.linear(p+"ffn.gate", "router", h, int64(m.Experts), false)
	l.add(p+"ffn.gate.bias", "bias", int64(m.Experts))
	l.ts[len(l.ts)-1].DType = FP32
	f := int64(m.ExpertFFN)
	for e := 0; e < m.Experts; e++ {
		start := len(l.ts)
		x := fmt.Sprintf("%sffn.experts.%d.", p, e)
		l.linear(x+"w1", "gate_proj", h, f, false)
		l.linear(x+"w2", "down_proj", f, h, false)
		l.linear(x+"w3", "up_proj", h, f, false)
		l.asExpert(start, e)
	}
	l.linear(p+"ffn.shared_experts.w1", "gate_proj", h, f, false)
	l.linear(p+"ffn.shared_experts.w2", "down_proj", f, h, false)
	l.linear(p+"ffn.shared_experts.w3", "up_proj", h, f, false)
}
