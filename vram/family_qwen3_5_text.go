package vram

import "fmt"

// Qwen3.5's language model (transformers 5.23.0
// models/qwen3_5/modeling_qwen3_5.py, Qwen3_5TextModel l.1203-1213; its
// config is the wrapper's text_config, Qwen3_5TextConfig, model_type
// qwen3_5_text): Qwen3-Next's hybrid of Gated DeltaNet layers and gated
// attention at layer_types' "full_attention" layers (every fourth by
// default, configuration_qwen3_5.py l.110-117), with dense SwiGLU MLPs
// (Qwen3_5MLP, l.817-825). The DeltaNet's projections are four linears,
// in_proj_qkv, in_proj_z, in_proj_b and in_proj_a (l.539-542), not
// Qwen3-Next's two; its parameters register as dt_bias and A_log, then
// conv1d, the gated norm, out_proj and the four (l.517-542). The attention
// is Qwen3-Next's: q_proj twice as wide (q and a per-channel output gate),
// per-head q/k RMSNorms, a partial rotary embedding, attention_bias on all
// four projections (l.754-767). Every norm is (1 + weight) in fp32
// (Qwen3_5RMSNorm, l.834-851). The rotary embedding is the multimodal one
// (3-D positions, interleaved sections, l.134-200) with transformers 5's two
// buffers. The checkpoint's mtp.* multi-token-prediction weights are not
// built (_keys_to_ignore_on_load_unexpected, l.918); the config's
// mtp_num_hidden_layers (not a Qwen3_5TextConfig field) counts them as
// stored. transformers 5.23 builds it alone too, as Qwen3_5ForCausalLM
// (AutoModelForCausalLM's qwen3_5_text, models/auto/modeling_auto.py l.920;
// l.1650-1662): model.…, lm_head, the names the engine lists; its presets
// are the wrapper's (family qwen3_5).
func init() {
	register(&family{
		name: qwen35TextModelType, gguf: "qwen35", source: "transformers/models/qwen3_5/modeling_qwen3_5.py (transformers 5.23.0)",
		defaults:    Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, QKNorm: "head"},
		deltaNet:    true,
		servingOnly: qwen35ServingOnly,
		only5:       true,
		// Qwen3_5TextConfig's defaults (configuration_qwen3_5.py l.82-103),
		// Qwen/Qwen3.5-9B's shape.
		fromConfig: func(c *hfReader, m *Model) {
			qwen35TextFromConfig(c, m, qwen35Shape{layers: 32, hidden: 4096, ffn: 12288, heads: 16, kvHeads: 4})
		},
		toConfig:   qwen35TextToConfig,
		check:      func(m Model) error { return qwen35TextCheck(m, false) },
		tensors:    qwen35Tensors,
		buffers:    func(m Model, b *bufferList) { rotaryBuffers5(m, b, "model.") },
		storedOnly: qwen35MTP,
		block:      qwen35Block,
		// (1 + weight) norms in fp32 (l.834-851), the gated attention
		// (l.754-767), the DeltaNet's own projections (qwen35Block) and
		// transformers 5's chunked rule (l.286-424, deltanet5.go);
		// DynamicCache (l.1238), torch.cat copies of k and v.
		recipe: func(Model, libVersion) recipe {
			return recipe{normWeightFP32: true, gatedAttention: true, deltaRule5: true}
		},
	})
}

// qwen35ServingOnly is what the Qwen3.5 families do not plan: the
// language model's training step and the image-text wrapper's are
// modelled as their 5.23 traces hold (trainsAt5); transformers' generate
// (the recurrent decode), not traced, is not.
const qwen35ServingOnly = "its modeling code is transformers 5's; of it the training step (the language model's, Qwen3_5ForCausalLM, and the image-text model's, Qwen3_5ForConditionalGeneration) is traced at 5.23, not transformers' generate"

// qwen35Shape is a Qwen3.5 text config class's defaults where the dense
// and the MoE classes differ; experts > 0 reads the MoE keys.
type qwen35Shape struct {
	layers, hidden, ffn, heads, kvHeads  int
	experts, perToken, expertFFN, shared int
}

// qwen35TextFromConfig reads a Qwen3_5TextConfig (Qwen3_5MoeTextConfig
// with d.experts > 0), each key missing taking the class's default.
func qwen35TextFromConfig(c *hfReader, m *Model, d qwen35Shape) {
	m.Layers, m.Hidden = c.optInt("num_hidden_layers", d.layers), c.optInt("hidden_size", d.hidden)
	m.Heads, m.KVHeads = c.optInt("num_attention_heads", d.heads), c.optInt("num_key_value_heads", d.kvHeads)
	m.HeadDim, m.Vocab = c.optInt("head_dim", 256), c.optInt("vocab_size", 248320)
	m.MaxPosition = c.optInt("max_position_embeddings", 32768)
	// The wrapper's tie_word_embeddings decides (Qwen3_5Config l.185); this
	// one is read for a text config alone.
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
	if c.optBool("attention_bias", false) {
		m.Bias = BiasAttn
	}
	if act := c.optString("hidden_act", "silu"); act != "silu" && c.err == nil {
		c.fail(fmt.Sprintf("hidden_act %q: Qwen3.5's MLP and DeltaNet convolution are modelled with silu", act))
	}
	m.RotaryPct = qwen35RotaryPct(c)
	if d.experts > 0 {
		// Qwen3_5MoeTextConfig has no intermediate_size: every layer is a
		// mixture of experts (l.109-112).
		m.Experts, m.ExpertsPerToken = c.optInt("num_experts", d.experts), c.optInt("num_experts_per_tok", d.perToken)
		m.ExpertFFN = c.optInt("moe_intermediate_size", d.expertFFN)
		m.SharedExperts, m.SharedExpertFFN = 1, c.optInt("shared_expert_intermediate_size", d.shared)
		if m.SharedExpertFFN < 1 && c.err == nil {
			c.fail(fmt.Sprintf("shared_expert_intermediate_size = %d: the shared expert (one in every layer) is modelled ≥ 1 wide", m.SharedExpertFFN))
		}
		m.FFN, m.Router = m.ExpertFFN, "softmax_topk_norm"
	} else {
		m.FFN = c.optInt("intermediate_size", d.ffn)
	}
	dn := DeltaNet{KeyHeads: c.optInt("linear_num_key_heads", 16), ValueHeads: c.optInt("linear_num_value_heads", 32),
		KeyDim: c.optInt("linear_key_head_dim", 128), ValueDim: c.optInt("linear_value_head_dim", 128), ConvKernel: c.optInt("linear_conv_kernel_dim", 4)}
	// layer_types, else every full_attention_interval-th layer (4):
	// __post_init__ l.112-117, as Qwen3-Next's.
	dn.Attention = c.qwen3NextAttentionLayers(m.Layers)
	m.DeltaNet = &dn
	m.MTPLayers = c.optInt("mtp_num_hidden_layers", 0)
}

// qwen35RotaryPct is the rotated share of a head: rope_parameters' (or the
// legacy rope_scaling's) partial_rotary_factor, else the config's own key,
// else 0.25 (__post_init__ l.111, which standardization moves into
// rope_parameters only where that lacks one).
func qwen35RotaryPct(c *hfReader) float64 {
	top := c.optFloat("partial_rotary_factor", 0.25)
	for _, key := range []string{"rope_parameters", "rope_scaling"} {
		rp, ok := c.c[key].(map[string]any)
		if !ok {
			continue
		}
		if f, ok := rp["partial_rotary_factor"].(float64); ok {
			return f
		}
	}
	return top
}

// qwen35TextToConfig writes a Qwen3_5TextConfig (Qwen3_5MoeTextConfig
// with experts): the rotary parameters as the releases spell them (the
// interleaved sections of half the rotated dimensions, rope_theta 10⁷,
// which the engine does not read), the layer kinds, the DeltaNet's keys.
func qwen35TextToConfig(m Model, c map[string]any) {
	writeCommonConfig(m, c)
	c["attention_bias"] = m.Bias == BiasAttn
	c["hidden_act"] = "silu"
	half := int(float64(m.HeadDim)*m.RotaryPct) / 2
	t := (half + 2) / 3
	h := (half - t + 1) / 2
	c["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": m.RotaryPct,
		"mrope_interleaved": true, "mrope_section": []int{t, h, half - t - h}}
	if m.Experts > 0 {
		delete(c, "intermediate_size")
		c["num_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"] = m.Experts, m.ExpertsPerToken, m.ExpertFFN
		c["shared_expert_intermediate_size"] = m.SharedExpertFFN
	}
	d := m.DeltaNet
	c["linear_num_key_heads"], c["linear_num_value_heads"] = d.KeyHeads, d.ValueHeads
	c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"] = d.KeyDim, d.ValueDim, d.ConvKernel
	writeLayerKinds(c, m.Layers, func(i int) bool { return !m.DeltaNetLayer(i) }, "full_attention", "linear_attention")
	if m.MTPLayers > 0 {
		c["mtp_num_hidden_layers"] = m.MTPLayers
	}
}

// qwen35TextCheck is a Qwen3.5 language model's rules: the dense one's
// MLPs, or with moe the MoE one's experts (qwen35MoECheck).
func qwen35TextCheck(m Model, moe bool) error {
	switch {
	case m.DeltaNet == nil:
		return fmt.Errorf("model: %s needs model.delta_net (its Gated DeltaNet layers) with attention_layers", m.Family)
	case m.Bias != BiasNone && m.Bias != BiasAttn:
		return fmt.Errorf("model.bias %q: %s's attention_bias puts biases on q, k, v and o (\"attention\"), or none", m.Bias, m.Family)
	case m.MLP != "swiglu":
		return fmt.Errorf("model.mlp %q: %s's MLPs are SwiGLU", m.MLP, m.Family)
	case m.RotaryPct <= 0 || m.RotaryPct > 1 || int(float64(m.HeadDim)*m.RotaryPct) < 2:
		return fmt.Errorf("model.rotary_pct = %v: partial_rotary_factor must rotate at least two of head_dim = %d's dimensions, at most all", m.RotaryPct, m.HeadDim)
	case m.MTPLayers < 0 || m.MTPLayers > maxLayers:
		return fmt.Errorf("model.mtp_layers = %d (mtp_num_hidden_layers) is out of range [0, %d]", m.MTPLayers, maxLayers)
	}
	if moe {
		if err := qwen35MoECheck(m); err != nil {
			return err
		}
	} else if m.Experts != 0 || m.SharedExperts != 0 {
		return fmt.Errorf("model: %s has dense MLPs only (experts are Qwen3.5-MoE's, family qwen3_5_moe)", m.Family)
	}
	return requireQKNorm("head")(m)
}

// qwen35Tensors lists a Qwen3.5 language model's parameters in
// registration order: the embedding, each layer's mixer (the DeltaNet's
// or the attention's), MLP and two norms (Qwen3_5DecoderLayer
// l.854-866), the final norm, the output layer.
func qwen35Tensors(m Model, l *tensorList) {
	d := m.dims()
	l.add("model.embed_tokens.weight", "embedding", d.v, d.h)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("model.layers.%d.", i)
		if m.DeltaNetLayer(i) {
			qwen35DeltaNetTensors(m, l, p+"linear_attn.")
		} else {
			qwen35Attention(m, l, p+"self_attn.")
		}
		qwen35MLP(m, l, p+"mlp.")
		l.norm(p+"input_layernorm", false, d.h)
		l.norm(p+"post_attention_layernorm", false, d.h)
	}
	l.headSide()
	l.norm("model.norm", false, d.h)
	lmHead(m, l, "lm_head", "score")
}

// qwen35DeltaNetTensors adds a Qwen3_5GatedDeltaNet's parameters under p
// (l.517-542): dt_bias and A_log (its own), the depthwise conv1d over
// q|k|v, the gated norm (one head's width), out_proj, then in_proj_qkv,
// in_proj_z (the gate), in_proj_b and in_proj_a (one per value head).
func qwen35DeltaNetTensors(m Model, l *tensorList, p string) {
	d, h := *m.DeltaNet, int64(m.Hidden)
	nv := int64(d.ValueHeads)
	l.add(p+"dt_bias", "other", nv)
	l.add(p+"A_log", "other", nv)
	l.add(p+"conv1d.weight", "other", d.convDim(), 1, int64(d.ConvKernel))
	l.norm(p+"norm", false, int64(d.ValueDim))
	l.linear(p+"out_proj", "out_proj", d.valueDim(), h, false)
	l.linear(p+"in_proj_qkv", "in_proj", h, d.convDim(), false)
	l.linear(p+"in_proj_z", "in_proj", h, d.valueDim(), false)
	l.linear(p+"in_proj_b", "in_proj", h, nv, false)
	l.linear(p+"in_proj_a", "in_proj", h, nv, false)
}

// qwen35Attention adds a Qwen3_5Attention's parameters (l.754-767): q_proj
// twice as wide (q and the output gate), k, v, o (biased with
// attention_bias), the per-head q and k norms.
func qwen35Attention(m Model, l *tensorList, p string) {
	d := m.dims()
	l.linear(p+"q_proj", "q_proj", d.h, 2*d.q, m.Bias.attn())
	l.linear(p+"k_proj", "k_proj", d.h, d.kv, m.Bias.attn())
	l.linear(p+"v_proj", "v_proj", d.h, d.kv, m.Bias.attn())
	l.linear(p+"o_proj", "o_proj", d.q, d.h, m.Bias.out())
	qkNormTensors(m, l, p)
}

// qwen35MLP adds a layer's MLP under p: Qwen3_5MLP's gate, up and down, or
// Qwen3_5MoeSparseMoeBlock's (modeling_qwen3_5_moe.py l.891-897): the
// router (gate.weight, l.872-878), the fused experts (gate_up_proj [E,
// 2·I, H], down_proj [E, H, I], l.840-841), the shared expert and its
// one-output sigmoid gate.
func qwen35MLP(m Model, l *tensorList, p string) {
	if m.Experts == 0 {
		mlpGated(m, l, p, int64(m.FFN), -1)
		return
	}
	l.linear(p+"gate", "router", int64(m.Hidden), int64(m.Experts), false)
	fusedExperts(m, l, p+"experts.")
	mlpGated(m, l, p+"shared_expert.", int64(m.SharedExpertFFN), -1)
	l.linear(p+"shared_expert_gate", "router", int64(m.Hidden), 1, false)
}

// qwen35MTP lists the multi-token-prediction weights the checkpoint stores
// under mtp.* and transformers does not build (l.918): as vLLM's
// Qwen3_5MultiTokenPredictor loads them (model_executor/models/
// qwen3_5_mtp.py), fc (2·hidden → hidden), mtp_num_hidden_layers
// full-attention decoder layers with the model's MLP, the final norm and
// the two pre-fc norms; the embedding and the output layer are the main
// model's (mtp_use_dedicated_embeddings false in the releases).
func qwen35MTP(m Model, l *tensorList) {
	if m.MTPLayers == 0 {
		return
	}
	m = m.Normalize()
	d := m.dims()
	l.outside()
	l.add("mtp.fc.weight", "other", d.h, 2*d.h)
	for k := 0; k < m.MTPLayers; k++ {
		l.block(m.Layers + k)
		p := fmt.Sprintf("mtp.layers.%d.", k)
		qwen35Attention(m, l, p+"self_attn.")
		qwen35MLP(m, l, p+"mlp.")
		l.norm(p+"input_layernorm", false, d.h)
		l.norm(p+"post_attention_layernorm", false, d.h)
	}
	l.outside()
	l.norm("mtp.norm", false, d.h)
	l.norm("mtp.pre_fc_norm_hidden", false, d.h)
	l.norm("mtp.pre_fc_norm_embedding", false, d.h)
}

// qwen35Block builds a layer's activations: the DeltaNet's (its own
// projections, qwen35GatedDeltaNet) or the gated attention's block (as
// Qwen3-Next's).
func qwen35Block(r *resolved, layer int) BlockActivations {
	if r.m.DeltaNetLayer(layer) {
		return recurrentBlock(r, layer, "input_layernorm", "post_attention_layernorm", (*actBuilder).qwen35GatedDeltaNet)
	}
	return decoderBlock(r, layer)
}

// qwen35GatedDeltaNet is Qwen3_5GatedDeltaNet.forward on x (the norm's
// output) in training (modeling_qwen3_5.py l.545-657 at 5.23.0): four
// linears, in_proj_qkv, in_proj_z, in_proj_b, in_proj_a (l.563-570), where
// Qwen3-Next has two fused ones whose outputs it regroups and copies
// (gatedDeltaNet). q|k|v is in_proj_qkv's output itself, transposed (a
// view, l.564), which the convolution reads (l.587); z, b and a are the
// linears' outputs (z reshaped, a view, l.567). From the convolution on the
// code is Qwen3-Next's at 5.x: the sigmoid β (l.614), the fp32 decay
// (l.616), the chunked rule (l.632, the same torch_chunk_gated_delta_rule,
// deltanet5.go), the gated norm on the [tokens·heads, head] views
// (l.650-652) and out_proj (l.655).
func (b *actBuilder) qwen35GatedDeltaNet(p blockPlan, x *actT) *actT {
	if b.r.servingEngine {
		return b.deltaNetProfile(x)
	}
	d := b.r.deltaDims()
	h := int64(b.r.m.Hidden)
	qkv := b.linear(p, "in_proj_qkv", "in_proj", x, h, d.conv)
	z := b.linear(p, "in_proj_z", "in_proj", x, h, d.vd)
	bb := b.linear(p, "in_proj_b", "in_proj", x, h, d.nv)
	aa := b.linear(p, "in_proj_a", "in_proj", x, h, d.nv)
	act := b.deltaConv(p, d, qkv)
	beta := b.keep(b.op("beta.sigmoid", b.size(d.nv, bb.dtype), bb.dtype, list(bb)))
	g := b.deltaDecay(d, aa)
	core := b.chunkGatedDeltaRule5(p, d, act, act, g, beta)
	return b.linear(p, "out_proj", "out_proj", b.deltaGatedNorm(p, d, core, z), d.vd, h)
}

// qwen35TextModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const qwen35TextModelType = "qwen3_5_text"
