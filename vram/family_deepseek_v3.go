package vram

import "fmt"

// DeepSeek-V3 (transformers/models/deepseek_v3/modeling_deepseek_v3.py):
// multi-head latent attention (low-rank q and kv with a decoupled rotary
// part), the first first_k_dense_replace blocks dense, then a router, routed
// experts and shared experts (one MLP of width n_shared · expert_ffn) per
// block.
func init() {
	register(&family{
		name: "deepseek_v3", source: "transformers/models/deepseek_v3/modeling_deepseek_v3.py",
		defaults:        Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Router: "sigmoid_topk_norm"},
		latentAttention: true,
		fromConfig: func(c *hfReader, m *Model) {
			c.common(m)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if c.optBool("attention_bias", false) {
				m.Bias = BiasQKVOnly
			}
			if c.optBool("mlp_bias", false) {
				m.Bias = BiasAll
			}
			m.Experts, m.ExpertsPerToken = c.int("n_routed_experts"), c.int("num_experts_per_tok")
			m.SharedExperts, m.ExpertFFN = c.optInt("n_shared_experts", 0), c.int("moe_intermediate_size")
			m.DenseLayers = c.optInt("first_k_dense_replace", 0)
			m.QLoRARank, m.KVLoRARank = c.optInt("q_lora_rank", 0), c.int("kv_lora_rank")
			m.QKNopeDim, m.QKRopeDim, m.VHeadDim = c.int("qk_nope_head_dim"), c.int("qk_rope_head_dim"), c.int("v_head_dim")
			m.HeadDim = m.QKNopeDim + m.QKRopeDim
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			delete(c, "head_dim")
			c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"] = m.Experts, m.ExpertsPerToken, m.SharedExperts
			c["moe_intermediate_size"], c["first_k_dense_replace"] = m.ExpertFFN, m.DenseLayers
			c["q_lora_rank"], c["kv_lora_rank"] = m.QLoRARank, m.KVLoRARank
			c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"] = m.QKNopeDim, m.QKRopeDim, m.VHeadDim
			c["n_group"], c["topk_group"] = 1, 1
		},
		check: func(m Model) error {
			if m.KVLoRARank < 1 || m.QKNopeDim < 1 || m.QKRopeDim < 1 || m.VHeadDim < 1 {
				return fmt.Errorf("model: deepseek_v3 needs kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim ≥ 1")
			}
			return nil
		},
		tensors: standardDecoder{attn: mlaTensors, mlp: func(m Model, l *tensorList, p string, layer int) {
			if !m.IsMoELayer(layer) {
				denseMLP(m, l, p, layer)
				return
			}
			// mlp.gate (its e_score_correction_bias is a buffer:
			// DeepseekV3TopkRouter.register_buffer), routed experts, and the
			// shared experts as one MLP.
			routedExperts(m, l, p+"mlp.")
			if m.SharedExperts > 0 {
				mlpGated(m, l, p+"mlp.shared_experts.", int64(m.SharedExpertFFN)*int64(m.SharedExperts), -1)
			}
		}}.tensors,
		buffers: func(m Model, b *bufferList) {
			b.add("model.rotary_emb.inv_freq", -1, FP32, int64(m.QKRopeDim)/2)
			for i := m.DenseLayers; i < m.Layers; i++ {
				b.add(fmt.Sprintf("model.layers.%d.mlp.gate.e_score_correction_bias", i), i, FP32, int64(m.Experts))
			}
		},
		// The multi-token-prediction module of the checkpoint is not part of
		// the transformers model.
		presets: map[string]Preset{
			"deepseek-v3": {Model{Name: "deepseek-ai/DeepSeek-V3", Layers: 61, Hidden: 7168, Heads: 128, FFN: 18432, Vocab: 129280, MaxPosition: 163840,
				Experts: 256, ExpertsPerToken: 8, SharedExperts: 1, ExpertFFN: 2048, DenseLayers: 3,
				QLoRARank: 1536, KVLoRARank: 512, QKNopeDim: 128, QKRopeDim: 64, VHeadDim: 128, HeadDim: 192}, hf("deepseek-ai/DeepSeek-V3")},
		},
	})
}
