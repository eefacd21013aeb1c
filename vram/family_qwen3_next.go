package vram

import "fmt"

// Qwen3-Next (transformers/models/qwen3_next/modeling_qwen3_next.py): a
// hybrid of Gated DeltaNet layers (model.delta_net; deltanet.go) and gated
// attention at layer_types' "full_attention" layers (every fourth by
// default): q_proj makes q and a per-channel output gate, q/k RMSNorm per
// head, a partial rotary embedding (a quarter of each 256-wide head), and
// the attention output times sigmoid(gate) before o_proj. Every norm is
// Qwen3NextRMSNorm, (1 + weight) in fp32. The MLPs are Qwen2-MoE's:
// softmax-top-k experts in a Python loop and a shared expert scaled by a
// sigmoid gate. With use_cache in training the model builds
// Qwen3NextDynamicCache: k and v as they are, each DeltaNet layer's conv
// and final recurrent state. The checkpoint's mtp.* weights are not loaded
// by transformers (_keys_to_ignore_on_load_unexpected) and not counted.
func init() {
	register(&family{
		name: "qwen3_next", gguf: "qwen3next", source: "transformers/models/qwen3_next/modeling_qwen3_next.py",
		defaults:   Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, QKNorm: "head"},
		deltaNet:   true,
		fromConfig: qwen3NextFromConfig,
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["partial_rotary_factor"] = m.RotaryPct
			writeQwenMoEConfig(m, c)
			c["shared_expert_intermediate_size"] = 0
			if m.SharedExperts > 0 {
				c["shared_expert_intermediate_size"] = m.SharedExpertFFN
			}
			d := m.DeltaNet
			c["linear_num_key_heads"], c["linear_num_value_heads"] = d.KeyHeads, d.ValueHeads
			c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"] = d.KeyDim, d.ValueDim, d.ConvKernel
			writeLayerKinds(c, m.Layers, m.AttentionLayer, "full_attention", "linear_attention")
		},
		check: func(m Model) error {
			switch {
			case m.DeltaNet == nil:
				return fmt.Errorf("model: qwen3_next needs model.delta_net (its Gated DeltaNet layers) with attention_layers")
			case m.Bias != BiasNone:
				return fmt.Errorf("model.bias %q: qwen3_next's projections have no biases", m.Bias)
			case m.Experts > 0 && m.SharedExperts > 1:
				return fmt.Errorf("model.shared_experts = %d: qwen3_next has one shared expert", m.SharedExperts)
			}
			return requireQKNorm("head")(m)
		},
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			l.add("model.embed_tokens.weight", "embedding", d.v, d.h)
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf("model.layers.%d.", i)
				if m.DeltaNetLayer(i) {
					deltaNetTensors(m, l, p+"linear_attn.")
				} else {
					qwen3NextAttention(m, l, p+"self_attn.")
				}
				qwenMoEMLP(m, l, p, i)
				l.norm(p+"input_layernorm", false, d.h)
				l.norm(p+"post_attention_layernorm", false, d.h)
			}
			l.headSide()
			l.norm("model.norm", false, d.h)
			lmHead(m, l, "lm_head", "score")
		},
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		block: func(r *resolved, layer int) BlockActivations {
			if r.m.DeltaNetLayer(layer) {
				return deltaNetBlock(r, layer)
			}
			return decoderBlock(r, layer)
		},
		// transformers 5: the experts through grouped_mm
		// (moe_grouped_mm.go; 5.23 modeling_qwen3_next.py:788), the
		// shared expert before the router and its gate after the experts
		// (l.855-862, Qwen2-MoE's block), the routing weights cast to the
		// logits' dtype (l.845), the rewritten chunked rule (deltanet5.go),
		// and DynamicCache in place of Qwen3NextDynamicCache (l.1008-1009):
		// torch.cat copies of k and v in k's dtype (fp32 after the rotary
		// embedding under autocast, so v is cached in fp32 too).
		recipe: func(_ Model, lib libVersion) recipe {
			v5 := !lib.before(5, 0)
			return recipe{normWeightFP32: true, sharedExpertGate: true, gatedAttention: true, cacheKeepsKV: !v5,
				groupedMM: v5, sharedFirst: v5, sharedGateLast: true, routerLogitsDType: v5, deltaRule5: v5}
		},
		// Qwen/Qwen3-Next-80B-A3B-Instruct: Qwen3NextConfig's defaults are
		// this checkpoint (its docstring): 48 layers 2,048 wide; every
		// fourth gated attention (16 heads of 256 over 2 KV heads, a
		// quarter rotated), the others Gated DeltaNet (16 key heads and 32
		// value heads of 128, a 4-tap conv); 512 experts of 512, 10 a
		// token, and a shared expert of 512 in every layer; 151,936
		// tokens, untied; 262,144 positions.
		presets: map[string]Preset{
			"qwen3-next-80b-a3b": {Model{Name: "Qwen/Qwen3-Next-80B-A3B-Instruct", Layers: 48, Hidden: 2048, Heads: 16, KVHeads: 2, HeadDim: 256, FFN: 5632, Vocab: 151936, MaxPosition: 262144,
				RotaryPct: 0.25, Experts: 512, ExpertsPerToken: 10, ExpertFFN: 512, SharedExperts: 1, SharedExpertFFN: 512, Router: "softmax_topk_norm",
				DeltaNet: &DeltaNet{KeyHeads: 16, ValueHeads: 32, KeyDim: 128, ValueDim: 128, ConvKernel: 4,
					Attention: []int{3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47}}}, hf("Qwen/Qwen3-Next-80B-A3B-Instruct")},
		},
	})
}

// qwen3NextFromConfig reads a Qwen3NextConfig: Qwen3's shape with a
// 256-wide head by default, a partial rotary embedding, Qwen2-MoE's
// experts, the DeltaNet's linear_* keys and the layer kinds from
// layer_types, else full_attention_interval (4).
func qwen3NextFromConfig(c *hfReader, m *Model) {
	// A key config.json leaves out takes the class's default
	// (configuration_qwen3_next.py:92-128, transformers 5.23.0).
	c.commonOr(m, classShape{layers: 48, hidden: 2048, heads: 16, kvHeads: 2, ffn: 5632, vocab: 151936, maxPosition: 32768})
	m.HeadDim = c.optInt("head_dim", 256)
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
	m.RotaryPct = c.optFloat("partial_rotary_factor", 0.25)
	if c.optBool("attention_bias", false) && c.err == nil {
		c.fail("attention_bias: biases on Qwen3-Next's attention projections are not modelled")
	}
	qwenMoEConfig(c, m, qwenMoEDefaults{experts: 512, perToken: 10, expertFFN: 512, normTopK: true})
	if m.Experts > 0 {
		if s := c.optInt("shared_expert_intermediate_size", 512); s > 0 {
			m.SharedExperts, m.SharedExpertFFN = 1, s
		}
	}
	d := DeltaNet{KeyHeads: c.optInt("linear_num_key_heads", 16), ValueHeads: c.optInt("linear_num_value_heads", 32),
		KeyDim: c.optInt("linear_key_head_dim", 128), ValueDim: c.optInt("linear_value_head_dim", 128), ConvKernel: c.optInt("linear_conv_kernel_dim", 4)}
	d.Attention = c.qwen3NextAttentionLayers(m.Layers)
	m.DeltaNet = &d
}

// qwen3NextAttentionLayers reads which layers are full attention:
// layer_types ("linear_attention" or "full_attention" per layer), else
// every full_attention_interval-th (Qwen3NextConfig: 4).
func (r *hfReader) qwen3NextAttentionLayers(layers int) []int {
	if out, ok := r.layerKinds(layers, "full_attention", "linear_attention"); ok {
		return out
	}
	var out []int
	every := r.optInt("full_attention_interval", 4)
	if every < 1 {
		r.fail("full_attention_interval must be ≥ 1")
		return nil
	}
	for i := every - 1; i < min(layers, maxLayers); i += every {
		out = append(out, i)
	}
	return out
}

// qwen3NextAttention adds a Qwen3NextAttention's parameters: q_proj twice
// as wide (q and the output gate), k, v, o and the per-head q and k norms.
func qwen3NextAttention(m Model, l *tensorList, p string) {
	d := m.dims()
	l.linear(p+"q_proj", "q_proj", d.h, 2*d.q, false)
	l.linear(p+"k_proj", "k_proj", d.h, d.kv, false)
	l.linear(p+"v_proj", "v_proj", d.h, d.kv, false)
	l.linear(p+"o_proj", "o_proj", d.q, d.h, false)
	qkNormTensors(m, l, p)
}

// qwen3NextModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const qwen3NextModelType = "qwen3_next"
