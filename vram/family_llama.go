package vram

// Llama 1/2/3 (transformers/models/llama/modeling_llama.py): the standard
// pre-norm decoder with RMSNorm, rotary positions, SwiGLU and no biases
// (attention_bias adds them to all four projections, mlp_bias to the MLP).
// A key config.json leaves out takes the class's default
// (configuration_llama.py:64-90, transformers 5.23.0), as does a wrapper's
// text_config (llava-1.5-7b-hf leaves most out).
func init() {
	register(&family{
		name: "llama", gguf: ggufLlama, source: "transformers/models/llama/modeling_llama.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone},
		fromConfig: func(c *hfReader, m *Model) {
			c.commonOr(m, classShape{layers: 32, hidden: 4096, heads: 32, ffn: 11008, vocab: 32000, maxPosition: 2048})
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if c.optBool("attention_bias", false) || c.optBool("mlp_bias", false) {
				m.Bias = BiasAll
			}
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			if m.SlidingWindow > 0 {
				c["sliding_window"] = m.SlidingWindow
			}
		},
		tensors: standardDecoder{attn: attnQKVO, mlp: denseMLP}.tensors,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		// Llama-2-7b 6,738,415,616 and Meta-Llama-3-8B 8,030,261,248: the
		// totals in the checkpoints' model.safetensors.index.json
		// metadata.total_size / 2 (bf16).
		presets: map[string]Preset{
			"llama-7b":       {Model{Name: "huggyllama/llama-7b", Layers: 32, Hidden: 4096, Heads: 32, FFN: 11008, Vocab: 32000, MaxPosition: 2048}, hf("huggyllama/llama-7b")},
			"llama-2-7b":     {Model{Name: "meta-llama/Llama-2-7b-hf", Layers: 32, Hidden: 4096, Heads: 32, FFN: 11008, Vocab: 32000, MaxPosition: 4096, Params: 6738415616}, hf("meta-llama/Llama-2-7b-hf")},
			"llama-2-13b":    {Model{Name: "meta-llama/Llama-2-13b-hf", Layers: 40, Hidden: 5120, Heads: 40, FFN: 13824, Vocab: 32000, MaxPosition: 4096, Params: 13015864320}, hf("meta-llama/Llama-2-13b-hf")},
			"llama-2-70b":    {Model{Name: "meta-llama/Llama-2-70b-hf", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, FFN: 28672, Vocab: 32000, MaxPosition: 4096, Params: 68976648192}, hf("meta-llama/Llama-2-70b-hf")},
			"codellama-34b":  {Model{Name: "codellama/CodeLlama-34b-hf", Layers: 48, Hidden: 8192, Heads: 64, KVHeads: 8, FFN: 22016, Vocab: 32000, MaxPosition: 16384, Params: 33743970304}, hf("codellama/CodeLlama-34b-hf")},
			"llama-3-8b":     {Model{Name: "meta-llama/Meta-Llama-3-8B", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 128256, MaxPosition: 8192, Params: 8030261248}, hf("meta-llama/Meta-Llama-3-8B")},
			"llama-3-70b":    {Model{Name: "meta-llama/Meta-Llama-3-70B", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, FFN: 28672, Vocab: 128256, MaxPosition: 8192, Params: 70553706496}, hf("meta-llama/Meta-Llama-3-70B")},
			"llama-3.1-8b":   {Model{Name: "meta-llama/Llama-3.1-8B", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 128256, MaxPosition: 131072, Params: 8030261248}, hf("meta-llama/Llama-3.1-8B")},
			"llama-3.1-70b":  {Model{Name: "meta-llama/Llama-3.1-70B", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, FFN: 28672, Vocab: 128256, MaxPosition: 131072, Params: 70553706496}, hf("meta-llama/Llama-3.1-70B")},
			"llama-3.1-405b": {Model{Name: "meta-llama/Llama-3.1-405B", Layers: 126, Hidden: 16384, Heads: 128, KVHeads: 8, FFN: 53248, Vocab: 128256, MaxPosition: 131072}, hf("meta-llama/Llama-3.1-405B")},
			"llama-3.2-1b":   {Model{Name: "meta-llama/Llama-3.2-1B", Layers: 16, Hidden: 2048, Heads: 32, KVHeads: 8, HeadDim: 64, FFN: 8192, Vocab: 128256, MaxPosition: 131072, TiedEmbeddings: true}, hf("meta-llama/Llama-3.2-1B")},
			"llama-3.2-3b":   {Model{Name: "meta-llama/Llama-3.2-3B", Layers: 28, Hidden: 3072, Heads: 24, KVHeads: 8, HeadDim: 128, FFN: 8192, Vocab: 128256, MaxPosition: 131072, TiedEmbeddings: true}, hf("meta-llama/Llama-3.2-3B")},
			"tinyllama-1.1b": {Model{Name: "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", Layers: 22, Hidden: 2048, Heads: 32, KVHeads: 4, FFN: 5632, Vocab: 32000, MaxPosition: 2048}, hf("TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T")},
		},
	})
}

// classShape is a config class's defaults for the keys hfReader.common
// reads, under LlamaConfig's names: kvHeads 0 stands for
// num_attention_heads (the classes' __post_init__ where
// num_key_value_heads is None), as does an explicit null; head_dim's
// default is hidden / heads, as the engine takes a head_dim of 0.
type classShape struct{ layers, hidden, heads, kvHeads, ffn, vocab, maxPosition int }

// commonOr reads what common reads, a key config.json leaves out taking
// d's value, the config class's default.
func (r *hfReader) commonOr(m *Model, d classShape) {
	m.Layers, m.Hidden = r.optInt("num_hidden_layers", d.layers), r.optInt("hidden_size", d.hidden)
	m.Heads = r.optInt("num_attention_heads", d.heads)
	if m.KVHeads = r.optIntOrNone("num_key_value_heads", d.kvHeads); m.KVHeads == 0 {
		m.KVHeads = m.Heads
	}
	m.FFN, m.Vocab = r.optInt("intermediate_size", d.ffn), r.optInt("vocab_size", d.vocab)
	m.MaxPosition = r.optInt("max_position_embeddings", d.maxPosition)
	m.HeadDim = r.optInt("head_dim", 0)
}

// ggufLlama is this family's architecture name in GGUF files
// (general.architecture), which Ollama's graph formulas are keyed by.
const ggufLlama = "llama"

// asLlama lays out a decoder given by its shape alone (Megatron-LM's
// GPTModel arguments, importer/megatron.go) as this family's pre-norm
// blocks; its Norm, MLP, Bias and Position fields say the rest.
func asLlama(m *Model) { m.Family = "llama" }

// llamaModelType is the family's model_type, which the serving engines'
// tables of defaults are keyed by.
const llamaModelType = "llama"
