package vram

import "fmt"

// K-EXAONE (transformers 5.23 models/exaone_moe/modeling_exaone_moe.py;
// configuration_exaone_moe.py): EXAONE 4.0's attention — an RMSNorm over
// each head of q and k (l.159-160), three sliding-window layers to each
// global one whose global layers leave q and k unrotated (l.183) — in
// pre-norm blocks (input_layernorm, post_attention_layernorm, l.339-340,
// not EXAONE 4.0's norms after each sublayer), with DeepSeek-V3's MoE past
// the dense layers mlp_layer_types names (l.337; first_k_dense_replace,
// default 1, when absent, configuration_exaone_moe.py l.126-129): the
// fused experts, a sigmoid router whose top-k reads the scores plus a
// persistent fp32 e_score_correction_bias (l.237), and the shared experts
// as one MLP, registered experts, gate, shared_experts (l.315-317). The
// checkpoint's multi-token-prediction module (mtp.*) is ignored on load
// (l.395). A key config.json leaves out takes the class's default
// (configuration_exaone_moe.py l.88-123).
func init() {
	register(&family{
		name: exaoneMoeModelType, source: "transformers/models/exaone_moe/modeling_exaone_moe.py (transformers 5.23.0)",
		defaults:    Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, QKNorm: "head", Router: "sigmoid_topk_norm"},
		servingOnly: "its modeling code is transformers 5's (grouped_mm experts), which the training rules do not follow yet",
		only5:       true,
		fromConfig:  exaoneMoeFromConfig,
		// The experts through grouped_mm (moe_grouped_mm.go;
		// @use_experts_implementation, l.267).
		recipe: func(_ Model, lib libVersion) recipe { return recipe{groupedMM: true} },
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["sliding_window"], c["sliding_window_pattern"] = m.SlidingWindow, m.GlobalEvery
			writeLayerTypes(m, c, "sliding_attention")
			c["num_experts"], c["num_experts_per_tok"], c["num_shared_experts"] = m.Experts, m.ExpertsPerToken, m.SharedExperts
			c["moe_intermediate_size"], c["first_k_dense_replace"] = m.ExpertFFN, m.DenseLayers
			c["n_group"], c["topk_group"], c["norm_topk_prob"] = 1, 1, true
		},
		check: func(m Model) error {
			switch {
			case m.Experts < 1 || m.ExpertsPerToken < 1:
				return fmt.Errorf("model: exaone_moe needs experts and experts_per_token ≥ 1")
			case m.Bias != BiasNone:
				return fmt.Errorf("model.bias %q: exaone_moe has no biases", m.Bias)
			case m.SlidingWindow < 1:
				// ExaoneMoeConfig.sliding_window is an int (l.105): the
				// strict dataclass refuses None.
				return fmt.Errorf("model.sliding_window = %d: exaone_moe's config always has a window (sliding_window is an int in transformers 5.23)", m.SlidingWindow)
			case m.NoRopeGlobal != (m.GlobalEvery > 0):
				return fmt.Errorf("model.no_rope_global %v: exaone_moe's global layers, and only they, skip the rotary embedding (modeling_exaone_moe.py l.183)", m.NoRopeGlobal)
			case m.Router != "sigmoid_topk_norm":
				return fmt.Errorf("model.router %q: exaone_moe's router is sigmoid, top-k with a correction bias, renormalized (sigmoid_topk_norm)", m.Router)
			}
			if err := requireQKNorm("head")(m); err != nil {
				return err
			}
			return requireNormPosition("")(m)
		},
		tensors: standardDecoder{attn: func(m Model, l *tensorList, p string) {
			attnQKVO(m, l, p)
			qkNormTensors(m, l, p)
		}, mlp: func(m Model, l *tensorList, p string, layer int) {
			if !m.IsMoELayer(layer) {
				denseMLP(m, l, p, layer)
				return
			}
			fusedExperts(m, l, p+"mlp.experts.")
			l.add(p+"mlp.gate.weight", "router", int64(m.Experts), int64(m.Hidden))
			mlpGated(m, l, p+"mlp.shared_experts.", int64(m.SharedExpertFFN)*int64(m.SharedExperts), -1)
		}}.tensors,
		buffers: func(m Model, b *bufferList) {
			for i := m.DenseLayers; i < m.Layers; i++ {
				b.add(fmt.Sprintf("model.layers.%d.mlp.gate.e_score_correction_bias", i), i, FP32, int64(m.Experts))
			}
			rotaryBuffers5(m, b, "model.")
		},
		// K-EXAONE-236B-A23B (the checkpoint the config class's docstring
		// names, l.27): the class's defaults are not its shape (they build
		// 28,550,639,616 parameters). Its shape as a quantized copy's model
		// card describes the release (third-party, not the hub's
		// config.json): 48 layers 6144 wide, 64 heads over 8 KV heads of
		// 128, a 128-token window on three layers of four, layer 0 dense
		// (18432), then 128 experts of 2048, 8 a token, one shared; a
		// 153,600-token vocabulary and 262,144 positions. Built so on the
		// meta device: 236,571,150,336 parameters (the card's "236B"; its
		// MTP layer, not built, is left out).
		presets: map[string]Preset{
			"k-exaone-236b-a23b": {Model{Name: "LGAI-EXAONE/K-EXAONE-236B-A23B", Layers: 48, Hidden: 6144, Heads: 64, KVHeads: 8, HeadDim: 128, FFN: 18432, Vocab: 153600, MaxPosition: 262144,
				SlidingWindow: 128, GlobalEvery: 4, NoRopeGlobal: true,
				Experts: 128, ExpertsPerToken: 8, SharedExperts: 1, ExpertFFN: 2048, DenseLayers: 1}, hf("LGAI-EXAONE/K-EXAONE-236B-A23B")},
		},
	})
}

// exaoneMoeFromConfig reads an exaone_moe config.json, each key with
// ExaoneMoeConfig's default (configuration_exaone_moe.py l.88-123).
func exaoneMoeFromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden = c.optInt("num_hidden_layers", 32), c.optInt("hidden_size", 4096)
	m.Heads, m.KVHeads = c.optInt("num_attention_heads", 32), c.optInt("num_key_value_heads", 32)
	// head_dim is no field of the class: getattr(config, "head_dim",
	// hidden / heads) (modeling_exaone_moe.py l.144).
	if m.Heads > 0 {
		m.HeadDim = c.optInt("head_dim", m.Hidden/m.Heads)
	}
	m.FFN, m.Vocab = c.optInt("intermediate_size", 16384), c.optInt("vocab_size", 102400)
	m.MaxPosition = c.optInt("max_position_embeddings", 2048)
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
	m.Experts, m.ExpertsPerToken = c.optInt("num_experts", 64), c.optInt("num_experts_per_tok", 8)
	m.SharedExperts, m.ExpertFFN = c.optInt("num_shared_experts", 1), c.optInt("moe_intermediate_size", 1024)
	if c.optList("mlp_layer_types") != nil {
		m.DenseLayers = mlpLayerTypes(c, m.Layers)
	} else {
		m.DenseLayers = min(c.optInt("first_k_dense_replace", 1), m.Layers)
	}
	if !c.optBool("norm_topk_prob", true) && c.err == nil {
		c.fail("norm_topk_prob false: the sigmoid router without renormalization is not modelled")
	}
	// n_group and topk_group (l.122-123) only limit which experts a token
	// may pick: no tensor of their own, not read.
	if v, ok := c.c["sliding_window"]; ok && v == nil && c.err == nil {
		c.fail("sliding_window null: ExaoneMoeConfig's sliding_window is an int (l.105); transformers 5.23 refuses None")
	}
	m.SlidingWindow = c.optInt("sliding_window", 4096)
	if c.optList("layer_types") == nil {
		// __post_init__ (l.132-138): sliding unless (i+1) is a multiple
		// of sliding_window_pattern, which must then be a number.
		if _, text := c.c["sliding_window_pattern"].(string); text && c.err == nil {
			c.fail("sliding_window_pattern is text without layer_types: ExaoneMoeConfig.__post_init__ computes (i + 1) % pattern (l.135) and raises")
		}
		if m.GlobalEvery = c.optInt("sliding_window_pattern", 4); m.GlobalEvery < 1 && c.err == nil {
			c.fail("sliding_window_pattern 0 without layer_types: ExaoneMoeConfig.__post_init__ divides by it (l.135)")
		}
	}
	window := m.SlidingWindow
	c.layerTypes(m)
	if m.SlidingWindow == 0 && c.err == nil {
		// Every layer full: transformers keeps the window (an int), so
		// no layer rotates q and k (l.183), which is not modelled.
		c.fail(fmt.Sprintf("layer_types: every layer full_attention with sliding_window %d: no layer would apply the rotary embedding (modeling_exaone_moe.py l.183); not modelled", window))
	}
	m.NoRopeGlobal = m.GlobalEvery > 0 // every layer local: none skips it
}

// exaoneMoeModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const exaoneMoeModelType = "exaone_moe"
