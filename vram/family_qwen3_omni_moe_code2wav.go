package vram

import (
	"errors"
	"fmt"
	"math"
)

// Qwen3-Omni's vocoder (transformers 5.23.0
// models/qwen3_omni_moe/modeling_qwen3_omni_moe.py, Qwen3OmniMoeCode2Wav
// l.3886-3920; its config is the wrapper's code2wav_config,
// Qwen3OmniMoeCode2WavConfig, configuration_qwen3_omni_moe.py l.481-534,
// which has no model_type of its own, hence this family's name), the last
// stage of family qwen3_omni_moe's speech generator
// (model.speech.vocoder), from codes to a waveform:
//   - pre_transformer (l.3701-3716): decoder layers without an embedding —
//     q, k, v, o (no q/k norms, l.3514-3542), a SwiGLU MLP, two RMSNorms
//     and two layer scales of hidden each (l.3623-3647), every layer
//     attending within sliding_window (l.529-534) — and its final norm;
//   - code_embedding: num_quantizers × codebook_size codes (model.codec
//     groups × vocab) × hidden (l.3894), with the code_offset buffer
//     [1, num_quantizers, 1] (int64, not persistent);
//   - upsample: for each factor of upsampling_ratios (model.codec
//     upsample) a transposed Conv1d hidden → hidden of that kernel and
//     stride, and a ConvNeXt block (a depthwise 7-tap Conv1d, a
//     LayerNorm, pwconv1 to 4 · hidden, pwconv2, a gamma), all with biases
//     (l.3427-3511, 3897-3909);
//   - decoder: a 7-tap Conv1d hidden → decoder_dim, then for each rate of
//     upsample_rates (model.codec decoder_upsample) a block halving the
//     width — a SnakeBeta (alpha, beta), a transposed Conv1d of twice the
//     rate, three residual units of SnakeBeta, a dilated 7-tap Conv1d,
//     SnakeBeta, a 1-tap Conv1d (l.3790-3883) — then a SnakeBeta and a
//     7-tap Conv1d to one channel (l.3911-3919).
//
// Its forward is not modelled (speech.go).
func init() {
	register(&family{
		name: "qwen3_omni_moe_code2wav", source: "transformers/models/qwen3_omni_moe/modeling_qwen3_omni_moe.py (transformers 5.23.0)",
		kind: decoder, towerOnly: true,
		defaults:   Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Head: "none"},
		fromConfig: qwen3OmniCode2WavFromConfig,
		toConfig: func(m Model, c map[string]any) {
			cd := m.Codec
			c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"] = m.Layers, m.Hidden, m.Heads
			c["num_key_value_heads"], c["head_dim"], c["intermediate_size"] = m.KVHeads, m.HeadDim, m.FFN
			c["codebook_size"], c["max_position_embeddings"], c["sliding_window"] = m.Vocab, m.MaxPosition, m.SlidingWindow
			c["attention_bias"], c["num_quantizers"], c["decoder_dim"] = m.Bias == BiasAttn, cd.Groups, cd.DecoderDim
			c["upsampling_ratios"], c["upsample_rates"] = cd.Upsample.Indexes(), cd.DecoderUpsample.Indexes()
			c["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 10000.0}
		},
		check:   qwen3OmniCode2WavCheck,
		tensors: qwen3OmniCode2WavTensors,
		buffers: func(m Model, b *bufferList) {
			qwen3OmniRotary(m, b, "pre_transformer.")
			if m.Codec != nil {
				b.add("code_offset", -1, INT64, 1, int64(m.Codec.Groups), 1)
			}
		},
	})
}

// qwen3OmniCode2WavFromConfig reads a Qwen3OmniMoeCode2WavConfig, each key
// left out taking the class's default (l.509-527): 8 layers 1,024 wide,
// 16 heads and 16 KV heads, an MLP of 3,072, a window of 72, 8,000
// positions, 16 codebooks of 2,048 codes, a decoder 1,536 wide, upsampling
// ratios (2, 2) and rates (8, 5, 4, 3). The class has no head_dim: the
// attention takes config.json's, else hidden // heads (l.3524).
func qwen3OmniCode2WavFromConfig(c *hfReader, m *Model) {
	c.commonOr(m, classShape{layers: 8, hidden: 1024, heads: 16, kvHeads: 16, ffn: 3072, vocab: 0, maxPosition: 8000})
	m.Vocab = c.optInt("codebook_size", 2048)
	if m.HeadDim == 0 && m.Heads > 0 {
		m.HeadDim = m.Hidden / m.Heads
	}
	if c.optBool("attention_bias", false) {
		m.Bias = BiasAttn
	}
	m.SlidingWindow = c.optInt("sliding_window", 72)
	if act := c.optString("hidden_act", "silu"); act != "silu" && c.err == nil {
		c.fail(fmt.Sprintf("hidden_act %q: the vocoder's transformer is modelled with silu (the class's default)", act))
	}
	cd := &Codec{Groups: c.optInt("num_quantizers", 16), DecoderDim: c.optInt("decoder_dim", 1536),
		Upsample: Blocks(2, 2), DecoderUpsample: Blocks(8, 5, 4, 3)}
	if (c.c["upsample_rates"] == nil) != (c.c["upsampling_ratios"] == nil) && c.err == nil {
		// total_upsample = np.prod(upsample_rates + upsampling_ratios)
		// (l.3892): config.json's list and the class's default tuple do
		// not concatenate (TypeError).
		c.fail("upsample_rates and upsampling_ratios: give both or neither (Qwen3OmniMoeCode2Wav adds the two, and a list does not concatenate with the class's default tuple: TypeError, modeling_qwen3_omni_moe.py l.3892)")
		return
	}
	for _, kd := range []struct {
		key string
		dst *BlockList
	}{{"upsampling_ratios", &cd.Upsample}, {"upsample_rates", &cd.DecoderUpsample}} {
		key, dst := kd.key, kd.dst
		raw, ok := c.c[key]
		if !ok || raw == nil {
			continue
		}
		var ix []int
		for i, v := range c.optList(key) {
			f, ok := v.(float64)
			if !ok || f != math.Trunc(f) || f < 1 || f > maxChannels {
				c.fail(fmt.Sprintf("%s[%d] = %v: want a factor in [1, %d]", key, i, v, maxChannels))
				return
			}
			ix = append(ix, int(f))
		}
		*dst = Blocks(ix...)
	}
	m.Codec = cd
}

// qwen3OmniCode2WavCheck is the vocoder's rules.
func qwen3OmniCode2WavCheck(m Model) error {
	cd := m.Codec
	if cd == nil {
		return errors.New("model.codec (groups, decoder_dim, upsample, decoder_upsample) is required for the vocoder")
	}
	rates := cd.DecoderUpsample.Indexes()
	switch {
	case cd.Groups < 1:
		return fmt.Errorf("model.codec.groups = %d (num_quantizers) must be ≥ 1", cd.Groups)
	case cd.DecoderDim>>len(rates) < 1:
		return fmt.Errorf("model.codec.decoder_dim = %d: each of the %d decoder blocks halves it (decoder_dim // 2**i, l.3864-3865), which must leave ≥ 1 channel", cd.DecoderDim, len(rates))
	case m.Experts != 0 || m.QKNorm != "" || m.TiedEmbeddings:
		return errors.New("model: the vocoder's transformer has dense MLPs, no q/k norms and no output layer")
	case m.SlidingWindow < 1:
		return fmt.Errorf("model.sliding_window = %d: every vocoder layer attends within a window (layer_types, l.529-534)", m.SlidingWindow)
	}
	for _, f := range append(cd.Upsample.Indexes(), rates...) {
		if f < 1 {
			return fmt.Errorf("model.codec: upsample %v and decoder_upsample %v must be factors ≥ 1", cd.Upsample.Indexes(), rates)
		}
	}
	return nil
}

// qwen3OmniCode2WavTensors lists the vocoder's parameters under its own
// names (the wrapper adds code2wav.), in registration order.
func qwen3OmniCode2WavTensors(m Model, l *tensorList) {
	d := m.dims()
	cd := m.Codec
	if cd == nil {
		cd = &Codec{} // Validate reports it missing
	}
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("pre_transformer.layers.%d.", i)
		attnQKVO(m, l, p+"self_attn.")
		denseMLP(m, l, p, i)
		l.norm(p+"input_layernorm", false, d.h)
		l.norm(p+"post_attention_layernorm", false, d.h)
		l.add(p+"self_attn_layer_scale.scale", "other", d.h)
		l.add(p+"mlp_layer_scale.scale", "other", d.h)
	}
	l.outside()
	l.norm("pre_transformer.norm", false, d.h)
	l.add("code_embedding.weight", "other", mulI64(int64(cd.Groups), d.v), d.h)
	for i, f := range cd.Upsample.Indexes() {
		p := fmt.Sprintf("upsample.%d.", i)
		conv1d(l, p+"0.conv", d.h, d.h, int64(f), true)
		conv1d(l, p+"1.dwconv.conv", 1, d.h, 7, false) // depthwise: one input channel a group
		l.norm(p+"1.norm", true, d.h)
		l.linear(p+"1.pwconv1", "other", d.h, 4*d.h, true)
		l.linear(p+"1.pwconv2", "other", 4*d.h, d.h, true)
		l.add(p+"1.gamma", "other", d.h)
	}
	dd := int64(cd.DecoderDim)
	conv1d(l, "decoder.0.conv", d.h, dd, 7, false)
	rates := cd.DecoderUpsample.Indexes()
	for i, r := range rates {
		in, out := dd>>i, dd>>(i+1)
		p := fmt.Sprintf("decoder.%d.block.", i+1)
		snake(l, p+"0", in)
		conv1d(l, p+"1.conv", in, out, 2*int64(r), true)
		for u := 2; u < 5; u++ {
			q := fmt.Sprintf("%s%d.", p, u)
			snake(l, q+"act1", out)
			conv1d(l, q+"conv1.conv", out, out, 7, false)
			snake(l, q+"act2", out)
			conv1d(l, q+"conv2.conv", out, out, 1, false)
		}
	}
	last := dd >> len(rates)
	snake(l, fmt.Sprintf("decoder.%d", len(rates)+1), last)
	conv1d(l, fmt.Sprintf("decoder.%d.conv", len(rates)+2), last, 1, 7, false)
}

// conv1d adds a biased Conv1d of kernel k to out channels from in
// channels a group (weight [out, in, k]), or with transposed a
// ConvTranspose1d from in to out channels (weight [in, out, k]).
func conv1d(l *tensorList, p string, in, out, k int64, transposed bool) {
	if transposed {
		l.add(p+".weight", "other", in, out, k)
		l.add(p+".bias", "bias", out)
		return
	}
	l.add(p+".weight", "other", out, in, k)
	l.add(p+".bias", "bias", out)
}

// snake adds a SnakeBeta's alpha and beta, one each a channel.
func snake(l *tensorList, p string, ch int64) {
	l.add(p+".alpha", "other", ch)
	l.add(p+".beta", "other", ch)
}
