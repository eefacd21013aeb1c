package vram

// GPT-BigCode / StarCoder (transformers/models/gpt_bigcode/
// modeling_gpt_bigcode.py): GPT-2's layout with nn.Linear matmuls and
// multi-query attention (one key/value head, multi_query). A key
// config.json leaves out takes the class's default
// (configuration_gpt_bigcode.py:59-83, transformers 5.23.0), under either
// of the names its attribute_map gives (l.52-57: n_layer or
// num_hidden_layers, …).
func init() {
	register(&family{
		name: gptBigcodeModelType, source: "transformers/models/gpt_bigcode/modeling_gpt_bigcode.py",
		defaults: Model{MLP: "gelu_pytorch_tanh", Norm: "layernorm", Position: "learned", Bias: BiasAll, TiedEmbeddings: true},
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers = c.optInt("n_layer", c.optInt("num_hidden_layers", 12))
			m.Hidden = c.optInt("n_embd", c.optInt("hidden_size", 768))
			m.Heads = c.optInt("n_head", c.optInt("num_attention_heads", 12))
			m.FFN = c.optInt("n_inner", 4*m.Hidden)
			m.Vocab = c.optInt("vocab_size", 50257)
			m.MaxPosition = c.optInt("n_positions", c.optInt("max_position_embeddings", 1024))
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
			if c.optBool("multi_query", true) {
				m.KVHeads = 1
			}
		},
		toConfig: func(m Model, c map[string]any) {
			c["n_layer"], c["n_embd"], c["n_head"], c["n_inner"] = m.Layers, m.Hidden, m.Heads, m.FFN
			c["vocab_size"], c["n_positions"], c["tie_word_embeddings"] = m.Vocab, m.MaxPosition, m.TiedEmbeddings
			c["multi_query"] = m.KVHeads == 1
		},
		tensors: conv1DDecoder,
		// GPTBigCodeModel registers one causal mask for all blocks.
		buffers: func(m Model, b *bufferList) {
			p := int64(m.MaxPosition)
			b.add("transformer.bias", -1, Bool, p, p)
		},
		// transformers 4.54 made GPTBigCodeBlock a plain nn.Module again and
		// dropped the model loop's checkpoint call (4.53.0 has
		// GPTBigCodeBlock(GradientCheckpointingLayer); 4.54.0 through 4.57.6
		// have neither), so gradient checkpointing does nothing there;
		// transformers 5 has GPTBigCodeBlock(GradientCheckpointingLayer)
		// again (5.23 modeling_gpt_bigcode.py:259).
		recipe: func(_ Model, lib libVersion) recipe {
			return recipe{fusedQKV: true, noCheckpointing: !lib.before(4, 54) && lib.before(5, 0)}
		},
		presets: map[string]Preset{
			"starcoderbase-1b": {Model{Name: "bigcode/starcoderbase-1b", Layers: 24, Hidden: 2048, Heads: 16, KVHeads: 1, FFN: 8192, Vocab: 49152, MaxPosition: 8192}, hf("bigcode/starcoderbase-1b")},
			"starcoder":        {Model{Name: "bigcode/starcoder", Layers: 40, Hidden: 6144, Heads: 48, KVHeads: 1, FFN: 24576, Vocab: 49152, MaxPosition: 8192}, hf("bigcode/starcoder")},
		},
	})
}

const gptBigcodeModelType = "gpt_bigcode"
