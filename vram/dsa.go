package vram

import "fmt"

// DeepSeek Sparse Attention (DSA) as transformers 5.23 builds it
// (models/deepseek_v32/modeling_deepseek_v32.py and its GLM sibling,
// models/glm_moe_dsa/modeling_glm_moe_dsa.py): DeepSeek-V3's multi-head
// latent attention whose keys a lightning indexer chooses per query — the
// index_topk earlier tokens its scores rank first — with DeepSeek-V3's
// mixture of experts, as transformers 5 keeps it (fused experts, a sigmoid
// router with an fp32 e_score_correction_bias, shared experts as one MLP).
// The families' config classes share their keys and differ in defaults; a
// key config.json leaves out takes the class's default (def: the class's
// defaults as a Model). Lines cited are modeling_deepseek_v32.py's
// (modeling l.N) and configuration_deepseek_v32.py's (config l.N); the GLM
// files repeat them with the shifts their own comments give.

// dsaIndexerTensors adds one layer's lightning indexer under p
// (DeepseekV32Indexer.__init__, modeling l.172-175): wq_b from the q
// latent to index_n_heads × index_head_dim, wk from the hidden state to
// one index_head_dim key, k_norm (an nn.LayerNorm: weight and
// bias), weights_proj to one weight per index head. transformers keeps
// weights_proj in fp32 (_keep_in_fp32_modules = ["indexer.weights_proj"],
// modeling l.664), which the fp8 quantizer adds to the modules it leaves
// alone (quantizers/base.py:273-274); DeepSeek's checkpoint stores it in
// bf16 (inference/model.py: "weights_proj in the checkpoint is stored in
// bf16") and vLLM builds it without its quant_config: the engine gives it
// the router's role, a linear layer no quantization converts (sized in the
// plan's weight dtype, not fp32).
func dsaIndexerTensors(m Model, l *tensorList, p string) {
	h, n, d := int64(m.Hidden), int64(m.IndexHeads), int64(m.IndexHeadDim)
	l.linear(p+"wq_b", "q_proj", int64(m.QLoRARank), n*d, false)
	l.linear(p+"wk", "k_proj", h, d, false)
	l.norm(p+"k_norm", true, d)
	l.linear(p+"weights_proj", "router", h, n, false)
	for i := len(l.ts) - 5; i < len(l.ts); i++ {
		l.ts[i].part = noGradPart
	}
}

// dsaRecipe is how transformers 5.23 runs both families' step: DeepSeek-V3's
// latent attention and experts as transformers 5 runs them (mla5.go,
// moe_grouped_mm.go), and a causal mask made whatever the attention
// ("allow_is_causal_skip": False, "Always force creation to account for
// causality in the indexer", modeling l.729).
func dsaRecipe(_ Model, _ libVersion) recipe {
	return recipe{groupedMM: true, latentCache: true, alwaysMasked: true}
}

// dsaAttention is one layer's attention: MLA (q_a_proj … o_proj), then
// its indexer, registered last (modeling l.358-381).
func dsaAttention(m Model, l *tensorList, p string) {
	mlaTensors(m, l, p)
	dsaIndexerTensors(m, l, p+"indexer.")
}

// dsaMLP is one layer's MLP: a dense MLP where mlp_layer_types says
// "dense", else the MoE block in its registration order
// (DeepseekV32MoE.__init__, modeling l.585-589; the choice, l.607): the
// fused experts, the router, the shared experts as one MLP of
// n_shared_experts × moe_intermediate_size.
func dsaMLP(m Model, l *tensorList, p string, layer int) {
	if !m.IsMoELayer(layer) {
		denseMLP(m, l, p, layer)
		return
	}
	fusedExperts(m, l, p+"mlp.experts.")
	l.linear(p+"mlp.gate", "router", int64(m.Hidden), int64(m.Experts), false)
	mlpGated(m, l, p+"mlp.shared_experts.", int64(m.SharedExpertFFN)*int64(m.SharedExperts), -1)
}

// dsaBuffers are the rotary embedding's inv_freq and original_inv_freq
// over qk_rope_head_dim (the config points head_dim at it, config l.132;
// modeling l.81-82) and each MoE layer's router bias (modeling l.507).
func dsaBuffers(m Model, b *bufferList) {
	rope := int64(m.QKRopeDim) / 2
	b.add("model.rotary_emb.inv_freq", -1, FP32, rope)
	b.add("model.rotary_emb.original_inv_freq", -1, FP32, rope)
	for i := m.DenseLayers; i < m.Layers; i++ {
		b.add(fmt.Sprintf("model.layers.%d.mlp.gate.e_score_correction_bias", i), i, FP32, int64(m.Experts))
	}
}

// dsaMTP is what the checkpoint stores that the model does not build:
// every router's fp32 e_score_correction_bias (a persistent buffer), and
// the multi-token-prediction layers after the blocks, which the model
// ignores (_keys_to_ignore_on_load_unexpected, modeling l.663)
// — each a block like the last one, its attention with an indexer, its
// routed experts one module each as the checkpoint keeps them, plus
// DeepSeek-V3's enorm, hnorm, eh_proj and its own embedding and output
// layer (shared_head).
func dsaMTP(m Model, l *tensorList) { mtpLayers(m, l, dsaAttention) }

// dsaPreset is a flagship: its class's defaults def, named, with its
// checkpoint's mtp multi-token-prediction layers and its release.
func dsaPreset(def Model, name string, mtp int, rel *Release) Model {
	def.Name, def.MTPLayers, def.Release = name, mtp, rel
	return def
}

// readDSAConfig reads the keys DeepseekV32Config and GlmMoeDsaConfig
// share (config l.87-126; configuration_glm_moe_dsa.py:92-131 declares
// the same fields), a missing key taking def's value.
func readDSAConfig(c *hfReader, m *Model, def Model) {
	m.Layers, m.Hidden = c.optInt("num_hidden_layers", def.Layers), c.optInt("hidden_size", def.Hidden)
	m.Heads, m.FFN = c.optInt("num_attention_heads", def.Heads), c.optInt("intermediate_size", def.FFN)
	// num_key_value_heads only sets num_key_value_groups, which must be 1:
	// expand_kv makes a key and a value for every head (modeling l.383-400).
	m.KVHeads = m.Heads
	m.Vocab, m.MaxPosition = c.optInt("vocab_size", def.Vocab), c.optInt("max_position_embeddings", def.MaxPosition)
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
	if c.optBool("attention_bias", false) {
		m.Bias = BiasQKVOnly
	}
	// attribute_map: num_local_experts is n_routed_experts; __post_init__
	// lets a num_experts key override it (config l.85, 141-142).
	m.Experts = c.optInt("n_routed_experts", c.optInt("num_local_experts", def.Experts))
	m.Experts = c.optInt("num_experts", m.Experts)
	m.ExpertsPerToken = c.optInt("num_experts_per_tok", def.ExpertsPerToken)
	m.SharedExperts, m.ExpertFFN = c.optInt("n_shared_experts", def.SharedExperts), c.optInt("moe_intermediate_size", def.ExpertFFN)
	// q_lora_rank is an int (the strict dataclass refuses null): the
	// attention always builds q_a_proj (modeling l.358).
	m.QLoRARank, m.KVLoRARank = c.optIntOrNone("q_lora_rank", def.QLoRARank), c.optInt("kv_lora_rank", def.KVLoRARank)
	// head_dim is overwritten with qk_rope_head_dim (config l.132): not read.
	m.QKRopeDim, m.QKNopeDim = c.optInt("qk_rope_head_dim", def.QKRopeDim), c.optInt("qk_nope_head_dim", def.QKNopeDim)
	m.VHeadDim, m.HeadDim = c.optInt("v_head_dim", def.VHeadDim), m.QKNopeDim+m.QKRopeDim
	m.IndexHeads, m.IndexHeadDim = c.optInt("index_n_heads", def.IndexHeads), c.optInt("index_head_dim", def.IndexHeadDim)
	// mlp_layer_types, else the first first_k_dense_replace layers dense
	// (config l.134-136).
	m.DenseLayers = min(c.optInt("first_k_dense_replace", def.DenseLayers), m.Layers)
	if c.optList("mlp_layer_types") != nil {
		m.DenseLayers = mlpLayerTypes(c, m.Layers)
	}
	m.MTPLayers = c.optInt("num_nextn_predict_layers", 0)
	if !c.optBool("norm_topk_prob", true) && c.err == nil {
		c.fail("norm_topk_prob false: the sigmoid router without renormalization is not modelled")
	}
}

// writeDSAConfig writes the keys that make transformers build m.
func writeDSAConfig(m Model, c map[string]any) {
	writeCommonConfig(m, c)
	delete(c, "head_dim")
	c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"] = m.Experts, m.ExpertsPerToken, m.SharedExperts
	c["moe_intermediate_size"], c["attention_bias"] = m.ExpertFFN, m.Bias == BiasQKVOnly
	c["q_lora_rank"], c["kv_lora_rank"] = m.QLoRARank, m.KVLoRARank
	c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"] = m.QKNopeDim, m.QKRopeDim, m.VHeadDim
	c["index_n_heads"], c["index_head_dim"] = m.IndexHeads, m.IndexHeadDim
	c["first_k_dense_replace"], c["n_group"], c["topk_group"], c["norm_topk_prob"] = m.DenseLayers, 1, 1, true
}

// checkDSA is the rules both families' modeling code sets.
func checkDSA(name string, m Model) error {
	switch {
	case m.QLoRARank < 1 || m.KVLoRARank < 1 || m.QKNopeDim < 1 || m.QKRopeDim < 1 || m.VHeadDim < 1:
		return fmt.Errorf("model: %s needs q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim ≥ 1 (its attention always builds q_a_proj)", name)
	case m.IndexHeads < 1 || m.IndexHeadDim < 1:
		return fmt.Errorf("model: %s needs index_heads and index_head_dim ≥ 1 (index_n_heads, index_head_dim: every layer's indexer)", name)
	case m.IndexHeadDim < m.QKRopeDim:
		return fmt.Errorf("model.index_head_dim = %d: %s's indexer rotates the first qk_rope_head_dim = %d of it, so it must be at least that wide", m.IndexHeadDim, name, m.QKRopeDim)
	case m.Experts < 1 || m.ExpertsPerToken < 1:
		return fmt.Errorf("model: %s needs experts and experts_per_token ≥ 1", name)
	case m.Bias != BiasNone && m.Bias != BiasQKVOnly:
		return fmt.Errorf("model.bias %q: %s's attention_bias puts biases on q_a_proj, kv_a_proj_with_mqa and o_proj, or none", m.Bias, name)
	}
	return nil
}

// dsaIndexKeyBytes is one token's indexer key in a serving engine's cache,
// per layer: index_head_dim fp8 values and one fp32 scale for each 128 of
// them, stored as uint8 whatever the KV cache dtype (vLLM's Indexer:
// quant_block_size 128 and DeepseekV32IndexerCache(head_dim + head_dim //
// quant_block_size * 4, torch.uint8), model_executor/models/deepseek_v2.py
// l.770-772 in 0.11.0, l.724 and 731-735 in 0.33.0; SGLang 0.5.23's cell,
// srt/model_executor/pool_configurator.py:691-700, DSATokenToKVPool's
// quant_block_size 128, srt/mem_cache/memory_pool.py:5280). It is never
// split over tensor-parallel ranks (one head, max_tp_shards=1).
func dsaIndexKeyBytes(m Model) int64 {
	d := int64(m.IndexHeadDim)
	return d + d/128*4
}
