package vram

import "fmt"

// Mixtral (transformers/models/mixtral/modeling_mixtral.py): Mistral's
// decoder with a sparse mixture of experts in every block
// (block_sparse_moe: a router and experts.N.w1/w2/w3, SwiGLU). A key
// config.json leaves out takes the class's default
// (configuration_mixtral.py:67-94, transformers 5.23.0).
func init() {
	register(&family{
		name: "mixtral", source: "transformers/models/mixtral/modeling_mixtral.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone},
		fromConfig: func(c *hfReader, m *Model) {
			c.commonOr(m, classShape{layers: 32, hidden: 4096, heads: 32, kvHeads: 8, ffn: 14336, vocab: 32000, maxPosition: 4096 * 32})
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if c.optBool("attention_bias", false) {
				m.Bias = BiasQKVOnly
			}
			if c.optBool("mlp_bias", false) {
				m.Bias = BiasAll
			}
			m.SlidingWindow = c.optInt("sliding_window", 0)
			m.Experts, m.ExpertsPerToken = c.optInt("num_local_experts", 8), c.optInt("num_experts_per_tok", 2)
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["num_local_experts"], c["num_experts_per_tok"] = m.Experts, m.ExpertsPerToken
		},
		// transformers 5: the experts through grouped_mm (moe_grouped_mm.go).
		recipe: func(_ Model, lib libVersion) recipe { return recipe{groupedMM: !lib.before(5, 0)} },
		tensors: standardDecoder{attn: attnQKVO, mlp: func(m Model, l *tensorList, p string, layer int) {
			if !m.IsMoELayer(layer) {
				denseMLP(m, l, p, layer)
				return
			}
			h, ef := int64(m.Hidden), int64(m.ExpertFFN)
			l.linear(p+"block_sparse_moe.gate", "router", h, int64(m.Experts), false)
			for e := 0; e < m.Experts; e++ {
				q := fmt.Sprintf("%sblock_sparse_moe.experts.%d.", p, e)
				start := len(l.ts)
				l.linear(q+"w1", "gate_proj", h, ef, false)
				l.linear(q+"w2", "down_proj", ef, h, false)
				l.linear(q+"w3", "up_proj", h, ef, false)
				l.asExpert(start, e)
			}
		}}.tensors,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		// Mixtral-8x7B 46,702,792,704: model.safetensors.index.json total_size / 2.
		presets: map[string]Preset{
			"mixtral-8x7b":  {Model{Name: "mistralai/Mixtral-8x7B-v0.1", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 32000, MaxPosition: 32768, Experts: 8, ExpertsPerToken: 2, Params: 46702792704}, hf("mistralai/Mixtral-8x7B-v0.1")},
			"mixtral-8x22b": {Model{Name: "mistralai/Mixtral-8x22B-v0.1", Layers: 56, Hidden: 6144, Heads: 48, KVHeads: 8, FFN: 16384, Vocab: 32768, MaxPosition: 65536, Experts: 8, ExpertsPerToken: 2}, hf("mistralai/Mixtral-8x22B-v0.1")},
		},
	})
}

// asMixtral lays out a mixture-of-experts decoder given by its shape
// alone (Megatron-LM's --num-experts) as this family's blocks.
func asMixtral(m *Model) { m.Family = "mixtral" }
