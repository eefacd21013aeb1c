package vram

import "fmt"

// MiniMax-M2 (transformers 5.23 models/minimax_m2/modeling_minimax_m2.py;
// configuration_minimax_m2.py): grouped-query attention with q and k
// RMSNorms over the whole projection (q_norm [heads · head_dim], before
// the heads are split, l.292-293, 309-310), a rotary embedding over part
// of each head (the config's rotary_dim becomes partial_rotary_factor,
// l.99-104), and a mixture of experts in every layer — a sigmoid router
// whose top-k reads the scores plus a persistent fp32
// e_score_correction_bias kept on the MoE block (l.113), renormalized, no
// groups, no shared experts (l.51-64) — with transformers 5's fused
// experts of intermediate_size each (l.75-76). A key config.json leaves
// out takes the class's default (l.75-96).
func init() {
	register(&family{
		name: minimaxM2ModelType, source: "transformers/models/minimax_m2/modeling_minimax_m2.py (transformers 5.23.0)",
		defaults:    Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Router: "sigmoid_topk_norm", QKNorm: "full"},
		servingOnly: "its modeling code is transformers 5's (grouped_mm experts), which the training rules do not follow yet",
		only5:       true,
		recipe:      func(_ Model, lib libVersion) recipe { return recipe{groupedMM: true} },
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden = c.optInt("num_hidden_layers", 62), c.optInt("hidden_size", 3072)
			m.Heads, m.KVHeads = c.optInt("num_attention_heads", 48), c.optInt("num_key_value_heads", 8)
			m.HeadDim, m.Vocab = c.optInt("head_dim", 128), c.optInt("vocab_size", 200064)
			m.MaxPosition = c.optInt("max_position_embeddings", 196608)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			m.Experts = c.optInt("num_local_experts", c.optInt("num_experts", 256))
			m.ExpertsPerToken, m.ExpertFFN = c.optInt("num_experts_per_tok", 8), c.optInt("intermediate_size", 1536)
			m.FFN = m.ExpertFFN
			m.RotaryPct = 1
			if rd := c.optInt("rotary_dim", 0); rd > 0 && m.HeadDim > 0 {
				m.RotaryPct = float64(rd) / float64(m.HeadDim)
			}
			m.RotaryPct = c.optFloat("partial_rotary_factor", m.RotaryPct)
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["intermediate_size"], c["num_local_experts"], c["num_experts_per_tok"] = m.ExpertFFN, m.Experts, m.ExpertsPerToken
			c["rotary_dim"] = int(float64(m.HeadDim) * m.RotaryPct)
		},
		check: func(m Model) error {
			switch {
			case m.Experts < 1 || m.ExpertsPerToken < 1:
				return fmt.Errorf("model: minimax_m2 needs experts and experts_per_token ≥ 1")
			case m.SharedExperts != 0 || m.DenseLayers != 0:
				return fmt.Errorf("model: minimax_m2 has a mixture of experts in every layer and no shared experts")
			case m.QKNorm != "full":
				return fmt.Errorf("model.qk_norm %q: minimax_m2's q and k norms are over the whole projection (full)", m.QKNorm)
			}
			if m.Bias != BiasNone {
				return fmt.Errorf("model.bias %q: minimax_m2 has no biases", m.Bias)
			}
			return nil
		},
		tensors: standardDecoder{attn: func(m Model, l *tensorList, p string) {
			attnQKVO(m, l, p)
			qkNormTensors(m, l, p)
		}, mlp: func(m Model, l *tensorList, p string, layer int) {
			// Registration order (l.51, 75-76): the router, the fused experts.
			l.linear(p+"mlp.gate", "router", int64(m.Hidden), int64(m.Experts), false)
			fusedExperts(m, l, p+"mlp.experts.")
		}}.tensors,
		buffers: func(m Model, b *bufferList) {
			for i := 0; i < m.Layers; i++ {
				b.add(fmt.Sprintf("model.layers.%d.mlp.e_score_correction_bias", i), i, FP32, int64(m.Experts))
			}
			rotaryBuffers5(m, b, "model.")
		},
		// MiniMax-M2: the class's defaults (62 layers of 256 experts, 8 a
		// token, rotary_dim 64 of 128), released in fp8: the catalog
		// assumes the 128 × 128 blocks of the fine-grained fp8 releases; a
		// checkpoint folder or hf:// id reads the release's own
		// quantization_config.
		presets: map[string]Preset{
			"minimax-m2": {Model{Name: "MiniMaxAI/MiniMax-M2", Layers: 62, Hidden: 3072, Heads: 48, KVHeads: 8, HeadDim: 128, FFN: 1536, Vocab: 200064, MaxPosition: 196608,
				Experts: 256, ExpertsPerToken: 8, ExpertFFN: 1536, RotaryPct: 0.5, Release: blockFP8Release}, hf("MiniMaxAI/MiniMax-M2")},
		},
	})
}

// minimaxM2ModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const minimaxM2ModelType = "minimax_m2"
