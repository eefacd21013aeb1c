package vram

import "fmt"

// GPT-2 (transformers/models/gpt2/modeling_gpt2.py): learned positions,
// Conv1D matmuls (weights stored [in, out]) with a fused q|k|v, gelu_new,
// dropout 0.1, tied embeddings. A key config.json leaves out takes the
// class's default (configuration_gpt2.py:78-103, transformers 5.23.0),
// under either of the names its attribute_map gives (l.71-76: n_layer or
// num_hidden_layers, …).
func init() {
	register(&family{
		name: "gpt2", source: "transformers/models/gpt2/modeling_gpt2.py",
		defaults: Model{MLP: "gelu_new", Norm: "layernorm", Position: "learned", Bias: BiasAll, TiedEmbeddings: true},
		dropout:  [2]float64{0.1, 0.1}, // resid_pdrop, attn_pdrop
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers = c.optInt("n_layer", c.optInt("num_hidden_layers", 12))
			m.Hidden = c.optInt("n_embd", c.optInt("hidden_size", 768))
			m.Heads = c.optInt("n_head", c.optInt("num_attention_heads", 12))
			m.FFN = c.optInt("n_inner", 4*m.Hidden)
			m.Vocab = c.optInt("vocab_size", 50257)
			m.MaxPosition = c.optInt("n_positions", c.optInt("max_position_embeddings", 1024))
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
		},
		toConfig: func(m Model, c map[string]any) {
			c["n_layer"], c["n_embd"], c["n_head"], c["n_inner"] = m.Layers, m.Hidden, m.Heads, m.FFN
			c["vocab_size"], c["n_positions"], c["tie_word_embeddings"] = m.Vocab, m.MaxPosition, m.TiedEmbeddings
		},
		tensors: conv1DDecoder,
		// GPT2Attention registers the causal mask "bias" (bool,
		// 1×1×n_positions×n_positions) and "masked_bias" in every block.
		buffers: func(m Model, b *bufferList) {
			p := int64(m.MaxPosition)
			for i := 0; i < m.Layers; i++ {
				b.add(fmt.Sprintf("transformer.h.%d.attn.bias", i), i, Bool, 1, 1, p, p)
				b.add(fmt.Sprintf("transformer.h.%d.attn.masked_bias", i), i, FP32)
			}
		},
		// eager_attention_forward: softmax in the scores' dtype.
		recipe: func(Model, libVersion) recipe { return recipe{fusedQKV: true, softmaxInDType: true, conv1D: true} },
		// 124,439,808 for gpt2: the count HF's model.num_parameters()
		// prints; also Karpathy's nanoGPT README ("124M").
		presets: map[string]Preset{
			"gpt2":        {Model{Name: "gpt2", Layers: 12, Hidden: 768, Heads: 12, FFN: 3072, Vocab: 50257, MaxPosition: 1024, TiedEmbeddings: true, Params: 124439808}, hf("openai-community/gpt2")},
			"gpt2-medium": {Model{Name: "gpt2-medium", Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096, Vocab: 50257, MaxPosition: 1024, TiedEmbeddings: true}, hf("openai-community/gpt2-medium")},
			"gpt2-large":  {Model{Name: "gpt2-large", Layers: 36, Hidden: 1280, Heads: 20, FFN: 5120, Vocab: 50257, MaxPosition: 1024, TiedEmbeddings: true}, hf("openai-community/gpt2-large")},
			"gpt2-xl":     {Model{Name: "gpt2-xl", Layers: 48, Hidden: 1600, Heads: 25, FFN: 6400, Vocab: 50257, MaxPosition: 1024, TiedEmbeddings: true}, hf("openai-community/gpt2-xl")},
		},
	})
}
