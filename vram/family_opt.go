package vram

import "fmt"

// OPT (transformers/models/opt/modeling_opt.py): learned positions with an
// offset of 2 rows, ReLU MLPs, project_in/project_out where the embedding
// width (word_embed_proj_dim) differs from the hidden size, and post-LN
// blocks without a final norm for do_layer_norm_before=False (opt-350m).
// A key config.json leaves out takes the class's default
// (configuration_opt.py:54-79, transformers 5.23.0: OPT-125m's shape).
func init() {
	register(&family{
		name: optModelType, source: "transformers/models/opt/modeling_opt.py",
		defaults: Model{MLP: "relu", Norm: "layernorm", Position: "learned", Bias: BiasAll, TiedEmbeddings: true},
		dropout:  [2]float64{0.1, 0}, // dropout, attention_dropout
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden = c.optInt("num_hidden_layers", 12), c.optInt("hidden_size", 768)
			m.Heads, m.FFN = c.optInt("num_attention_heads", 12), c.optInt("ffn_dim", 3072)
			m.Vocab, m.MaxPosition = c.optInt("vocab_size", 50272), c.optInt("max_position_embeddings", 2048)
			m.WordEmbedProjDim = c.optInt("word_embed_proj_dim", m.Hidden)
			if !c.optBool("do_layer_norm_before", true) {
				m.NormPosition = "post"
			}
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
			if !c.optBool("enable_bias", true) {
				m.Bias = BiasNone
			}
		},
		toConfig: func(m Model, c map[string]any) {
			c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["ffn_dim"] = m.Layers, m.Hidden, m.Heads, m.FFN
			c["vocab_size"], c["max_position_embeddings"], c["tie_word_embeddings"] = m.Vocab, m.MaxPosition, m.TiedEmbeddings
			c["word_embed_proj_dim"] = m.Hidden
			if m.WordEmbedProjDim > 0 {
				c["word_embed_proj_dim"] = m.WordEmbedProjDim
			}
			c["do_layer_norm_before"] = m.NormPosition != "post"
		},
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			e := d.h
			if m.WordEmbedProjDim > 0 {
				e = int64(m.WordEmbedProjDim)
			}
			l.add("model.decoder.embed_tokens.weight", "embedding", d.v, e)
			l.add("model.decoder.embed_positions.weight", "position", int64(m.MaxPosition)+2, d.h)
			if e != d.h {
				l.linear("model.decoder.project_out", "other", d.h, e, false)
				l.linear("model.decoder.project_in", "other", e, d.h, false)
			}
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf("model.decoder.layers.%d.", i)
				l.linear(p+"self_attn.k_proj", "k_proj", d.h, d.kv, m.Bias.attn())
				l.linear(p+"self_attn.v_proj", "v_proj", d.h, d.kv, m.Bias.attn())
				l.linear(p+"self_attn.q_proj", "q_proj", d.h, d.q, m.Bias.attn())
				l.linear(p+"self_attn.out_proj", "o_proj", d.q, d.h, m.Bias.out())
				l.norm(p+"self_attn_layer_norm", true, d.h)
				l.linear(p+"fc1", "up_proj", d.h, d.f, m.Bias.mlp())
				l.linear(p+"fc2", "down_proj", d.f, d.h, m.Bias.mlp())
				l.norm(p+"final_layer_norm", true, d.h)
			}
			l.headSide()
			if m.NormPosition != "post" {
				l.norm("model.decoder.final_layer_norm", true, d.h)
			}
			if classes, _ := m.headClasses(); classes > 0 {
				l.linear("score", "other", d.h, int64(classes), false)
			} else if m.Head == "lm" && !m.TiedEmbeddings {
				l.linear("lm_head", "lm_head", e, d.v, m.LMHeadBias)
			}
		},
		// OPTAttention clamped eager scores with torch.max(attn_weights,
		// finfo.min) (modeling_opt.py of the releases the measured OPT runs
		// used).
		// OPTAttention clamped the eager scores with torch.max(attn_weights,
		// finfo.min) through 4.48; 4.49's move to the shared attention
		// interface dropped it.
		recipe: func(_ Model, lib libVersion) recipe { return recipe{scoreClamp: lib.before(4, 49)} },
		presets: map[string]Preset{
			"opt-125m": {Model{Name: "facebook/opt-125m", Layers: 12, Hidden: 768, Heads: 12, FFN: 3072, Vocab: 50272, MaxPosition: 2048, TiedEmbeddings: true}, hf("facebook/opt-125m")},
			"opt-350m": {Model{Name: "facebook/opt-350m", Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096, Vocab: 50272, MaxPosition: 2048, TiedEmbeddings: true, NormPosition: "post", WordEmbedProjDim: 512, Params: 331196416}, hf("facebook/opt-350m")},
			"opt-1.3b": {Model{Name: "facebook/opt-1.3b", Layers: 24, Hidden: 2048, Heads: 32, FFN: 8192, Vocab: 50272, MaxPosition: 2048, TiedEmbeddings: true}, hf("facebook/opt-1.3b")},
			"opt-6.7b": {Model{Name: "facebook/opt-6.7b", Layers: 32, Hidden: 4096, Heads: 32, FFN: 16384, Vocab: 50272, MaxPosition: 2048, TiedEmbeddings: true}, hf("facebook/opt-6.7b")},
		},
	})
}

const optModelType = "opt"
