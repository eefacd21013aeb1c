package vram

import (
	"errors"
	"fmt"
)

// Qwen3-Omni's code predictor (transformers 5.23.0
// models/qwen3_omni_moe/modeling_qwen3_omni_moe.py,
// Qwen3OmniMoeTalkerCodePredictorModelForConditionalGeneration
// l.2703-2722 over Qwen3OmniMoeTalkerCodePredictorModel l.2614-2640; its
// config is the talker's code_predictor_config,
// Qwen3OmniMoeTalkerCodePredictorConfig, configuration_qwen3_omni_moe.py
// l.242-307, model_type qwen3_omni_moe_talker_code_predictor), the second
// stage of family qwen3_omni_moe's speech generator
// (model.speech.predictor), which fills each codec frame's further
// codebooks: a small Qwen3 decoder without a token embedding — q, k, v, o
// with per-head q and k RMSNorms, a SwiGLU MLP (l.2434-2532) — its final
// norm, then num_code_groups − 1 codec embeddings and as many output
// heads, vocab × hidden each (model.codec.groups; l.2636-2638,
// 2719-2721). Its tie_word_embeddings names an embed_tokens the model does
// not have (l.2704): transformers fails to build it tied. Its forward is
// not modelled (speech.go).
func init() {
	register(&family{
		name: "qwen3_omni_moe_talker_code_predictor", source: "transformers/models/qwen3_omni_moe/modeling_qwen3_omni_moe.py (transformers 5.23.0)",
		kind: decoder, towerOnly: true,
		defaults:   Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, QKNorm: "head", Head: "none"},
		fromConfig: qwen3OmniPredictorFromConfig,
		toConfig: func(m Model, c map[string]any) {
			qwen3Config(m, c)
			c["num_code_groups"] = m.Codec.Groups
			c["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 1000000.0}
		},
		check: func(m Model) error {
			switch {
			case m.Codec == nil || m.Codec.Groups < 1:
				return errors.New("model.codec.groups (num_code_groups) ≥ 1 is required for the code predictor")
			case m.Codec.DecoderDim != 0 || m.Codec.Upsample != "" || m.Codec.DecoderUpsample != "":
				return errors.New("model.codec: decoder_dim, upsample and decoder_upsample describe a vocoder, not the code predictor")
			case m.TiedEmbeddings:
				return errors.New("model.tied_embeddings: the code predictor's heads cannot be tied (its _tied_weights_keys name an embed_tokens it does not have, l.2704: AttributeError)")
			case m.Experts != 0:
				return errors.New("model.experts: the code predictor's MLPs are dense")
			}
			return requireQKNorm("head")(m)
		},
		tensors: qwen3OmniPredictorTensors,
		buffers: func(m Model, b *bufferList) { qwen3OmniRotary(m, b, "model.") },
	})
}

// qwen3OmniPredictorFromConfig reads a Qwen3OmniMoeTalkerCodePredictorConfig,
// each key left out taking the class's default (l.271-293): 5 layers
// 1,024 wide, 16 heads of 128 over 8 KV heads, an MLP of 3,072, 2,048
// codes, 32,768 positions, 32 code groups.
func qwen3OmniPredictorFromConfig(c *hfReader, m *Model) {
	c.commonOr(m, classShape{layers: 5, hidden: 1024, heads: 16, kvHeads: 8, ffn: 3072, vocab: 2048, maxPosition: 32768})
	if m.HeadDim = c.optInt("head_dim", 128); m.HeadDim == 0 && m.Heads > 0 {
		m.HeadDim = m.Hidden / m.Heads
	}
	if c.optBool("attention_bias", false) {
		m.Bias = BiasAttn
	}
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
	m.Codec = &Codec{Groups: c.optInt("num_code_groups", 32)}
	if act := c.optString("hidden_act", "silu"); act != "silu" && c.err == nil {
		c.fail(fmt.Sprintf("hidden_act %q: the code predictor is modelled with silu (the class's default)", act))
	}
}

// qwen3OmniPredictorTensors lists the code predictor's parameters under its
// own names (the wrapper adds talker.code_predictor.).
func qwen3OmniPredictorTensors(m Model, l *tensorList) {
	d := m.dims()
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("model.layers.%d.", i)
		attnQKVO(m, l, p+"self_attn.")
		qkNormTensors(m, l, p+"self_attn.")
		denseMLP(m, l, p, i)
		l.norm(p+"input_layernorm", false, d.h)
		l.norm(p+"post_attention_layernorm", false, d.h)
	}
	l.headSide()
	l.norm("model.norm", false, d.h)
	groups := 0
	if m.Codec != nil {
		groups = m.Codec.Groups
	}
	for g := 0; g < groups-1; g++ {
		l.add(fmt.Sprintf("model.codec_embedding.%d.weight", g), "embedding", d.v, d.h)
	}
	for g := 0; g < groups-1; g++ {
		l.linear(fmt.Sprintf("lm_head.%d", g), "lm_head", d.h, d.v, false)
	}
}
