package vram

// OLMo 3 (transformers/models/olmo3/modeling_olmo3.py): OLMo 2's decoder
// (norms after each sublayer, before its residual add; an RMSNorm over all
// heads of q and of k; norms that apply their weight in fp32) with three
// sliding-window layers to each global one (Olmo3Config's layer_types:
// "sliding_attention" unless (i + 1) % 4 == 0) and a rotary embedding per
// attention kind (rotary_embs: "sliding_attention" with the default rope,
// "full_attention" with the config's scaling), both computed every step.
// A key config.json leaves out takes the class's default
// (configuration_olmo3.py:65-98, transformers 5.23.0).
func init() {
	register(&family{
		name: olmo3ModelType, source: "transformers/models/olmo3/modeling_olmo3.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, NormPosition: "sublayer", QKNorm: "full"},
		fromConfig: func(c *hfReader, m *Model) {
			c.commonOr(m, classShape{layers: 32, hidden: 4096, heads: 32, ffn: 11008, vocab: 50304, maxPosition: 2048})
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if c.optBool("attention_bias", false) {
				m.Bias = BiasAttn
			}
			m.SlidingWindow, m.GlobalEvery = c.optInt("sliding_window", 4096), 4
			c.layerTypes(m)
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["attention_bias"] = m.Bias == BiasAttn
			c["sliding_window"] = m.SlidingWindow
			writeLayerTypes(m, c, "sliding_attention")
		},
		check: func(m Model) error {
			if err := requireNormPosition("sublayer")(m); err != nil {
				return err
			}
			return requireQKNorm("full")(m)
		},
		tensors: sublayerDecoder,
		buffers: func(m Model, b *bufferList) {
			rot := int64(float64(m.HeadDim) * m.RotaryPct)
			b.add("model.rotary_embs.sliding_attention.inv_freq", -1, FP32, rot/2)
			b.add("model.rotary_embs.full_attention.inv_freq", -1, FP32, rot/2)
		},
		recipe: func(Model, libVersion) recipe {
			return recipe{normWeightFP32: true, ropeKeepsDType: true, localRotary: true}
		},
		// The model cards' tables (7B: 32 layers, 4096 wide, 32 heads and
		// 32 KV heads; 32B: 64, 5120, 40 and 8; 65,536 positions) and the
		// config.json keys they leave out (intermediate_size, the Dolma 2
		// tokenizer's 100,278 rows, sliding_window 4096 with layer_types
		// three sliding to one full), as released copies of the configs
		// carry them.
		presets: map[string]Preset{
			"olmo-3-7b": {Model{Name: "allenai/Olmo-3-1025-7B", Layers: 32, Hidden: 4096, Heads: 32, FFN: 11008, Vocab: 100278, MaxPosition: 65536,
				SlidingWindow: 4096, GlobalEvery: 4}, hf("allenai/Olmo-3-1025-7B")},
			"olmo-3-32b": {Model{Name: "allenai/Olmo-3-1125-32B", Layers: 64, Hidden: 5120, Heads: 40, KVHeads: 8, FFN: 27648, Vocab: 100278, MaxPosition: 65536,
				SlidingWindow: 4096, GlobalEvery: 4}, hf("allenai/Olmo-3-1125-32B")},
		},
	})
}

// olmo3ModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const olmo3ModelType = "olmo3"
