package vram

// Gemma (transformers/models/gemma/modeling_gemma.py): the standard decoder
// with GeGLU, a 256-wide head dimension, tied embeddings scaled by
// sqrt(hidden) (the normalizer), and RMSNorms that apply (1 + weight) in
// fp32 before casting back. A key config.json leaves out takes the class's
// default (configuration_gemma.py:67-86, transformers 5.23.0): head_dim
// 256, not hidden / heads.
func init() {
	register(&family{
		name: "gemma", source: "transformers/models/gemma/modeling_gemma.py",
		defaults: Model{MLP: "geglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, TiedEmbeddings: true},
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden = c.optInt("num_hidden_layers", 28), c.optInt("hidden_size", 3072)
			m.Heads = c.optInt("num_attention_heads", 16)
			m.KVHeads = c.optIntNull("num_key_value_heads", 16, m.Heads)
			m.FFN, m.Vocab = c.optInt("intermediate_size", 24576), c.optInt("vocab_size", 256000)
			m.MaxPosition = c.optInt("max_position_embeddings", 8192)
			m.HeadDim = c.optIntOrNone("head_dim", 256)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
			if c.optBool("attention_bias", false) {
				m.Bias = BiasQKVOnly
			}
			if c.optBool("mlp_bias", false) {
				m.Bias = BiasAll
			}
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			if m.SlidingWindow > 0 {
				c["sliding_window"] = m.SlidingWindow
			}
		},
		tensors: standardDecoder{attn: attnQKVO, mlp: denseMLP}.tensors,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		recipe:  func(Model, libVersion) recipe { return recipe{normWeightFP32: true, embedScale: true} },
		presets: map[string]Preset{
			"gemma-2b": {Model{Name: "google/gemma-2b", Layers: 18, Hidden: 2048, Heads: 8, KVHeads: 1, HeadDim: 256, FFN: 16384, Vocab: 256000, MaxPosition: 8192, TiedEmbeddings: true}, hf("google/gemma-2b")},
			"gemma-7b": {Model{Name: "google/gemma-7b", Layers: 28, Hidden: 3072, Heads: 16, HeadDim: 256, FFN: 24576, Vocab: 256000, MaxPosition: 8192, TiedEmbeddings: true}, hf("google/gemma-7b")},
		},
	})
}
