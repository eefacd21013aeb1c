package vram

import "fmt"

// T5 (transformers/models/t5/modeling_t5.py; T5 v1.1, Flan-T5, T0): an
// encoder-decoder. Both stacks are pre-norm blocks of T5LayerNorm (an RMS
// norm) with eager attention only — no scaling of the scores, which add a
// learned relative position bias that the first block of each stack
// computes (relative_attention_bias) and every block reuses — and a
// feed-forward of wi (relu) or wi_0/wi_1 (gated-gelu, gelu_new) and wo,
// with dropout inside. Decoder blocks attend causally to themselves, then
// to the encoder's output (EncDecAttention). The word embedding is shared
// by both stacks; the LM head is untied from T5 v1.1 on (tied, the decoder
// output is scaled by d_model^-0.5).
func init() {
	register(&family{
		name: "t5", source: "transformers/models/t5/modeling_t5.py", kind: encoderDecoder,
		defaults:  Model{MLP: "relu", Norm: "rmsnorm", Position: "relative", Bias: BiasNone, RelativeBuckets: 32},
		attention: []string{"eager"}, // T5PreTrainedModel supports neither SDPA nor FlashAttention
		dropout:   [2]float64{0.1, 0.1},
		fromConfig: func(c *hfReader, m *Model) {
			enc := c.optInt("num_layers", 6)
			dec := c.optInt("num_decoder_layers", enc)
			m.Layers, m.DecoderLayers = enc+dec, dec
			m.Hidden = c.optInt("d_model", 512)
			m.HeadDim = c.optInt("d_kv", 64)
			m.FFN = c.optInt("d_ff", 2048)
			m.Heads = c.optInt("num_heads", 8)
			m.KVHeads = m.Heads
			m.Vocab = c.optInt("vocab_size", 32128)
			m.RelativeBuckets = c.optInt("relative_attention_num_buckets", 32)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
			switch ff := c.optString("feed_forward_proj", ""); ff {
			case "", "relu":
				m.MLP = "relu"
			case "gated-gelu":
				m.MLP = "geglu"
			default:
				c.fail(fmt.Sprintf("feed_forward_proj %q: relu and gated-gelu are modelled", ff))
			}
		},
		toConfig: func(m Model, c map[string]any) {
			c["num_layers"], c["num_decoder_layers"] = m.Layers-m.DecoderLayers, m.DecoderLayers
			c["d_model"], c["d_kv"], c["d_ff"], c["num_heads"] = m.Hidden, m.HeadDim, m.FFN, m.Heads
			c["vocab_size"], c["relative_attention_num_buckets"] = m.Vocab, m.RelativeBuckets
			c["tie_word_embeddings"] = m.TiedEmbeddings
			c["decoder_start_token_id"], c["pad_token_id"] = 0, 0 // T5's released configs
			c["feed_forward_proj"] = "relu"
			if m.MLP == "geglu" {
				c["feed_forward_proj"] = "gated-gelu"
			}
		},
		check: func(m Model) error {
			switch {
			case m.MLP != "relu" && m.MLP != "geglu":
				return fmt.Errorf("model.mlp %q: T5's feed-forward is relu or geglu (gated-gelu)", m.MLP)
			case m.KVHeads != m.Heads:
				return fmt.Errorf("model.kv_heads = %d: T5 attention has as many key/value heads as heads (%d)", m.KVHeads, m.Heads)
			case m.RelativeBuckets < 1:
				return fmt.Errorf("model.relative_buckets must be ≥ 1")
			}
			return nil
		},
		recipe:  func(Model, libVersion) recipe { return recipe{lossInDType: true} },
		tensors: t5Tensors,
		presets: map[string]Preset{
			"flan-t5-base":  {Model{Name: "google/flan-t5-base", Layers: 24, DecoderLayers: 12, Hidden: 768, Heads: 12, HeadDim: 64, FFN: 2048, Vocab: 32128, MLP: "geglu"}, hf("google/flan-t5-base")},
			"flan-t5-large": {Model{Name: "google/flan-t5-large", Layers: 48, DecoderLayers: 24, Hidden: 1024, Heads: 16, HeadDim: 64, FFN: 2816, Vocab: 32128, MLP: "geglu"}, hf("google/flan-t5-large")},
			"flan-t5-xl":    {Model{Name: "google/flan-t5-xl", Layers: 48, DecoderLayers: 24, Hidden: 2048, Heads: 32, HeadDim: 64, FFN: 5120, Vocab: 32128, MLP: "geglu"}, hf("google/flan-t5-xl")},
			"t0-3b":         {Model{Name: "bigscience/T0_3B", Layers: 48, DecoderLayers: 24, Hidden: 2048, Heads: 32, HeadDim: 64, FFN: 5120, Vocab: 32128, MLP: "geglu", Params: 2849757184}, hf("bigscience/T0_3B")},
		},
	})
}

// t5Tensors lists T5ForConditionalGeneration's parameters: the shared
// embedding, the encoder's blocks and final norm (with the first decoder
// block, where the decoder takes over), the decoder's blocks and final
// norm, and the LM head.
func t5Tensors(m Model, l *tensorList) {
	d := m.dims()
	enc := m.Layers - m.DecoderLayers
	l.add("shared.weight", "embedding", d.v, d.h)
	attn := func(p string, first bool) {
		l.linear(p+"q", "q_proj", d.h, d.q, false)
		l.linear(p+"k", "k_proj", d.h, d.q, false)
		l.linear(p+"v", "v_proj", d.h, d.q, false)
		l.linear(p+"o", "o_proj", d.q, d.h, false)
		if first {
			l.add(p+"relative_attention_bias.weight", "position", int64(m.RelativeBuckets), int64(m.Heads))
		}
	}
	ff := func(p string) {
		if m.MLP == "geglu" {
			l.linear(p+"DenseReluDense.wi_0", "gate_proj", d.h, d.f, false)
			l.linear(p+"DenseReluDense.wi_1", "up_proj", d.h, d.f, false)
		} else {
			l.linear(p+"DenseReluDense.wi", "up_proj", d.h, d.f, false)
		}
		l.linear(p+"DenseReluDense.wo", "down_proj", d.f, d.h, false)
		l.norm(p+"layer_norm", false, d.h)
	}
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		if i < enc {
			p := fmt.Sprintf("encoder.block.%d.", i)
			attn(p+"layer.0.SelfAttention.", i == 0)
			l.norm(p+"layer.0.layer_norm", false, d.h)
			ff(p + "layer.1.")
			continue
		}
		if i == enc {
			l.norm("encoder.final_layer_norm", false, d.h)
		}
		p := fmt.Sprintf("decoder.block.%d.", i-enc)
		attn(p+"layer.0.SelfAttention.", i == enc)
		l.norm(p+"layer.0.layer_norm", false, d.h)
		attn(p+"layer.1.EncDecAttention.", false)
		l.norm(p+"layer.1.layer_norm", false, d.h)
		ff(p + "layer.2.")
	}
	l.headSide()
	l.norm("decoder.final_layer_norm", false, d.h)
	lmHead(m, l, "lm_head", "classification_head")
}
