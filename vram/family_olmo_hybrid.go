package vram

import "fmt"

// OLMo Hybrid (transformers 5.23 models/olmo_hybrid/modeling_olmo_hybrid.py;
// configuration_olmo_hybrid.py): Gated DeltaNet layers (model.delta_net)
// and, at layer_types' "full_attention" layers (every fourth by default,
// the last one at least: __post_init__ l.122-130), OLMo 3's attention
// blocks. A DeltaNet layer (OlmoHybridLinearAttentionDecoderLayer,
// l.809-816) is pre-norm (input_layernorm, post_attention_layernorm) and
// its DeltaNet has separate q, k, v, a, b and g (gate) projections, one
// depthwise conv1d over q|k|v without bias, A_log and dt_bias per value
// head and a gated RMSNorm (o_norm) of one value head's width
// (OlmoHybridGatedDeltaNet, l.596-631). An attention layer
// (OlmoHybridAttentionDecoderLayer, l.768-776) puts its norms after each
// sublayer (post_attention_layernorm, post_feedforward_layernorm), with
// RMSNorms over all heads of q and of k (l.192-193) and biases on all four
// projections under attention_bias (l.180-190). The rotary embedding is
// built only when rope_parameters has a rope_theta (l.896-901; the
// released checkpoints set none, the comment there says): without it the
// attention layers have no positional encoding (l.216-218, 949). The
// checkpoint's mtp.* weights are not built (l.856) and not counted. A key
// config.json leaves out takes the class's default
// (configuration_olmo_hybrid.py l.90-119).
func init() {
	register(&family{
		name: olmoHybridModelType, source: "transformers/models/olmo_hybrid/modeling_olmo_hybrid.py (transformers 5.23.0)",
		defaults:    Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, NormPosition: "sublayer", QKNorm: "full"},
		deltaNet:    true,
		servingOnly: "its modeling code is transformers 5's; of it the training step is traced at 5.23, not transformers' generate",
		only5:       true,
		fromConfig:  olmoHybridFromConfig,
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["attention_bias"] = m.Bias == BiasAttn
			c["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 10000.0}
			if m.Position == "none" {
				c["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": nil}
			}
			d := m.DeltaNet
			c["linear_num_key_heads"], c["linear_num_value_heads"] = d.KeyHeads, d.ValueHeads
			c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"] = d.KeyDim, d.ValueDim, d.ConvKernel
			writeLayerKinds(c, m.Layers, func(i int) bool { return !m.DeltaNetLayer(i) }, "full_attention", "linear_attention")
			if m.Vocab <= olmoHybridPad {
				// The class's default would be outside the vocabulary, which
				// nn.Embedding(vocab_size, hidden_size, pad_token_id) refuses
				// (modeling_olmo_hybrid.py l.885).
				c["pad_token_id"] = nil
			}
		},
		check: func(m Model) error {
			switch {
			case m.DeltaNet == nil:
				return fmt.Errorf("model: olmo_hybrid needs model.delta_net (its Gated DeltaNet layers) with attention_layers")
			case len(m.DeltaNet.Attention) == 0 || len(m.DeltaNet.Attention) == m.Layers:
				// validate_architecture (configuration_olmo_hybrid.py l.145-150).
				return fmt.Errorf("model.delta_net.attention_layers: olmo_hybrid needs at least one attention layer and one Gated DeltaNet layer")
			case m.Bias != BiasNone && m.Bias != BiasAttn:
				return fmt.Errorf("model.bias %q: olmo_hybrid's attention_bias puts biases on q, k, v and o (\"attention\"), or none", m.Bias)
			case m.Position != "rope" && m.Position != "none":
				return fmt.Errorf("model.position %q: olmo_hybrid's attention has the rotary embedding or none", m.Position)
			case m.Experts != 0:
				return fmt.Errorf("model: olmo_hybrid has dense MLPs only")
			}
			if err := requireNormPosition("sublayer")(m); err != nil {
				return err
			}
			return requireQKNorm("full")(m)
		},
		tensors: olmoHybridTensors,
		buffers: func(m Model, b *bufferList) {
			if m.Position == "rope" {
				rotaryBuffers5(m, b, "model.")
			}
		},
		block: func(r *resolved, layer int) BlockActivations {
			if r.m.DeltaNetLayer(layer) {
				return recurrentBlock(r, layer, "input_layernorm", "post_attention_layernorm", (*actBuilder).olmoHybridGatedDeltaNet)
			}
			return decoderBlock(r, layer)
		},
		// OlmoHybridRMSNorm multiplies its fp32 output by the weight
		// before the cast back (l.78-83); apply_rotary_pos_emb casts q and
		// k back to their dtypes (l.127-150); the training cache is
		// DynamicCache (l.924-925), torch.cat copies of k and v; the
		// chunked rule is transformers 5's (deltanet5.go, l.359-498).
		recipe: func(Model, libVersion) recipe {
			return recipe{normWeightFP32: true, ropeKeepsDType: true, deltaRule5: true}
		},
		// allenai/Olmo-Hybrid-7B (the checkpoint the config class's
		// docstring names, l.29): the class's defaults (l.90-119), 32
		// layers 3,840 wide, every fourth attention (30 heads of 128), the
		// others Gated DeltaNet (30 key and value heads, keys 96 wide,
		// values 192, a 4-tap conv), an MLP of 11,008, 100,352 tokens:
		// 7,430,870,688 parameters as transformers 5.23 builds it on the
		// meta device. The class's default rope_parameters has a
		// rope_theta, so the preset keeps the rotary embedding, which the
		// modeling file says the released checkpoints do not use; a
		// release's config.json read with FromHFConfig says which.
		presets: map[string]Preset{
			"olmo-hybrid-7b": {Model{Name: "allenai/Olmo-Hybrid-7B", Layers: 32, Hidden: 3840, Heads: 30, KVHeads: 30, HeadDim: 128, FFN: 11008, Vocab: 100352, MaxPosition: 65536,
				DeltaNet: &DeltaNet{KeyHeads: 30, ValueHeads: 30, KeyDim: 96, ValueDim: 192, ConvKernel: 4,
					Attention: []int{3, 7, 11, 15, 19, 23, 27, 31}}}, hf("allenai/Olmo-Hybrid-7B")},
		},
	})
}

// olmoHybridPad is OlmoHybridConfig's pad_token_id default
// (configuration_olmo_hybrid.py l.101).
const olmoHybridPad = 100277

// olmoHybridFromConfig reads an OlmoHybridConfig, each key missing taking
// the class's default (configuration_olmo_hybrid.py l.90-119) and
// __post_init__'s derived ones (l.121-143).
func olmoHybridFromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden = c.optInt("num_hidden_layers", 32), c.optInt("hidden_size", 3840)
	m.Heads = c.optInt("num_attention_heads", 30)
	m.KVHeads = c.optInt("num_key_value_heads", m.Heads)
	// head_dim is no field of the class: getattr(config, "head_dim",
	// hidden / heads) (modeling_olmo_hybrid.py l.174).
	if m.Heads > 0 {
		m.HeadDim = c.optInt("head_dim", m.Hidden/m.Heads)
	}
	m.FFN, m.Vocab = c.optInt("intermediate_size", 11008), c.optInt("vocab_size", 100352)
	m.MaxPosition = c.optInt("max_position_embeddings", 65536)
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
	if c.optBool("attention_bias", false) {
		m.Bias = BiasAttn
	}
	if !olmoHybridRope(c) {
		m.Position = "none"
	}
	kh := c.optInt("linear_num_key_heads", m.Heads)
	d := DeltaNet{KeyHeads: kh, ValueHeads: c.optInt("linear_num_value_heads", m.Heads), ConvKernel: c.optInt("linear_conv_kernel_dim", 4)}
	if kh > 0 {
		d.KeyDim = c.optInt("linear_key_head_dim", int(0.75*float64(m.Hidden)/float64(kh)))
	}
	d.ValueDim = c.optInt("linear_value_head_dim", 2*d.KeyDim)
	if out, ok := c.layerKinds(m.Layers, "full_attention", "linear_attention"); ok {
		d.Attention = out
	} else {
		for i := 3; i < min(m.Layers, maxLayers); i += 4 {
			d.Attention = append(d.Attention, i)
		}
		if len(d.Attention) == 0 && m.Layers > 0 {
			d.Attention = []int{m.Layers - 1}
		}
	}
	m.DeltaNet = &d
}

// olmoHybridRope reports whether the model builds its rotary embedding:
// rope_parameters (or the legacy top-level rope_theta, which
// standardization moves into it) with a rope_theta that is not null.
func olmoHybridRope(c *hfReader) bool {
	if v, ok := c.c["rope_theta"]; ok && v == nil {
		return false
	}
	if rp, ok := c.c["rope_parameters"].(map[string]any); ok {
		if v, ok := rp["rope_theta"]; ok && v == nil {
			return false
		}
	}
	return true
}

// olmoHybridTensors lists an OLMo Hybrid's parameters in registration
// order: a DeltaNet layer's MLP, two norms and DeltaNet (l.812-816); an
// attention layer's attention, MLP and two norms (l.771-776).
func olmoHybridTensors(m Model, l *tensorList) {
	d := m.dims()
	l.add("model.embed_tokens.weight", "embedding", d.v, d.h)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("model.layers.%d.", i)
		if m.DeltaNetLayer(i) {
			mlpGated(m, l, p+"mlp.", d.f, -1)
			l.norm(p+"input_layernorm", false, d.h)
			l.norm(p+"post_attention_layernorm", false, d.h)
			olmoHybridDeltaNetTensors(m, l, p+"linear_attn.")
			continue
		}
		attnQKVO(m, l, p+"self_attn.")
		qkNormTensors(m, l, p+"self_attn.")
		mlpGated(m, l, p+"mlp.", d.f, -1)
		l.norm(p+"post_attention_layernorm", false, d.h)
		l.norm(p+"post_feedforward_layernorm", false, d.h)
	}
	l.headSide()
	l.norm("model.norm", false, d.h)
	lmHead(m, l, "lm_head", "score")
}

// olmoHybridDeltaNetTensors adds an OlmoHybridGatedDeltaNet's parameters
// under p (l.596-631): q, k, v, a, b, g and o projections, the bias-free
// depthwise conv1d over q|k|v, A_log and dt_bias, the gated o_norm.
func olmoHybridDeltaNetTensors(m Model, l *tensorList, p string) {
	d, h := *m.DeltaNet, int64(m.Hidden)
	nv := int64(d.ValueHeads)
	l.linear(p+"q_proj", "in_proj", h, d.keyDim(), false)
	l.linear(p+"k_proj", "in_proj", h, d.keyDim(), false)
	l.linear(p+"v_proj", "in_proj", h, d.valueDim(), false)
	l.linear(p+"a_proj", "in_proj", h, nv, false)
	l.linear(p+"b_proj", "in_proj", h, nv, false)
	l.linear(p+"g_proj", "in_proj", h, d.valueDim(), false)
	l.linear(p+"o_proj", "out_proj", d.valueDim(), h, false)
	l.add(p+"conv1d.weight", "other", d.convDim(), 1, int64(d.ConvKernel))
	l.add(p+"A_log", "other", nv)
	l.add(p+"dt_bias", "other", nv)
	l.norm(p+"o_norm", false, int64(d.ValueDim))
}

// olmoHybridGatedDeltaNet is OlmoHybridGatedDeltaNet.forward on x (the
// norm's output) in training (modeling_olmo_hybrid.py l.635-749 at
// 5.23.0): q_proj, k_proj and v_proj concatenated into q|k|v (torch.cat, a
// copy, l.657-664), which the convolution reads (l.683, deltaConv; its
// [..., -seq:] slice and the splits are views, l.692-702); β, the sigmoid
// of b_proj, doubled under linear_allow_neg_eigval (l.704-706: the class's
// default, true, is modelled: a product saving nothing); the fp32 decay of
// a_proj (l.708); transformers 5's chunked rule (l.724, deltanet5.go);
// then g_proj, the gate, made only after the rule (l.741), the gated
// o_norm on the [tokens·heads, head] views (l.742-744) and o_proj
// (l.747).
func (b *actBuilder) olmoHybridGatedDeltaNet(p blockPlan, x *actT) *actT {
	if b.r.servingEngine {
		return b.deltaNetProfile(x)
	}
	d := b.r.deltaDims()
	h := int64(b.r.m.Hidden)
	q := b.linear(p, "q_proj", "in_proj", x, h, d.kd)
	k := b.linear(p, "k_proj", "in_proj", x, h, d.kd)
	v := b.linear(p, "v_proj", "in_proj", x, h, d.vd)
	e := q.dtype
	act := b.deltaConv(p, d, b.op("mixed_qkv.cat", b.size(d.conv, e), e, list(q, k, v)))
	bb := b.linear(p, "b_proj", "in_proj", x, h, d.nv)
	beta := b.keep(b.op("beta.sigmoid", b.size(d.nv, bb.dtype), bb.dtype, list(bb)))
	beta = b.op("beta*2", b.size(d.nv, beta.dtype), beta.dtype, list(beta))
	g := b.deltaDecay(d, b.linear(p, "a_proj", "in_proj", x, h, d.nv))
	core := b.chunkGatedDeltaRule5(p, d, act, act, g, beta)
	gate := b.linear(p, "g_proj", "in_proj", x, h, d.vd)
	return b.linear(p, "o_proj", "out_proj", b.deltaGatedNorm(p, d, core, gate), d.vd, h)
}

// olmoHybridModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const olmoHybridModelType = "olmo_hybrid"
