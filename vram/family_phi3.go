package vram

// Phi-3 (transformers/models/phi3/modeling_phi3.py): the standard decoder
// with a fused qkv_proj and a fused gate_up_proj.
func init() {
	register(&family{
		name: "phi3", source: "transformers/models/phi3/modeling_phi3.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone},
		fromConfig: func(c *hfReader, m *Model) {
			// A key config.json leaves out takes the class's default
			// (configuration_phi3.py:61-85, transformers 5.23.0).
			c.commonOr(m, classShape{layers: 32, hidden: 3072, heads: 32, ffn: 8192, vocab: 32064, maxPosition: 4096})
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
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
			if m.Vocab <= 32000 {
				c["pad_token_id"] = nil // Phi3Config's default 32000 must be a row of the embedding
			}
		},
		tensors: standardDecoder{
			attn: func(m Model, l *tensorList, p string) {
				fusedQKV(m, l, p+"qkv_proj", false)
				d := m.dims()
				l.linear(p+"o_proj", "o_proj", d.q, d.h, false)
			},
			mlp: func(m Model, l *tensorList, p string, _ int) { mlpFusedGateUp(m, l, p+"mlp.", int64(m.FFN), -1) },
		}.tensors,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		// apply_rotary_pos_emb: torch.cat([rotated, q_pass]) even for a full
		// rotary embedding; Phi3MLP chunks one gate_up_proj output.
		recipe: func(Model, libVersion) recipe { return recipe{fusedQKV: true, ropeConcat: true, fusedGateUp: true} },
		presets: map[string]Preset{
			"phi-4":         {Model{Name: "microsoft/phi-4", Layers: 40, Hidden: 5120, Heads: 40, KVHeads: 10, FFN: 17920, Vocab: 100352, MaxPosition: 16384}, hf("microsoft/phi-4")},
			"phi-3-mini-4k": {Model{Name: "microsoft/Phi-3-mini-4k-instruct", Layers: 32, Hidden: 3072, Heads: 32, FFN: 8192, Vocab: 32064, MaxPosition: 4096}, hf("microsoft/Phi-3-mini-4k-instruct")},
		},
	})
}
