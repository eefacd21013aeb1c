package vram

import "fmt"

// BERT (transformers/models/bert/modeling_bert.py): a post-LN encoder with
// learned positions and token types, a LayerNorm on the embeddings, a
// pooler, dropout 0.1. BertModel has no prefix; the task heads wrap it as
// bert. (a sequence classifier, or the masked-LM head cls.predictions with
// its dense + GELU + LayerNorm transform and a decoder tied to the word
// embeddings). A key config.json leaves out takes the class's default
// (configuration_bert.py:44-63, transformers 5.23.0).
func init() {
	register(&family{
		name: "bert", source: "transformers/models/bert/modeling_bert.py", kind: encoder,
		defaults: Model{MLP: "gelu", Norm: "layernorm", Position: "learned", Bias: BiasAll, NormPosition: "post", Head: "none"},
		dropout:  [2]float64{0.1, 0.1}, // hidden_dropout_prob, attention_probs_dropout_prob
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden = c.optInt("num_hidden_layers", 12), c.optInt("hidden_size", 768)
			m.Heads = c.optInt("num_attention_heads", 12)
			m.KVHeads = c.optInt("num_key_value_heads", m.Heads)
			m.FFN, m.Vocab = c.optInt("intermediate_size", 3072), c.optInt("vocab_size", 30522)
			m.MaxPosition = c.optInt("max_position_embeddings", 512)
			m.HeadDim = c.optInt("head_dim", 0)
			m.TypeVocab = c.optInt("type_vocab_size", 2)
			m.Pooler = true // BertModel default add_pooling_layer=True
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			delete(c, "num_key_value_heads")
			delete(c, "tie_word_embeddings")
			c["type_vocab_size"] = m.TypeVocab
		},
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			root := bertRoot(m)
			l.add(root+"embeddings.word_embeddings.weight", "embedding", d.v, d.h)
			l.add(root+"embeddings.position_embeddings.weight", "position", int64(m.MaxPosition), d.h)
			if m.TypeVocab > 0 {
				l.add(root+"embeddings.token_type_embeddings.weight", "embedding", int64(m.TypeVocab), d.h)
			}
			l.norm(root+"embeddings.LayerNorm", true, d.h)
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf(root+"encoder.layer.%d.", i)
				l.linear(p+"attention.self.query", "q_proj", d.h, d.q, true)
				l.linear(p+"attention.self.key", "k_proj", d.h, d.q, true)
				l.linear(p+"attention.self.value", "v_proj", d.h, d.q, true)
				l.linear(p+"attention.output.dense", "o_proj", d.q, d.h, true)
				l.norm(p+"attention.output.LayerNorm", true, d.h)
				l.linear(p+"intermediate.dense", "up_proj", d.h, d.f, true)
				l.linear(p+"output.dense", "down_proj", d.f, d.h, true)
				l.norm(p+"output.LayerNorm", true, d.h)
			}
			l.headSide()
			if m.Pooler {
				l.linear(root+"pooler.dense", "other", d.h, d.h, true)
			}
			switch classes, _ := m.headClasses(); {
			case classes > 0:
				l.linear("classifier", "other", d.h, int64(classes), true)
			case m.Head == "lm":
				l.linear("cls.predictions.transform.dense", "other", d.h, d.h, true)
				l.norm("cls.predictions.transform.LayerNorm", true, d.h)
				if !m.TiedEmbeddings {
					l.linear("cls.predictions.decoder", "lm_head", d.h, d.v, false)
				}
				l.add("cls.predictions.bias", "bias", d.v)
			}
		},
		// BertEmbeddings registers position_ids and token_type_ids.
		buffers: func(m Model, b *bufferList) {
			p := int64(m.MaxPosition)
			b.add(bertRoot(m)+"embeddings.position_ids", -1, INT64, 1, p)
			b.add(bertRoot(m)+"embeddings.token_type_ids", -1, INT64, 1, p)
		},
		// eager attention's softmax in the scores' dtype; the embeddings'
		// LayerNorm; the masked-LM head's transform.
		recipe: func(Model, libVersion) recipe {
			return recipe{softmaxInDType: true, embedNorm: true, headTransform: true}
		},
		// bert-large-uncased 335,141,888: HF model card /
		// BertModel(config).num_parameters().
		presets: map[string]Preset{
			"bert-base-uncased":  {Model{Name: "bert-base-uncased", Layers: 12, Hidden: 768, Heads: 12, FFN: 3072, Vocab: 30522, MaxPosition: 512, TypeVocab: 2, Pooler: true, Params: 109482240}, hf("google-bert/bert-base-uncased")},
			"bert-large-uncased": {Model{Name: "bert-large-uncased", Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096, Vocab: 30522, MaxPosition: 512, TypeVocab: 2, Pooler: true, Params: 335141888}, hf("google-bert/bert-large-uncased")},
		},
	})
}

// bertRoot is the prefix of the encoder's names: none for the bare
// BertModel, "bert." under a task head.
func bertRoot(m Model) string {
	if m.Head == "none" {
		return ""
	}
	return "bert."
}
