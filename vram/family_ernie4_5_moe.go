package vram

import "fmt"

// ERNIE 4.5 MoE (transformers/models/ernie4_5_moe/modeling_ernie4_5_moe.py):
// a Llama-style decoder (biases everywhere with use_bias, the LM head's
// too) whose rotary embedding runs interleaved in fp32, and whose layers
// from moe_layer_start_index to moe_layer_end_index (every
// moe_layer_interval-th) are a mixture of experts: the shared experts (one
// MLP of moe_num_shared_experts · moe_intermediate_size) first, then the
// router outside autocast (its fp32 gate, softmax, top-k chosen with
// moe_statics' e_score_correction_bias — a parameter without gradient —
// renormalized), then the routed experts in a Python loop. The gate and
// the bias stay fp32 in a bf16 model (_keep_in_fp32_modules_strict); the
// engine sizes them in the plan's weight dtype (hidden × experts per
// layer, under 0.01 % of the model). A key config.json leaves out takes
// the class's default (configuration_ernie4_5_moe.py:91-117, transformers
// 5.23.0).
func init() {
	register(&family{
		name: "ernie4_5_moe", source: "transformers/models/ernie4_5_moe/modeling_ernie4_5_moe.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Router: "softmax_gather_norm"},
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden = c.optInt("num_hidden_layers", 28), c.optInt("hidden_size", 2560)
			m.Heads = c.optInt("num_attention_heads", 20)
			m.KVHeads = c.optIntNull("num_key_value_heads", 4, m.Heads)
			m.FFN, m.Vocab = c.optInt("intermediate_size", 12288), c.optInt("vocab_size", 103424)
			m.MaxPosition = c.optInt("max_position_embeddings", 131072)
			m.HeadDim = c.optInt("head_dim", 0)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
			if c.optBool("use_bias", false) {
				m.Bias, m.LMHeadBias = BiasAll, true
			}
			m.Experts, m.ExpertsPerToken = c.optInt("moe_num_experts", 64), c.optInt("moe_k", 6)
			m.SharedExperts, m.ExpertFFN = c.optInt("moe_num_shared_experts", 2), c.optInt("moe_intermediate_size", 1536)
			m.DenseLayers, m.MoEEvery = c.optInt("moe_layer_start_index", 1), c.optInt("moe_layer_interval", 1)
			if end := c.optInt("moe_layer_end_index", -1); end != -1 && end != m.Layers-1 && c.err == nil {
				c.fail(fmt.Sprintf("moe_layer_end_index = %d: dense layers after the MoE layers are not modelled (want -1 or num_hidden_layers - 1)", end))
			}
			m.MTPLayers = c.optInt("num_nextn_predict_layers", 0)
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["use_bias"] = m.Bias == BiasAll
			c["moe_num_experts"], c["moe_k"], c["moe_num_shared_experts"] = m.Experts, m.ExpertsPerToken, m.SharedExperts
			c["moe_intermediate_size"], c["moe_layer_start_index"], c["moe_layer_end_index"] = m.ExpertFFN, m.DenseLayers, m.Layers-1
			c["moe_layer_interval"] = max(1, m.MoEEvery)
			if m.Vocab <= 2 {
				c["pad_token_id"] = nil
			}
		},
		check: func(m Model) error {
			switch {
			case m.Experts < 1 || m.ExpertsPerToken < 1:
				return fmt.Errorf("model: ernie4_5_moe needs experts and experts_per_token ≥ 1")
			case m.Bias != BiasNone && m.Bias != BiasAll || m.LMHeadBias != (m.Bias == BiasAll):
				return fmt.Errorf("model.bias %q: ernie4_5_moe has biases on every linear layer and the LM head (use_bias) or none", m.Bias)
			}
			return nil
		},
		tensors: standardDecoder{attn: attnQKVO, mlp: ernieMLP}.tensors,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		recipe: func(_ Model, lib libVersion) recipe {
			return recipe{sharedFirst: true, ropeInterleaved: true, groupedMM: !lib.before(5, 0)}
		},
		// ERNIE-4.5-21B-A3B: 28 layers 2,560 wide, 20 heads over 4 KV heads,
		// the first dense, then 64 experts of 1,536 (6 a token) and two
		// shared, tied embeddings (Ernie4_5_MoeConfig's defaults, which its
		// docstring says are this checkpoint's, and copies of the config).
		presets: map[string]Preset{
			"ernie-4.5-21b-a3b": {Model{Name: "baidu/ERNIE-4.5-21B-A3B-PT", Layers: 28, Hidden: 2560, Heads: 20, KVHeads: 4, FFN: 12288, Vocab: 103424,
				MaxPosition: 131072, TiedEmbeddings: true, Experts: 64, ExpertsPerToken: 6, SharedExperts: 2, ExpertFFN: 1536, DenseLayers: 1}, hf("baidu/ERNIE-4.5-21B-A3B-PT")},
		},
	})
}

// ernieMLP is a dense MLP outside the MoE layers; in them, moe_statics'
// correction bias (a frozen fp32 parameter), the gate, the routed experts
// and the shared experts, in their registration order.
func ernieMLP(m Model, l *tensorList, p string, layer int) {
	if !m.IsMoELayer(layer) {
		denseMLP(m, l, p, layer)
		return
	}
	p += "mlp."
	l.add(p+"moe_statics.e_score_correction_bias", "bias", 1, int64(m.Experts))
	l.ts[len(l.ts)-1].part = frozenPart
	routedExperts(m, l, p)
	if m.SharedExperts > 0 {
		mlpGated(m, l, p+"shared_experts.", int64(m.SharedExpertFFN)*int64(m.SharedExperts), -1)
	}
}

// ernie45MoeModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const ernie45MoeModelType = "ernie4_5_moe"
