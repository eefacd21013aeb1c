package vram

import (
	"fmt"
	"math"
)

// Jamba (transformers/models/jamba/modeling_jamba.py): a hybrid of Mamba-1
// mixers (JambaMambaMixer; mamba1.go) and attention without positional
// encoding (every attn_layer_period-th layer from attn_layer_offset), each
// layer followed by an MLP or, every expert_layer_period-th layer, a
// sparse mixture of experts (JambaSparseMoeBlock: a softmax router, the
// top num_experts_per_tok weights not renormalised, the experts in a
// Python loop). Norms are RMSNorms (input_layernorm, pre_ff_layernorm,
// final_layernorm). JambaModel builds no cache in training unless one is
// passed in.
func init() {
	register(&family{
		name: jambaModelType, source: "transformers/models/jamba/modeling_jamba.py",
		defaults:   Model{MLP: "swiglu", Norm: "rmsnorm", Position: "none", Bias: BiasNone, Router: "softmax_topk"},
		mamba1:     true,
		fromConfig: jambaFromConfig,
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			s := *m.Mamba
			c["mamba_d_state"], c["mamba_d_conv"], c["mamba_expand"], c["mamba_dt_rank"] = s.State, s.ConvKernel, s.Inner/m.Hidden, s.DTRank
			c["mamba_conv_bias"], c["mamba_proj_bias"], c["use_mamba_kernels"] = s.ConvBias, s.ProjBias, false
			period := m.Layers
			if len(s.Attention) > 1 {
				period = s.Attention[1] - s.Attention[0]
			}
			c["attn_layer_period"], c["attn_layer_offset"] = period, s.Attention[0]
			c["num_experts"], c["num_experts_per_tok"] = max(1, m.Experts), max(1, m.ExpertsPerToken)
			c["expert_layer_period"], c["expert_layer_offset"] = max(1, m.MoEEvery), max(1, m.MoEEvery)-1
		},
		check: func(m Model) error {
			switch {
			case m.Mamba == nil || len(m.Mamba.Attention) == 0:
				return fmt.Errorf("model: jamba needs model.mamba (its Mamba-1 mixers) with attention_layers")
			case m.Bias != BiasNone || m.Position != "none":
				return fmt.Errorf("model: jamba's attention has no biases and no positional encoding (bias %q, position %q)", m.Bias, m.Position)
			case m.Experts > 0 && (m.ExpertFFN != m.FFN || m.SharedExperts > 0 || m.DenseLayers > 0):
				return fmt.Errorf("model: jamba's experts are as wide as its MLPs (expert_ffn = ffn), with no shared expert and no leading dense layers")
			}
			return nil
		},
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			l.add("model.embed_tokens.weight", "embedding", d.v, d.h)
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf("model.layers.%d.", i)
				if m.MambaLayer(i) {
					mamba1Tensors(m, l, p+"mamba.")
				} else {
					attnQKVO(m, l, p+"self_attn.")
				}
				jambaFeedForward(m, l, p+"feed_forward.", i)
				l.norm(p+"input_layernorm", false, d.h)
				l.norm(p+"pre_ff_layernorm", false, d.h)
			}
			l.headSide()
			l.norm("model.final_layernorm", false, d.h)
			lmHead(m, l, "lm_head", "score")
		},
		block: func(r *resolved, layer int) BlockActivations {
			if r.m.MambaLayer(layer) {
				return mamba1Block(r, layer)
			}
			return decoderBlock(r, layer)
		},
		recipe: func(Model, libVersion) recipe { return recipe{noTrainingCache: true} },
		// Jamba-v0.1 (ai21labs/Jamba-v0.1 config.json, JambaConfig's
		// defaults): 32 layers 4,096 wide, attention at layers 4, 12, 20
		// and 28 (32 heads over 8 KV heads), Mamba-1 mixers of 8,192 with a
		// 16-number state and a Δt rank of 256, 16 experts of 14,336 (top
		// 2) in every other layer, 65,536 tokens.
		presets: map[string]Preset{
			"jamba-v0.1": {jambaV01("ai21labs/Jamba-v0.1"), hf("ai21labs/Jamba-v0.1")},
		},
	})
}

// jambaV01 is Jamba-v0.1's shape.
func jambaV01(name string) Model {
	return Model{Name: name, Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 65536, MaxPosition: 262144,
		Experts: 16, ExpertsPerToken: 2, ExpertFFN: 14336, MoEEvery: 2,
		Mamba: &Mamba{Inner: 8192, State: 16, ConvKernel: 4, DTRank: 256, ConvBias: true, Attention: []int{4, 12, 20, 28}}}
}

// jambaFeedForward adds a layer's JambaMLP, or its JambaSparseMoeBlock
// (router, then experts.N.gate_proj, up_proj, down_proj).
func jambaFeedForward(m Model, l *tensorList, p string, layer int) {
	if !m.IsMoELayer(layer) {
		mlpGated(m, l, p, int64(m.FFN), -1)
		return
	}
	l.linear(p+"router", "router", int64(m.Hidden), int64(m.Experts), false)
	for e := 0; e < m.Experts; e++ {
		mlpGated(m, l, fmt.Sprintf("%sexperts.%d.", p, e), int64(m.ExpertFFN), e)
	}
}

// jambaFromConfig reads a JambaConfig: the common shape, the mamba_* keys
// (mamba_dt_rank "auto" is ceil(hidden / 16)), the attention layers from
// attn_layer_period and attn_layer_offset, the experts' layers from
// expert_layer_period and expert_layer_offset (every period-th layer from
// offset = period − 1 is modelled, as released). A key config.json leaves
// out takes the class's default (configuration_jamba.py:67-105,
// transformers 5.23.0).
func jambaFromConfig(c *hfReader, m *Model) {
	c.commonOr(m, classShape{layers: 32, hidden: 4096, heads: 32, kvHeads: 8, ffn: 14336, vocab: 65536, maxPosition: 262144})
	m.HeadDim = 0 // JambaAttention: hidden_size / num_attention_heads
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
	if c.optString("hidden_act", "silu") != "silu" {
		c.fail(fmt.Sprintf("hidden_act %q: Jamba's MLPs are modelled with silu", c.optString("hidden_act", "")))
		return
	}
	s := Mamba{Inner: c.optInt("mamba_expand", 2) * m.Hidden, State: c.optInt("mamba_d_state", 16), ConvKernel: c.optInt("mamba_d_conv", 4),
		ConvBias: c.optBool("mamba_conv_bias", true), ProjBias: c.optBool("mamba_proj_bias", false)}
	if v, ok := c.c["mamba_dt_rank"].(string); ok && v == "auto" || c.c["mamba_dt_rank"] == nil {
		s.DTRank = int(math.Ceil(float64(m.Hidden) / 16))
	} else {
		s.DTRank = c.int("mamba_dt_rank")
	}
	period, offset := c.optInt("attn_layer_period", 8), c.optInt("attn_layer_offset", 4)
	if period < 1 || offset < 0 || offset >= period {
		c.fail(fmt.Sprintf("attn_layer_offset %d must be in [0, attn_layer_period %d)", offset, period))
		return
	}
	for i := offset; i < min(m.Layers, maxLayers); i += period {
		s.Attention = append(s.Attention, i)
	}
	m.Mamba = &s
	if e := c.optInt("num_experts", 16); e > 1 {
		ep, eo := c.optInt("expert_layer_period", 2), c.optInt("expert_layer_offset", 1)
		if eo != ep-1 {
			c.fail(fmt.Sprintf("expert_layer_offset %d: experts every expert_layer_period-th layer from period − 1 (%d) are modelled", eo, ep-1))
			return
		}
		m.Experts, m.ExpertsPerToken, m.ExpertFFN, m.MoEEvery = e, c.optInt("num_experts_per_tok", 2), m.FFN, ep
	}
}

// jambaModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const jambaModelType = "jamba"
