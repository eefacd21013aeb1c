package vram

import (
	"fmt"
	"slices"

	"github.com/vramlab/vramlab/vram/internal/strictjson"
)

// LFM2 (transformers/models/lfm2/modeling_lfm2.py): a hybrid of gated
// short convolutions (Lfm2ShortConv; model.short_conv, shortconv.go) and
// GQA attention blocks with a per-head RMSNorm on q and k (q_layernorm,
// k_layernorm) and an output projection named out_proj, at the layers
// layer_types calls "full_attention"; every layer has a SwiGLU MLP (w1
// gate, w3 up, w2 down) after operator_norm's branch, the final norm is
// embedding_norm, and the embedding is tied. Lfm2Model registers two
// rotary embeddings (rotary_emb, pos_emb) and uses pos_emb. In training
// with use_cache it builds Lfm2HybridConvCache: a conv state per layer,
// and k and v appended as they are (no torch.cat on a fresh cache).
func init() {
	register(&family{
		name: lfm2ModelType, gguf: ggufLFM2, source: "transformers/models/lfm2/modeling_lfm2.py",
		defaults:   Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, QKNorm: "head", TiedEmbeddings: true},
		shortConv:  true,
		fromConfig: lfm2FromConfig,
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["block_auto_adjust_ff_dim"] = false // intermediate_size is the MLP's width as is
			c["conv_L_cache"], c["conv_bias"] = m.ShortConv.Kernel, m.ShortConv.Bias
			writeLayerKinds(c, m.Layers, m.AttentionLayer, "full_attention", "conv")
		},
		check: func(m Model) error {
			switch {
			case m.ShortConv == nil:
				return fmt.Errorf("model: lfm2 needs model.short_conv (kernel, attention_layers)")
			case m.Bias != BiasNone:
				return fmt.Errorf("model.bias %q: lfm2's attention and MLP have no biases (the convolution's are model.short_conv.bias)", m.Bias)
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
					lfm2Attention(m, l, p+"self_attn.")
				}
				l.linear(p+"feed_forward.w1", "gate_proj", d.h, d.f, false)
				l.linear(p+"feed_forward.w3", "up_proj", d.h, d.f, false)
				l.linear(p+"feed_forward.w2", "down_proj", d.f, d.h, false)
				l.norm(p+"operator_norm", false, d.h)
				l.norm(p+"ffn_norm", false, d.h)
			}
			l.headSide()
			l.norm("model.embedding_norm", false, d.h)
			lmHead(m, l, "lm_head", "score")
		},
		buffers: func(m Model, b *bufferList) {
			rotaryBuffer(m, b, "model.")
			b.add("model.pos_emb.inv_freq", -1, FP32, int64(m.HeadDim)/2)
		},
		block: func(r *resolved, layer int) BlockActivations {
			if r.m.ConvLayer(layer) {
				return shortConvBlock(r, layer)
			}
			return decoderBlock(r, layer)
		},
		recipe: func(Model, libVersion) recipe { return recipe{cacheKeepsKV: true} },
		// LiquidAI/LFM2-1.2B (config.json, transformers 4.54): 16 layers 2,048
		// wide, attention at full_attn_idxs [2, 5, 8, 10, 12, 14] (32 heads
		// of 64 over 8 KV heads), short convolutions of 3 taps without
		// biases elsewhere; block_ff_dim 12,288 auto-adjusted to an MLP of
		// int(2 · 12288 / 3) = 8,192 (Lfm2MLP); a 65,536-token vocabulary,
		// tied; 128,000 positions.
		presets: map[string]Preset{
			"lfm2-1.2b": {Model{Name: "LiquidAI/LFM2-1.2B", Layers: 16, Hidden: 2048, Heads: 32, KVHeads: 8, HeadDim: 64, FFN: 8192, Vocab: 65536, MaxPosition: 128000, TiedEmbeddings: true,
				ShortConv: &ShortConv{Kernel: 3, Attention: []int{2, 5, 8, 10, 12, 14}}}, hf("LiquidAI/LFM2-1.2B")},
		},
	})
}

// lfm2FromConfig reads an Lfm2Config: the original keys (block_ff_dim,
// theta, tie_embedding) where given, as Lfm2Config.__init__ takes them;
// the MLP's width after block_auto_adjust_ff_dim; the layer kinds from
// layer_types, else full_attn_idxs (every layer attention without it). A
// key config.json leaves out takes the class's default
// (configuration_lfm2.py:58-91, transformers 5.23.0).
func lfm2FromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden, m.Vocab = c.optInt("num_hidden_layers", 32), c.optInt("hidden_size", 2560), c.optInt("vocab_size", 65536)
	m.Heads, m.KVHeads = c.optInt("num_attention_heads", 32), c.optInt("num_key_value_heads", 8)
	m.MaxPosition = c.optInt("max_position_embeddings", 128000)
	if m.Heads > 0 {
		m.HeadDim = c.optInt("head_dim", m.Hidden/m.Heads)
	}
	ff := c.optInt("block_ff_dim", c.optInt("intermediate_size", 12288))
	if c.optBool("block_auto_adjust_ff_dim", true) {
		// Lfm2MLP: int(2 · ff / 3), times block_ffn_dim_multiplier, rounded
		// up to a multiple of block_multiple_of.
		ff = 2 * ff / 3
		if mult, ok := c.c["block_ffn_dim_multiplier"]; !ok || mult != nil {
			ff = int(c.optFloat("block_ffn_dim_multiplier", 1) * float64(ff))
			if k := c.optInt("block_multiple_of", 256); k > 0 {
				ff = k * ((ff + k - 1) / k)
			}
		}
	}
	m.FFN = ff
	m.TiedEmbeddings = c.optBool("tie_embedding", c.optBool("tie_word_embeddings", true))
	m.ShortConv = &ShortConv{Kernel: c.optInt("conv_L_cache", 3), Bias: c.optBool("conv_bias", false), Attention: c.lfm2AttentionLayers(m.Layers)}
}

// lfm2AttentionLayers reads which layers are attention blocks: layer_types
// ("full_attention" or "conv" per layer), else full_attn_idxs, else all.
func (r *hfReader) lfm2AttentionLayers(layers int) []int {
	if out, ok := r.layerKinds(layers, "full_attention", "conv"); ok {
		return out
	}
	raw := r.optList("full_attn_idxs")
	if raw == nil {
		out := make([]int, max(0, min(layers, maxLayers)))
		for i := range out {
			out[i] = i
		}
		return out
	}
	var out []int
	for i, v := range raw {
		f, ok := v.(float64)
		if !ok || f != float64(int(f)) || f < 0 || int(f) >= layers {
			r.fail(fmt.Sprintf("full_attn_idxs[%d] = %s: want a layer index in [0, %d)", i, strictjson.Kind(v), layers))
			return nil
		}
		out = append(out, int(f))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// lfm2Attention adds an Lfm2Attention's parameters: q, k, v, out_proj
// and the per-head q_layernorm and k_layernorm.
func lfm2Attention(m Model, l *tensorList, p string) {
	d := m.dims()
	l.linear(p+"q_proj", "q_proj", d.h, d.q, false)
	l.linear(p+"k_proj", "k_proj", d.h, d.kv, false)
	l.linear(p+"v_proj", "v_proj", d.h, d.kv, false)
	l.linear(p+"out_proj", "o_proj", d.q, d.h, false)
	l.add(p+"q_layernorm.weight", "norm", int64(m.HeadDim))
	l.add(p+"k_layernorm.weight", "norm", int64(m.HeadDim))
}

// ggufLFM2 is this family's architecture name in GGUF files
// (general.architecture).
const ggufLFM2 = "lfm2"

// lfm2ModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const lfm2ModelType = "lfm2"
