package vram

import (
	"errors"
	"fmt"
)

// Qwen3-Omni's talker (transformers 5.23.0
// models/qwen3_omni_moe/modeling_qwen3_omni_moe.py,
// Qwen3OmniMoeTalkerForConditionalGeneration l.3086-3115 over
// Qwen3OmniMoeTalkerModel l.2958-2980; its config is the wrapper's
// talker_config, Qwen3OmniMoeTalkerConfig, configuration_qwen3_omni_moe.py
// l.402-478, whose text_config, Qwen3OmniMoeTalkerTextConfig l.310-399,
// shapes the decoder; the class has no model_type of its own, hence this
// family's name), the first stage of family qwen3_omni_moe's speech
// generator (model.speech.talker): a decoder over codec tokens with no
// token embedding of its own — every layer the thinker's attention (q, k,
// v, o with per-head q and k RMSNorms) and, whatever decoder_sparse_step
// and mlp_only_layers say, a mixture of experts (the layer replaces its
// MLP, l.2905-2918): a router (softmax in fp32, top-k, renormalized with
// norm_topk_prob), transformers 5's fused experts of moe_intermediate_size,
// a shared SwiGLU expert of shared_expert_intermediate_size and its
// sigmoid gate (l.2820-2903) — then the final norm, codec_embedding
// (vocab × hidden) and codec_head, tied to it with the talker config's
// tie_word_embeddings (l.3087). The wrapper lists text_projection and
// hidden_projection, the MLPs that bring the thinker's states to its
// width (l.2391-2401, 3106-3107). Its forward is not modelled (speech.go).
func init() {
	register(&family{
		name: "qwen3_omni_moe_talker", source: "transformers/models/qwen3_omni_moe/modeling_qwen3_omni_moe.py (transformers 5.23.0)",
		kind: decoder, towerOnly: true,
		defaults:   Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, QKNorm: "head", Router: "softmax_topk"},
		fromConfig: qwen3OmniTalkerFromConfig,
		toConfig:   qwen3OmniTalkerToConfig,
		check: func(m Model) error {
			switch {
			case m.Experts < 1 || m.SharedExperts != 1 || m.SharedExpertFFN < 1:
				return errors.New("model: every talker layer is a mixture of experts (experts ≥ 1) with one shared expert (shared_experts 1, shared_expert_ffn ≥ 1)")
			case m.MoEEvery > 1 || m.DenseLayers != 0:
				return errors.New("model: every talker layer is a mixture of experts (moe_every and dense_layers are not read)")
			}
			return requireQKNorm("head")(m)
		},
		tensors: qwen3OmniTalkerTensors,
		buffers: func(m Model, b *bufferList) { qwen3OmniRotary(m, b, "model.") },
	})
}

// qwen3OmniTalkerFromConfig reads a Qwen3OmniMoeTalkerConfig: its
// tie_word_embeddings (default false) and its text_config, each key left
// out taking Qwen3OmniMoeTalkerTextConfig's default (l.368-394): 20 layers
// 1,024 wide, 16 heads over 2 KV heads, an intermediate_size of 2,048 (the
// projections' width), 3,072 codes, 32,768 positions, 128 experts
// (num_experts is num_local_experts, attribute_map l.338-340) of 384, 8 a
// token, not renormalized. shared_expert_intermediate_size has no default:
// without it transformers fails to build the talker (l.2887); nor has
// the talker config a spatial_merge_size, which the talker reads when
// built (l.3112). head_dim is config.json's, else hidden // heads.
func qwen3OmniTalkerFromConfig(c *hfReader, m *Model) {
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
	if v, ok := c.c["spatial_merge_size"]; (!ok || v == nil) && c.err == nil {
		c.fail("spatial_merge_size is required: Qwen3OmniMoeTalkerConfig declares none and the talker reads it when it is built (modeling_qwen3_omni_moe.py l.3112, AttributeError)")
	}
	tc, ok := c.sub("text_config")
	if !ok {
		return
	}
	t := hfReader{c: tc}
	t.commonOr(m, classShape{layers: 20, hidden: 1024, heads: 16, kvHeads: 2, ffn: 2048, vocab: 3072, maxPosition: 32768})
	if m.HeadDim == 0 && m.Heads > 0 {
		m.HeadDim = m.Hidden / m.Heads
	}
	if t.optBool("attention_bias", false) {
		m.Bias = BiasAttn
	}
	m.Experts = t.optInt("num_local_experts", t.optInt("num_experts", 128))
	if m.Experts < 1 && t.err == nil {
		t.fail(fmt.Sprintf("num_local_experts = %d: every talker layer is a mixture of experts (l.2905-2918)", m.Experts))
	}
	m.ExpertsPerToken, m.ExpertFFN = t.optInt("num_experts_per_tok", 8), t.optInt("moe_intermediate_size", 384)
	m.SharedExperts = 1
	if v, ok := tc["shared_expert_intermediate_size"]; (!ok || v == nil) && t.err == nil {
		t.fail("shared_expert_intermediate_size is required: Qwen3OmniMoeTalkerTextConfig has no default and the talker's shared expert reads it (modeling_qwen3_omni_moe.py l.2886-2888, AttributeError)")
	}
	m.SharedExpertFFN = t.optInt("shared_expert_intermediate_size", 0)
	m.Router = "softmax_topk"
	if t.optBool("norm_topk_prob", false) {
		m.Router = "softmax_topk_norm"
	}
	if act := t.optString("hidden_act", "silu"); act != "silu" && t.err == nil {
		t.fail(fmt.Sprintf("hidden_act %q: the talker is modelled with silu (the class's default)", act))
	}
	if t.err != nil {
		c.fail("text_config: " + t.err.Error())
	}
}

// qwen3OmniTalkerToConfig writes a Qwen3OmniMoeTalkerConfig's own keys and
// its text_config (the wrapper writes the code predictor's config and
// thinker_hidden_size).
func qwen3OmniTalkerToConfig(m Model, c map[string]any) {
	tc := map[string]any{"model_type": "qwen3_omni_moe_talker_text"}
	qwen3Config(m, tc)
	tc["tie_word_embeddings"] = false
	tc["num_local_experts"], tc["num_experts_per_tok"], tc["moe_intermediate_size"] = m.Experts, m.ExpertsPerToken, m.ExpertFFN
	tc["shared_expert_intermediate_size"], tc["norm_topk_prob"] = m.SharedExpertFFN, m.Router == "softmax_topk_norm"
	tc["decoder_sparse_step"], tc["mlp_only_layers"] = 1, []int{}
	tc["rope_parameters"] = qwen3OmniRope(m.HeadDim, true)
	c["text_config"] = tc
	c["tie_word_embeddings"] = m.TiedEmbeddings
	c["spatial_merge_size"] = 2
}

// qwen3OmniTalkerTensors lists the talker's parameters under its own names
// (the wrapper adds talker.), but for the wrapper's projections.
func qwen3OmniTalkerTensors(m Model, l *tensorList) {
	d := m.dims()
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("model.layers.%d.", i)
		attnQKVO(m, l, p+"self_attn.")
		qkNormTensors(m, l, p+"self_attn.")
		// Qwen3OmniMoeTalkerTextSparseMoeBlock (l.2881-2889): gate,
		// experts, shared_expert, shared_expert_gate.
		l.linear(p+"mlp.gate", "router", d.h, int64(m.Experts), false)
		fusedExperts(m, l, p+"mlp.experts.")
		mlpGated(m, l, p+"mlp.shared_expert.", int64(m.SharedExpertFFN), -1)
		l.linear(p+"mlp.shared_expert_gate", "router", d.h, 1, false)
		l.norm(p+"input_layernorm", false, d.h)
		l.norm(p+"post_attention_layernorm", false, d.h)
	}
	l.headSide()
	l.norm("model.norm", false, d.h)
	l.add("model.codec_embedding.weight", "embedding", d.v, d.h)
	if !m.TiedEmbeddings {
		l.linear("codec_head", "lm_head", d.h, d.v, false)
	}
}
