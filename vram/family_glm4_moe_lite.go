package vram

import "fmt"

// GLM-4.7-Flash (transformers 5.23 models/glm4_moe_lite/
// modeling_glm4_moe_lite.py; configuration_glm4_moe_lite.py): DeepSeek-V3's
// multi-head latent attention (modular_glm4_moe_lite.py:22-23,
// DeepseekV3Attention) and its MoE — a sigmoid router with an fp32
// e_score_correction_bias (l.385), routed experts fused as transformers 5
// keeps them, shared experts as one MLP — with the dense and MoE layers
// named by mlp_layer_types: one dense layer first unless the config lists
// them (__post_init__ l.118-123; a hub config's first_k_dense_replace is
// not read). The checkpoint's multi-token-prediction layer is stored and
// not built (_keys_to_ignore_on_load_unexpected = [r"model\.layers\.47.*"],
// l.562). A key config.json leaves out takes the class's default (l.82-115).
func init() {
	register(&family{
		name: glm4MoeLiteModelType, source: "transformers/models/glm4_moe_lite/modeling_glm4_moe_lite.py (transformers 5.23.0)",
		defaults:        Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Router: "sigmoid_topk_norm"},
		latentAttention: true,
		servingOnly:     "its modeling code is transformers 5's (grouped_mm experts, MLA's compressed cache), which the training rules do not follow yet",
		only5:           true,
		// The modeling code is DeepSeek-V3's at 5.23 (modular_glm4_moe_lite.py
		// l.22-23; the same attention, l.222-355, router, l.374-413, and
		// MoE, l.476-497): the experts through grouped_mm
		// (moe_grouped_mm.go; @use_experts_implementation, l.436-473), the
		// latent cache and expand_kv (mla5.go; l.280-297, 332, 336).
		recipe: func(_ Model, lib libVersion) recipe { return recipe{groupedMM: true, latentCache: true} },
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden = c.optInt("num_hidden_layers", 47), c.optInt("hidden_size", 2048)
			m.Heads = c.optInt("num_attention_heads", 20)
			m.FFN, m.Vocab = c.optInt("intermediate_size", 10240), c.optInt("vocab_size", 154880)
			m.MaxPosition = c.optInt("max_position_embeddings", 202752)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if c.optBool("attention_bias", false) {
				m.Bias = BiasQKVOnly
			}
			m.Experts = c.optInt("n_routed_experts", c.optInt("num_local_experts", 64))
			m.ExpertsPerToken = c.optInt("num_experts_per_tok", 4)
			m.SharedExperts, m.ExpertFFN = c.optInt("n_shared_experts", 1), c.optInt("moe_intermediate_size", 1536)
			m.QLoRARank, m.KVLoRARank = c.optIntOrNone("q_lora_rank", 768), c.optInt("kv_lora_rank", 512)
			// attribute_map: head_dim is qk_rope_head_dim (l.77-80).
			m.QKRopeDim = c.optInt("qk_rope_head_dim", c.optInt("head_dim", 64))
			m.QKNopeDim, m.VHeadDim = c.optInt("qk_nope_head_dim", 192), c.optInt("v_head_dim", 256)
			m.HeadDim = m.QKNopeDim + m.QKRopeDim
			m.KVHeads = m.Heads
			m.DenseLayers = mlpLayerTypes(c, m.Layers)
			m.MTPLayers = c.optInt("num_nextn_predict_layers", 0)
			if !c.optBool("norm_topk_prob", true) && c.err == nil {
				c.fail("norm_topk_prob false: the sigmoid router without renormalization is not modelled")
			}
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			delete(c, "head_dim")
			c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"] = m.Experts, m.ExpertsPerToken, m.SharedExperts
			c["moe_intermediate_size"], c["attention_bias"] = m.ExpertFFN, m.Bias == BiasQKVOnly
			c["q_lora_rank"], c["kv_lora_rank"] = m.QLoRARank, m.KVLoRARank
			if m.QLoRARank == 0 {
				c["q_lora_rank"] = nil
			}
			c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"] = m.QKNopeDim, m.QKRopeDim, m.VHeadDim
			types := make([]string, m.Layers)
			for i := range types {
				types[i] = "sparse"
				if i < m.DenseLayers {
					types[i] = "dense"
				}
			}
			c["mlp_layer_types"], c["n_group"], c["topk_group"], c["norm_topk_prob"] = types, 1, 1, true
		},
		check: func(m Model) error {
			switch {
			case m.KVLoRARank < 1 || m.QKNopeDim < 1 || m.QKRopeDim < 1 || m.VHeadDim < 1:
				return fmt.Errorf("model: glm4_moe_lite needs kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim ≥ 1")
			case m.Experts < 1 || m.ExpertsPerToken < 1:
				return fmt.Errorf("model: glm4_moe_lite needs experts and experts_per_token ≥ 1")
			case m.Bias != BiasNone && m.Bias != BiasQKVOnly:
				return fmt.Errorf("model.bias %q: glm4_moe_lite's attention_bias puts biases on q_a_proj, kv_a_proj_with_mqa and o_proj, or none", m.Bias)
			}
			return nil
		},
		tensors: standardDecoder{attn: mlaTensors, mlp: func(m Model, l *tensorList, p string, layer int) {
			if !m.IsMoELayer(layer) {
				denseMLP(m, l, p, layer)
				return
			}
			// Registration order (l.476-497): the fused experts, the
			// router, the shared experts as one MLP.
			fusedExperts(m, l, p+"mlp.experts.")
			l.linear(p+"mlp.gate", "router", int64(m.Hidden), int64(m.Experts), false)
			mlpGated(m, l, p+"mlp.shared_experts.", int64(m.SharedExpertFFN)*int64(m.SharedExperts), -1)
		}}.tensors,
		buffers: func(m Model, b *bufferList) {
			// Every rotary embedding of transformers 5 keeps inv_freq and
			// original_inv_freq (l.61-62).
			rope := int64(m.QKRopeDim) / 2
			b.add("model.rotary_emb.inv_freq", -1, FP32, rope)
			b.add("model.rotary_emb.original_inv_freq", -1, FP32, rope)
			for i := m.DenseLayers; i < m.Layers; i++ {
				b.add(fmt.Sprintf("model.layers.%d.mlp.gate.e_score_correction_bias", i), i, FP32, int64(m.Experts))
			}
		},
		storedOnly: deepseekMTP,
		// GLM-4.7-Flash: the class's defaults (configuration_glm4_moe_lite.py
		// l.82-115) with the checkpoint's one multi-token-prediction layer
		// (layers.47, the ignored key): 29,943,390,976 parameters as
		// transformers 5.23 builds it on the meta device.
		presets: map[string]Preset{
			"glm-4.7-flash": {Model{Name: "zai-org/GLM-4.7-Flash", Layers: 47, Hidden: 2048, Heads: 20, KVHeads: 20, FFN: 10240, Vocab: 154880, MaxPosition: 202752,
				Experts: 64, ExpertsPerToken: 4, SharedExperts: 1, ExpertFFN: 1536, DenseLayers: 1,
				QLoRARank: 768, KVLoRARank: 512, QKNopeDim: 192, QKRopeDim: 64, VHeadDim: 256, HeadDim: 256, MTPLayers: 1}, hf("zai-org/GLM-4.7-Flash")},
		},
	})
}

// glm4MoeLiteModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const glm4MoeLiteModelType = "glm4_moe_lite"
