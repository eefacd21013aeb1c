package vram

// SmolLM3 (transformers/models/smollm3/modeling_smollm3.py): Llama's
// decoder whose every no_rope_layer_interval-th layer leaves q and k
// unrotated (SmolLM3Attention.use_rope = config.no_rope_layers[layer_idx];
// SmolLM3Config builds the list as int((i + 1) % interval != 0)), GQA,
// tied embeddings in the 3B, and sliding windows only with
// use_sliding_window (no released checkpoint sets it).
func init() {
	register(&family{
		name: smollm3ModelType, source: "transformers/models/smollm3/modeling_smollm3.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone},
		fromConfig: func(c *hfReader, m *Model) {
			// A key config.json leaves out takes the class's default
			// (configuration_smollm3.py:72-99, transformers 5.23.0).
			c.commonOr(m, classShape{layers: 36, hidden: 2048, heads: 16, kvHeads: 4, ffn: 11008, vocab: 128256, maxPosition: 32768})
			// SmolLM3Config ties the embeddings unless told otherwise
			// (4.57.6: PretrainedConfig's tie_word_embeddings = True, which
			// SmolLM3Config.__init__ does not override; 5.23.0
			// configuration_smollm3.py:95), and the released config.json
			// leaves the key out.
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
			if c.optBool("attention_bias", false) || c.optBool("mlp_bias", false) {
				m.Bias = BiasAll
			}
			if c.optBool("use_sliding_window", false) && c.err == nil {
				c.fail("use_sliding_window: SmolLM3's sliding windows on its NoPE layers are not modelled (no released checkpoint sets it)")
			}
			m.NoRopeEvery = c.noRopePeriod(c.optInt("no_rope_layer_interval", 4), m.Layers)
			c.layerTypes(m)
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["attention_bias"], c["mlp_bias"] = m.Bias == BiasAll, m.Bias == BiasAll
			c["use_sliding_window"] = false
			if m.Vocab <= 128004 {
				c["pad_token_id"] = nil // SmolLM3Config's default 128004 must be a row of the embedding
			}
			if m.NoRopeEvery > 0 {
				c["no_rope_layer_interval"] = m.NoRopeEvery
			} else {
				c["no_rope_layers"] = ropeFlags(m)
			}
		},
		tensors: standardDecoder{attn: attnQKVO, mlp: denseMLP}.tensors,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		// SmolLM3-3B's config.json: 36 layers, 16 heads over 4 KV heads,
		// no_rope_layer_interval 4 (no_rope_layers 1,1,1,0, …), tied
		// embeddings, 65,536 positions.
		presets: map[string]Preset{
			"smollm3-3b": {Model{Name: "HuggingFaceTB/SmolLM3-3B", Layers: 36, Hidden: 2048, Heads: 16, KVHeads: 4, FFN: 11008, Vocab: 128256,
				MaxPosition: 65536, TiedEmbeddings: true, NoRopeEvery: 4}, hf("HuggingFaceTB/SmolLM3-3B")},
		},
	})
}

// ropeFlags is config.no_rope_layers for m: 1 where layer i applies the
// rotary embedding, 0 where it does not (the key's name says the opposite
// of its values; SmolLM3Config).
func ropeFlags(m Model) []int {
	flags := make([]int, m.Layers)
	for i := range flags {
		if m.Roped(i) {
			flags[i] = 1
		}
	}
	return flags
}

// smollm3ModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const smollm3ModelType = "smollm3"
