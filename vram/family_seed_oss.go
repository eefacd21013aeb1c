package vram

import "fmt"

// Seed-OSS (transformers/models/seed_oss/modeling_seed_oss.py): Llama's
// pre-norm decoder with biases on q, k and v (attention_bias) but not on
// the output projection unless attention_out_bias, a 128-wide head, and
// residual dropout on each branch's output (residual_dropout, after o_proj
// and after down_proj, where the engine's branch dropout sits). The
// released 36B's config copies give both dropouts as 0 (SeedOssConfig's
// defaults are 0.1); a plan sets them with train.dropout.
func init() {
	register(&family{
		name: seedOssModelType, source: "transformers/models/seed_oss/modeling_seed_oss.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasQKVOnly},
		fromConfig: func(c *hfReader, m *Model) {
			// A key config.json leaves out takes the class's default
			// (configuration_seed_oss.py:62-90, transformers 5.23.0): a
			// 128-wide head, hidden/heads only where head_dim is None.
			c.commonOr(m, classShape{layers: 64, hidden: 4096, heads: 80, kvHeads: 8, ffn: 27648, vocab: 155136, maxPosition: 524288})
			m.HeadDim = c.optIntOrNone("head_dim", 128)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			qkv, out, mlp := c.optBool("attention_bias", true), c.optBool("attention_out_bias", false), c.optBool("mlp_bias", false)
			switch {
			case qkv && out && mlp:
				m.Bias = BiasAll
			case qkv && out:
				m.Bias = BiasAttn
			case qkv && !mlp:
				m.Bias = BiasQKVOnly
			case !qkv && !out && mlp:
				m.Bias = BiasMLPOnly
			case !qkv && !out:
				m.Bias = BiasNone
			default:
				c.fail(fmt.Sprintf("attention_bias %v, attention_out_bias %v, mlp_bias %v: this mix of biases is not modelled", qkv, out, mlp))
			}
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["attention_bias"], c["attention_out_bias"], c["mlp_bias"] = m.Bias.attn(), m.Bias.out(), m.Bias.mlp()
			c["attention_dropout"], c["residual_dropout"] = 0.0, 0.0
			if m.Vocab <= 1 {
				c["pad_token_id"] = nil
			}
		},
		tensors: standardDecoder{attn: attnQKVO, mlp: denseMLP}.tensors,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		// Seed-OSS-36B: 64 layers 5,120 wide, 80 heads over 8 KV heads of
		// 128, 155,136 vocabulary rows, 524,288 positions (ByteDance-Seed's
		// README and model card, and the config's copies).
		presets: map[string]Preset{
			"seed-oss-36b": {Model{Name: "ByteDance-Seed/Seed-OSS-36B-Base", Layers: 64, Hidden: 5120, Heads: 80, KVHeads: 8, HeadDim: 128, FFN: 27648, Vocab: 155136,
				MaxPosition: 524288}, hf("ByteDance-Seed/Seed-OSS-36B-Base")},
		},
	})
}

// seedOssModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const seedOssModelType = "seed_oss"
