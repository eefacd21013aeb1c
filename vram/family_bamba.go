package vram

import (
	"fmt"

	"github.com/vramlab/vramlab/vram/internal/strictjson"
)

// Bamba (transformers/models/bamba/modeling_bamba.py): a hybrid of
// Mamba-2 mixers (BambaMixer, the same torch path as Mamba2Mixer) and
// Llama attention blocks at attn_layer_indices, each layer with a gated
// MLP after its mixer or attention (input_layernorm, mixer, residual,
// pre_ff_layernorm, feed_forward, residual), a rotary embedding over half
// of each attention head (BambaConfig sets partial_rotary_factor 0.5), and
// a causal mask for the attention layers only. A key config.json leaves
// out takes the class's default (configuration_bamba.py:49-80,
// transformers 5.23.0): attn_layer_indices None makes every layer a
// Mamba-2 mixer.
func init() {
	register(&family{
		name: bambaModelType, source: "transformers/models/bamba/modeling_bamba.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone},
		ssm:      true,
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden = c.optInt("num_hidden_layers", 32), c.optInt("hidden_size", 4096)
			m.Heads = c.optInt("num_attention_heads", 32)
			m.KVHeads = c.optIntNull("num_key_value_heads", 8, m.Heads)
			m.FFN, m.Vocab = c.optInt("intermediate_size", 14336), c.optInt("vocab_size", 128000)
			m.MaxPosition = c.optInt("max_position_embeddings", 262144)
			m.HeadDim = c.optInt("head_dim", 0)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			m.RotaryPct = c.optFloat("partial_rotary_factor", 0.5)
			m.SSM = c.hybridSSM(m.Hidden, m.Layers, "attn_layer_indices")
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			writeHybridSSM(m, c)
			c["attn_layer_indices"], c["partial_rotary_factor"] = m.SSM.Attention, m.RotaryPct
		},
		check: func(m Model) error {
			if m.SSM == nil {
				return fmt.Errorf("model: bamba needs model.ssm (its Mamba-2 mixers) with attention_layers")
			}
			if m.Bias != BiasNone {
				return fmt.Errorf("model.bias %q: bamba's attention and MLP have no biases (BambaConfig fixes them off)", m.Bias)
			}
			return nil
		},
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			l.add("model.embed_tokens.weight", "embedding", d.v, d.h)
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf("model.layers.%d.", i)
				mlpGated(m, l, p+"feed_forward.", d.f, -1)
				l.norm(p+"input_layernorm", false, d.h)
				l.norm(p+"pre_ff_layernorm", false, d.h)
				if m.SSMLayer(i) {
					mamba2Mixer(m, l, p+"mamba.")
				} else {
					attnQKVO(m, l, p+"self_attn.")
				}
			}
			l.headSide()
			l.norm("model.final_layernorm", false, d.h)
			lmHead(m, l, "lm_head", "score")
		},
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		// BambaModel.forward returns no cache unless one is passed in
		// ("Bamba requires an initialized HybridMambaAttentionDynamicCache
		// to return a cache").
		// transformers 5 builds a DynamicCache in training too (5.23
		// modeling_bamba.py:967-968); 4.57 returned none without a
		// HybridMambaAttentionDynamicCache (4.57 l.1150-1154).
		recipe: func(_ Model, lib libVersion) recipe { return recipe{noTrainingCache: lib.before(5, 0)} },
		// Bamba-9B's config.json: 32 layers 4,096 wide, attention at
		// layers 9, 18 and 27 (32 heads over 8 KV heads), Mamba-2 mixers
		// of 128 heads of 64 with a 128-number state; it has no
		// max_position_embeddings, so BambaConfig's 262,144 applies.
		presets: map[string]Preset{
			"bamba-9b": {Model{Name: "ibm-ai-platform/Bamba-9B", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 128256, MaxPosition: 262144, RotaryPct: 0.5,
				SSM: &SSM{Heads: 128, HeadDim: 64, State: 128, Groups: 1, ConvKernel: 4, Chunk: 256, Attention: []int{9, 18, 27}}}, hf("ibm-ai-platform/Bamba-9B")},
		},
	})
}

// hybridSSM reads a hybrid's Mamba-2 mixer under the mamba_* keys
// (BambaConfig, GraniteMoeHybridConfig: mamba_n_heads, mamba_d_head
// ("auto": expand · hidden / heads), mamba_d_state, mamba_n_groups,
// mamba_d_conv, mamba_expand, mamba_chunk_size, mamba_conv_bias,
// mamba_proj_bias) and its attention layers from key (a list of layer
// indices).
func (r *hfReader) hybridSSM(hidden, layers int, key string) *SSM {
	s := SSM{Heads: r.optInt("mamba_n_heads", 128), State: r.optInt("mamba_d_state", 256), Groups: r.optInt("mamba_n_groups", 1),
		ConvKernel: r.optInt("mamba_d_conv", 4), Chunk: r.optInt("mamba_chunk_size", 256),
		NoConvBias: !r.optBool("mamba_conv_bias", true), ProjBias: r.optBool("mamba_proj_bias", false)}
	inner := r.optInt("mamba_expand", 2) * hidden
	if v, ok := r.c["mamba_d_head"].(string); ok && v == "auto" || r.c["mamba_d_head"] == nil {
		if s.Heads > 0 {
			s.HeadDim = inner / s.Heads
		}
	} else {
		s.HeadDim = r.int("mamba_d_head")
	}
	if s.Heads*s.HeadDim != inner && r.err == nil {
		r.fail(fmt.Sprintf("mamba_n_heads · mamba_d_head = %d must equal mamba_expand · hidden_size = %d", s.Heads*s.HeadDim, inner))
	}
	for i, v := range r.optList(key) {
		f, ok := v.(float64)
		if !ok || f != float64(int(f)) || f < 0 || int(f) >= layers {
			r.fail(fmt.Sprintf("%s[%d] = %s: want a layer index in [0, %d)", key, i, strictjson.Kind(v), layers))
			break
		}
		s.Attention = append(s.Attention, int(f))
	}
	return &s
}

// writeHybridSSM writes the mamba_* keys of hybridSSM.
func writeHybridSSM(m Model, c map[string]any) {
	s := *m.SSM
	c["mamba_n_heads"], c["mamba_d_head"], c["mamba_d_state"], c["mamba_n_groups"] = s.Heads, s.HeadDim, s.State, s.Groups
	c["mamba_d_conv"], c["mamba_expand"], c["mamba_chunk_size"] = s.ConvKernel, int(s.inner())/m.Hidden, s.Chunk
	c["mamba_conv_bias"], c["mamba_proj_bias"] = !s.NoConvBias, s.ProjBias
}

// bambaModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const bambaModelType = "bamba"
