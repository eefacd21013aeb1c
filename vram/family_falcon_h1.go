package vram

import "fmt"

// Falcon-H1 (transformers/models/falcon_h1/modeling_falcon_h1.py): every
// layer runs a Mamba-2 mixer (FalconH1Mixer, the torch path of
// Mamba2Mixer with a width of its own, mamba_d_ssm) and GQA attention side
// by side on the same norm's output and sums them, then a SwiGLU MLP. The
// μP multipliers are Python floats applied to tensors, each a new tensor
// (never saved): the embedding, the mixer's input and its output, the
// attention's input, k and its output, the MLP's gate and down
// projections, the logits; and the in_proj output times the per-channel
// mup_vector buffer. The mixer's gated norm is optional (mamba_rms_norm)
// and normalizes before the gate (mamba_norm_before_gate). FalconH1Model
// builds no cache in training ("requires an initialized
// FalconHybridMambaAttentionDynamicCache to return a cache").
func init() {
	register(&family{
		name: falconH1ModelType, source: "transformers/models/falcon_h1/modeling_falcon_h1.py",
		defaults:   Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone},
		ssm:        true,
		fromConfig: falconH1FromConfig,
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			s := m.SSM
			c["mamba_d_ssm"], c["mamba_n_heads"], c["mamba_d_head"] = s.inner(), s.Heads, s.HeadDim
			c["mamba_d_state"], c["mamba_n_groups"], c["mamba_d_conv"], c["mamba_chunk_size"] = s.State, s.Groups, s.ConvKernel, s.Chunk
			c["mamba_conv_bias"], c["mamba_proj_bias"], c["projectors_bias"] = !s.NoConvBias, s.ProjBias, s.ProjBias
			c["mamba_rms_norm"], c["mamba_norm_before_gate"] = s.Norm != "none", s.Norm == "before_gate"
		},
		check: func(m Model) error {
			switch {
			case m.SSM == nil || !m.SSM.ParallelAttention:
				return fmt.Errorf("model: falcon_h1 needs model.ssm with parallel_attention (every layer runs its mixer beside attention)")
			case m.Bias != BiasNone:
				return fmt.Errorf("model.bias %q: falcon_h1's attention and MLP have no biases (FalconH1Config fixes them off)", m.Bias)
			case m.SSM.Norm == "":
				return fmt.Errorf("model.ssm.norm: falcon_h1's mixer normalizes before the gate (\"before_gate\") or not at all (\"none\")")
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
				mamba2Mixer(m, l, p+"mamba.") // FalconH1Mixer has Mamba2Mixer's parameters
				attnQKVO(m, l, p+"self_attn.")
				l.norm(p+"input_layernorm", false, d.h)
				l.norm(p+"pre_ff_layernorm", false, d.h)
			}
			l.headSide()
			l.norm("model.final_layernorm", false, d.h)
			lmHead(m, l, "lm_head", "score")
		},
		buffers: func(m Model, b *bufferList) {
			rotaryBuffer(m, b, "model.")
			s := m.SSM
			// compute_mup_vector: ones(1, 1, in_proj's width), one tensor
			// registered on every mixer (persistent=False), so named_buffers
			// lists it once, under the first layer; built in fp32 (the
			// weights' dtype after .to()).
			b.add("model.layers.0.mamba.mup_vector", -1, FP32, 1, 1, s.inner()+s.convDim()+int64(s.Heads))
		},
		block: falconH1Block,
		// transformers 5 builds a DynamicCache in training too (5.23
		// modeling_falcon_h1.py:1065-1066); 4.57 returned none without a
		// FalconHybridMambaAttentionDynamicCache (4.57 l.1273-1277).
		recipe: func(_ Model, lib libVersion) recipe {
			return recipe{noTrainingCache: lib.before(5, 0), embedScale: true, logitsScale: true, ssmInputScale: true, ssmProjScale: true, keyScale: true}
		},
		// tiiuae/Falcon-H1-0.5B-Instruct's config.json: 36 layers 1,024
		// wide, 8 heads of 64 over 2 KV heads, an MLP of 2,048; mixers of 24
		// heads of 64 (mamba_d_ssm 1,536), a 128-number state, one group,
		// chunks of 128, conv biases, no mamba_rms_norm; 32,784 tokens,
		// untied; 16,384 positions.
		presets: map[string]Preset{
			"falcon-h1-0.5b-instruct": {Model{Name: "tiiuae/Falcon-H1-0.5B-Instruct", Layers: 36, Hidden: 1024, Heads: 8, KVHeads: 2, HeadDim: 64, FFN: 2048, Vocab: 32784, MaxPosition: 16384,
				SSM: &SSM{Heads: 24, HeadDim: 64, State: 128, Groups: 1, ConvKernel: 4, Chunk: 128, ParallelAttention: true, Norm: "none"}}, hf("tiiuae/Falcon-H1-0.5B-Instruct")},
		},
	})
}

// falconH1FromConfig reads a FalconH1Config: the mixer's own width
// (mamba_d_ssm, 1,024 when absent, expand · hidden when null), its head
// width ("auto": the width over the heads), its norm, and the
// projections' biases (in_proj's mamba_proj_bias, out_proj's
// projectors_bias). A key config.json leaves out takes the class's
// default (configuration_falcon_h1.py:60-102, transformers 5.23.0).
func falconH1FromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden = c.optInt("num_hidden_layers", 32), c.optInt("hidden_size", 4096)
	m.Heads = c.optInt("num_attention_heads", 32)
	m.KVHeads = c.optIntNull("num_key_value_heads", 8, m.Heads)
	m.FFN, m.Vocab = c.optInt("intermediate_size", 14336), c.optInt("vocab_size", 128000)
	m.MaxPosition = c.optInt("max_position_embeddings", 8192)
	m.HeadDim = c.optInt("head_dim", 0)
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
	inner := c.optInt("mamba_expand", 2) * m.Hidden
	if v, ok := c.c["mamba_d_ssm"]; !ok || v != nil {
		inner = c.optInt("mamba_d_ssm", 1024)
	}
	s := SSM{Heads: c.optInt("mamba_n_heads", 128), State: c.optInt("mamba_d_state", 256), Groups: c.optInt("mamba_n_groups", 1),
		ConvKernel: c.optInt("mamba_d_conv", 4), Chunk: c.optInt("mamba_chunk_size", 256), ParallelAttention: true,
		NoConvBias: !c.optBool("mamba_conv_bias", true), ProjBias: c.optBool("mamba_proj_bias", false), Norm: "none"}
	if v, ok := c.c["mamba_d_head"].(string); ok && v == "auto" || c.c["mamba_d_head"] == nil {
		if s.Heads > 0 {
			s.HeadDim = inner / s.Heads
		}
	} else {
		s.HeadDim = c.int("mamba_d_head")
	}
	if s.Heads*s.HeadDim != inner && c.err == nil {
		c.fail(fmt.Sprintf("mamba_n_heads · mamba_d_head = %d must equal the mixer's width %d (mamba_d_ssm, FalconH1Config's rule)", s.Heads*s.HeadDim, inner))
	}
	if c.optBool("mamba_rms_norm", false) {
		s.Norm = ""
		if c.optBool("mamba_norm_before_gate", true) {
			s.Norm = "before_gate"
		}
	}
	if c.optBool("projectors_bias", false) != s.ProjBias && c.err == nil {
		c.fail("projectors_bias differing from mamba_proj_bias (a bias on only one of the mixer's projections) is not modelled")
	}
	m.SSM = &s
}

// falconH1Block is FalconH1DecoderLayer: input_layernorm; the mixer and
// the attention on its output side by side, each scaled, summed; the
// residual add; pre_ff_layernorm, the MLP, the residual add.
func falconH1Block(r *resolved, layer int) BlockActivations {
	p := r.blockPlan(layer)
	sd := r.ssmDims()
	b := newActBuilder(r, sd.tokens)
	h := int64(r.m.Hidden)
	x := b.external("input", b.size(h, p.resid), p.resid)
	n := b.norm(p, "input_layernorm", "rmsnorm", x, h)
	mix := b.mambaMixer(p, sd, n)
	mix = b.op("mamba.scale", b.size(h, mix.dtype), mix.dtype, list(mix))
	ain := b.op("attention_in.scale", b.size(h, n.dtype), n.dtype, list(n))
	att := b.attention(p, r.decoderDims(p, layer), ain)
	att = b.op("attention.scale", b.size(h, att.dtype), att.dtype, list(att))
	b.hold(n) // hidden_states holds the norm's output until the sum replaces it
	sum := b.op("mamba+attention", b.size(h, promote(mix.dtype, att.dtype)), promote(mix.dtype, att.dtype), list(mix, att))
	x1 := b.residualAdd(p, "residual", h, x, sum)
	n2 := b.norm(p, "pre_ff_layernorm", "rmsnorm", x1, h)
	mo := b.falconH1MLP(p, n2, h, int64(r.m.FFN))
	b.hold(n2)
	out := b.residualAdd(p, "ff_residual", h, x1, mo)
	out.keepAlive = true
	return b.summarize(x)
}

// falconH1MLP is FalconH1MLP: up_proj(x) · silu(gate_proj(x) ·
// gate_multiplier), down_proj of that times down_multiplier — up first, as
// Python evaluates the product.
func (b *actBuilder) falconH1MLP(p blockPlan, x *actT, h, f int64) *actT {
	u := b.linear(p, "feed_forward.up_proj", "up_proj", x, h, f)
	g := b.linear(p, "feed_forward.gate_proj", "gate_proj", x, h, f)
	gs := b.op("feed_forward.gate.scale", b.size(f, g.dtype), g.dtype, list(g))
	act := b.op("feed_forward.act", b.size(f, gs.dtype), gs.dtype, list(gs), gs)
	prod := b.op("feed_forward.up*act", b.size(f, act.dtype), act.dtype, list(u, act), u, act)
	down := b.linear(p, "feed_forward.down_proj", "down_proj", prod, f, h)
	return b.op("feed_forward.down.scale", b.size(h, down.dtype), down.dtype, list(down))
}

const falconH1ModelType = "falcon_h1"
