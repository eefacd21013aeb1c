package vram

import "fmt"

// Qwen2-MoE / Qwen1.5-MoE (transformers/models/qwen2_moe/modeling_qwen2_moe.py):
// Qwen2's attention (biases on q, k, v with qkv_bias) with a sparse MLP —
// a softmax-top-k router (renormalized only with norm_topk_prob), experts of
// moe_intermediate_size in a Python loop, and one shared expert of
// shared_expert_intermediate_size scaled by a sigmoid gate — in every
// decoder_sparse_step-th block.
func init() {
	register(&family{
		name: "qwen2_moe", source: "transformers/models/qwen2_moe/modeling_qwen2_moe.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasQKVOnly},
		fromConfig: func(c *hfReader, m *Model) {
			// A key config.json leaves out takes the class's default
			// (configuration_qwen2_moe.py:79-105, transformers 5.23.0).
			c.commonOr(m, classShape{layers: 24, hidden: 2048, heads: 16, kvHeads: 16, ffn: 5632, vocab: 151936, maxPosition: 32768})
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if !c.optBool("qkv_bias", true) {
				m.Bias = BiasNone
			}
			if c.optBool("use_sliding_window", false) {
				c.fail("use_sliding_window: Qwen2-MoE's sliding-window layers are not modelled")
			}
			qwenMoEConfig(c, m, qwenMoEDefaults{experts: 60, perToken: 4, expertFFN: 1408})
			if m.Experts > 0 {
				if s := c.optInt("shared_expert_intermediate_size", 5632); s > 0 {
					m.SharedExperts, m.SharedExpertFFN = 1, s
				}
			}
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["qkv_bias"] = m.Bias == BiasQKVOnly
			writeQwenMoEConfig(m, c)
			c["shared_expert_intermediate_size"] = 0
			if m.SharedExperts > 0 {
				c["shared_expert_intermediate_size"] = m.SharedExperts * m.SharedExpertFFN
			}
		},
		check: func(m Model) error {
			if m.Bias != BiasQKVOnly && m.Bias != BiasNone {
				return fmt.Errorf("model.bias %q: qwen2_moe has biases on q, k and v (qkv_only) or none (false)", m.Bias)
			}
			if m.SharedExperts > 1 {
				return fmt.Errorf("model.shared_experts = %d: qwen2_moe has one shared expert (set shared_expert_ffn for its width)", m.SharedExperts)
			}
			return nil
		},
		// Qwen2MoeSdpaAttention (the per-implementation attention classes of
		// transformers before its attention refactor) calls repeat_kv
		// before scaled_dot_product_attention.
		recipe: func(_ Model, lib libVersion) recipe {
			return recipe{sharedExpertGate: true, repeatKV: lib.before(5, 0), groupedMM: !lib.before(5, 0), sharedFirst: !lib.before(5, 0), sharedGateLast: true, routerLogitsDType: !lib.before(5, 0)}
		},
		tensors: standardDecoder{attn: attnQKVO, mlp: qwenMoEMLP}.tensors,
		// Each Qwen2MoeAttention builds a rotary embedding of its own besides
		// the model's (self.rotary_emb = Qwen2MoeRotaryEmbedding(...)).
		buffers: func(m Model, b *bufferList) {
			for i := 0; i < m.Layers; i++ {
				rotaryBuffer(m, b, fmt.Sprintf("model.layers.%d.self_attn.", i))
				b.bs[len(b.bs)-1].Layer = i
			}
			rotaryBuffer(m, b, "model.")
		},
		presets: map[string]Preset{
			"qwen1.5-moe-a2.7b": {Model{Name: "Qwen/Qwen1.5-MoE-A2.7B", Layers: 24, Hidden: 2048, Heads: 16, KVHeads: 16, FFN: 5632, Vocab: 151936, MaxPosition: 8192,
				Experts: 60, ExpertsPerToken: 4, ExpertFFN: 1408, SharedExperts: 1, SharedExpertFFN: 5632, Router: "softmax_topk"}, hf("Qwen/Qwen1.5-MoE-A2.7B")},
		},
	})
}
