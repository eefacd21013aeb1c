package vram

import "fmt"

// GLM-4.5 / 4.6 (transformers/models/glm4_moe/modeling_glm4_moe.py):
// grouped-query attention with biases on q, k and v only (o_proj has none),
// a per-head q/k RMSNorm with use_qk_norm, a rotary embedding over half of
// each head (partial_rotary_factor 0.5, the rest concatenated back), and
// DeepSeek-V3's MoE as is (Glm4MoeTopkRouter: sigmoid scores in fp32,
// grouped top-k, renormalized and scaled; the experts in a Python loop; the
// shared experts as one MLP of n_shared · moe_intermediate_size) after
// first_k_dense_replace dense layers. A key config.json leaves out takes
// the class's default (configuration_glm4_moe.py:91-124, transformers
// 5.23.0); the class has no head_dim, so one left out is hidden // heads
// (Glm4MoeAttention, modeling_glm4_moe.py:181): 42 for the defaults'
// 4,096 over 96 heads.
func init() {
	register(&family{
		name: "glm4_moe", source: "transformers/models/glm4_moe/modeling_glm4_moe.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Router: "sigmoid_topk_norm"},
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden = c.optInt("num_hidden_layers", 46), c.optInt("hidden_size", 4096)
			m.Heads = c.optInt("num_attention_heads", 96)
			m.KVHeads = c.optIntNull("num_key_value_heads", 8, m.Heads)
			m.FFN, m.Vocab = c.optInt("intermediate_size", 10944), c.optInt("vocab_size", 151552)
			m.MaxPosition = c.optInt("max_position_embeddings", 131072)
			if m.HeadDim = c.optInt("head_dim", 0); m.HeadDim == 0 && m.Heads > 0 {
				m.HeadDim = m.Hidden / m.Heads
			}
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if c.optBool("attention_bias", false) {
				m.Bias = BiasQKVOnly
			}
			if c.optBool("use_qk_norm", false) {
				m.QKNorm = "head"
			}
			m.RotaryPct = c.optFloat("partial_rotary_factor", 0.5)
			// attribute_map: num_local_experts is n_routed_experts,
			// num_mtp_layers num_nextn_predict_layers (l.86-89).
			m.Experts = c.optInt("n_routed_experts", c.optInt("num_local_experts", 128))
			m.ExpertsPerToken = c.optInt("num_experts_per_tok", 8)
			m.SharedExperts, m.ExpertFFN = c.optInt("n_shared_experts", 1), c.optInt("moe_intermediate_size", 1408)
			m.DenseLayers = c.optInt("first_k_dense_replace", 1)
			m.MTPLayers = c.optInt("num_nextn_predict_layers", c.optInt("num_mtp_layers", 1))
			if !c.optBool("norm_topk_prob", true) && c.err == nil {
				c.fail("norm_topk_prob false: the sigmoid router without renormalization is not modelled")
			}
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["attention_bias"], c["use_qk_norm"], c["partial_rotary_factor"] = m.Bias == BiasQKVOnly, m.QKNorm == "head", m.RotaryPct
			c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"] = m.Experts, m.ExpertsPerToken, m.SharedExperts
			c["moe_intermediate_size"], c["first_k_dense_replace"] = m.ExpertFFN, m.DenseLayers
			c["n_group"], c["topk_group"], c["norm_topk_prob"] = 1, 1, true
		},
		// transformers 5: the experts through grouped_mm (moe_grouped_mm.go).
		recipe: func(_ Model, lib libVersion) recipe { return recipe{groupedMM: !lib.before(5, 0)} },
		check: func(m Model) error {
			switch {
			case m.Experts < 1 || m.ExpertsPerToken < 1:
				return fmt.Errorf("model: glm4_moe needs experts and experts_per_token ≥ 1")
			case m.Bias != BiasNone && m.Bias != BiasQKVOnly:
				return fmt.Errorf("model.bias %q: glm4_moe has biases on q, k and v only (attention_bias) or none", m.Bias)
			case m.QKNorm != "" && m.QKNorm != "head":
				return fmt.Errorf("model.qk_norm %q: glm4_moe's q/k norm is per head (use_qk_norm)", m.QKNorm)
			}
			return nil
		},
		tensors: standardDecoder{attn: glmAttention, mlp: glmMLP}.tensors,
		buffers: func(m Model, b *bufferList) {
			rotaryBuffer(m, b, "model.")
			for i := m.DenseLayers; i < m.Layers; i++ {
				b.add(fmt.Sprintf("model.layers.%d.mlp.gate.e_score_correction_bias", i), i, FP32, int64(m.Experts))
			}
		},
		storedOnly: glmMTP,
		// GLM-4.5: 92 layers (3 dense), 96 heads over 8 KV heads of 128,
		// 160 experts of 1,536 (8 a token) and one shared, q/k norms, one
		// MTP layer; GLM-4.5-Air: 46 layers (1 dense), 128 experts of 1,408,
		// no q/k norm; GLM-4.6: GLM-4.5 with 202,752 positions (Z.ai's
		// model cards and the configs' copies; 355B and 106B in total).
		presets: map[string]Preset{
			"glm-4.5": {Model{Name: "zai-org/GLM-4.5", Layers: 92, Hidden: 5120, Heads: 96, KVHeads: 8, HeadDim: 128, FFN: 12288, Vocab: 151552, MaxPosition: 131072,
				Bias: BiasQKVOnly, QKNorm: "head", RotaryPct: 0.5, Experts: 160, ExpertsPerToken: 8, SharedExperts: 1, ExpertFFN: 1536, DenseLayers: 3, MTPLayers: 1}, hf("zai-org/GLM-4.5")},
			"glm-4.5-air": {Model{Name: "zai-org/GLM-4.5-Air", Layers: 46, Hidden: 4096, Heads: 96, KVHeads: 8, HeadDim: 128, FFN: 10944, Vocab: 151552, MaxPosition: 131072,
				Bias: BiasQKVOnly, RotaryPct: 0.5, Experts: 128, ExpertsPerToken: 8, SharedExperts: 1, ExpertFFN: 1408, DenseLayers: 1, MTPLayers: 1}, hf("zai-org/GLM-4.5-Air")},
			"glm-4.6": {Model{Name: "zai-org/GLM-4.6", Layers: 92, Hidden: 5120, Heads: 96, KVHeads: 8, HeadDim: 128, FFN: 12288, Vocab: 151552, MaxPosition: 202752,
				Bias: BiasQKVOnly, QKNorm: "head", RotaryPct: 0.5, Experts: 160, ExpertsPerToken: 8, SharedExperts: 1, ExpertFFN: 1536, DenseLayers: 3, MTPLayers: 1}, hf("zai-org/GLM-4.6")},
		},
	})
}

// glmAttention is q, k, v (biased with attention_bias), o without a bias,
// and the per-head q/k norms.
func glmAttention(m Model, l *tensorList, p string) {
	d := m.dims()
	bias := m.Bias == BiasQKVOnly
	l.linear(p+"q_proj", "q_proj", d.h, d.q, bias)
	l.linear(p+"k_proj", "k_proj", d.h, d.kv, bias)
	l.linear(p+"v_proj", "v_proj", d.h, d.kv, bias)
	l.linear(p+"o_proj", "o_proj", d.q, d.h, false)
	qkNormTensors(m, l, p)
}

// glmMLP is a dense MLP in the first layers, then the router, the routed
// experts and the shared experts as one MLP.
func glmMLP(m Model, l *tensorList, p string, layer int) {
	if !m.IsMoELayer(layer) {
		denseMLP(m, l, p, layer)
		return
	}
	routedExperts(m, l, p+"mlp.")
	mlpGated(m, l, p+"mlp.shared_experts.", int64(m.SharedExpertFFN)*int64(m.SharedExperts), -1)
}

// glmMTP lists what the checkpoint stores beyond the model transformers
// builds (_keys_to_ignore_on_load_unexpected = [r"model\.layers\.92.*",
// r"model\.layers\.46.*"]): each router's e_score_correction_bias, and the
// multi-token-prediction layers after the blocks as vLLM's
// glm4_moe_mtp.py loads them — a decoder block, enorm and hnorm, eh_proj
// (2·hidden → hidden) and shared_head's norm and output layer.
func glmMTP(m Model, l *tensorList) {
	d := m.dims()
	routerBiases(m, l, m.Layers+m.MTPLayers)
	for k := 0; k < m.MTPLayers; k++ {
		i := m.Layers + k
		p := fmt.Sprintf("model.layers.%d.", i)
		l.block(i)
		l.norm(p+"enorm", false, d.h)
		l.norm(p+"hnorm", false, d.h)
		l.add(p+"eh_proj.weight", "other", d.h, 2*d.h)
		l.norm(p+"input_layernorm", false, d.h)
		glmAttention(m, l, p+"self_attn.")
		l.norm(p+"post_attention_layernorm", false, d.h)
		glmMLP(m, l, p, i)
		l.norm(p+"shared_head.norm", false, d.h)
		l.add(p+"shared_head.head.weight", "lm_head", d.v, d.h)
	}
}

// glm4MoeModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const glm4MoeModelType = "glm4_moe"
