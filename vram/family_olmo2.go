package vram

// OLMo 2 (transformers/models/olmo2/modeling_olmo2.py): norms after each
// sublayer, before its residual add (post_attention_layernorm,
// post_feedforward_layernorm; none before), an RMSNorm over all heads of q
// and of k (q_norm, k_norm), RMSNorms that apply their weight in fp32, and
// a rotary embedding that casts q and k back to their dtype. A key
// config.json leaves out takes the class's default
// (configuration_olmo2.py:70-92, transformers 5.23.0).
func init() {
	register(&family{
		name: olmo2ModelType, source: "transformers/models/olmo2/modeling_olmo2.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, NormPosition: "sublayer", QKNorm: "full"},
		fromConfig: func(c *hfReader, m *Model) {
			c.commonOr(m, classShape{layers: 32, hidden: 4096, heads: 32, ffn: 11008, vocab: 50304, maxPosition: 2048})
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if c.optBool("attention_bias", false) {
				m.Bias = BiasAttn
			}
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["attention_bias"] = m.Bias == BiasAttn
		},
		check: func(m Model) error {
			if err := requireNormPosition("sublayer")(m); err != nil {
				return err
			}
			return requireQKNorm("full")(m)
		},
		tensors: sublayerDecoder,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		recipe:  func(Model, libVersion) recipe { return recipe{normWeightFP32: true, ropeKeepsDType: true} },
		presets: map[string]Preset{
			"olmo-2-7b":  {Model{Name: "allenai/OLMo-2-1124-7B", Layers: 32, Hidden: 4096, Heads: 32, FFN: 11008, Vocab: 100352, MaxPosition: 4096}, hf("allenai/OLMo-2-1124-7B")},
			"olmo-2-13b": {Model{Name: "allenai/OLMo-2-1124-13B", Layers: 40, Hidden: 5120, Heads: 40, FFN: 13824, Vocab: 100352, MaxPosition: 4096}, hf("allenai/OLMo-2-1124-13B")},
		},
	})
}

const olmo2ModelType = "olmo2"
