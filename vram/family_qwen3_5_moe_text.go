package vram

import "fmt"

// Qwen3.5-MoE's language model (transformers 5.23.0
// models/qwen3_5_moe/modeling_qwen3_5_moe.py, Qwen3_5MoeTextModel
// l.1292; its config is the wrapper's text_config, Qwen3_5MoeTextConfig,
// model_type qwen3_5_moe_text): Qwen3.5's hybrid of Gated DeltaNet layers
// and gated attention (family qwen3_5_text, whose declarations it shares)
// with a mixture of experts in every layer (Qwen3_5MoeDecoderLayer
// l.934-946): a softmax router whose top-k weights are always renormalized
// (Qwen3_5MoeTopKRouter, l.872-888), transformers 5's fused experts
// (Qwen3_5MoeExperts, l.831-841) and one shared expert scaled by a sigmoid
// gate (Qwen3_5MoeSparseMoeBlock, l.891-911). The checkpoint's mtp.*
// weights are stored and not built (l.1001). transformers 5.23 builds it
// alone too, as Qwen3_5MoeForCausalLM (AutoModelForCausalLM's
// qwen3_5_moe_text, models/auto/modeling_auto.py l.919; l.1811-1823); its
// presets are the wrapper's (family qwen3_5_moe).
func init() {
	register(&family{
		name: qwen35MoeTextModelType, gguf: "qwen35moe", source: "transformers/models/qwen3_5_moe/modeling_qwen3_5_moe.py (transformers 5.23.0)",
		defaults:    Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, QKNorm: "head", Router: "softmax_topk_norm"},
		deltaNet:    true,
		servingOnly: qwen35MoEServingOnly,
		only5:       true,
		// Qwen3_5MoeTextConfig's defaults (configuration_qwen3_5_moe.py
		// l.89-112), Qwen/Qwen3.5-35B-A3B's shape.
		fromConfig: func(c *hfReader, m *Model) {
			qwen35TextFromConfig(c, m, qwen35Shape{layers: 40, hidden: 2048, heads: 16, kvHeads: 2,
				experts: 256, perToken: 8, expertFFN: 512, shared: 512})
		},
		toConfig:   qwen35TextToConfig,
		check:      func(m Model) error { return qwen35TextCheck(m, true) },
		tensors:    qwen35Tensors,
		buffers:    func(m Model, b *bufferList) { rotaryBuffers5(m, b, "model.") },
		storedOnly: qwen35MTP,
		block:      qwen35Block,
		// Qwen3.5's (qwen3_5_text) with Qwen3-Next's 5.x MoE block: the
		// experts through grouped_mm (@use_experts_implementation, l.831;
		// moe_grouped_mm.go), the shared expert before the router and its
		// sigmoid gate after the experts (l.902-906), the top-k weights
		// cast to the logits' dtype (l.886); DynamicCache (l.1327).
		recipe: func(Model, libVersion) recipe {
			return recipe{normWeightFP32: true, gatedAttention: true, deltaRule5: true, sharedExpertGate: true,
				groupedMM: true, sharedFirst: true, sharedGateLast: true, routerLogitsDType: true}
		},
	})
}

// qwen35MoEServingOnly is what the Qwen3.5-MoE families do not plan: the
// language model's training step and the image-text wrapper's are
// modelled as their 5.23 traces hold (trainsAt5); transformers'
// generate, not traced, is not.
const qwen35MoEServingOnly = "its modeling code is transformers 5's; of it the training step (the language model's, Qwen3_5MoeForCausalLM, and the image-text model's, Qwen3_5MoeForConditionalGeneration) is traced at 5.23, not transformers' generate"

// qwen35MoECheck is the MoE language model's rules on its experts: every
// layer routed (no decoder_sparse_step or dense layers in the class), the
// router renormalized, one shared expert.
func qwen35MoECheck(m Model) error {
	switch {
	case m.Experts < 1 || m.ExpertsPerToken < 1 || m.ExpertsPerToken > m.Experts:
		return fmt.Errorf("model: %s needs experts ≥ 1 and experts_per_token in [1, experts] (num_experts %d, num_experts_per_tok %d)", m.Family, m.Experts, m.ExpertsPerToken)
	case m.ExpertFFN < 1:
		return fmt.Errorf("model.expert_ffn = %d (moe_intermediate_size) must be ≥ 1", m.ExpertFFN)
	case m.SharedExperts != 1 || m.SharedExpertFFN < 1:
		return fmt.Errorf("model: %s has one shared expert in every layer: shared_experts must be 1 and shared_expert_ffn (shared_expert_intermediate_size) ≥ 1", m.Family)
	case m.MoEEvery > 1 || m.DenseLayers != 0:
		return fmt.Errorf("model: every %s layer is a mixture of experts (no moe_every or dense_layers)", m.Family)
	case m.Router != "softmax_topk_norm":
		return fmt.Errorf("model.router %q: %s's router renormalizes its softmax top-k (softmax_topk_norm)", m.Router, m.Family)
	}
	return nil
}

// qwen35MoeTextModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const qwen35MoeTextModelType = "qwen3_5_moe_text"
