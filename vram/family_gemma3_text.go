package vram

// Gemma 3, the language model (transformers/models/gemma3/modeling_gemma3.py
// Gemma3ForCausalLM): Gemma 2's sandwich-norm decoder with an RMSNorm over
// each head of q and k, five sliding-window layers to each global one
// (sliding_window_pattern 6), no soft-capping, embeddings scaled by
// sqrt(hidden) through a registered embed_scale, and a second rotary
// embedding (rotary_emb_local) for the local layers. The image-text model
// that the 4B, 12B and 27B checkpoints are is family gemma3. A key
// config.json leaves out takes the class's default (configuration_gemma3.py:74-112,
// Gemma3TextConfig, transformers 5.23.0).
func init() {
	register(&family{
		name: gemma3TextModelType, source: "transformers/models/gemma3/modeling_gemma3.py",
		defaults: Model{MLP: "geglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, TiedEmbeddings: true, NormPosition: "sandwich", QKNorm: "head"},
		fromConfig: func(c *hfReader, m *Model) {
			gemmaConfig(c, m, gemmaDefaults{layers: 26, hidden: 2304, ffn: 9216, pattern: 6, vocab: 262208, maxPosition: 131072})
		},
		toConfig: func(m Model, c map[string]any) {
			writeGemmaConfig(m, c)
			c["attn_logit_softcapping"], c["final_logit_softcapping"] = nilIfZero(m.AttnSoftcap), nilIfZero(m.FinalSoftcap)
		},
		check: func(m Model) error {
			if err := requireNormPosition("sandwich")(m); err != nil {
				return err
			}
			return requireQKNorm("head")(m)
		},
		tensors: sandwichDecoder,
		buffers: func(m Model, b *bufferList) {
			b.add("model.embed_tokens.embed_scale", -1, FP32)
			rotaryBuffer(m, b, "model.")
			rot := int64(float64(m.HeadDim) * m.RotaryPct)
			b.add("model.rotary_emb_local.inv_freq", -1, FP32, rot/2)
		},
		recipe: func(_ Model, lib libVersion) recipe {
			// No cache in training before 5.0 (4.57 modeling_gemma3.py:518
			// "if use_cache and past_key_values is None and not
			// self.training"); 5.x builds one as Llama does (5.23 l.516).
			return recipe{normWeightFP32: true, embedScale: true, noTrainingCache: lib.before(5, 0), localRotary: true}
		},
		// Gemma 3 1B is a text model; "-text" are the language models of
		// the 4B and 27B image-text checkpoints (their text_config; the
		// released models with their tower are gemma3's presets).
		presets: map[string]Preset{
			"gemma-3-1b": {Model{Name: "google/gemma-3-1b-pt", Layers: 26, Hidden: 1152, Heads: 4, KVHeads: 1, HeadDim: 256, FFN: 6912, Vocab: 262144, MaxPosition: 32768,
				TiedEmbeddings: true, SlidingWindow: 512, GlobalEvery: 6}, hf("google/gemma-3-1b-pt")},
			"gemma-3-4b-text": {Model{Name: "google/gemma-3-4b-pt (text)", Layers: 34, Hidden: 2560, Heads: 8, KVHeads: 4, HeadDim: 256, FFN: 10240, Vocab: 262208, MaxPosition: 131072,
				TiedEmbeddings: true, SlidingWindow: 1024, GlobalEvery: 6}, hf("google/gemma-3-4b-pt")},
			"gemma-3-27b-text": {Model{Name: "google/gemma-3-27b-pt (text)", Layers: 62, Hidden: 5376, Heads: 32, KVHeads: 16, HeadDim: 128, FFN: 21504, Vocab: 262208, MaxPosition: 131072,
				TiedEmbeddings: true, SlidingWindow: 1024, GlobalEvery: 6}, hf("google/gemma-3-27b-pt")},
		},
	})
}

const gemma3TextModelType = "gemma3_text"
