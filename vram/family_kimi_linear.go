package vram

import "fmt"

// Kimi-Linear (transformers 5.23.0 models/kimi_linear/
// modeling_kimi_linear.py; configuration_kimi_linear.py): a hybrid of Kimi
// Delta Attention layers (model.kda; kda.go) and DeepSeek-V3's multi-head
// latent attention without a rotary embedding (KimiLinearAttention
// l.190-313: the rotary part of q and of the shared key is projected and
// cached, never rotated; the model has no rotary module and so no rotary
// buffers), with layer_types naming which is which. The MLPs are
// DeepSeek-V3's: a dense first layer (mlp_layer_types, else the
// config.json's first_k_dense_replace, 1), then a sigmoid router with an
// fp32 e_score_correction_bias buffer (l.718-729), routed experts fused as
// transformers 5 keeps them and the shared experts as one MLP (l.759-771).
// A decoder layer registers its mixer and MLP before its two norms
// (l.783-797). The checkpoint names keys its own way (experts one by one,
// block_sparse_moe, q|k|v convs apart: conversion_mapping.py:2330-2364);
// the engine lists the model's names. KimiLinearForCausalLM ties nothing
// (_tied_weights_keys = {}, l.953): lm_head is its own matrix even when
// tie_word_embeddings is set.
func init() {
	register(&family{
		name: kimiLinearModelType, source: "transformers/models/kimi_linear/modeling_kimi_linear.py (transformers 5.23.0)",
		defaults:        Model{MLP: "swiglu", Norm: "rmsnorm", Position: "none", Bias: BiasNone, Router: "sigmoid_topk_norm"},
		latentAttention: true,
		kda:             true,
		servingOnly:     "its modeling code is transformers 5's; of it the training step is traced at 5.23, not transformers' generate (the recurrent decode)",
		only5:           true,
		// The MLA, router and MoE are DeepSeek-V3's at 5.23 without the
		// rotary embedding: the experts through grouped_mm
		// (moe_grouped_mm.go; @use_experts_implementation, l.97-135), the
		// latent cache and expand_kv (mla5.go; l.249-294); the KDA layers
		// run their torch fallbacks (kda5.go).
		recipe: func(Model, libVersion) recipe {
			return recipe{groupedMM: true, latentCache: true}
		},
		fromConfig: kimiLinearFromConfig,
		toConfig:   kimiLinearToConfig,
		check:      kimiLinearCheck,
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			l.add("model.embed_tokens.weight", "embedding", d.v, d.h)
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf("model.layers.%d.", i)
				if m.KDALayer(i) {
					kdaTensors(m, l, p+"self_attn.")
				} else {
					mlaTensors(m, l, p+"self_attn.")
				}
				if m.IsMoELayer(i) {
					// KimiLinearMoE (l.767-771): experts, gate, shared_experts.
					fusedExperts(m, l, p+"mlp.experts.")
					l.linear(p+"mlp.gate", "router", d.h, int64(m.Experts), false)
					mlpGated(m, l, p+"mlp.shared_experts.", int64(m.SharedExpertFFN)*int64(m.SharedExperts), -1)
				} else {
					denseMLP(m, l, p, i)
				}
				l.norm(p+"input_layernorm", false, d.h)
				l.norm(p+"post_attention_layernorm", false, d.h)
			}
			l.headSide()
			l.norm("model.norm", false, d.h)
			lmHead(m, l, "lm_head", "score")
		},
		block: func(r *resolved, layer int) BlockActivations {
			if r.m.KDALayer(layer) {
				return kdaBlock(r, layer)
			}
			return decoderBlock(r, layer)
		},
		buffers: func(m Model, b *bufferList) {
			for i := m.DenseLayers; i < m.Layers; i++ {
				b.add(fmt.Sprintf("model.layers.%d.mlp.gate.e_score_correction_bias", i), i, FP32, int64(m.Experts))
			}
		},
		// The routers' e_score_correction_bias: persistent buffers (nn.Buffer,
		// l.729) the checkpoint stores beside the parameters.
		storedOnly: func(m Model, l *tensorList) { routerBiases(m, l, m.Layers) },
		// moonshotai/Kimi-Linear-48B-A3B-Instruct: KimiLinearConfig's
		// defaults (l.76-113) are this checkpoint's shape — 27 layers 2,304
		// wide, 32 heads of MLA (no q_lora, kv_lora 512, 128 + 64 query and
		// key widths, 128 value), 256 experts of 1,024 with 8 a token and one
		// shared, a dense first layer of 9,216, KDA of 32 heads of 128 with a
		// 4-tap conv, 163,840 tokens untied, 1,048,576 positions — except the
		// layer kinds: the class's fallback puts MLA at layers 4, 8, …, 24
		// (l.138-140), while the checkpoint's linear_attn_config names
		// full_attn_layers [4, 8, 12, 16, 20, 24, 27] (1-indexed, l.130-136):
		// MLA at 3, 7, …, 23 and the last layer, 20 KDA layers. As
		// transformers 5.23 builds it on the meta device (that
		// linear_attn_config): 49,122,675,072 parameters.
		presets: map[string]Preset{
			"kimi-linear-48b-a3b": {Model{Name: "moonshotai/Kimi-Linear-48B-A3B-Instruct", Layers: 27, Hidden: 2304, Heads: 32, KVHeads: 32, FFN: 9216, Vocab: 163840, MaxPosition: 1048576,
				Experts: 256, ExpertsPerToken: 8, SharedExperts: 1, ExpertFFN: 1024, DenseLayers: 1,
				KVLoRARank: 512, QKNopeDim: 128, QKRopeDim: 64, VHeadDim: 128, HeadDim: 192,
				KDA: &KDA{Heads: 32, HeadDim: 128, ConvKernel: 4, Attention: []int{3, 7, 11, 15, 19, 23, 26}}}, hf("moonshotai/Kimi-Linear-48B-A3B-Instruct")},
		},
	})
}

// kimiPad is KimiLinearConfig's pad_token_id default (l.100).
const kimiPad = 163839

// kimiLinearFromConfig reads a KimiLinearConfig: a key config.json leaves
// out takes the class's default (l.76-113); where attribute_map (l.67-74)
// gives a key a checkpoint name (num_experts, num_experts_per_token,
// num_shared_experts, model_max_length, moe_renormalize), that name wins
// over the class's, as transformers reads them.
func kimiLinearFromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden = c.optInt("num_hidden_layers", 27), c.optInt("hidden_size", 2304)
	m.Heads = c.optInt("num_attention_heads", 32)
	m.KVHeads = m.Heads // MLA: every head has its own k and v from kv_b_proj
	m.FFN, m.Vocab = c.optInt("intermediate_size", 9216), c.optInt("vocab_size", 163840)
	m.MaxPosition = c.optInt("model_max_length", c.optInt("max_position_embeddings", 1048576))
	if c.optBool("tie_word_embeddings", false) {
		m.note("config.json", "tie_word_embeddings: KimiLinearForCausalLM ties nothing (_tied_weights_keys = {}), so lm_head is its own matrix as transformers builds it")
	}
	if c.optBool("attention_bias", false) {
		m.Bias = BiasQKVOnly
	}
	m.Experts = c.optInt("num_experts", c.optInt("num_local_experts", 256))
	m.ExpertsPerToken = c.optInt("num_experts_per_token", c.optInt("num_experts_per_tok", 8))
	m.SharedExperts = c.optInt("num_shared_experts", c.optInt("n_shared_experts", 1))
	m.ExpertFFN = c.optInt("moe_intermediate_size", 1024)
	m.QLoRARank, m.KVLoRARank = c.optIntOrNone("q_lora_rank", 0), c.optInt("kv_lora_rank", 512)
	m.QKNopeDim, m.QKRopeDim = c.optInt("qk_nope_head_dim", 128), c.optInt("qk_rope_head_dim", 64)
	m.VHeadDim = c.optInt("v_head_dim", 128)
	m.HeadDim = m.QKNopeDim + m.QKRopeDim
	m.DenseLayers = kimiLinearDenseLayers(c, m.Layers)
	if pad := c.optIntOrNone("pad_token_id", kimiPad); pad >= m.Vocab && c.err == nil {
		// nn.Embedding(vocab_size, hidden_size, pad_token_id), l.880.
		c.fail(fmt.Sprintf("pad_token_id %d (the class's default is %d) is outside vocab_size %d: transformers' nn.Embedding refuses it", pad, kimiPad, m.Vocab))
	}
	if !c.optBool("moe_renormalize", c.optBool("norm_topk_prob", true)) && c.err == nil {
		c.fail("moe_renormalize (norm_topk_prob) false: the sigmoid router without renormalization is not modelled")
	}
	if act := c.optString("hidden_act", "silu"); act != "silu" && c.err == nil {
		c.fail(fmt.Sprintf("hidden_act %q: kimi_linear's MLPs and KDA convolution are modelled with silu (the class's default)", act))
	}
	// __post_init__ (l.122-126): linear_attn_config's keys, where the
	// checkpoint gives them, override the linear_* ones.
	lin, _ := c.sub("linear_attn_config")
	lc := hfReader{c: lin}
	d := KDA{Heads: lc.optInt("num_heads", c.optInt("linear_num_heads", 32)), HeadDim: lc.optInt("head_dim", c.optInt("linear_head_dim", 128)),
		ConvKernel: lc.optInt("short_conv_kernel_size", c.optInt("linear_conv_kernel_dim", 4))}
	d.Attention = kimiLinearAttentionLayers(c, &lc, m.Layers)
	if lc.err != nil && c.err == nil {
		c.fail("linear_attn_config: " + lc.err.Error())
	}
	m.KDA = &d
}

// kimiLinearDenseLayers reads which layers keep a dense MLP:
// mlp_layer_types (dense first, then sparse), else the config.json's
// first_k_dense_replace (a keyword the class reads, default 1: l.143-147).
func kimiLinearDenseLayers(c *hfReader, layers int) int {
	if c.optList("mlp_layer_types") != nil {
		return mlpLayerTypes(c, layers)
	}
	return max(0, min(c.optInt("first_k_dense_replace", 1), layers))
}

// kimiLinearAttentionLayers reads which layers are MLA (l.128-140):
// layer_types ("full_attention" or "linear_attention" per layer), else
// linear_attn_config's full_attn_layers and kda_layers (1-indexed, both
// needed, every layer named), else MLA at every fourth layer from the
// fifth (i > 0 and i % 4 == 0).
func kimiLinearAttentionLayers(c, lc *hfReader, layers int) []int {
	if out, ok := c.layerKinds(layers, "full_attention", "linear_attention"); ok {
		return out
	}
	full, kda := lc.optList("full_attn_layers"), lc.optList("kda_layers")
	if full == nil || kda == nil {
		var out []int
		for i := 4; i < min(layers, maxLayers); i += 4 {
			out = append(out, i)
		}
		return out
	}
	kinds := make([]string, min(layers, maxLayers))
	for _, l := range []struct {
		key, kind string
		list      []any
	}{{"full_attn_layers", "full_attention", full}, {"kda_layers", "linear_attention", kda}} {
		for j, v := range l.list {
			n, ok := v.(float64)
			if !ok || n != float64(int(n)) || n < 1 || int(n) > len(kinds) {
				lc.fail(fmt.Sprintf("%s[%d] = %v: want a layer number in [1, %d] (1-indexed)", l.key, j, v, len(kinds)))
				return nil
			}
			kinds[int(n)-1] = l.kind // kda_layers last: it wins, as in __post_init__
		}
	}
	var out []int
	for i, k := range kinds {
		switch k {
		case "":
			lc.fail(fmt.Sprintf("layer %d (1-indexed) is in neither full_attn_layers nor kda_layers: transformers refuses the config", i+1))
			return nil
		case "full_attention":
			out = append(out, i)
		}
	}
	return out
}

// kimiLinearToConfig writes the class's own keys (the attribute_map's
// left-hand names), the layer kinds spelled out.
func kimiLinearToConfig(m Model, c map[string]any) {
	writeCommonConfig(m, c)
	delete(c, "head_dim") // the class sets head_dim = qk_rope_head_dim (l.120)
	c["num_local_experts"], c["num_experts_per_tok"], c["n_shared_experts"] = m.Experts, m.ExpertsPerToken, m.SharedExperts
	c["moe_intermediate_size"], c["attention_bias"] = m.ExpertFFN, m.Bias == BiasQKVOnly
	c["q_lora_rank"], c["kv_lora_rank"] = m.QLoRARank, m.KVLoRARank
	if m.QLoRARank == 0 {
		c["q_lora_rank"] = nil
	}
	c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"] = m.QKNopeDim, m.QKRopeDim, m.VHeadDim
	types := make([]string, m.Layers)
	for i := range types {
		types[i] = "sparse"
		if !m.IsMoELayer(i) {
			types[i] = "dense"
		}
	}
	if m.Vocab <= kimiPad {
		c["pad_token_id"] = nil // the class's default would be outside the vocabulary
	}
	c["mlp_layer_types"], c["n_group"], c["topk_group"], c["norm_topk_prob"], c["hidden_act"] = types, 1, 1, true, "silu"
	if d := m.KDA; d != nil {
		c["linear_num_heads"], c["linear_head_dim"], c["linear_conv_kernel_dim"] = d.Heads, d.HeadDim, d.ConvKernel
		writeLayerKinds(c, m.Layers, func(i int) bool { return !m.KDALayer(i) }, "full_attention", "linear_attention")
	}
}

// kimiLinearCheck is the family's rules: MLA's widths, the MoE the
// modeling code always builds past the dense layers (with its shared
// experts, l.769-771), the attention biases attention_bias gives.
func kimiLinearCheck(m Model) error {
	switch {
	case m.KDA == nil:
		return fmt.Errorf("model: kimi_linear needs model.kda (its Kimi Delta Attention layers) with attention_layers")
	case m.KVLoRARank < 1 || m.QKNopeDim < 1 || m.QKRopeDim < 1 || m.VHeadDim < 1:
		return fmt.Errorf("model: kimi_linear needs kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim ≥ 1")
	case m.Experts < 1 || m.ExpertsPerToken < 1:
		return fmt.Errorf("model: kimi_linear needs experts and experts_per_token ≥ 1 (KimiLinearMoE past the dense layers)")
	case m.TiedEmbeddings:
		return fmt.Errorf("model.tied_embeddings: KimiLinearForCausalLM ties nothing (_tied_weights_keys = {}); lm_head is its own matrix")
	case m.SharedExperts < 1:
		return fmt.Errorf("model.shared_experts = %d: kimi_linear's MoE always builds its shared experts (n_shared_experts ≥ 1; 0 builds empty matrices, not modelled)", m.SharedExperts)
	case m.MoEEvery > 1:
		return fmt.Errorf("model.moe_every = %d: kimi_linear's MoE layers are every layer past the dense ones", m.MoEEvery)
	case m.Bias != BiasNone && m.Bias != BiasQKVOnly:
		return fmt.Errorf("model.bias %q: kimi_linear's attention_bias puts biases on MLA's q_a_proj, kv_a_proj_with_mqa and o_proj, or none", m.Bias)
	}
	return nil
}

// kimiLinearModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const kimiLinearModelType = "kimi_linear"
