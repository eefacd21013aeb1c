package vram

import "fmt"

// Hunyuan-A13B (transformers/models/hunyuan_v1_moe/modeling_hunyuan_v1_moe.py):
// a Llama-style decoder whose every layer is a mixture of experts — a
// shared MLP run first, a router (HunYuanMoEV1Gate: an fp32 nn.Linear,
// softmax in fp32, top-k, renormalized in place), routed experts in a
// Python loop — and whose per-head q/k RMSNorms (query_layernorm,
// key_layernorm) run after the rotary embedding. As the pinned code builds
// it, every expert and the shared MLP are intermediate_size wide
// (HunYuanMoEV1MLP ignores moe_intermediate_size and num_shared_expert),
// and cross-layer attention (use_cla) is not implemented.
func init() {
	register(&family{
		name: hunyuanV1MoeModelType, source: "transformers/models/hunyuan_v1_moe/modeling_hunyuan_v1_moe.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, QKNorm: "head", Router: "softmax_topk_norm"},
		fromConfig: func(c *hfReader, m *Model) {
			c.common(m)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if c.optBool("attention_bias", false) {
				m.Bias = BiasAttn
			}
			m.Experts, m.ExpertsPerToken = c.perLayerInt("num_experts", 1, m.Layers), c.perLayerInt("moe_topk", 1, m.Layers)
			m.SharedExperts, m.ExpertFFN, m.SharedExpertFFN = 1, m.FFN, m.FFN
			if c.optBool("use_cla", false) && c.err == nil {
				c.fail("use_cla: cross-layer attention is not part of transformers' HunYuanMoEV1 model (its layers each keep their own k and v)")
			}
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["attention_bias"] = m.Bias == BiasAttn
			c["num_experts"], c["moe_topk"] = m.Experts, m.ExpertsPerToken
			if m.Vocab <= 4 {
				c["pad_token_id"] = nil
			}
		},
		check: func(m Model) error {
			switch {
			case m.Experts < 1 || m.ExpertsPerToken < 1:
				return fmt.Errorf("model: hunyuan_v1_moe needs experts and experts_per_token ≥ 1")
			case m.SharedExperts != 1 || m.DenseLayers != 0 || m.MoEEvery > 1:
				return fmt.Errorf("model: hunyuan_v1_moe has one shared MLP and experts in every layer (shared_experts 1, dense_layers 0, moe_every 0)")
			case m.ExpertFFN != m.FFN || m.SharedExpertFFN != m.FFN:
				return fmt.Errorf("model: hunyuan_v1_moe's experts and shared MLP are all ffn (intermediate_size) wide")
			case m.QKNorm != "head":
				return fmt.Errorf("model.qk_norm %q: hunyuan_v1_moe always norms q and k per head", m.QKNorm)
			}
			return nil
		},
		tensors: standardDecoder{attn: func(m Model, l *tensorList, p string) {
			attnQKVO(m, l, p)
			l.add(p+"query_layernorm.weight", "norm", int64(m.HeadDim))
			l.add(p+"key_layernorm.weight", "norm", int64(m.HeadDim))
		}, mlp: func(m Model, l *tensorList, p string, _ int) {
			p += "mlp."
			l.linear(p+"gate.wg", "router", int64(m.Hidden), int64(m.Experts), false)
			for e := 0; e < m.Experts; e++ {
				mlpGated(m, l, fmt.Sprintf("%sexperts.%d.", p, e), int64(m.ExpertFFN), e)
			}
			mlpGated(m, l, p+"shared_mlp.", int64(m.SharedExpertFFN), -1)
		}}.tensors,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		recipe: func(_ Model, lib libVersion) recipe {
			return recipe{sharedFirst: true, qkNormAfterRope: true, groupedMM: !lib.before(5, 0), routerLogitsDType: !lib.before(5, 0)}
		},
		// Hunyuan-A13B: 32 layers 4,096 wide, 32 heads over 8 KV heads of
		// 128, 64 experts (8 a token) and one shared MLP, all 3,072 wide,
		// tied embeddings; 80B in total, 13B active (Tencent's model card
		// and copies of the config). Its max_position_embeddings was not at
		// hand (the card says 256K tokens of context), so the preset leaves
		// it unset and a serving plan states its context.
		presets: map[string]Preset{
			"hunyuan-a13b": {Model{Name: "tencent/Hunyuan-A13B-Instruct", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 3072, Vocab: 128167,
				TiedEmbeddings: true, Experts: 64, ExpertsPerToken: 8, SharedExperts: 1, ExpertFFN: 3072, SharedExpertFFN: 3072}, hf("tencent/Hunyuan-A13B-Instruct")},
		},
	})
}

const hunyuanV1MoeModelType = "hunyuan_v1_moe"
