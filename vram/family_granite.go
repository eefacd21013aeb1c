package vram

// Granite (transformers/models/granite/modeling_granite.py): Llama's decoder
// with four constants from its config, three of which make tensors of
// their own: the embeddings times embedding_multiplier, each residual
// branch's output times residual_multiplier before the add, the logits
// divided by logits_scaling (attention_multiplier is the score scaling). A
// key config.json leaves out takes the class's default
// (configuration_granite.py:64-90, transformers 5.23.0).
func init() {
	register(&family{
		name: "granite", source: "transformers/models/granite/modeling_granite.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone},
		fromConfig: func(c *hfReader, m *Model) {
			c.commonOr(m, classShape{layers: 32, hidden: 4096, heads: 32, ffn: 11008, vocab: 32000, maxPosition: 2048})
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if c.optBool("attention_bias", false) {
				m.Bias = BiasAttn
			}
			if c.optBool("mlp_bias", false) {
				m.Bias = BiasAll
			}
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["attention_bias"] = m.Bias == BiasAttn || m.Bias == BiasAll
			c["mlp_bias"] = m.Bias == BiasAll
			// The multipliers' values do not change memory: multiplying by a
			// Python float makes a new tensor whatever the value.
		},
		tensors: standardDecoder{attn: attnQKVO, mlp: denseMLP}.tensors,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		recipe:  func(Model, libVersion) recipe { return recipe{embedScale: true, branchScale: true, logitsScale: true} },
		presets: map[string]Preset{
			"granite-3.1-2b": {Model{Name: "ibm-granite/granite-3.1-2b-base", Layers: 40, Hidden: 2048, Heads: 32, KVHeads: 8, FFN: 8192, Vocab: 49155, MaxPosition: 131072, TiedEmbeddings: true}, hf("ibm-granite/granite-3.1-2b-base")},
			"granite-3.1-8b": {Model{Name: "ibm-granite/granite-3.1-8b-base", Layers: 40, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 12800, Vocab: 49155, MaxPosition: 131072, TiedEmbeddings: true}, hf("ibm-granite/granite-3.1-8b-base")},
		},
	})
}
