package vram

import (
	"fmt"
	"slices"

	"github.com/vramlab/vramlab/vram/internal/strictjson"
)

// LFM3 (transformers 5.23.0 models/lfm3/modeling_lfm3.py;
// configuration_lfm3.py): LFM2's hybrid of gated short convolutions
// (Lfm3ShortConv, l.341-362: conv, in_proj, out_proj) and GQA attention,
// with three layer kinds in layer_types — "conv", "full_attention" and
// "sliding_attention" (within sliding_window, l.237) — defaulting to full
// attention at i % 4 == 2, sliding attention at i % 4 == 0 for i > 0 and
// convolutions elsewhere (configuration_lfm3.py:94-98). The attention
// (l.223-242) is Qwen3's: q/k/v/o_proj, per-head q_norm and k_norm, and a
// sigmoid gate per head, g_proj (hidden → heads) under use_attention_gate.
// Every layer has a SwiGLU MLP (w1, w3, w2), operator_norm and ffn_norm,
// and under use_sandwich_norm post_operator_norm and post_ffn_norm on the
// sublayers' outputs (l.418-426); the final norm is embedding_norm and the
// embedding is tied. The rotary embedding keeps an inv_freq and an
// original_inv_freq per attention kind present (l.72-81).
func init() {
	register(&family{
		name: lfm3ModelType, source: "transformers/models/lfm3/modeling_lfm3.py (transformers 5.23.0)",
		defaults:    Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, QKNorm: "head", TiedEmbeddings: true},
		shortConv:   true,
		servingOnly: "its modeling code is transformers 5's (per-kind rotary embeddings, a per-head attention gate, sandwich norms), which the training rules do not follow yet",
		only5:       true,
		fromConfig:  lfm3FromConfig,
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["conv_L_cache"], c["conv_bias"] = m.ShortConv.Kernel, m.ShortConv.Bias
			c["use_sandwich_norm"], c["use_attention_gate"] = m.NormPosition == "sandwich", true
			if m.Vocab <= 124900 {
				// Lfm3Config's default token ids (pad 124,893, bos 124,894,
				// eos 124,900; configuration_lfm3.py:67-69) must be rows of
				// the embedding.
				c["pad_token_id"], c["bos_token_id"], c["eos_token_id"] = nil, nil, nil
			}
			if m.SlidingWindow > 0 {
				c["sliding_window"] = m.SlidingWindow
			}
			types := make([]string, m.Layers)
			for i := range types {
				switch {
				case m.ConvLayer(i):
					types[i] = "conv"
				case m.LocalLayer(i):
					types[i] = "sliding_attention"
				default:
					types[i] = "full_attention"
				}
			}
			c["layer_types"] = types
		},
		check: func(m Model) error {
			switch {
			case m.ShortConv == nil:
				return fmt.Errorf("model: lfm3 needs model.short_conv (kernel, attention_layers, local_layers)")
			case m.Bias != BiasNone:
				return fmt.Errorf("model.bias %q: lfm3's attention (attention_bias) and MLP have no biases here (the convolution's are model.short_conv.bias)", m.Bias)
			case m.NormPosition != "sandwich" && m.NormPosition != "":
				return fmt.Errorf("model.norm_position %q: lfm3's norms are pre-norms, with post-norms under use_sandwich_norm (sandwich)", m.NormPosition)
			case m.GlobalEvery > 0 || m.GlobalFirst:
				return fmt.Errorf("model: lfm3's sliding layers are model.short_conv.local_layers, not global_every or global_first")
			}
			return requireQKNorm("head")(m)
		},
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			l.add("model.embed_tokens.weight", "embedding", d.v, d.h)
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf("model.layers.%d.", i)
				if m.ConvLayer(i) {
					shortConvTensors(m, l, p+"conv.")
				} else {
					// Lfm3Attention (l.223-242): q, k, v, o, q_norm, k_norm, g_proj.
					attnQKVO(m, l, p+"self_attn.")
					qkNormTensors(m, l, p+"self_attn.")
					l.linear(p+"self_attn.g_proj", "other", d.h, int64(m.Heads), false)
				}
				l.linear(p+"feed_forward.w1", "gate_proj", d.h, d.f, false)
				l.linear(p+"feed_forward.w3", "up_proj", d.h, d.f, false)
				l.linear(p+"feed_forward.w2", "down_proj", d.f, d.h, false)
				l.norm(p+"operator_norm", false, d.h)
				l.norm(p+"ffn_norm", false, d.h)
				if m.NormPosition == "sandwich" {
					l.norm(p+"post_operator_norm", false, d.h)
					l.norm(p+"post_ffn_norm", false, d.h)
				}
			}
			l.headSide()
			l.norm("model.embedding_norm", false, d.h)
			lmHead(m, l, "lm_head", "score")
		},
		buffers: lfm3Buffers,
		block: func(r *resolved, layer int) BlockActivations {
			if r.m.ConvLayer(layer) {
				return shortConvBlock(r, layer)
			}
			return decoderBlock(r, layer)
		},
		recipe: lfm3Recipe,
		// LiquidAI/LFM3-1.7B (the config class's docstring checkpoint,
		// configuration_lfm3.py:26): the class's defaults (l.57-82) — 24
		// layers 2,048 wide, 16 heads of 128 over 4 KV heads, full attention
		// at layers 2, 6, 10, 14, 18, 22, sliding attention (256 tokens) at
		// 4, 8, 12, 16, 20, 7-tap convolutions elsewhere, an MLP of 7,680, a
		// 128,000-token vocabulary, tied; 128,000 positions. Built on meta
		// with transformers 5.23.0: 1,728,801,536 parameters.
		presets: map[string]Preset{
			"lfm3-1.7b": {Model{Name: "LiquidAI/LFM3-1.7B", Layers: 24, Hidden: 2048, Heads: 16, KVHeads: 4, HeadDim: 128, FFN: 7680, Vocab: 128000, MaxPosition: 128000, TiedEmbeddings: true, SlidingWindow: 256, NormPosition: "sandwich",
				ShortConv: &ShortConv{Kernel: 7, Attention: []int{2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22}, Local: []int{4, 8, 12, 16, 20}}}, hf("LiquidAI/LFM3-1.7B")},
		},
	})
}

// lfm3Recipe is LFM3's step at transformers 5.23: a rotary cos and sin
// per attention kind (Lfm3Model.forward l.562-565), the per-head sigmoid
// gate (l.280-281), the short convolution through causal_conv1d_fn
// (l.319-338, 393-397), and the training cache a DynamicCache (l.537):
// its torch.cat copies k and v, and the conv layers make their conv
// states on first use (not LFM2's Lfm2HybridConvCache, which kept k and v
// and built every conv state before the layers).
func lfm3Recipe(Model, libVersion) recipe {
	return recipe{localRotary: true, headGate: true, shortConv5: true}
}

// lfm3FromConfig reads an Lfm3Config; a key config.json leaves out takes
// the class's default (configuration_lfm3.py:57-98, transformers 5.23.0).
func lfm3FromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden, m.Vocab = c.optInt("num_hidden_layers", 24), c.optInt("hidden_size", 2048), c.optInt("vocab_size", 128000)
	m.Heads, m.KVHeads = c.optInt("num_attention_heads", 16), c.optInt("num_key_value_heads", 4)
	m.HeadDim, m.FFN = c.optInt("head_dim", 128), c.optInt("intermediate_size", 7680)
	m.MaxPosition = c.optInt("max_position_embeddings", 128000)
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
	if c.optBool("use_sandwich_norm", true) {
		m.NormPosition = "sandwich" // else pre-norms only (l.421-426: nn.Identity)
	}
	if c.optBool("attention_bias", false) {
		m.Bias = BiasAll // refused by check: not modelled
	}
	if !c.optBool("use_attention_gate", true) {
		c.fail("use_attention_gate = false (no g_proj) is not modelled for lfm3")
	}
	attn, local := c.lfm3LayerKinds(m.Layers)
	// sliding_window (default 256); null would let the sliding layers see
	// every key (l.237 passes None), which the layer lists cannot say.
	if v, ok := c.c["sliding_window"]; ok && v == nil && local != nil {
		c.fail("sliding_window = null with sliding_attention layers is not modelled for lfm3")
	}
	if local != nil {
		m.SlidingWindow = c.optInt("sliding_window", 256)
	}
	m.ShortConv = &ShortConv{Kernel: c.optInt("conv_L_cache", 7), Bias: c.optBool("conv_bias", false), Attention: attn, Local: local}
}

// lfm3LayerKinds reads layer_types ("conv", "full_attention",
// "sliding_attention" per layer) into the attention layers and the
// sliding ones among them; without it, the class's pattern (l.94-98).
func (r *hfReader) lfm3LayerKinds(layers int) (attn, local []int) {
	raw := r.optList("layer_types")
	if raw == nil {
		for i := range max(0, min(layers, maxLayers)) {
			if i%4 == 2 || i%4 == 0 && i > 0 {
				attn = append(attn, i)
			}
			if i%4 == 0 && i > 0 {
				local = append(local, i)
			}
		}
		return attn, local
	}
	if len(raw) != layers {
		r.fail(fmt.Sprintf("layer_types lists %d layers for num_hidden_layers = %d", len(raw), layers))
		return nil, nil
	}
	kinds := []any{"conv", "full_attention", "sliding_attention"}
	for i, v := range raw {
		switch k := slices.Index(kinds, v); k {
		case 1, 2:
			attn = append(attn, i)
			if k == 2 {
				local = append(local, i)
			}
		case -1:
			r.fail(fmt.Sprintf("layer_types[%d] = %s: want \"conv\", \"full_attention\" or \"sliding_attention\"", i, strictjson.Kind(v)))
			return nil, nil
		}
	}
	return attn, local
}

// lfm3Buffers are Lfm3RotaryEmbedding's: per attention kind present, in
// _rope_type_labels' order (full, then sliding; configuration_lfm3.py:76),
// <kind>_inv_freq and <kind>_original_inv_freq of head_dim / 2 — the
// proportional rope of the full layers also returns head_dim / 2
// frequencies, zero past its partial_rotary_factor (modeling_rope_utils.py
// _compute_proportional_rope_parameters).
func lfm3Buffers(m Model, b *bufferList) {
	var full, sliding bool
	for i := 0; i < m.Layers; i++ {
		if m.AttentionLayer(i) {
			full = full || !m.LocalLayer(i)
			sliding = sliding || m.LocalLayer(i)
		}
	}
	half := int64(m.HeadDim) / 2
	for _, k := range []struct {
		name string
		on   bool
	}{{"full_attention", full}, {"sliding_attention", sliding}} {
		if k.on {
			b.add("model.rotary_emb."+k.name+"_inv_freq", -1, FP32, half)
			b.add("model.rotary_emb."+k.name+"_original_inv_freq", -1, FP32, half)
		}
	}
}

// lfm3ModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const lfm3ModelType = "lfm3"
