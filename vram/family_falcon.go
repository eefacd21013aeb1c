package vram

import "fmt"

// Falcon (transformers/models/falcon/modeling_falcon.py): a fused
// query_key_value (multi-query for Falcon-7B, grouped for the "new decoder
// architecture" of Falcon-40B/180B), a parallel block whose attention and
// MLP read one LayerNorm (input_layernorm) or one each (ln_attn, ln_mlp,
// new_decoder_architecture), an ungated GELU MLP, rotary positions (alibi
// is not modelled), tied embeddings. A key config.json leaves out takes
// the class's default (configuration_falcon.py:66-97, transformers 5.23.0;
// an n_embed wins over hidden_size, l.92-94).
func init() {
	register(&family{
		name: falconModelType, source: "transformers/models/falcon/modeling_falcon.py",
		defaults: Model{MLP: "gelu", Norm: "layernorm", Position: "rope", Bias: BiasNone, ParallelBlock: true, TiedEmbeddings: true},
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Heads = c.optInt("num_hidden_layers", 32), c.optInt("num_attention_heads", 71)
			m.Hidden = c.optInt("n_embed", c.optInt("hidden_size", 4544))
			m.Vocab, m.MaxPosition = c.optInt("vocab_size", 65024), c.optInt("max_position_embeddings", 2048)
			m.FFN = c.optInt("ffn_hidden_size", 4*m.Hidden)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
			m.ParallelBlock = c.optBool("parallel_attn", true)
			if c.optBool("bias", false) {
				m.Bias = BiasAll
			}
			switch {
			case c.optBool("new_decoder_architecture", false):
				m.KVHeads = c.optInt("num_kv_heads", m.Heads)
				if !m.ParallelBlock || c.optInt("num_ln_in_parallel_attn", 2) != 2 {
					c.err = fmt.Errorf("new_decoder_architecture is modelled with parallel_attn and two norms (num_ln_in_parallel_attn 2)")
				}
			case c.optBool("multi_query", true):
				m.KVHeads = 1
			}
			if c.optBool("alibi", false) {
				c.err = fmt.Errorf("alibi Falcon models (falcon-rw) are not modelled; the rotary ones are")
			}
		},
		toConfig: func(m Model, c map[string]any) {
			c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"] = m.Layers, m.Hidden, m.Heads
			c["vocab_size"], c["max_position_embeddings"], c["ffn_hidden_size"] = m.Vocab, m.MaxPosition, m.FFN
			c["tie_word_embeddings"], c["parallel_attn"], c["bias"], c["alibi"] = m.TiedEmbeddings, m.ParallelBlock, m.Bias == BiasAll, false
			newArch := falconNewArch(m)
			c["new_decoder_architecture"], c["multi_query"] = newArch, m.KVHeads == 1
			if newArch {
				c["num_kv_heads"] = m.KVHeads
			}
		},
		check: func(m Model) error {
			if m.Bias != BiasAll && m.Bias != BiasNone {
				return fmt.Errorf("model.bias: family falcon has biases on every matmul or none")
			}
			if falconNewArch(m) && !m.ParallelBlock {
				return fmt.Errorf("model: a Falcon with grouped key/value heads (new_decoder_architecture) has a parallel block")
			}
			return nil
		},
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			bias := m.Bias == BiasAll
			l.add("transformer.word_embeddings.weight", "embedding", d.v, d.h)
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf("transformer.h.%d.", i)
				fusedQKV(m, l, p+"self_attention.query_key_value", bias)
				l.linear(p+"self_attention.dense", "o_proj", d.q, d.h, bias)
				l.linear(p+"mlp.dense_h_to_4h", "up_proj", d.h, d.f, bias)
				l.linear(p+"mlp.dense_4h_to_h", "down_proj", d.f, d.h, bias)
				switch {
				case !m.ParallelBlock:
					l.norm(p+"post_attention_layernorm", true, d.h)
					l.norm(p+"input_layernorm", true, d.h)
				case falconNewArch(m):
					l.norm(p+"ln_attn", true, d.h)
					l.norm(p+"ln_mlp", true, d.h)
				default:
					l.norm(p+"input_layernorm", true, d.h)
				}
			}
			l.headSide()
			l.norm("transformer.ln_f", true, d.h)
			lmHead(m, l, "lm_head", "score")
		},
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "transformer.") },
		recipe: func(m Model, lib libVersion) recipe {
			// _split_heads: k and v by advanced indexing (multi-query), or
			// broadcast to every query head (new_decoder_architecture).
			// From 5.0 the model always materialises its causal mask
			// (5.23 modeling_falcon.py:755-761, allow_is_causal_skip=False,
			// "so alibi can be added onto it"); 4.57 let SDPA skip it.
			r := recipe{fusedQKV: true, splitQKV: true, softmaxInDType: true, parallelNorms: 1, alwaysMasked: !lib.before(5, 0)}
			if falconNewArch(m) {
				r.parallelNorms, r.broadcastKV = 2, true
			}
			return r
		},
		presets: map[string]Preset{
			"falcon-7b":  {Model{Name: "tiiuae/falcon-7b", Layers: 32, Hidden: 4544, Heads: 71, KVHeads: 1, FFN: 18176, Vocab: 65024, MaxPosition: 2048}, hf("tiiuae/falcon-7b")},
			"falcon-40b": {Model{Name: "tiiuae/falcon-40b", Layers: 60, Hidden: 8192, Heads: 128, KVHeads: 8, FFN: 32768, Vocab: 65024, MaxPosition: 2048}, hf("tiiuae/falcon-40b")},
		},
	})
}

// falconNewArch: Falcon's grouped key/value heads come with its "new
// decoder architecture" (num_kv_heads, ln_attn and ln_mlp).
func falconNewArch(m Model) bool { return m.KVHeads > 1 && m.KVHeads < m.Heads }

// falconModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const falconModelType = "falcon"
