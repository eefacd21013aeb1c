package vram

// Gemma 2 (transformers/models/gemma2/modeling_gemma2.py): Gemma's decoder
// with sandwich norms (before and after attention and MLP), sliding-window
// layers alternating with global ones (layer_types: every second layer
// global), soft-capped attention scores (attn_logit_softcapping, eager) and
// final logits (final_logit_softcapping), embeddings scaled by sqrt(hidden),
// RMSNorms that apply (1 + weight) in fp32. A key config.json leaves out
// takes the class's default (configuration_gemma2.py:68-98, transformers
// 5.23.0).
func init() {
	register(&family{
		name: "gemma2", source: "transformers/models/gemma2/modeling_gemma2.py",
		defaults: Model{MLP: "geglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, TiedEmbeddings: true, NormPosition: "sandwich"},
		fromConfig: func(c *hfReader, m *Model) {
			gemmaConfig(c, m, gemmaDefaults{layers: 26, hidden: 2304, ffn: 9216, pattern: 2, vocab: 256000, maxPosition: 8192, attnCap: 50, finalCap: 30})
		},
		toConfig: func(m Model, c map[string]any) {
			writeGemmaConfig(m, c)
			c["attn_logit_softcapping"], c["final_logit_softcapping"] = nilIfZero(m.AttnSoftcap), nilIfZero(m.FinalSoftcap)
		},
		check:   requireNormPosition("sandwich"),
		tensors: sandwichDecoder,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		recipe: func(_ Model, lib libVersion) recipe {
			// No cache in training before 5.0 ("and not self.training",
			// 4.57 modeling_gemma2.py); 5.x builds one as Llama does
			// (5.23 l.411).
			rec := recipe{normWeightFP32: true, embedScale: true, noTrainingCache: lib.before(5, 0)}
			if !lib.before(5, 0) {
				// "_supports_sdpa = False  # sdpa does not support
				// softcapping" (5.23 modeling_gemma2.py:352; 4.57 had SDPA).
				rec.attention = []string{"eager", "flash2", "flash3"}
			}
			return rec
		},
		presets: map[string]Preset{
			"gemma-2-9b": {Model{Name: "google/gemma-2-9b", Layers: 42, Hidden: 3584, Heads: 16, KVHeads: 8, HeadDim: 256, FFN: 14336, Vocab: 256000, MaxPosition: 8192,
				TiedEmbeddings: true, SlidingWindow: 4096, GlobalEvery: 2, AttnSoftcap: 50, FinalSoftcap: 30}, hf("google/gemma-2-9b")},
			"gemma-2-27b": {Model{Name: "google/gemma-2-27b", Layers: 46, Hidden: 4608, Heads: 32, KVHeads: 16, HeadDim: 128, FFN: 36864, Vocab: 256000, MaxPosition: 8192,
				TiedEmbeddings: true, SlidingWindow: 4096, GlobalEvery: 2, AttnSoftcap: 50, FinalSoftcap: 30}, hf("google/gemma-2-27b")},
		},
	})
}

// gemmaDefaults are the defaults of Gemma2Config / Gemma3TextConfig for the
// keys a checkpoint may leave out (a Gemma 3 text_config leaves out many).
type gemmaDefaults struct {
	layers, hidden, ffn         int
	pattern, vocab, maxPosition int // every pattern-th layer global
	attnCap, finalCap           float64
}

// gemmaConfig reads a Gemma 2 or Gemma 3 text config: the local/global
// pattern from layer_types or, failing that, sliding_window_pattern.
func gemmaConfig(c *hfReader, m *Model, d gemmaDefaults) {
	m.Layers = c.optInt("num_hidden_layers", d.layers)
	m.Hidden = c.optInt("hidden_size", d.hidden)
	m.FFN = c.optInt("intermediate_size", d.ffn)
	m.Heads = c.optInt("num_attention_heads", 8)
	m.KVHeads = c.optInt("num_key_value_heads", 4)
	m.HeadDim = c.optInt("head_dim", 256)
	m.Vocab = c.optInt("vocab_size", d.vocab)
	m.MaxPosition = c.optInt("max_position_embeddings", d.maxPosition)
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
	if c.optBool("attention_bias", false) {
		m.Bias = BiasAttn
	}
	m.SlidingWindow = c.optInt("sliding_window", 4096)
	m.GlobalEvery = c.optInt("sliding_window_pattern", d.pattern)
	m.AttnSoftcap = c.optFloat("attn_logit_softcapping", d.attnCap)
	m.FinalSoftcap = c.optFloat("final_logit_softcapping", d.finalCap)
	if v, ok := c.c["attn_logit_softcapping"]; ok && v == nil {
		m.AttnSoftcap = 0
	}
	if v, ok := c.c["final_logit_softcapping"]; ok && v == nil {
		m.FinalSoftcap = 0
	}
	c.layerTypes(m)
}

// writeGemmaConfig writes the keys a Gemma 2 or 3 text config needs.
func writeGemmaConfig(m Model, c map[string]any) {
	writeCommonConfig(m, c)
	c["head_dim"] = m.HeadDim
	c["attention_bias"] = m.Bias == BiasAttn
	c["sliding_window"] = m.SlidingWindow
	writeLayerTypes(m, c, "sliding_attention")
}

func nilIfZero(v float64) any {
	if v == 0 {
		return nil
	}
	return v
}
