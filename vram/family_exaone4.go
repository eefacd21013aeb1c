package vram

import "fmt"

// EXAONE 4.0 (transformers/models/exaone4/modeling_exaone4.py): norms after
// each sublayer, before its residual add (post_attention_layernorm,
// post_feedforward_layernorm; none before, as OLMo 2), an RMSNorm over each
// head of q and of k, and — when the config has a sliding window — three
// sliding-window layers to each global one, whose global layers leave q and
// k unrotated (Exaone4Attention.forward: apply_rotary_pos_emb only "if
// self.sliding_window is None or self.is_sliding"). Without a window (the
// 1.2B) every layer is global and rotates. A key config.json leaves out
// takes the class's default (configuration_exaone4.py:79-98, transformers
// 5.23.0).
func init() {
	register(&family{
		name: exaone4ModelType, source: "transformers/models/exaone4/modeling_exaone4.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, NormPosition: "sublayer", QKNorm: "head"},
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden = c.optInt("num_hidden_layers", 32), c.optInt("hidden_size", 4096)
			m.Heads = c.optInt("num_attention_heads", 32)
			m.KVHeads = c.optIntNull("num_key_value_heads", 32, m.Heads)
			m.FFN, m.Vocab = c.optInt("intermediate_size", 16384), c.optInt("vocab_size", 102400)
			m.MaxPosition = c.optInt("max_position_embeddings", 2048)
			m.HeadDim = c.optInt("head_dim", 0)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			// Exaone4Config: sliding_window 4096 and sliding_window_pattern
			// 4 by default; the released configs spell the pattern as
			// "LLLG" and list layer_types, which win.
			m.SlidingWindow = c.optInt("sliding_window", 4096)
			if _, text := c.c["sliding_window_pattern"].(string); !text {
				m.GlobalEvery = c.optInt("sliding_window_pattern", 4)
			} else {
				m.GlobalEvery = c.exaonePattern()
			}
			if m.SlidingWindow == 0 {
				m.GlobalEvery = 0
			}
			c.layerTypes(m)
			m.NoRopeGlobal = m.SlidingWindow > 0 && m.GlobalEvery > 0
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["sliding_window"] = nilIfZero(float64(m.SlidingWindow))
			c["sliding_window_pattern"] = m.GlobalEvery
			writeLayerTypes(m, c, "sliding_attention")
		},
		check: func(m Model) error {
			if err := requireNormPosition("sublayer")(m); err != nil {
				return err
			}
			if m.NoRopeGlobal != (m.SlidingWindow > 0 && m.GlobalEvery > 0) {
				return fmt.Errorf("model: exaone4's global layers skip the rotary embedding exactly when it has sliding-window layers (no_rope_global %v, sliding_window %d, global_every %d)", m.NoRopeGlobal, m.SlidingWindow, m.GlobalEvery)
			}
			return requireQKNorm("head")(m)
		},
		tensors: sublayerDecoder,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		// The 32B: 64 layers, 40 heads over 8 KV heads of 128, a
		// 4096-token window on three layers of four; the 1.2B: 30 global
		// layers, tied embeddings (LG AI's model cards and the configs'
		// copies).
		presets: map[string]Preset{
			"exaone-4.0-32b": {Model{Name: "LGAI-EXAONE/EXAONE-4.0-32B", Layers: 64, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128, FFN: 27392, Vocab: 102400,
				MaxPosition: 131072, SlidingWindow: 4096, GlobalEvery: 4, NoRopeGlobal: true}, hf("LGAI-EXAONE/EXAONE-4.0-32B")},
			"exaone-4.0-1.2b": {Model{Name: "LGAI-EXAONE/EXAONE-4.0-1.2B", Layers: 30, Hidden: 2048, Heads: 32, KVHeads: 8, HeadDim: 64, FFN: 4096, Vocab: 102400,
				MaxPosition: 65536, TiedEmbeddings: true}, hf("LGAI-EXAONE/EXAONE-4.0-1.2B")},
		},
	})
}

// exaonePattern reads sliding_window_pattern written as letters, one a
// layer of a repeating group ("LLLG": local, local, local, global) as
// EXAONE's released configs spell it: global every len(pattern) layers
// when the group ends in its only G.
func (r *hfReader) exaonePattern() int {
	s := r.optString("sliding_window_pattern", "")
	for i, ch := range s {
		if (ch == 'G') != (i == len(s)-1) || (ch != 'G' && ch != 'L') {
			r.fail(fmt.Sprintf("sliding_window_pattern %q: only groups of local layers (L) ending in one global layer (G) are modelled", s))
			return 0
		}
	}
	return len(s)
}

// exaone4ModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const exaone4ModelType = "exaone4"
