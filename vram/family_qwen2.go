package vram

// Qwen2 / Qwen2.5 (transformers/models/qwen2/modeling_qwen2.py): the
// standard decoder with biases on the q, k and v projections only; a sliding
// window only with use_sliding_window.
func init() {
	register(&family{
		name: "qwen2", gguf: ggufQwen2, source: "transformers/models/qwen2/modeling_qwen2.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasQKVOnly},
		fromConfig: func(c *hfReader, m *Model) {
			// A key config.json leaves out takes the class's default
			// (configuration_qwen2.py:61-87, transformers 5.23.0):
			// num_key_value_heads 32, whatever num_attention_heads says.
			c.commonOr(m, classShape{layers: 32, hidden: 4096, heads: 32, kvHeads: 32, ffn: 22016, vocab: 151936, maxPosition: 32768})
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if c.optBool("attention_bias", false) {
				m.Bias = BiasQKVOnly
			}
			if c.optBool("mlp_bias", false) {
				m.Bias = BiasAll
			}
			if c.optBool("use_sliding_window", false) {
				m.SlidingWindow = c.optInt("sliding_window", 0)
			}
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["sliding_window"] = nil
			if m.SlidingWindow > 0 {
				c["sliding_window"], c["use_sliding_window"] = m.SlidingWindow, true
			}
		},
		tensors: standardDecoder{attn: attnQKVO, mlp: denseMLP}.tensors,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		presets: map[string]Preset{
			"qwen2.5-0.5b": {Model{Name: "Qwen/Qwen2.5-0.5B", Layers: 24, Hidden: 896, Heads: 14, KVHeads: 2, FFN: 4864, Vocab: 151936, MaxPosition: 32768, TiedEmbeddings: true}, hf("Qwen/Qwen2.5-0.5B")},
			// Qwen2-0.5B shares Qwen2.5-0.5B's shapes; its config.json
			// says 131072 positions.
			"qwen2-0.5b":   {Model{Name: "Qwen/Qwen2-0.5B", Layers: 24, Hidden: 896, Heads: 14, KVHeads: 2, FFN: 4864, Vocab: 151936, MaxPosition: 131072, TiedEmbeddings: true}, hf("Qwen/Qwen2-0.5B")},
			"qwen2.5-1.5b": {Model{Name: "Qwen/Qwen2.5-1.5B", Layers: 28, Hidden: 1536, Heads: 12, KVHeads: 2, FFN: 8960, Vocab: 151936, MaxPosition: 131072, TiedEmbeddings: true}, hf("Qwen/Qwen2.5-1.5B")},
			"qwen2.5-7b":   {Model{Name: "Qwen/Qwen2.5-7B", Layers: 28, Hidden: 3584, Heads: 28, KVHeads: 4, FFN: 18944, Vocab: 152064, MaxPosition: 131072}, hf("Qwen/Qwen2.5-7B")},
			"qwen2.5-72b":  {Model{Name: "Qwen/Qwen2.5-72B", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, FFN: 29568, Vocab: 152064, MaxPosition: 131072}, hf("Qwen/Qwen2.5-72B")},
		},
	})
}

// ggufQwen2 is this family's architecture name in GGUF files
// (general.architecture).
const ggufQwen2 = "qwen2"
