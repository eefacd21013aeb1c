package vram

import "fmt"

// DeepSeek-V2 (transformers/models/deepseek_v2/modeling_deepseek_v2.py):
// multi-head latent attention whose rotary part is rotated as complex
// numbers (torch.polar's freqs_cis, complex64), the first
// first_k_dense_replace blocks dense, then a softmax gate (top-k within
// n_group groups for group_limited_greedy, scaled by
// routed_scaling_factor, never renormalized: the pinned code reads
// norm_topk_prob but does not use it), the routed experts run on the
// tokens sorted by expert, and shared experts (one MLP of n_shared ·
// moe_intermediate_size) added after them. moe_layer_freq is not read by
// the pinned code either. A key config.json leaves out takes the class's
// default (configuration_deepseek_v2.py:76-120, transformers 5.23.0),
// except num_experts_per_tok, whose default None DeepseekV2Moe cannot
// route with (torch.topk(k=None), modeling_deepseek_v2.py:88, 102).
func init() {
	register(&family{
		name: "deepseek_v2", source: "transformers/models/deepseek_v2/modeling_deepseek_v2.py",
		defaults:        Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Router: "softmax_topk_scaled"},
		latentAttention: true,
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden = c.optInt("num_hidden_layers", 32), c.optInt("hidden_size", 4096)
			m.Heads = c.optInt("num_attention_heads", 32)
			m.KVHeads = c.optInt("num_key_value_heads", m.Heads)
			m.FFN, m.Vocab = c.optInt("intermediate_size", 11008), c.optInt("vocab_size", 102400)
			m.MaxPosition = c.optInt("max_position_embeddings", 2048)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if c.optBool("attention_bias", false) || c.optBool("mlp_bias", false) {
				c.fail("attention_bias, mlp_bias: DeepSeek-V2 with biases is not modelled (no released checkpoint has them)")
			}
			// attribute_map: num_experts is n_routed_experts (l.102-104).
			m.Experts = c.optInt("n_routed_experts", c.optInt("num_experts", 64))
			if v, ok := c.c["num_experts_per_tok"]; (!ok || v == nil) && c.err == nil {
				c.fail(`missing "num_experts_per_tok": DeepseekV2Config's default is None, which DeepseekV2Moe cannot route with (torch.topk with k=None)`)
			}
			m.ExpertsPerToken = c.optInt("num_experts_per_tok", 0)
			m.SharedExperts, m.ExpertFFN = c.optInt("n_shared_experts", 2), c.optInt("moe_intermediate_size", 1407)
			m.DenseLayers = c.optInt("first_k_dense_replace", 0)
			if c.optString("topk_method", "greedy") == "group_limited_greedy" {
				m.ExpertGroups = c.int("n_group")
			}
			m.QLoRARank, m.KVLoRARank = c.optIntOrNone("q_lora_rank", 1536), c.optInt("kv_lora_rank", 512)
			m.QKNopeDim, m.QKRopeDim = c.optInt("qk_nope_head_dim", 128), c.optInt("qk_rope_head_dim", 64)
			m.VHeadDim = c.optInt("v_head_dim", 128)
			m.HeadDim = m.QKNopeDim + m.QKRopeDim
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			delete(c, "head_dim")
			c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"] = m.Experts, m.ExpertsPerToken, m.SharedExperts
			c["moe_intermediate_size"], c["first_k_dense_replace"] = m.ExpertFFN, m.DenseLayers
			c["topk_method"], c["n_group"], c["topk_group"] = "greedy", nil, nil
			if m.ExpertGroups > 1 {
				c["topk_method"], c["n_group"], c["topk_group"] = "group_limited_greedy", m.ExpertGroups, max(1, m.ExpertGroups/2)
			}
			c["q_lora_rank"], c["kv_lora_rank"] = nilIfZero(float64(m.QLoRARank)), m.KVLoRARank
			c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"] = m.QKNopeDim, m.QKRopeDim, m.VHeadDim
		},
		check: func(m Model) error {
			switch {
			case m.KVLoRARank < 1 || m.QKNopeDim < 1 || m.QKRopeDim < 1 || m.VHeadDim < 1:
				return fmt.Errorf("model: deepseek_v2 needs kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim ≥ 1")
			case m.Experts < 1 || m.SharedExperts < 1:
				return fmt.Errorf("model: deepseek_v2 needs experts and shared_experts ≥ 1 (DeepseekV2MoE.forward always adds the shared experts)")
			case m.ExpertGroups > 1 && m.Experts%m.ExpertGroups != 0:
				return fmt.Errorf("model.expert_groups = %d must divide experts = %d", m.ExpertGroups, m.Experts)
			}
			return nil
		},
		tensors: standardDecoder{attn: mlaTensors, mlp: func(m Model, l *tensorList, p string, layer int) {
			if !m.IsMoELayer(layer) {
				denseMLP(m, l, p, layer)
				return
			}
			routedExperts(m, l, p+"mlp.")
			mlpGated(m, l, p+"mlp.shared_experts.", int64(m.SharedExpertFFN)*int64(m.SharedExperts), -1)
		}}.tensors,
		buffers: func(m Model, b *bufferList) { b.add("model.rotary_emb.inv_freq", -1, FP32, int64(m.QKRopeDim)/2) },
		recipe: func(_ Model, lib libVersion) recipe {
			return recipe{sortedExperts: lib.before(5, 0), groupedMM: !lib.before(5, 0), latentCache: !lib.before(5, 0), complexRope: true}
		},
		// DeepSeek-V2: 60 layers 5,120 wide, 128 heads, the first dense,
		// then 160 experts of 1,536 (6 a token, chosen within 3 of 8
		// groups) and two shared; DeepSeek-V2-Lite: 27 layers 2,048 wide,
		// 16 heads without a q low-rank pair, 64 experts of 1,408 and two
		// shared, greedy routing (236B and 15.7B in total; the configs'
		// copies and DeepSeek's model cards).
		presets: map[string]Preset{
			"deepseek-v2": {Model{Name: "deepseek-ai/DeepSeek-V2", Layers: 60, Hidden: 5120, Heads: 128, FFN: 12288, Vocab: 102400, MaxPosition: 163840,
				Experts: 160, ExpertsPerToken: 6, SharedExperts: 2, ExpertFFN: 1536, DenseLayers: 1, ExpertGroups: 8,
				QLoRARank: 1536, KVLoRARank: 512, QKNopeDim: 128, QKRopeDim: 64, VHeadDim: 128, HeadDim: 192}, hf("deepseek-ai/DeepSeek-V2")},
			"deepseek-v2-lite": {Model{Name: "deepseek-ai/DeepSeek-V2-Lite", Layers: 27, Hidden: 2048, Heads: 16, FFN: 10944, Vocab: 102400, MaxPosition: 163840,
				Experts: 64, ExpertsPerToken: 6, SharedExperts: 2, ExpertFFN: 1408, DenseLayers: 1,
				KVLoRARank: 512, QKNopeDim: 128, QKRopeDim: 64, VHeadDim: 128, HeadDim: 192}, hf("deepseek-ai/DeepSeek-V2-Lite")},
		},
	})
}

// deepseekV2ModelType is the family's model_type, which the serving
// engines' tables of defaults are keyed by.
const deepseekV2ModelType = "deepseek_v2"
