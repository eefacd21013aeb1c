package vram

// DeepSeek-V3.2 (transformers 5.23 models/deepseek_v32/
// modeling_deepseek_v32.py; configuration_deepseek_v32.py): DeepSeek-V3's
// latent attention with DeepSeek Sparse Attention's lightning indexer in
// every layer (dsa.go: wq_b, wk, k_norm, weights_proj under
// self_attn.indexer), and DeepSeek-V3's mixture of experts as transformers
// 5 keeps it — fused experts, a sigmoid router whose group-limited choice
// (n_group, topk_group) changes no tensor, shared experts as one MLP —
// dense in the first first_k_dense_replace layers (or as mlp_layer_types
// says). The checkpoint's multi-token-prediction layer is stored, not
// built (_keys_to_ignore_on_load_unexpected = [r"model\.layers\.61.*"],
// l.663). A key config.json leaves out takes the class's default
// (configuration_deepseek_v32.py:87-126).
func init() {
	register(&family{
		name: "deepseek_v32", source: "transformers/models/deepseek_v32/modeling_deepseek_v32.py (transformers 5.23.0)",
		defaults:        Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Router: "sigmoid_topk_norm"},
		latentAttention: true,
		indexer:         true,
		servingOnly:     "its modeling code is transformers 5's (grouped_mm experts, MLA's compressed cache, the indexer's top-k mask and key cache), which the training rules do not follow yet",
		only5:           true,
		recipe:          dsaRecipe,
		fromConfig:      func(c *hfReader, m *Model) { readDSAConfig(c, m, deepseekV32Defaults) },
		toConfig:        writeDSAConfig,
		check:           func(m Model) error { return checkDSA("deepseek_v32", m) },
		tensors:         standardDecoder{attn: dsaAttention, mlp: dsaMLP}.tensors,
		buffers:         dsaBuffers,
		storedOnly:      dsaMTP,
		// DeepSeek-V3.2 (the class's docstring names DeepSeek-V3.2-Exp,
		// the same architecture): the class's defaults with the
		// checkpoint's one multi-token-prediction layer (layers.61) —
		// 671,877,929,216 parameters as transformers 5.23 builds it on the
		// meta device — released, as DeepSeek-V3 was, in fp8 e4m3 with
		// 128×128 block scales (its config.json's quantization_config: fp8,
		// e4m3, weight_block_size [128, 128], scale_fmt ue8m0); the
		// indexer's weights_proj stays bf16 (dsaIndexerTensors).
		presets: map[string]Preset{
			"deepseek-v3.2": {dsaPreset(deepseekV32Defaults, "deepseek-ai/DeepSeek-V3.2", 1, blockFP8Release), hf("deepseek-ai/DeepSeek-V3.2")},
			// DeepSeek-V3.2-Exp, the experimental release of September
			// 2025: the same config.json shape and fp8 release.
			"deepseek-v3.2-exp": {dsaPreset(deepseekV32Defaults, "deepseek-ai/DeepSeek-V3.2-Exp", 1, blockFP8Release), hf("deepseek-ai/DeepSeek-V3.2-Exp")},
		},
	})
}

// deepseekV32Defaults are DeepseekV32Config's defaults
// (configuration_deepseek_v32.py:87-126): DeepSeek-V3's shape with an
// indexer of 64 heads of 128.
var deepseekV32Defaults = Model{Layers: 61, Hidden: 7168, Heads: 128, KVHeads: 128, FFN: 18432, Vocab: 129280, MaxPosition: 163840,
	Experts: 256, ExpertsPerToken: 8, SharedExperts: 1, ExpertFFN: 2048, DenseLayers: 3,
	QLoRARank: 1536, KVLoRARank: 512, QKNopeDim: 128, QKRopeDim: 64, VHeadDim: 128, HeadDim: 192,
	IndexHeads: 64, IndexHeadDim: 128}

// deepseekV32ModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const deepseekV32ModelType = "deepseek_v32"
