package vram

import (
	"errors"
	"fmt"
)

// Qwen3-Omni's audio encoder (transformers 5.23.0
// models/qwen3_omni_moe/modeling_qwen3_omni_moe.py,
// Qwen3OmniMoeAudioEncoder l.754-790; its config is the thinker's
// audio_config, Qwen3OmniMoeAudioEncoderConfig,
// configuration_qwen3_omni_moe.py l.28-71, model_type
// qwen3_omni_moe_audio_encoder), the audio tower of family qwen3_omni_moe
// (model.audio):
//   - a sinusoidal position table of max_source_positions × d_model, an
//     fp32 buffer, not persistent (SinusoidsPositionEmbedding l.91-110);
//   - Whisper-style pre-LayerNorm blocks (l.603-614): q, k, v and out
//     projections with biases (l.529-532, registered k, v, q, out), a
//     self_attn_layer_norm, fc1 and fc2 with biases around the activation
//     (gelu), a final_layer_norm;
//   - ln_post over d_model; a front end of three 3 × 3 stride-2 Conv2d
//     with biases, 1 → downsample_hidden_size → downsample_hidden_size →
//     downsample_hidden_size channels (model.downsample_channels), over
//     the num_mel_bins (model.mel_bins) frequency rows, their output
//     flattened (channels × the rows left after three halvings) and
//     projected to d_model by conv_out without a bias (l.776-784);
//   - proj1 (d_model → d_model) and proj2 (d_model → output_dim), with
//     biases (l.786-788), which the wrapper lists as the tower's
//     projector (output_dim is the thinker's width).
//
// n_window, n_window_infer and conv_chunksize chunk the forward only,
// which the engine does not model (audio.go): they are not read.
func init() {
	register(&family{
		name: "qwen3_omni_moe_audio_encoder", source: "transformers/models/qwen3_omni_moe/modeling_qwen3_omni_moe.py (transformers 5.23.0)",
		kind: encoder, towerOnly: true, audio: true,
		defaults:   Model{MLP: "gelu", Norm: "layernorm", Position: "none", Bias: BiasAll, Head: "none"},
		fromConfig: qwen3OmniAudioFromConfig,
		toConfig: func(m Model, c map[string]any) {
			c["encoder_layers"], c["d_model"], c["encoder_attention_heads"], c["encoder_ffn_dim"] = m.Layers, m.Hidden, m.Heads, m.FFN
			c["num_mel_bins"], c["max_source_positions"], c["downsample_hidden_size"] = m.MelBins, m.SourcePositions, m.DownsampleChannels
			c["activation_function"] = "gelu"
		},
		check:   qwen3OmniAudioCheck,
		tensors: qwen3OmniAudioTensors,
		buffers: func(m Model, b *bufferList) {
			b.add("positional_embedding.positional_embedding", -1, FP32, int64(m.SourcePositions), int64(m.Hidden))
		},
	})
}

// qwen3OmniAudioFromConfig reads a Qwen3OmniMoeAudioEncoderConfig, each key
// left out taking the class's default (l.54-71; attribute_map:
// num_hidden_layers is encoder_layers, hidden_size d_model,
// num_attention_heads encoder_attention_heads, intermediate_size
// encoder_ffn_dim). The wrapper reads output_dim.
func qwen3OmniAudioFromConfig(c *hfReader, m *Model) {
	m.Layers = c.optInt("encoder_layers", c.optInt("num_hidden_layers", 32))
	m.Hidden = c.optInt("d_model", c.optInt("hidden_size", 1280))
	m.Heads = c.optInt("encoder_attention_heads", c.optInt("num_attention_heads", 20))
	m.FFN = c.optInt("encoder_ffn_dim", c.optInt("intermediate_size", 5120))
	m.KVHeads = m.Heads
	m.MelBins, m.SourcePositions = c.optInt("num_mel_bins", 128), c.optInt("max_source_positions", 1500)
	m.DownsampleChannels = c.optInt("downsample_hidden_size", 480)
	if act := c.optString("activation_function", "gelu"); act != "gelu" && c.err == nil {
		c.fail(fmt.Sprintf("activation_function %q: the Qwen3-Omni audio encoder is modelled with gelu (the class's default)", act))
	}
}

// qwen3OmniAudioCheck is the tower's rules.
func qwen3OmniAudioCheck(m Model) error {
	switch {
	case m.Heads < 1 || m.Hidden%m.Heads != 0 || m.KVHeads != m.Heads || m.HeadDim*m.Heads != m.Hidden:
		return fmt.Errorf("model: the Qwen3-Omni audio attention has heads = %d heads of hidden / heads for queries, keys and values alike: hidden = %d must be a multiple (embed_dim must be divisible by num_heads, l.522-526)", m.Heads, m.Hidden)
	case m.Hidden%2 != 0:
		return fmt.Errorf("model.hidden = %d must be even: the sinusoidal position table has sine and cosine halves (SinusoidsPositionEmbedding needs even channels, l.97-98)", m.Hidden)
	case m.DownsampleChannels < 1:
		return errors.New("model.downsample_channels (downsample_hidden_size) must be ≥ 1: the front end's convolutions have that many channels")
	case m.MLP != "gelu" || m.Norm != "layernorm" || m.Bias != BiasAll || m.NormPosition != "" || m.QKNorm != "" || m.Position != "none":
		return errors.New("model: the Qwen3-Omni audio blocks are modelled with gelu, pre-LayerNorms, biases throughout and a fixed sinusoidal table (position none)")
	}
	return nil
}

// qwen3OmniAudioRows is how many of mels frequency rows the front end's
// three stride-2 convolutions leave (conv_out's input, l.782).
func qwen3OmniAudioRows(mels int64) int64 { return (((mels+1)/2+1)/2 + 1) / 2 }

// qwen3OmniAudioTensors lists the tower's parameters under its own names
// (the wrapper adds thinker.model.audio_tower.), in registration order:
// the blocks, ln_post, the convolutions, conv_out.
func qwen3OmniAudioTensors(m Model, l *tensorList) {
	h, f, c := int64(m.Hidden), int64(m.FFN), int64(m.DownsampleChannels)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("layers.%d.", i)
		l.linear(p+"self_attn.k_proj", "k_proj", h, h, true)
		l.linear(p+"self_attn.v_proj", "v_proj", h, h, true)
		l.linear(p+"self_attn.q_proj", "q_proj", h, h, true)
		l.linear(p+"self_attn.out_proj", "o_proj", h, h, true)
		l.norm(p+"self_attn_layer_norm", true, h)
		l.linear(p+"fc1", "fc1", h, f, true)
		l.linear(p+"fc2", "fc2", f, h, true)
		l.norm(p+"final_layer_norm", true, h)
	}
	l.outside()
	l.norm("ln_post", true, h)
	l.add("conv2d1.weight", "other", c, 1, 3, 3)
	l.add("conv2d1.bias", "bias", c)
	l.add("conv2d2.weight", "other", c, c, 3, 3)
	l.add("conv2d2.bias", "bias", c)
	l.add("conv2d3.weight", "other", c, c, 3, 3)
	l.add("conv2d3.bias", "bias", c)
	l.linear("conv_out", "other", c*qwen3OmniAudioRows(int64(m.MelBins)), h, false)
}
