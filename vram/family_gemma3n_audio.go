package vram

import (
	"errors"
	"fmt"
	"math"
)

// Gemma 3n's audio encoder (transformers 5.23.0
// models/gemma3n/modeling_gemma3n.py, Gemma3nAudioEncoder l.1433-1451,
// after the Universal Speech Model; its config is the wrapper's
// audio_config, Gemma3nAudioConfig, configuration_gemma3n.py l.235-331,
// model_type gemma3n_audio), the audio tower of family gemma3n
// (model.audio):
//   - a subsampling front end (Gemma3nAudioSubSampleConvProjection
//     l.721-792): two 3 × 3 stride-2 convolutions without bias, 1 → c0 →
//     c1 channels (sscp_conv_channel_size), each followed by a cumulative
//     group norm with a weight per channel (l.543-651, 652-719), and
//     input_proj_linear from c1 × the frequency bins left of
//     input_feat_size (each convolution pads the frequencies by one on
//     either side: (f + 2 − 3) // 2 + 1, l.734-764) to hidden_size;
//   - conformer blocks (Gemma3nAudioConformerBlock l.890-915), each: a
//     feed-forward (l.822-846: pre-norm, hidden → 4 · hidden → hidden,
//     post-norm), the attention (l.794-821: pre-norm, a chunked local
//     self-attention with relative positions — per_dim_scale per head
//     dimension, relative_position_embedding's pos_proj, q, k, v,
//     l.153-171 and 319-348 — then post and a post-norm), a light
//     convolution (l.847-889: pre-norm, linear_start to 2 · hidden for a
//     GLU, a depthwise causal convolution of conf_conv_kernel_size taps
//     without bias, conv_norm, linear_end), a second feed-forward, and a
//     norm; every RMSNorm has a weight (l.129-150); no linear has a bias.
//
// Buffers, none persistent: in each block the clamp bound
// gradient_clipping of the block, of each feed-forward, of the attention
// and of the light convolution, and the attention's q_scale, softcap,
// local_causal_valid_mask (bool, chunk × chunk + max(0, left − 1) +
// right, l.350-361) and its position encoding's inv_timescales
// [1, 1, hidden // 2] (all fp32 but the mask). conf_attention_logit_cap,
// conf_reduction_factor, conf_residual_weight and gradient_clipping shape
// the forward only, which the engine does not model (audio.go): they are
// not read. vocab_size sizes the wrapper's embed_audio (family gemma3n).
func init() {
	register(&family{
		name: gemma3nAudioModelType, source: "transformers/models/gemma3n/modeling_gemma3n.py (transformers 5.23.0)", kind: encoder,
		towerOnly: true, conformer: true,
		defaults:   Model{MLP: "silu", Norm: "rmsnorm", Position: "relative", Bias: BiasNone, Head: "none"},
		fromConfig: gemma3nAudioFromConfig,
		toConfig: func(m Model, c map[string]any) {
			cf := m.Conformer
			c["conf_num_hidden_layers"], c["hidden_size"], c["conf_num_attention_heads"], c["vocab_size"] = m.Layers, m.Hidden, m.Heads, m.Vocab
			c["sscp_conv_channel_size"] = []int{cf.SubsampleChannels[0], cf.SubsampleChannels[1]}
			c["conf_conv_kernel_size"], c["input_feat_size"] = cf.ConvKernel, cf.InputFeatures
			c["conf_attention_chunk_size"], c["conf_attention_context_left"], c["conf_attention_context_right"] = cf.Chunk, cf.ContextLeft, cf.ContextRight
		},
		check:   gemma3nAudioCheck,
		tensors: gemma3nAudioTensors,
		buffers: gemma3nAudioBuffers,
	})
}

// gemma3nAudioModelType is the tower's model_type, which the wrapper's
// rules name (family_gemma3n_text.go).
const gemma3nAudioModelType = "gemma3n_audio"

// gemma3nAudioFromConfig reads a Gemma3nAudioConfig, each key missing
// taking the class's default (configuration_gemma3n.py l.308-331).
func gemma3nAudioFromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden = c.optInt("conf_num_hidden_layers", 12), c.optInt("hidden_size", 1536)
	m.Heads, m.Vocab = c.optInt("conf_num_attention_heads", 8), c.optInt("vocab_size", 128)
	m.KVHeads, m.FFN = m.Heads, 4*m.Hidden // ffw_layer_1 is 4 · hidden wide (l.830)
	if m.Heads > 0 && m.Hidden%m.Heads != 0 && c.err == nil {
		c.fail(fmt.Sprintf("conf_num_attention_heads = %d must divide hidden_size = %d: q, k and v are heads × hidden // heads wide and post reads hidden_size (l.326, 337-339, 802)", m.Heads, m.Hidden))
	}
	if m.Heads > 0 {
		m.HeadDim = m.Hidden / m.Heads
	}
	cf := &Conformer{SubsampleChannels: [2]int{128, 32}, ConvKernel: c.optInt("conf_conv_kernel_size", 5),
		InputFeatures: c.optInt("input_feat_size", 128), Chunk: c.optInt("conf_attention_chunk_size", 12),
		ContextLeft: c.optInt("conf_attention_context_left", 13), ContextRight: c.optInt("conf_attention_context_right", 0)}
	if l := c.optList("sscp_conv_channel_size"); l != nil {
		if len(l) != 2 {
			c.fail(fmt.Sprintf("sscp_conv_channel_size %v: the front end has two convolutions (conv_0, conv_1), one channel count each", l))
			return
		}
		for i, v := range l {
			f, ok := v.(float64)
			if !ok || f < 1 || f > maxChannels || f != math.Trunc(f) {
				c.fail(fmt.Sprintf("sscp_conv_channel_size[%d] = %v: want a channel count in [1, %d]", i, v, maxChannels))
				return
			}
			cf.SubsampleChannels[i] = int(f)
		}
	}
	gemma3nAudioConvs(c)
	m.Conformer = cf
}

// gemma3nAudioConvs refuses front-end kernels and strides other than the
// class's ((3, 3) and (2, 2) for both convolutions, l.325-331), which the
// engine's front end is.
func gemma3nAudioConvs(c *hfReader) {
	for _, k := range []struct {
		key  string
		want float64
	}{{"sscp_conv_kernel_size", 3}, {"sscp_conv_stride_size", 2}} {
		l := c.optList(k.key)
		if l == nil || c.err != nil {
			continue
		}
		ok := len(l) == 2
		for _, pair := range l {
			p, isList := pair.([]any)
			ok = ok && isList && len(p) == 2
			for j := 0; ok && j < 2; j++ {
				ok = p[j] == k.want
			}
		}
		if !ok {
			c.fail(fmt.Sprintf("%s %v: the front end is modelled with the class's [[%v, %v], [%v, %v]]", k.key, l, k.want, k.want, k.want, k.want))
		}
	}
}

// gemma3nAudioCheck is the tower's rules.
func gemma3nAudioCheck(m Model) error {
	cf := m.Conformer // Validate requires it for this family
	switch {
	case m.FFN != 4*m.Hidden:
		return fmt.Errorf("model.ffn = %d: the Gemma 3n audio feed-forward is 4 × hidden = %d wide (modeling_gemma3n.py l.830-831)", m.FFN, 4*m.Hidden)
	case m.KVHeads != m.Heads || m.HeadDim*m.Heads != m.Hidden:
		return fmt.Errorf("model: the Gemma 3n audio attention has heads = %d heads of hidden / heads for queries, keys and values alike (kv_heads %d, head_dim %d)", m.Heads, m.KVHeads, m.HeadDim)
	case m.MLP != "silu" || m.Norm != "rmsnorm" || m.Position != "relative" || m.Bias != BiasNone || m.NormPosition != "" || m.QKNorm != "":
		return errors.New("model: the Gemma 3n audio blocks are modelled with silu, RMSNorms, relative positions and no biases")
	case m.Vocab < 1:
		return fmt.Errorf("model.vocab = %d (audio_config.vocab_size) must be ≥ 1: embed_audio's table of hard audio tokens", m.Vocab)
	case cf.SubsampleChannels[0] < 1 || cf.SubsampleChannels[1] < 1 || cf.InputFeatures < 1:
		return fmt.Errorf("model.conformer: subsample_channels %v and input_features = %d must be ≥ 1", cf.SubsampleChannels, cf.InputFeatures)
	case cf.ConvKernel < 1 || cf.Chunk < 1:
		return fmt.Errorf("model.conformer: conv_kernel = %d and chunk = %d must be ≥ 1", cf.ConvKernel, cf.Chunk)
	case cf.OutputDim != 0 || cf.ClippedLinears:
		return errors.New("model.conformer: the Gemma 3n audio tower has no output projection (output_dim 0) and no clipped linears")
	}
	return nil
}

// gemma3nAudioFreq is the frequency bins left after a front-end
// convolution of f bins (padding one each side, 3 taps, stride 2).
func gemma3nAudioFreq(f int64) int64 { return (f+2-3)/2 + 1 }

// gemma3nAudioTensors lists the tower's parameters under its own names
// (the wrapper adds model.audio_tower.), as named_parameters yields them:
// a module's own parameters before its children's.
func gemma3nAudioTensors(m Model, l *tensorList) {
	cf := m.Conformer
	if cf == nil {
		cf = &Conformer{} // Validate reports it missing
	}
	h, c0, c1 := int64(m.Hidden), int64(cf.SubsampleChannels[0]), int64(cf.SubsampleChannels[1])
	p := "subsample_conv_projection."
	l.add(p+"conv_0.conv.weight", "other", c0, 1, 3, 3)
	l.add(p+"conv_0.norm.weight", "norm", c0)
	l.add(p+"conv_1.conv.weight", "other", c1, c0, 3, 3)
	l.add(p+"conv_1.norm.weight", "norm", c1)
	l.linear(p+"input_proj_linear", "other", c1*gemma3nAudioFreq(gemma3nAudioFreq(int64(cf.InputFeatures))), h, false)
	hd := h / int64(max(1, m.Heads))
	q := int64(m.Heads) * hd
	ffw := func(p string) {
		l.norm(p+"pre_layer_norm", false, h)
		l.linear(p+"ffw_layer_1", "up_proj", h, 4*h, false)
		l.linear(p+"ffw_layer_2", "down_proj", 4*h, h, false)
		l.norm(p+"post_layer_norm", false, h)
	}
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("conformer.%d.", i)
		ffw(p + "ffw_layer_start.")
		l.norm(p+"attention.pre_attn_norm", false, h)
		l.add(p+"attention.attn.per_dim_scale", "other", hd)
		l.linear(p+"attention.attn.relative_position_embedding.pos_proj", "k_proj", h, q, false)
		l.linear(p+"attention.attn.q_proj", "q_proj", h, q, false)
		l.linear(p+"attention.attn.k_proj", "k_proj", h, q, false)
		l.linear(p+"attention.attn.v_proj", "v_proj", h, q, false)
		l.linear(p+"attention.post", "o_proj", h, h, false)
		l.norm(p+"attention.post_norm", false, h)
		l.norm(p+"lconv1d.pre_layer_norm", false, h)
		l.linear(p+"lconv1d.linear_start", "up_proj", h, 2*h, false)
		l.add(p+"lconv1d.depthwise_conv1d.weight", "other", h, 1, int64(cf.ConvKernel))
		l.norm(p+"lconv1d.conv_norm", false, h)
		l.linear(p+"lconv1d.linear_end", "down_proj", h, h, false)
		ffw(p + "ffw_layer_end.")
		l.norm(p+"norm", false, h)
	}
	l.outside()
}

// gemma3nAudioBuffers lists each block's buffers in named_buffers' order:
// the block's own clamp bound, then its children's in registration order
// (ffw_layer_start, attention with its attn and the position encoding,
// lconv1d, ffw_layer_end).
func gemma3nAudioBuffers(m Model, b *bufferList) {
	cf := m.Conformer
	if cf == nil {
		return
	}
	ctx := int64(cf.Chunk + max(0, cf.ContextLeft-1) + cf.ContextRight)
	for i := 0; i < m.Layers; i++ {
		p := fmt.Sprintf("conformer.%d.", i)
		b.add(p+"gradient_clipping", i, FP32)
		b.add(p+"ffw_layer_start.gradient_clipping", i, FP32)
		b.add(p+"attention.gradient_clipping", i, FP32)
		b.add(p+"attention.attn.q_scale", i, FP32)
		b.add(p+"attention.attn.local_causal_valid_mask", i, Bool, int64(cf.Chunk), ctx)
		b.add(p+"attention.attn.softcap", i, FP32)
		b.add(p+"attention.attn.relative_position_embedding.inv_timescales", i, FP32, 1, 1, int64(m.Hidden/2))
		b.add(p+"lconv1d.gradient_clipping", i, FP32)
		b.add(p+"ffw_layer_end.gradient_clipping", i, FP32)
	}
}
