package vram

import "fmt"

// StarCoder2 (transformers/models/starcoder2/modeling_starcoder2.py): the
// standard pre-norm layout with LayerNorms, biases on every matmul
// (use_bias), an ungated MLP (mlp.c_fc, mlp.c_proj; gelu_pytorch_tanh),
// grouped-query attention and a sliding window on every layer. Its
// dropouts (attention_dropout, residual_dropout, embedding_dropout) default
// to 0 in Starcoder2Config; a plan sets them with train.dropout.
func init() {
	register(&family{
		name: starcoder2ModelType, source: "transformers/models/starcoder2/modeling_starcoder2.py",
		defaults: Model{MLP: "gelu_pytorch_tanh", Norm: "layernorm", Position: "rope", Bias: BiasAll, TiedEmbeddings: true},
		fromConfig: func(c *hfReader, m *Model) {
			// A key config.json leaves out takes the class's default
			// (configuration_starcoder2.py:61-81, transformers 5.23.0).
			c.commonOr(m, classShape{layers: 30, hidden: 3072, heads: 24, kvHeads: 2, ffn: 12288, vocab: 49152, maxPosition: 4096})
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", true) // PretrainedConfig's default
			if !c.optBool("use_bias", true) {
				m.Bias = BiasNone
			}
			m.SlidingWindow = c.optInt("sliding_window", 0)
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["use_bias"] = m.Bias == BiasAll
			c["sliding_window"] = nil
			if m.SlidingWindow > 0 {
				c["sliding_window"] = m.SlidingWindow
			}
		},
		check: func(m Model) error {
			if m.Gated() || m.Norm != "layernorm" || (m.Bias != BiasAll && m.Bias != BiasNone) {
				return fmt.Errorf("model: family starcoder2 has an ungated MLP, LayerNorms and biases on all matmuls or none")
			}
			return nil
		},
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			bias := m.Bias == BiasAll
			l.add("model.embed_tokens.weight", "embedding", d.v, d.h)
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf("model.layers.%d.", i)
				attnQKVO(m, l, p+"self_attn.")
				l.linear(p+"mlp.c_fc", "up_proj", d.h, d.f, bias)
				l.linear(p+"mlp.c_proj", "down_proj", d.f, d.h, bias)
				l.norm(p+"input_layernorm", true, d.h)
				l.norm(p+"post_attention_layernorm", true, d.h)
			}
			l.headSide()
			l.norm("model.norm", true, d.h)
			lmHead(m, l, "lm_head", "score")
		},
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		presets: map[string]Preset{
			"starcoder2-3b": {Model{Name: "bigcode/starcoder2-3b", Layers: 30, Hidden: 3072, Heads: 24, KVHeads: 2, FFN: 12288, Vocab: 49152, MaxPosition: 16384,
				TiedEmbeddings: true, SlidingWindow: 4096}, hf("bigcode/starcoder2-3b")},
			"starcoder2-15b": {Model{Name: "bigcode/starcoder2-15b", Layers: 40, Hidden: 6144, Heads: 48, KVHeads: 4, FFN: 24576, Vocab: 49152, MaxPosition: 16384,
				SlidingWindow: 4096}, hf("bigcode/starcoder2-15b")},
		},
	})
}

const starcoder2ModelType = "starcoder2"
