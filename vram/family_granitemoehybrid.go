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
// H-Tiny and H-Small) add GraniteMoE's ParallelExperts, which is not
// modelled yet.
func init() {
	register(&family{
		name: "granitemoehybrid", source: "transformers/models/granitemoehybrid/modeling_granitemoehybrid.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "none", Bias: BiasNone},
		ssm:      true,
		fromConfig: func(c *hfReader, m *Model) {
			c.common(m)
			m.FFN = c.int("shared_intermediate_size")
			m.HeadDim = 0 // GraniteMoeHybridAttention: hidden / heads
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if c.optBool("attention_bias", false) {
				m.Bias = BiasAttn
			}
			if c.optString("position_embedding_type", "") == "rope" {
				m.Position = "rope"
			}
			if n := c.optInt("num_local_experts", 8); n > 0 && c.err == nil {
				c.fail(fmt.Sprintf("num_local_experts = %d: GraniteMoeHybrid's experts (ParallelExperts) are not modelled yet; the dense models (num_local_experts 0) are", n))
			}
			m.SSM = c.hybridSSM(m.Hidden, m.Layers, "")
			m.SSM.Attention = c.attentionLayerTypes(m.Layers)
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			delete(c, "head_dim")
			writeHybridSSM(m, c)
			types := make([]string, m.Layers)
			for i := range types {
				types[i] = "attention"
				if m.SSMLayer(i) {
					types[i] = "mamba"
				}
			}
			c["layer_types"], c["shared_intermediate_size"], c["num_local_experts"] = types, m.FFN, 0
			c["attention_bias"], c["position_embedding_type"] = m.Bias == BiasAttn, map[bool]string{true: "rope", false: "nope"}[m.Position == "rope"]
		},
		check: func(m Model) error {
			switch {
			case m.SSM == nil:
				return fmt.Errorf("model: granitemoehybrid needs model.ssm (its Mamba-2 mixers)")
			case m.Experts > 0:
				return fmt.Errorf("model.experts: GraniteMoeHybrid's experts (ParallelExperts) are not modelled yet")
			case m.Bias != BiasNone && m.Bias != BiasAttn:
				return fmt.Errorf("model.bias %q: granitemoehybrid has attention biases (attention_bias) or none", m.Bias)
			case m.Position != "rope" && m.Position != "none":
				return fmt.Errorf("model.position %q: granitemoehybrid's attention has rope or no positions", m.Position)
			}
			return nil
		},
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			l.add("model.embed_tokens.weight", "embedding", d.v, d.h)
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf("model.layers.%d.", i)
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
		},
		buffers: func(m Model, b *bufferList) {
			if m.Position == "rope" {
				rotaryBuffer(m, b, "model.")
			}
		},
		// GraniteMoeHybridModel.forward returns no cache unless one is
		// passed in; the shared MLP is one gate|up matmul.
		recipe: func(Model, libVersion) recipe {
			return recipe{noTrainingCache: true, fusedGateUp: true, embedScale: true, branchScale: true, logitsScale: true}
		},
		// The dense Granite 4.0-H models (copies of their config.json,
		// IBM's GGUF metadata and model card): 40 layers with attention at
		// 5, 15, 25 and 35 (H-Micro 2,048 wide, 32 heads over 8, a shared
		// MLP of 8,192 as the card's table gives it; H-1B 1,536 wide, 12
		// over 4, 4,096), and H-350M's 32 layers 768 wide with attention at
		// 10, 13, 17 and 27; NoPE, tied embeddings, 100,352 vocabulary rows.
		presets: map[string]Preset{
			"granite-4.0-h-micro": {Model{Name: "ibm-granite/granite-4.0-h-micro", Layers: 40, Hidden: 2048, Heads: 32, KVHeads: 8, FFN: 8192, Vocab: 100352, MaxPosition: 131072, TiedEmbeddings: true,
				SSM: &SSM{Heads: 64, HeadDim: 64, State: 128, Groups: 1, ConvKernel: 4, Chunk: 256, Attention: []int{5, 15, 25, 35}}}, hf("ibm-granite/granite-4.0-h-micro")},
			"granite-4.0-h-1b": {Model{Name: "ibm-granite/granite-4.0-h-1b", Layers: 40, Hidden: 1536, Heads: 12, KVHeads: 4, FFN: 4096, Vocab: 100352, MaxPosition: 131072, TiedEmbeddings: true,
				SSM: &SSM{Heads: 48, HeadDim: 64, State: 128, Groups: 1, ConvKernel: 4, Chunk: 256, Attention: []int{5, 15, 25, 35}}}, hf("ibm-granite/granite-4.0-h-1b")},
			"granite-4.0-h-350m": {Model{Name: "ibm-granite/granite-4.0-h-350m", Layers: 32, Hidden: 768, Heads: 12, KVHeads: 4, FFN: 2048, Vocab: 100352, MaxPosition: 32768, TiedEmbeddings: true,
				SSM: &SSM{Heads: 48, HeadDim: 32, State: 128, Groups: 1, ConvKernel: 4, Chunk: 256, Attention: []int{10, 13, 17, 27}}}, hf("ibm-granite/granite-4.0-h-350m")},
		},
	})
}

// attentionLayerTypes reads config.layer_types as GraniteMoeHybridConfig
// spells it ("mamba" or "attention" per layer; missing: all mamba) into
// the attention layers' indices.
func (r *hfReader) attentionLayerTypes(layers int) []int {
	raw := r.optList("layer_types")
	if raw == nil || r.err != nil {
		return nil
	}
	if len(raw) != layers {
		r.fail(fmt.Sprintf("layer_types lists %d layers for num_hidden_layers = %d", len(raw), layers))
		return nil
	}
	var out []int
	for i, v := range raw {
		switch v {
		case "attention":
			out = append(out, i)
		case "mamba":
		default:
			r.fail(fmt.Sprintf("layer_types[%d] = %s: want \"mamba\" or \"attention\"", i, jsonKind(v)))
			return nil
		}
	}
	return out
}
