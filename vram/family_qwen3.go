package vram

import "fmt"

// Qwen3 (transformers/models/qwen3/modeling_qwen3.py): the standard decoder
// with an RMSNorm over each head of q and k (q_norm, k_norm) before the
// rotary embedding, a 128-wide head dimension by default, no biases
// (attention_bias adds them to the four attention projections), and
// sliding-window layers only with use_sliding_window (those from
// max_window_layers on; no released model uses them).
func init() {
	register(&family{
		name: qwen3ModelType, gguf: ggufQwen3, source: "transformers/models/qwen3/modeling_qwen3.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, QKNorm: "head"},
		fromConfig: func(c *hfReader, m *Model) {
			// A key config.json leaves out takes the class's default
			// (configuration_qwen3.py:62-89, transformers 5.23.0):
			// num_key_value_heads 32 whatever num_attention_heads says, a
			// 128-wide head, not hidden/heads.
			c.commonOr(m, classShape{layers: 32, hidden: 4096, heads: 32, kvHeads: 32, ffn: 22016, vocab: 151936, maxPosition: 32768})
			m.HeadDim = c.optInt("head_dim", 128)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if c.optBool("attention_bias", false) {
				m.Bias = BiasAttn
			}
			if c.optBool("use_sliding_window", false) {
				if c.optInt("max_window_layers", 28) > 0 && c.err == nil {
					c.err = fmt.Errorf("use_sliding_window with max_window_layers > 0 (global first layers, sliding after) is not modelled; set max_window_layers 0 for all-sliding")
				}
				m.SlidingWindow = c.optInt("sliding_window", 4096)
			}
		},
		toConfig: qwen3Config,
		check:    requireQKNorm("head"),
		tensors: standardDecoder{attn: func(m Model, l *tensorList, p string) {
			attnQKVO(m, l, p)
			qkNormTensors(m, l, p)
		}, mlp: denseMLP}.tensors,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		presets: map[string]Preset{
			"qwen3-0.6b": {Model{Name: "Qwen/Qwen3-0.6B", Layers: 28, Hidden: 1024, Heads: 16, KVHeads: 8, HeadDim: 128, FFN: 3072, Vocab: 151936, MaxPosition: 40960, TiedEmbeddings: true}, hf("Qwen/Qwen3-0.6B")},
			"qwen3-8b":   {Model{Name: "Qwen/Qwen3-8B", Layers: 36, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 12288, Vocab: 151936, MaxPosition: 40960}, hf("Qwen/Qwen3-8B")},
			"qwen3-1.7b": {Model{Name: "Qwen/Qwen3-1.7B", Layers: 28, Hidden: 2048, Heads: 16, KVHeads: 8, HeadDim: 128, FFN: 6144, Vocab: 151936, MaxPosition: 40960, TiedEmbeddings: true}, hf("Qwen/Qwen3-1.7B")},
			"qwen3-4b":   {Model{Name: "Qwen/Qwen3-4B", Layers: 36, Hidden: 2560, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 9728, Vocab: 151936, MaxPosition: 40960, TiedEmbeddings: true, Params: 4022468096}, hf("Qwen/Qwen3-4B")},
			"qwen3-14b":  {Model{Name: "Qwen/Qwen3-14B", Layers: 40, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128, FFN: 17408, Vocab: 151936, MaxPosition: 40960, Params: 14768307200}, hf("Qwen/Qwen3-14B")},
			"qwen3-32b":  {Model{Name: "Qwen/Qwen3-32B", Layers: 64, Hidden: 5120, Heads: 64, KVHeads: 8, HeadDim: 128, FFN: 25600, Vocab: 151936, MaxPosition: 40960}, hf("Qwen/Qwen3-32B")},
		},
	})
}

// qwen3Config writes a Qwen3Config (Qwen3-MoE's adds the expert keys).
func qwen3Config(m Model, c map[string]any) {
	writeCommonConfig(m, c)
	c["head_dim"] = m.HeadDim
	c["attention_bias"] = m.Bias == BiasAttn
	if m.SlidingWindow > 0 {
		c["use_sliding_window"], c["sliding_window"], c["max_window_layers"] = true, m.SlidingWindow, 0
	}
}

// ggufQwen3 is this family's architecture name in GGUF files
// (general.architecture).
const ggufQwen3 = "qwen3"

const qwen3ModelType = "qwen3"
