package vram

// Phi-1.5 / Phi-2 (transformers/models/phi/modeling_phi.py): a parallel
// block with one LayerNorm, partial rotary embeddings, biases everywhere
// and on the LM head.
func init() {
	register(&family{
		name: phiModelType, source: "transformers/models/phi/modeling_phi.py",
		defaults: Model{MLP: "gelu_new", Norm: "layernorm", Position: "rope", Bias: BiasAll, ParallelBlock: true, LMHeadBias: true},
		fromConfig: func(c *hfReader, m *Model) {
			// A key config.json leaves out takes the class's default
			// (configuration_phi.py:63-88, transformers 5.23.0).
			c.commonOr(m, classShape{layers: 24, hidden: 2048, heads: 32, ffn: 8192, vocab: 51200, maxPosition: 2048})
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

const phiModelType = "phi"
