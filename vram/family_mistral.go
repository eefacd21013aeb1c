package vram

// Mistral (transformers/models/mistral/modeling_mistral.py): the standard
// decoder with grouped-query attention and a sliding window, which bounds
// the KV cache and fused attention's keys. A key config.json leaves out
// takes the class's default (configuration_mistral.py:63-86, transformers
// 5.23.0): a 4,096-token window unless sliding_window is null.
func init() {
	register(&family{
		name: "mistral", source: "transformers/models/mistral/modeling_mistral.py",
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
			m.SlidingWindow = c.optIntOrNone("sliding_window", 4096)
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["sliding_window"] = nil // MistralConfig's default is 4096: none unless the model has one
			if m.SlidingWindow > 0 {
				c["sliding_window"] = m.SlidingWindow
			}
		},
		tensors: standardDecoder{attn: attnQKVO, mlp: denseMLP}.tensors,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		presets: map[string]Preset{
			// Mistral-Small-24B-Base-2501: no sliding window, 128-wide heads.
			"mistral-small-24b": {Model{Name: "mistralai/Mistral-Small-24B-Base-2501", Layers: 40, Hidden: 5120, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 32768, Vocab: 131072, MaxPosition: 32768}, hf("mistralai/Mistral-Small-24B-Base-2501")},
			"mistral-7b":        {Model{Name: "mistralai/Mistral-7B-v0.1", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 32000, MaxPosition: 32768, SlidingWindow: 4096}, hf("mistralai/Mistral-7B-v0.1")},
		},
	})
}
