package vram

// Qwen3-VL-MoE (transformers 4.57 models/qwen3_vl_moe/modeling_qwen3_vl_moe.py,
// Qwen3VLMoeForConditionalGeneration): Qwen3-VL's vision encoder, mergers,
// deepstack and interleaved rotary embedding (family qwen3_vl, whose
// declaration it shares) over a mixture-of-experts language model (family
// qwen3_vl_moe_text: stacked experts in a Python loop). Its vision_config's
// model_type reads qwen3_vl_moe; the tower is qwen3_vl_vision's.
// qwen3VLMoeModelType is this family's model_type, by which the serving engines' tables
// name it (vision_tp.go).
const qwen3VLMoeModelType = "qwen3_vl_moe"

func init() {
	register(&family{
		name: qwen3VLMoeModelType, gguf: "qwen3vlmoe", source: "transformers/models/qwen3_vl_moe/modeling_qwen3_vl_moe.py",
		tensors:    func(m Model, l *tensorList) { m.visionTensors(l) },
		vision:     qwen3VLWrapper(),
		fromConfig: func(c *hfReader, m *Model) { qwen3VLReadConfig(c, m, "qwen3_vl_moe_text", "qwen3_vl_moe") },
		toConfig:   func(m Model, c map[string]any) { qwen3VLWriteConfig(m, c, "qwen3_vl_moe_text", "qwen3_vl_moe") },
		presets: map[string]Preset{
			// Qwen/Qwen3-VL-30B-A3B-Instruct: a Qwen3-30B-A3B-shaped
			// language model (128 experts, 8 a token, 256k positions) and
			// the 27-block vision encoder.
			"qwen3-vl-30b-a3b": {Model{Name: "Qwen/Qwen3-VL-30B-A3B-Instruct", Family: "qwen3_vl_moe_text", Layers: 48, Hidden: 2048, Heads: 32, KVHeads: 4, HeadDim: 128,
				FFN: 6144, Vocab: 151936, MaxPosition: 262144, Experts: 128, ExpertsPerToken: 8, ExpertFFN: 768, Router: "softmax_topk_norm_scatter",
				Vision: &Vision{Family: "qwen3_vl_moe", Tower: qwen3Tower(false)}}, hf("Qwen/Qwen3-VL-30B-A3B-Instruct")},
		},
	})
}
