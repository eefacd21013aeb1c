package vram

import "fmt"

// Granite 4.0 hybrids (transformers/models/granitemoehybrid/
// modeling_granitemoehybrid.py): Mamba-2 mixers (the torch path of
// Mamba2Mixer) and attention layers as layer_types lists them, each
// followed by a shared MLP (one fused input_linear for gate|up, chunked,
// and output_linear; shared_intermediate_size wide), Granite's
// multipliers (embeddings × embedding_multiplier, each branch ×
// residual_multiplier, logits ÷ logits_scaling), and attention without a
// rotary embedding unless position_embedding_type is "rope" (the 4.0-H
// models are NoPE). The models with experts (num_local_experts > 0: the
// H-Tiny and H-Small) add GraniteMoE's ParallelExperts before the shared
// MLP in every layer. A key config.json leaves out takes the class's
// default (configuration_granitemoehybrid.py:67-117, transformers 5.23.0;
// the mamba_* keys in hybridSSM): every layer a Mamba-2 mixer, 8 experts,
// no rotary embedding.
func init() {
	register(&family{
		name: graniteMoeHybridModelType, source: "transformers/models/granitemoehybrid/modeling_granitemoehybrid.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "none", Bias: BiasNone},
		ssm:      true,
		fromConfig: func(c *hfReader, m *Model) {
			c.commonOr(m, classShape{layers: 32, hidden: 4096, heads: 32, ffn: 11008, vocab: 32000, maxPosition: 2048})
			m.FFN = c.optInt("shared_intermediate_size", 1024)
			m.HeadDim = 0 // GraniteMoeHybridAttention: hidden / heads
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if c.optBool("attention_bias", false) {
				m.Bias = BiasAttn
			}
			if c.optString("position_embedding_type", "") == "rope" {
				m.Position = "rope"
			}
			if n := c.optInt("num_local_experts", 8); n > 0 {
				// Every layer: the experts (intermediate_size wide) and
				// the shared MLP, one shared expert in the engine's terms.
				m.Experts, m.ExpertsPerToken, m.ExpertFFN = n, c.optInt("num_experts_per_tok", 2), c.optInt("intermediate_size", 11008)
				m.SharedExperts, m.SharedExpertFFN, m.Router = 1, m.FFN, "topk_softmax"
			}
			m.SSM = c.hybridSSM(m.Hidden, m.Layers, "")
			// layer_types as GraniteMoeHybridConfig spells it (missing: all mamba).
			m.SSM.Attention, _ = c.layerKinds(m.Layers, "attention", "mamba")
		},
		toConfig: writeGranite4Config,
		check: func(m Model) error {
			switch {
			case m.SSM == nil:
				return fmt.Errorf("model: granitemoehybrid needs model.ssm (its Mamba-2 mixers)")
			case m.Experts > 0 && (m.SharedExperts != 1 || m.DenseLayers != 0 || m.MoEEvery > 1 || m.SharedExpertFFN != m.FFN):
				return fmt.Errorf("model: granitemoehybrid's MoE layers are every layer's experts plus its one shared MLP of ffn (shared_experts 1, shared_expert_ffn = ffn, dense_layers 0)")
			case m.Bias != BiasNone && m.Bias != BiasAttn:
				return fmt.Errorf("model.bias %q: granitemoehybrid has attention biases (attention_bias) or none", m.Bias)
			case m.Position != "rope" && m.Position != "none":
				return fmt.Errorf("model.position %q: granitemoehybrid's attention has rope or no positions", m.Position)
			}
			return nil
		},
		tensors: granite4Tensors,
		buffers: func(m Model, b *bufferList) {
			if m.Position == "rope" {
				rotaryBuffer(m, b, "model.")
			}
		},
		// GraniteMoeHybridModel.forward returns no cache unless one is
		// passed in; the shared MLP is one gate|up matmul.
		// transformers 5 builds a DynamicCache in training too (5.23
		// modeling_granitemoehybrid.py:1084-1085); 4.57 returned none
		// without a HybridMambaAttentionDynamicCache (4.57 l.1350-1354).
		// transformers 5 runs the routed experts through grouped_mm (the
		// use_experts_implementation default, l.839) after the same fp32
		// top-k routing (l.832-836); 4.57 ran ParallelExperts.
		recipe: func(_ Model, lib libVersion) recipe {
			return recipe{noTrainingCache: lib.before(5, 0), fusedGateUp: true, embedScale: true, branchScale: true, logitsScale: true,
				parallelExperts: lib.before(5, 0), groupedMM: !lib.before(5, 0), floatTopKRouter: !lib.before(5, 0)}
		},
		// The dense Granite 4.0-H models (copies of their config.json,
		// IBM's GGUF metadata and model card): 40 layers with attention at
		// 5, 15, 25 and 35 (H-Micro 2,048 wide, 32 heads over 8, a shared
		// MLP of 8,192 as the card's table gives it; H-1B 1,536 wide, 12
		// over 4, 4,096), and H-350M's 32 layers 768 wide with attention at
		// 10, 13, 17 and 27; NoPE, tied embeddings, 100,352 vocabulary rows.
		// The MoE ones: H-Tiny, 40 layers 1,536 wide, 64 experts of 512
		// (6 a token) beside a shared MLP of 1,024 (7B in total, 1B
		// active); H-Small, 4,096 wide, 72 experts of 768 (10 a token),
		// shared 1,536, Mamba heads 128 (32B, 9B active). H-Small's
		// attention layers are counted as four, at the positions of the
		// others (where they sit does not change its memory).
		presets: map[string]Preset{
			"granite-4.0-h-tiny": {Model{Name: "ibm-granite/granite-4.0-h-tiny", Layers: 40, Hidden: 1536, Heads: 12, KVHeads: 4, FFN: 1024, Vocab: 100352, MaxPosition: 131072, TiedEmbeddings: true,
				Experts: 64, ExpertsPerToken: 6, ExpertFFN: 512, SharedExperts: 1, SharedExpertFFN: 1024, Router: "topk_softmax",
				SSM: &SSM{Heads: 48, HeadDim: 64, State: 128, Groups: 1, ConvKernel: 4, Chunk: 256, Attention: []int{5, 15, 25, 35}}}, hf("ibm-granite/granite-4.0-h-tiny")},
			"granite-4.0-h-small": {Model{Name: "ibm-granite/granite-4.0-h-small", Layers: 40, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 1536, Vocab: 100352, MaxPosition: 131072, TiedEmbeddings: true,
				Experts: 72, ExpertsPerToken: 10, ExpertFFN: 768, SharedExperts: 1, SharedExpertFFN: 1536, Router: "topk_softmax",
				SSM: &SSM{Heads: 128, HeadDim: 64, State: 128, Groups: 1, ConvKernel: 4, Chunk: 256, Attention: []int{5, 15, 25, 35}}}, hf("ibm-granite/granite-4.0-h-small")},
			"granite-4.0-h-micro": {Model{Name: "ibm-granite/granite-4.0-h-micro", Layers: 40, Hidden: 2048, Heads: 32, KVHeads: 8, FFN: 8192, Vocab: 100352, MaxPosition: 131072, TiedEmbeddings: true,
				SSM: &SSM{Heads: 64, HeadDim: 64, State: 128, Groups: 1, ConvKernel: 4, Chunk: 256, Attention: []int{5, 15, 25, 35}}}, hf("ibm-granite/granite-4.0-h-micro")},
			"granite-4.0-h-1b": {Model{Name: "ibm-granite/granite-4.0-h-1b", Layers: 40, Hidden: 1536, Heads: 12, KVHeads: 4, FFN: 4096, Vocab: 100352, MaxPosition: 131072, TiedEmbeddings: true,
				SSM: &SSM{Heads: 48, HeadDim: 64, State: 128, Groups: 1, ConvKernel: 4, Chunk: 256, Attention: []int{5, 15, 25, 35}}}, hf("ibm-granite/granite-4.0-h-1b")},
			"granite-4.0-h-350m": {Model{Name: "ibm-granite/granite-4.0-h-350m", Layers: 32, Hidden: 768, Heads: 12, KVHeads: 4, FFN: 2048, Vocab: 100352, MaxPosition: 32768, TiedEmbeddings: true,
				SSM: &SSM{Heads: 48, HeadDim: 32, State: 128, Groups: 1, ConvKernel: 4, Chunk: 256, Attention: []int{10, 13, 17, 27}}}, hf("ibm-granite/granite-4.0-h-350m")},
		},
	})
}

// writeGranite4Config writes a GraniteMoeHybridConfig.
func writeGranite4Config(m Model, c map[string]any) {
	writeCommonConfig(m, c)
	delete(c, "head_dim")
	writeHybridSSM(m, c)
	writeLayerKinds(c, m.Layers, m.AttentionLayer, "attention", "mamba")
	c["shared_intermediate_size"], c["num_local_experts"] = m.FFN, m.Experts
	if m.Experts > 0 {
		c["intermediate_size"], c["num_experts_per_tok"], c["shared_intermediate_size"] = m.ExpertFFN, m.ExpertsPerToken, m.SharedExpertFFN
	}
	c["attention_bias"], c["position_embedding_type"] = m.Bias == BiasAttn, map[bool]string{true: "rope", false: "nope"}[m.Position == "rope"]
}

// granite4Tensors lists the layers: experts (MoE models), norms, the
// shared MLP, then the layer's mixer or attention, in registration order.
func granite4Tensors(m Model, l *tensorList) {
	d := m.dims()
	l.add("model.embed_tokens.weight", "embedding", d.v, d.h)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("model.layers.%d.", i)
		if m.Experts > 0 {
			graniteExperts(m, l, p+"block_sparse_moe.")
		}
		l.norm(p+"input_layernorm", false, d.h)
		l.norm(p+"post_attention_layernorm", false, d.h)
		l.linear(p+"shared_mlp.input_linear", "gate_up_proj", d.h, 2*d.f, false, Part{"gate_proj", d.f}, Part{"up_proj", d.f})
		l.linear(p+"shared_mlp.output_linear", "down_proj", d.f, d.h, false)
		if m.SSMLayer(i) {
			mamba2Mixer(m, l, p+"mamba.")
		} else {
			attnQKVO(m, l, p+"self_attn.")
		}
	}
	l.headSide()
	l.norm("model.norm", false, d.h)
	lmHead(m, l, "lm_head", "score")
}

// graniteExperts adds GraniteMoeHybridMoE's parameters under p:
// ParallelExperts' stacked input_linear [experts, 2·expert_ffn, hidden] and
// output_linear [experts, hidden, expert_ffn], then the router's layer.
func graniteExperts(m Model, l *tensorList, p string) {
	e, h, f := int64(m.Experts), int64(m.Hidden), int64(m.ExpertFFN)
	l.add(p+"input_linear.weight", "gate_up_proj", e, 2*f, h)
	l.ts[len(l.ts)-1].Stacked = m.Experts
	l.add(p+"output_linear.weight", "down_proj", e, h, f)
	l.ts[len(l.ts)-1].Stacked = m.Experts
	l.linear(p+"router.layer", "router", h, e, false)
}

// graniteMoeHybridModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const graniteMoeHybridModelType = "granitemoehybrid"
