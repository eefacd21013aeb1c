package vram

// Qwen3.5-MoE (transformers 5.23.0 models/qwen3_5_moe/modeling_qwen3_5_moe.py,
// Qwen3_5MoeForConditionalGeneration l.1910-1922): Qwen3.5's vision
// encoder and merger (family qwen3_5, whose declaration it shares) over
// the mixture-of-experts language model (qwen3_5_moe_text). Its
// vision_config's model_type reads qwen3_5_moe_vision; the tower is
// qwen3_5_vision's (Qwen3_5MoeVisionConfig has the same keys and
// defaults, configuration_qwen3_5_moe.py l.149-159).
func init() {
	register(&family{
		name: qwen35MoeModelType, gguf: "qwen35moe", source: "transformers/models/qwen3_5_moe/modeling_qwen3_5_moe.py (transformers 5.23.0)",
		servingOnly: qwen35MoEServingOnly,
		only5:       true,
		tensors:     func(m Model, l *tensorList) { m.visionTensors(l) },
		vision:      qwen35Wrapper(),
		fromConfig:  func(c *hfReader, m *Model) { qwen35ReadConfig(c, m, "qwen3_5_moe_text", "qwen3_5_moe") },
		toConfig:    func(m Model, c map[string]any) { qwen35WriteConfig(m, c, "qwen3_5_moe_text", "qwen3_5_moe_vision") },
		presets: map[string]Preset{
			// Qwen/Qwen3.5-35B-A3B: Qwen3_5MoeTextConfig's defaults
			// describe this model (its docstring,
			// configuration_qwen3_5_moe.py l.48-49): 40 layers 2,048 wide,
			// every fourth gated attention (16 heads of 256 over 2 KV
			// heads, a quarter rotated), the others Gated DeltaNet (16 key
			// and 32 value heads of 128); 256 experts of 512, 8 a token,
			// and a shared expert of 512 in every layer; 248,320 tokens,
			// untied; the default tower. The class's shape is taken as the
			// release's (its config.json was not at hand); out_hidden_size
			// is the text width, and the 262,144 positions and one MTP
			// layer are what Qwen3.5's released configs carry:
			// 35,107,181,936 parameters as transformers 5.23 builds it on
			// the meta device.
			"qwen3.5-35b-a3b": {Model{Name: "Qwen/Qwen3.5-35B-A3B", Family: "qwen3_5_moe_text", Layers: 40, Hidden: 2048, Heads: 16, KVHeads: 2, HeadDim: 256, FFN: 512,
				Vocab: 248320, MaxPosition: 262144, RotaryPct: 0.25, MTPLayers: 1, DeltaNet: qwen35DeltaNet(40),
				Experts: 256, ExpertsPerToken: 8, ExpertFFN: 512, SharedExperts: 1, SharedExpertFFN: 512, Router: "softmax_topk_norm",
				Vision: &Vision{Family: "qwen3_5_moe", Tower: qwen35Tower()}}, hf("Qwen/Qwen3.5-35B-A3B")},
		},
	})
}

// qwen35MoeModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const qwen35MoeModelType = "qwen3_5_moe"
