package vram

// Phi-1.5 / Phi-2 (transformers/models/phi/modeling_phi.py): a parallel
// block with one LayerNorm, partial rotary embeddings, biases everywhere
// and on the LM head.
func init() {
	register(&family{
		name: "phi", source: "transformers/models/phi/modeling_phi.py",
		defaults: Model{MLP: "gelu_new", Norm: "layernorm", Position: "rope", Bias: BiasAll, ParallelBlock: true, LMHeadBias: true},
		fromConfig: func(c *hfReader, m *Model) {
			// A key config.json leaves out takes the class's default
			// (configuration_phi.py:63-88, transformers 5.23.0).
			m.Layers, m.Hidden = c.optInt("num_hidden_layers", 24), c.optInt("hidden_size", 2048)
			m.Heads = c.optInt("num_attention_heads", 32)
			m.KVHeads = c.optInt("num_key_value_heads", m.Heads)
			m.FFN, m.Vocab = c.optInt("intermediate_size", 8192), c.optInt("vocab_size", 51200)
			m.MaxPosition = c.optInt("max_position_embeddings", 2048)
			m.HeadDim = c.optInt("head_dim", 0)
			m.RotaryPct = c.optFloat("partial_rotary_factor", 0.5)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["partial_rotary_factor"] = m.RotaryPct
		},
		tensors: parallelDecoder(parallelNames{embed: "model.embed_tokens.weight", layers: "model.layers.%d.", final: "model.final_layernorm",
			norm: "input_layernorm", attn: "self_attn.", out: "dense", fcIn: "mlp.fc1", fcOut: "mlp.fc2"}),
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		recipe:  func(Model, libVersion) recipe { return recipe{parallelNorms: 1} },
		presets: map[string]Preset{
			"phi-1.5": {Model{Name: "microsoft/phi-1_5", Layers: 24, Hidden: 2048, Heads: 32, FFN: 8192, Vocab: 51200, MaxPosition: 2048, RotaryPct: 0.5, Params: 1418270720}, hf("microsoft/phi-1_5")},
			"phi-2":   {Model{Name: "microsoft/phi-2", Layers: 32, Hidden: 2560, Heads: 32, FFN: 10240, Vocab: 51200, MaxPosition: 2048, RotaryPct: 0.4}, hf("microsoft/phi-2")},
		},
	})
}
