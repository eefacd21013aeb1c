package vram

import "fmt"

// GPT-NeoX / Pythia (transformers/models/gpt_neox/modeling_gpt_neox.py): a
// fused query_key_value, partial rotary embeddings computed in fp32, and a
// parallel residual with two LayerNorms per block (use_parallel_residual).
// A key config.json leaves out takes the class's default
// (configuration_gpt_neox.py:61-81, 98, transformers 5.23.0).
func init() {
	register(&family{
		name: gptNeoxModelType, source: "transformers/models/gpt_neox/modeling_gpt_neox.py",
		defaults: Model{MLP: "gelu", Norm: "layernorm", Position: "rope", Bias: BiasAll, ParallelBlock: true},
		fromConfig: func(c *hfReader, m *Model) {
			c.commonOr(m, classShape{layers: 44, hidden: 6144, heads: 64, ffn: 24576, vocab: 50432, maxPosition: 2048})
			m.RotaryPct = c.optFloat("rotary_pct", 0.25)
			m.ParallelBlock = c.optBool("use_parallel_residual", true)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if !c.optBool("attention_bias", true) {
				m.Bias = BiasNone
			}
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			delete(c, "num_key_value_heads")
			c["rotary_pct"], c["use_parallel_residual"] = m.RotaryPct, m.ParallelBlock
		},
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			l.add("gpt_neox.embed_in.weight", "embedding", d.v, d.h)
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf("gpt_neox.layers.%d.", i)
				l.norm(p+"input_layernorm", true, d.h)
				l.norm(p+"post_attention_layernorm", true, d.h)
				fusedQKV(m, l, p+"attention.query_key_value", m.Bias.attn())
				l.linear(p+"attention.dense", "o_proj", d.q, d.h, m.Bias.out())
				l.linear(p+"mlp.dense_h_to_4h", "up_proj", d.h, d.f, m.Bias.mlp())
				l.linear(p+"mlp.dense_4h_to_h", "down_proj", d.f, d.h, m.Bias.mlp())
			}
			l.headSide()
			l.norm("gpt_neox.final_layer_norm", true, d.h)
			lmHead(m, l, "embed_out", "score")
		},
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "gpt_neox.") },
		// GPTNeoXAttention applies the rotary embedding with its fp32 cos/sin
		// caches ("casts query and key in fp32"), concatenates the
		// pass-through part and casts back.
		// Through 4.48 GPTNeoXAttention rotated q and k in fp32 and cast them
		// back ("casts query and key in fp32"); 4.49 moved it to the shared
		// apply_rotary_pos_emb, in cos/sin's dtype.
		recipe: func(_ Model, lib libVersion) recipe {
			return recipe{fusedQKV: true, rotaryFP32: lib.before(4, 49), parallelNorms: 2}
		},
		presets: map[string]Preset{
			"pythia-160m":  {Model{Name: "EleutherAI/pythia-160m", Layers: 12, Hidden: 768, Heads: 12, FFN: 3072, Vocab: 50304, MaxPosition: 2048, RotaryPct: 0.25}, hf("EleutherAI/pythia-160m")},
			"pythia-410m":  {Model{Name: "EleutherAI/pythia-410m", Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096, Vocab: 50304, MaxPosition: 2048, RotaryPct: 0.25, Params: 405334016}, hf("EleutherAI/pythia-410m")},
			"pythia-1.4b":  {Model{Name: "EleutherAI/pythia-1.4b", Layers: 24, Hidden: 2048, Heads: 16, FFN: 8192, Vocab: 50304, MaxPosition: 2048, RotaryPct: 0.25}, hf("EleutherAI/pythia-1.4b")},
			"pythia-6.9b":  {Model{Name: "EleutherAI/pythia-6.9b", Layers: 32, Hidden: 4096, Heads: 32, FFN: 16384, Vocab: 50432, MaxPosition: 2048, RotaryPct: 0.25}, hf("EleutherAI/pythia-6.9b")},
			"gpt-neox-20b": {Model{Name: "EleutherAI/gpt-neox-20b", Layers: 44, Hidden: 6144, Heads: 64, FFN: 24576, Vocab: 50432, MaxPosition: 2048, RotaryPct: 0.25, Params: 20554567680}, hf("EleutherAI/gpt-neox-20b")},
		},
	})
}

// gptNeoxModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const gptNeoxModelType = "gpt_neox"
