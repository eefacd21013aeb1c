package vram

import (
	"errors"
	"fmt"
	"math"
)

// Gemma 4's audio encoder (transformers 5.23.0
// models/gemma4/modeling_gemma4.py, Gemma4AudioModel l.1963-2052, after
// the Universal Speech Model; its config is the wrapper's audio_config,
// Gemma4AudioConfig, configuration_gemma4.py l.27-82, model_type
// gemma4_audio), the audio tower of family gemma4 (model.audio):
//   - a subsampling front end (Gemma4AudioSubSampleConvProjection
//     l.362-417): two 3 × 3 stride-2 convolutions without bias, 1 → c0 →
//     c1 channels (subsampling_conv_channels), each followed by a bias-free
//     LayerNorm over its channels, and input_proj_linear from (c0 // 4) · c1
//     features to hidden_size (l.403-404);
//   - a sinusoidal relative position encoding (l.225-253): an fp32 buffer
//     inv_timescales of hidden_size // 2 timescales, not persistent;
//   - conformer blocks (Gemma4AudioLayer l.530-578), each: a feed-forward
//     (l.420-453: pre-norm, hidden → 4 · hidden → hidden, post-norm), a
//     chunked local self-attention with relative positions (l.256-359:
//     q, k, v and post projections, a relative_k_proj of the position
//     encodings, a per_dim_scale per head dimension, a softcap buffer), a
//     light convolution (l.489-527: pre-norm, linear_start to 2 · hidden
//     for a GLU, a depthwise causal convolution of conv_kernel_size taps
//     without bias, conv_norm, linear_end), a second feed-forward, and
//     norm_pre_attn, norm_post_attn and norm_out; every RMSNorm has a
//     weight (l.204-222);
//   - output_proj, hidden_size → output_proj_dims with a bias (l.1988).
//
// The q, k, v, post, feed-forward and light-convolution linears are
// Gemma4ClippableLinear (l.175-201): the weight under .linear and, with
// use_clipped_linears (the class's default), four persistent scalar
// bounds as fp32 buffers. The attention's chunking (attention_chunk_size,
// attention_context_left/right), its logit cap, residual_weight and
// gradient_clipping shape the forward only, which the engine does not
// model (audio.go): they are not read. The wrapper projects the output
// with embed_audio (family gemma4).
func init() {
	register(&family{
		name: "gemma4_audio", source: "transformers/models/gemma4/modeling_gemma4.py (transformers 5.23.0)", kind: encoder,
		towerOnly: true, conformer: true,
		defaults:   Model{MLP: "silu", Norm: "rmsnorm", Position: "relative", Bias: BiasNone, Head: "none"},
		fromConfig: gemma4AudioFromConfig,
		toConfig: func(m Model, c map[string]any) {
			cf := m.Conformer
			c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["hidden_act"] = m.Layers, m.Hidden, m.Heads, "silu"
			c["subsampling_conv_channels"] = []int{cf.SubsampleChannels[0], cf.SubsampleChannels[1]}
			c["conv_kernel_size"], c["output_proj_dims"], c["use_clipped_linears"] = cf.ConvKernel, cf.OutputDim, cf.ClippedLinears
		},
		check:   gemma4AudioCheck,
		tensors: gemma4AudioTensors,
		buffers: gemma4AudioBuffers,
	})
}

// gemma4AudioFromConfig reads a Gemma4AudioConfig, each key missing taking
// the class's default (configuration_gemma4.py l.55-76).
func gemma4AudioFromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden, m.Heads = c.optInt("num_hidden_layers", 12), c.optInt("hidden_size", 1024), c.optInt("num_attention_heads", 8)
	m.KVHeads, m.FFN = m.Heads, 4*m.Hidden // ffw_layer_1 is 4 · hidden wide (l.425)
	if act := c.optString("hidden_act", "silu"); act != "silu" && c.err == nil {
		c.fail(fmt.Sprintf("hidden_act %q: the Gemma 4 audio tower is modelled with silu (the class's default)", act))
	}
	cf := &Conformer{SubsampleChannels: [2]int{128, 32}, ConvKernel: c.optInt("conv_kernel_size", 5),
		OutputDim: c.optInt("output_proj_dims", 1536), ClippedLinears: c.optBool("use_clipped_linears", true)}
	if l := c.optList("subsampling_conv_channels"); l != nil {
		if len(l) != 2 {
			c.fail(fmt.Sprintf("subsampling_conv_channels %v: the front end has two convolutions (layer0, layer1), one channel count each", l))
			return
		}
		for i, v := range l {
			f, ok := v.(float64)
			if !ok || f < 1 || f > maxChannels || f != math.Trunc(f) {
				c.fail(fmt.Sprintf("subsampling_conv_channels[%d] = %v: want a channel count in [1, %d]", i, v, maxChannels))
				return
			}
			cf.SubsampleChannels[i] = int(f)
		}
	}
	m.Conformer = cf
	if m.Heads > 0 && m.Hidden%m.Heads != 0 && c.err == nil {
		c.fail(fmt.Sprintf("num_attention_heads = %d must divide hidden_size = %d: the attention's heads × head_dim output feeds post, hidden_size wide (l.264, 278, 355-357)", m.Heads, m.Hidden))
	}
}

// gemma4AudioCheck is the tower's rules.
func gemma4AudioCheck(m Model) error {
	cf := m.Conformer // Validate requires it for this family
	switch {
	case m.FFN != 4*m.Hidden:
		return fmt.Errorf("model.ffn = %d: the Gemma 4 audio feed-forward is 4 × hidden = %d wide (modeling_gemma4.py l.425-426)", m.FFN, 4*m.Hidden)
	case m.KVHeads != m.Heads || m.HeadDim*m.Heads != m.Hidden:
		return fmt.Errorf("model: the Gemma 4 audio attention has heads = %d heads of hidden / heads for queries, keys and values alike (kv_heads %d, head_dim %d)", m.Heads, m.KVHeads, m.HeadDim)
	case m.MLP != "silu" || m.Norm != "rmsnorm" || m.Position != "relative" || m.Bias != BiasNone || m.NormPosition != "" || m.QKNorm != "":
		return errors.New("model: the Gemma 4 audio blocks are modelled with silu, RMSNorms, relative positions and no biases but output_proj's")
	case cf.SubsampleChannels[0] < 4 || cf.SubsampleChannels[1] < 1:
		return fmt.Errorf("model.conformer.subsample_channels = %v: input_proj_linear reads (c0 // 4) · c1 features, so c0 ≥ 4 and c1 ≥ 1", cf.SubsampleChannels)
	case cf.ConvKernel < 1 || cf.OutputDim < 1:
		return fmt.Errorf("model.conformer: conv_kernel = %d and output_dim = %d must be ≥ 1", cf.ConvKernel, cf.OutputDim)
	}
	return nil
}

// gemma4AudioLinears are each block's clippable linears in registration
// order (l.535-538: feed_forward1, feed_forward2, self_attn, lconv1d).
var gemma4AudioLinears = []string{
	"feed_forward1.ffw_layer_1", "feed_forward1.ffw_layer_2", "feed_forward2.ffw_layer_1", "feed_forward2.ffw_layer_2",
	"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.post", "lconv1d.linear_start", "lconv1d.linear_end",
}

// gemma4AudioTensors lists the tower's parameters under its own names (the
// wrapper adds model.audio_tower.), as named_parameters yields them: a
// module's own parameters before its children's.
func gemma4AudioTensors(m Model, l *tensorList) {
	cf := m.Conformer
	if cf == nil {
		cf = &Conformer{} // Validate reports it missing
	}
	h, c0, c1 := int64(m.Hidden), int64(cf.SubsampleChannels[0]), int64(cf.SubsampleChannels[1])
	p := "subsample_conv_projection."
	l.add(p+"layer0.conv.weight", "other", c0, 1, 3, 3)
	l.add(p+"layer0.norm.weight", "norm", c0)
	l.add(p+"layer1.conv.weight", "other", c1, c0, 3, 3)
	l.add(p+"layer1.norm.weight", "norm", c1)
	l.linear(p+"input_proj_linear", "other", c0/4*c1, h, false)
	hd := h / int64(max(1, m.Heads))
	q := int64(m.Heads) * hd
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("layers.%d.", i)
		for _, ff := range []string{"feed_forward1.", "feed_forward2."} {
			l.linear(p+ff+"ffw_layer_1.linear", "up_proj", h, 4*h, false)
			l.linear(p+ff+"ffw_layer_2.linear", "down_proj", 4*h, h, false)
			l.norm(p+ff+"pre_layer_norm", false, h)
			l.norm(p+ff+"post_layer_norm", false, h)
		}
		l.add(p+"self_attn.per_dim_scale", "other", hd)
		l.linear(p+"self_attn.q_proj.linear", "q_proj", h, q, false)
		l.linear(p+"self_attn.k_proj.linear", "k_proj", h, q, false)
		l.linear(p+"self_attn.v_proj.linear", "v_proj", h, q, false)
		l.linear(p+"self_attn.post.linear", "o_proj", h, h, false)
		l.linear(p+"self_attn.relative_k_proj", "k_proj", h, q, false)
		l.linear(p+"lconv1d.linear_start.linear", "up_proj", h, 2*h, false)
		l.linear(p+"lconv1d.linear_end.linear", "down_proj", h, h, false)
		l.add(p+"lconv1d.depthwise_conv1d.weight", "other", h, 1, int64(cf.ConvKernel))
		l.norm(p+"lconv1d.pre_layer_norm", false, h)
		l.norm(p+"lconv1d.conv_norm", false, h)
		for _, n := range []string{"norm_pre_attn", "norm_post_attn", "norm_out"} {
			l.norm(p+n, false, h)
		}
	}
	l.outside()
	l.linear("output_proj", "other", h, int64(cf.OutputDim), true)
}

// gemma4AudioBuffers lists the tower's buffers: the position encoding's
// inv_timescales [1, 1, hidden // 2] (l.242-245), and in each block the
// attention's softcap scalar (l.283) among, with use_clipped_linears, each
// clippable linear's four bounds (l.186-190), all fp32.
func gemma4AudioBuffers(m Model, b *bufferList) {
	cf := m.Conformer
	if cf == nil {
		return
	}
	b.add("rel_pos_enc.inv_timescales", -1, FP32, 1, 1, int64(m.Hidden/2))
	for i := 0; i < m.Layers; i++ {
		for _, lin := range gemma4AudioLinears {
			if lin == "self_attn.q_proj" {
				b.add(fmt.Sprintf("layers.%d.self_attn.softcap", i), i, FP32) // the attention's own, before its children's
			}
			if !cf.ClippedLinears {
				continue
			}
			for _, bound := range []string{"input_min", "input_max", "output_min", "output_max"} {
				b.add(fmt.Sprintf("layers.%d.%s.%s", i, lin, bound), i, FP32)
			}
		}
	}
}
