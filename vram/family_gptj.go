package vram

// GPT-J (transformers/models/gptj/modeling_gptj.py): a parallel block with
// one LayerNorm, partial rotary embeddings (rotary_dim), biases on the MLP
// only, an LM head with a bias. A key config.json leaves out takes the
// class's default (configuration_gptj.py:52-69, transformers 5.23.0): n_inner
// None is 4 · n_embd (modeling_gptj.py:386), rotary_dim 64.
func init() {
	register(&family{
		name: gptjModelType, source: "transformers/models/gptj/modeling_gptj.py",
		defaults: Model{MLP: "gelu_new", Norm: "layernorm", Position: "rope", Bias: BiasMLPOnly, ParallelBlock: true, LMHeadBias: true},
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden, m.Heads = c.optInt("n_layer", 28), c.optInt("n_embd", 4096), c.optInt("n_head", 16)
			m.FFN = c.optInt("n_inner", 4*m.Hidden)
			m.Vocab, m.MaxPosition = c.optInt("vocab_size", 50400), c.optInt("n_positions", 2048)
			if m.Heads > 0 && m.Hidden > 0 {
				m.RotaryPct = float64(c.optInt("rotary_dim", 64)) / float64(m.Hidden/m.Heads)
			}
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
		},
		toConfig: func(m Model, c map[string]any) {
			c["n_layer"], c["n_embd"], c["n_head"], c["n_inner"] = m.Layers, m.Hidden, m.Heads, m.FFN
			c["vocab_size"], c["n_positions"] = m.Vocab, m.MaxPosition
			c["rotary_dim"] = int(m.RotaryPct * float64(m.HeadDim))
			c["tie_word_embeddings"] = m.TiedEmbeddings
		},
		tensors: parallelDecoder(parallelNames{embed: "transformer.wte.weight", layers: "transformer.h.%d.", final: "transformer.ln_f",
			norm: "ln_1", attn: "attn.", out: "out_proj", fcIn: "mlp.fc_in", fcOut: "mlp.fc_out"}),
		// GPT-J keeps its sin/cos table as embed_positions, a plain attribute,
		// not a registered buffer: none to list.
		// GPTJAttention: sin and cos gathered from embed_positions are cast
		// to the key's dtype, so the rotated q and k keep theirs; _attn
		// casts q and k to fp32 for the scores.
		recipe: func(Model, libVersion) recipe {
			return recipe{parallelNorms: 1, ropeKeepsDType: true, scoresFP32: true}
		},
		// GPTJPreTrainedModel sets _supports_flash_attn but not
		// _supports_sdpa: transformers runs eager attention for SDPA.
		attention: []string{"eager", "flash2"},
		presets: map[string]Preset{
			"gpt-j-6b": {Model{Name: "EleutherAI/gpt-j-6b", Layers: 28, Hidden: 4096, Heads: 16, FFN: 16384, Vocab: 50400, MaxPosition: 2048, RotaryPct: 0.25, Params: 6050882784}, hf("EleutherAI/gpt-j-6b")},
		},
	})
}

// gptjModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const gptjModelType = "gptj"
