package vram

import "fmt"

// Qwen3-Omni's thinker language model (transformers 5.23.0
// models/qwen3_omni_moe/modeling_qwen3_omni_moe.py,
// Qwen3OmniMoeThinkerTextModel l.1623-1645; its config is the thinker's
// text_config, Qwen3OmniMoeTextConfig, configuration_qwen3_omni_moe.py
// l.107-190, model_type qwen3_omni_moe_text): Qwen3-MoE's decoder — q, k,
// v, o projections with per-head q and k RMSNorms (l.1429-1460), and in
// every decoder_sparse_step-th layer not listed in mlp_only_layers a
// router (a [experts, hidden] weight: softmax in fp32, top-k, renormalized
// with norm_topk_prob, l.1346-1364) and transformers 5's fused experts,
// gate_up_proj [experts, 2 · moe_intermediate_size, hidden] and down_proj
// [experts, hidden, moe_intermediate_size] (l.1305-1316), a dense SwiGLU of
// intermediate_size in the other layers (l.1520-1531) — whose rotary
// embedding reads 3-D positions and interleaves the sections'
// frequencies (l.1239-1300), with transformers 5's two rotary buffers.
// The thinker adds the deepstack features after its first layers
// (l.1722-1726, as Qwen3-VL). Only the omni wrapper (family
// qwen3_omni_moe) builds it: AutoModelForCausalLM has no class for
// qwen3_omni_moe_text (models/auto/modeling_auto.py maps only the thinker,
// l.506, 1246, and the wrapper, l.1279), and it trains as the thinker
// (Qwen3OmniMoeThinkerForConditionalGeneration.forward, l.2224-2343).
func init() {
	register(&family{
		name: "qwen3_omni_moe_text", source: "transformers/models/qwen3_omni_moe/modeling_qwen3_omni_moe.py (transformers 5.23.0)", wrappedText: true,
		servingOnly: qwen3OmniServingOnly,
		has4:        qwen3OmniHas4,
		defaults:    Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, QKNorm: "head", Router: "softmax_topk_norm"},
		// Qwen3-MoE's 5.x MoE block line for line: the router
		// (Qwen3OmniMoeThinkerTextTopKRouter l.1346-1364: softmax in fp32,
		// top-k, renormalized with norm_topk_prob, cast to the logits'
		// dtype) and the experts through grouped_mm
		// (@use_experts_implementation, l.1304; moe_grouped_mm.go).
		recipe: func(Model, libVersion) recipe {
			return recipe{groupedMM: true, routerLogitsDType: true}
		},
		fromConfig: qwen3OmniTextFromConfig,
		toConfig: func(m Model, c map[string]any) {
			qwen3Config(m, c)
			writeQwenMoEConfig(m, c)
			c["rope_parameters"] = qwen3OmniRope(m.HeadDim, true)
		},
		check: requireQKNorm("head"),
		tensors: standardDecoder{attn: func(m Model, l *tensorList, p string) {
			attnQKVO(m, l, p)
			qkNormTensors(m, l, p)
		}, mlp: qwen3OmniMoEMLP}.tensors,
		buffers: func(m Model, b *bufferList) { qwen3OmniRotary(m, b, "model.") },
	})
}

// qwen3OmniTextFromConfig reads a Qwen3OmniMoeTextConfig, a key left out
// taking the class's default (l.160-185): 28 layers 2,048 wide, 28 heads
// over 4 KV heads, a dense width of 18,944, 3,584 tokens, 32,768
// positions, 128 experts of 768, 8 a token, renormalized. The class has no
// head_dim: the attention takes config.json's where it has one, else
// hidden // heads (getattr, l.1436). The thinker's tie_word_embeddings
// decides the output layer (the wrapper reads it).
func qwen3OmniTextFromConfig(c *hfReader, m *Model) {
	c.commonOr(m, classShape{layers: 28, hidden: 2048, heads: 28, kvHeads: 4, ffn: 18944, vocab: 3584, maxPosition: 32768})
	if m.HeadDim == 0 && m.Heads > 0 {
		m.HeadDim = m.Hidden / m.Heads
	}
	if c.optBool("attention_bias", false) {
		m.Bias = BiasAttn
	}
	if act := c.optString("hidden_act", "silu"); act != "silu" && c.err == nil {
		c.fail(fmt.Sprintf("hidden_act %q: the Qwen3-Omni language model is modelled with silu (the class's default)", act))
	}
	qwenMoEConfig(c, m, qwenMoEDefaults{experts: 128, perToken: 8, expertFFN: 768, normTopK: true})
}

// qwen3OmniMoEMLP lists a thinker block's MLP: in a MoE layer the fused
// experts, then the router (registration order, l.1370-1371); a dense
// SwiGLU elsewhere.
func qwen3OmniMoEMLP(m Model, l *tensorList, p string, layer int) {
	if !m.IsMoELayer(layer) {
		denseMLP(m, l, p, layer)
		return
	}
	fusedExperts(m, l, p+"mlp.experts.")
	l.linear(p+"mlp.gate", "router", int64(m.Hidden), int64(m.Experts), false)
}

// qwen3OmniRotary adds transformers 5's rotary buffers under p: inv_freq
// and original_inv_freq, one a pair of a head's dimensions, ceil(head_dim
// / 2) (torch.arange(0, dim, 2), l.1271-1276).
func qwen3OmniRotary(m Model, b *bufferList, p string) {
	n := int64(m.HeadDim+1) / 2
	b.add(p+"rotary_emb.inv_freq", -1, FP32, n)
	b.add(p+"rotary_emb.original_inv_freq", -1, FP32, n)
}

// qwen3OmniRope is the rope_parameters the released configs carry: theta
// 10⁶ and, with mrope, three interleaved sections of half the head
// ([24, 20, 20] for head_dim 128, the rest of half the head to time).
func qwen3OmniRope(headDim int, mrope bool) map[string]any {
	r := map[string]any{"rope_type": "default", "rope_theta": 1000000.0}
	if mrope {
		half := headDim / 2
		hw := half * 5 / 16
		r["mrope_section"], r["interleaved"], r["mrope_interleaved"] = []int{half - 2*hw, hw, hw}, true, true
	}
	return r
}

// qwen3OmniServingOnly is what the Qwen3-Omni families do not plan: the
// thinker's training step with text and images is modelled as its 5.23
// traces hold (trainsAt5); transformers' generate, not traced, is not.
const qwen3OmniServingOnly = "its modeling code is transformers 5's (grouped_mm experts, a thinker with vision and audio towers, a talker and a vocoder); of it the thinker's training step on text and images is traced at 5.23, not transformers' generate"

// qwen3OmniHas4 is what of transformers 4.57's Qwen3-Omni the engine does
// not model: its thinker's experts are a ModuleList of MLPs under a linear
// gate (4.57.6 modeling_qwen3_omni_moe.py:1295-1351), other parameters'
// names and another loop than the fused experts the engine lists.
const qwen3OmniHas4 = "transformers 4.57 has Qwen3-Omni with a ModuleList of experts, other parameter names and loop"
