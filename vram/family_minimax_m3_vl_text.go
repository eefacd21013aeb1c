package vram

import "fmt"

// MiniMax-M3's language model (transformers 5.23.0
// models/minimax_m3_vl/modeling_minimax_m3_vl.py, MiniMaxM3VLTextModel
// l.704-719; its config is the wrapper's text_config,
// MiniMaxM3VLTextConfig, model_type minimax_m3_vl_text): grouped-query
// attention with per-head q and k norms (l.410-415) and, on the layers
// layer_types calls "minimax_m3_sparse", block-sparse attention's indexer
// (model.block_sparse; blocksparse.go); per layer a dense MLP or a mixture
// of experts as mlp_layer_types says (l.633-637). The MoE is a sigmoid
// router whose top-k reads the scores plus an fp32
// e_score_correction_bias buffer, renormalized and scaled by
// routed_scaling_factor (MiniMaxM3VLTopKRouter l.221-239), transformers 5's
// fused experts of intermediate_size and one shared expert of
// shared_intermediate_size (l.242-262); the dense MLP and the shared
// expert fuse gate and up in one gate_up_proj (l.162-177). Every MLP runs
// GPT-OSS's clamped SwiGLU (swiglu_alpha, swiglu_limit: no parameters);
// the config forces hidden_act to silu whatever the checkpoint says
// (l.124-126). Every norm is Gemma's (1 + weight) in fp32 (l.140-159). The
// rotary embedding rotates int(head_dim × partial_rotary_factor) of each
// head (l.295-303): rotary_dim is a config field the module never reads,
// so without a partial factor in rope_parameters the whole head turns. A
// decoder layer registers self_attn, mlp, then its two norms (l.632-639).
// The checkpoint's mtp.* layers are not built
// (_keys_to_ignore_on_load_unexpected, l.686) and no config key sizes
// them: the engine does not count them. transformers builds it alone as
// MiniMaxM3VLForCausalLM (l.856-875: the text model and an lm_head), which
// AutoModelForCausalLM maps minimax_m3_vl_text to (models/auto/
// modeling_auto.py:883), as well as inside the wrapper (minimax_m3_vl).
func init() {
	register(&family{
		name: minimaxM3VLTextModelType, source: "transformers/models/minimax_m3_vl/modeling_minimax_m3_vl.py (transformers 5.23.0)",
		defaults:    Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Router: "sigmoid_topk_norm", QKNorm: "head"},
		blockSparse: true,
		servingOnly: m3ServingOnly,
		only5:       true,
		recipe:      m3TextRecipe,
		fromConfig:  m3TextFromConfig,
		toConfig:    m3TextToConfig,
		check:       m3TextCheck,
		tensors:     m3TextTensors,
		buffers: func(m Model, b *bufferList) {
			// The routers' bias (nn.Buffer, persistent, l.228), then the
			// rotary embedding's two (l.279-280).
			for i := m.DenseLayers; i < m.Layers; i++ {
				b.add(fmt.Sprintf("model.layers.%d.mlp.gate.e_score_correction_bias", i), i, FP32, int64(m.Experts))
			}
			rotaryBuffers5(m, b, "model.")
		},
		// The routers' e_score_correction_bias, which the checkpoint stores
		// (conversion_mapping.py:792-795 renames its
		// block_sparse_moe.e_score_correction_bias).
		storedOnly: func(m Model, l *tensorList) { routerBiases(m, l, m.Layers) },
	})
}

// m3TextRecipe is how transformers 5.23 runs the language model's
// training step, as far as it is modelled (the block-sparse layers'
// indexer and block mask are not: resolveBlockSparse refuses them): the
// routed experts through grouped_mm (@use_experts_implementation, l.180),
// their _apply_gate gpt-oss's clamped SwiGLU on the chunks of the gate|up
// output (l.212-218: "same as GPT OSS, but the weights are not
// interleaved"; chunks or strided halves, both views of one output, so
// the same ops save the same bytes), the dense MLP and the shared expert
// the same gate on the chunks of one gate_up_proj (l.171-177), the shared
// expert before the router (l.253-255). Measured on the fp32 eager traces
// with the indexer left out: the clamped gate of the dense MLPs moves the
// peak from -4.62 % to -0.78 %.
func m3TextRecipe(Model, libVersion) recipe {
	return recipe{groupedMM: true, groupedGate: gptOSSGroupedGate, mlpGate: gptOSSGroupedGate, fusedGateUp: true, sharedFirst: true}
}

// m3ServingOnly is why the MiniMax-M3 families plan serving only.
const m3ServingOnly = "its modeling code is transformers 5's (grouped_mm experts, block-sparse attention, a vision tower of its own), which the training rules do not follow yet"

// m3TextFromConfig reads a MiniMaxM3VLTextConfig, each key missing taking
// the class's default (configuration_minimax_m3_vl.py:81-118; num_experts
// is num_local_experts' checkpoint name, attribute_map l.77-79).
func m3TextFromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden = c.optInt("num_hidden_layers", 60), c.optInt("hidden_size", 6144)
	m.Heads, m.KVHeads = c.optInt("num_attention_heads", 64), c.optInt("num_key_value_heads", 4)
	m.HeadDim, m.Vocab = c.optInt("head_dim", 128), c.optInt("vocab_size", 200064)
	m.MaxPosition = c.optInt("max_position_embeddings", 524288)
	// The wrapper's tie_word_embeddings decides (MiniMaxM3VLConfig
	// l.208-209 takes this one where it is set); read for a text config
	// alone.
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
	m.Experts = c.optInt("num_experts", c.optInt("num_local_experts", 128))
	m.ExpertsPerToken, m.ExpertFFN = c.optInt("num_experts_per_tok", 4), c.optInt("intermediate_size", 3072)
	m.FFN = c.optInt("dense_intermediate_size", 12288)
	m.SharedExperts, m.SharedExpertFFN = 1, c.optInt("shared_intermediate_size", 3072)
	if m.SharedExpertFFN < 1 && c.err == nil {
		// MiniMaxM3VLSparseMoeBlock always builds it (l.248); 0 makes empty
		// matrices, which the engine does not model.
		c.fail(fmt.Sprintf("shared_intermediate_size = %d: the one shared expert in every MoE layer is modelled ≥ 1 wide", m.SharedExpertFFN))
	}
	m.RotaryPct = m3RotaryPct(c)
	m.DenseLayers = m3DenseLayers(c, m.Layers)
	m.BlockSparse = m3BlockSparse(c, m.Layers)
}

// m3RotaryPct is the rotated share of a head: rope_parameters' (or the
// legacy rope_scaling's) partial_rotary_factor, else the config's own key
// (which standardization moves there), else 1.
func m3RotaryPct(c *hfReader) float64 {
	for _, key := range []string{"rope_parameters", "rope_scaling"} {
		if rp, ok := c.c[key].(map[string]any); ok {
			if f, ok := rp["partial_rotary_factor"].(float64); ok {
				return f
			}
		}
	}
	return c.optFloat("partial_rotary_factor", 1)
}

// m3DenseLayers reads which layers keep a dense MLP (__post_init__
// l.148-152): mlp_layer_types, else the checkpoint's moe_layer_freq
// (truthy: MoE), else none. The engine models the dense layers first.
func m3DenseLayers(c *hfReader, layers int) int {
	if c.optList("mlp_layer_types") != nil {
		return mlpLayerTypes(c, layers)
	}
	freq := c.optList("moe_layer_freq")
	if freq == nil {
		return 0
	}
	if len(freq) != layers {
		c.fail(fmt.Sprintf("moe_layer_freq lists %d layers for num_hidden_layers = %d", len(freq), layers))
		return 0
	}
	dense := 0
	for i, v := range freq {
		switch {
		case !m3Truthy(v) && i == dense:
			dense++
		case !m3Truthy(v):
			c.fail(fmt.Sprintf("moe_layer_freq[%d] = %v: the engine models the dense layers first, then the MoE ones", i, v))
			return 0
		}
	}
	return dense
}

// m3Truthy is Python's truth of a JSON number or boolean (a per-layer
// flag of the checkpoint's moe_layer_freq or sparse_attention_freq).
func m3Truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case float64:
		return x != 0
	}
	return v != nil
}

// m3BlockSparse reads the block-sparse layers and their indexer
// (__post_init__ l.121-146): layer_types ("full_attention" or
// "minimax_m3_sparse"), else sparse_attention_config's
// sparse_attention_freq, else none; the index_* keys, which
// sparse_attention_config's legacy names override. Nil without a sparse
// layer.
func m3BlockSparse(c *hfReader, layers int) *BlockSparse {
	sc, _ := c.sub("sparse_attention_config")
	sub := hfReader{c: sc}
	s := BlockSparse{Heads: sub.optInt("sparse_num_index_heads", c.optInt("index_n_heads", 4)),
		HeadDim:    sub.optInt("sparse_index_dim", c.optInt("index_head_dim", 128)),
		BlockSize:  sub.optInt("sparse_block_size", c.optInt("index_block_size", 0)),
		TopKBlocks: sub.optInt("sparse_topk_blocks", c.optInt("index_topk_blocks", 0))}
	if l, ok := c.layerKinds(layers, "minimax_m3_sparse", "full_attention"); ok {
		s.Layers = l
	} else if freq := sub.optList("sparse_attention_freq"); freq != nil {
		if len(freq) != layers {
			sub.fail(fmt.Sprintf("sparse_attention_freq lists %d layers for num_hidden_layers = %d", len(freq), layers))
		}
		for i, v := range freq {
			if m3Truthy(v) && i < layers {
				s.Layers = append(s.Layers, i)
			}
		}
	}
	if sub.err != nil && c.err == nil {
		c.fail("sparse_attention_config: " + sub.err.Error())
	}
	if len(s.Layers) == 0 {
		return nil
	}
	return &s
}

// m3TextToConfig writes a MiniMaxM3VLTextConfig: the layer kinds and MLP
// kinds spelled out, the rotated share in rope_parameters.
func m3TextToConfig(m Model, c map[string]any) {
	writeCommonConfig(m, c)
	c["intermediate_size"], c["dense_intermediate_size"] = m.ExpertFFN, m.FFN
	c["num_local_experts"], c["num_experts_per_tok"], c["shared_intermediate_size"] = m.Experts, m.ExpertsPerToken, m.SharedExpertFFN
	c["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 5000000.0, "partial_rotary_factor": m.RotaryPct}
	mlp := make([]string, m.Layers)
	for i := range mlp {
		mlp[i] = "sparse"
		if !m.IsMoELayer(i) {
			mlp[i] = "dense"
		}
	}
	c["mlp_layer_types"] = mlp
	writeLayerKinds(c, m.Layers, m.BlockSparseLayer, "minimax_m3_sparse", "full_attention")
	if s := m.BlockSparse; s != nil {
		c["index_n_heads"], c["index_head_dim"] = s.Heads, s.HeadDim
		for key, v := range map[string]int{"index_block_size": s.BlockSize, "index_topk_blocks": s.TopKBlocks} {
			if v > 0 {
				c[key] = v
			}
		}
	}
	if m.Vocab <= 200034 {
		c["bos_token_id"], c["eos_token_id"] = nil, nil // the class's ids would be outside the vocabulary
	}
}

// m3TextCheck is the language model's rules: the MoE past the dense layers
// with its one shared expert, per-head q/k norms, no biases.
func m3TextCheck(m Model) error {
	switch {
	case m.Experts < 1 || m.ExpertsPerToken < 1:
		return fmt.Errorf("model: %s needs experts and experts_per_token ≥ 1 (MiniMaxM3VLSparseMoeBlock past the dense layers)", m.Family)
	case m.SharedExperts != 1 || m.SharedExpertFFN < 1:
		return fmt.Errorf("model: %s's MoE has one shared expert (shared_experts = 1, shared_expert_ffn = shared_intermediate_size ≥ 1), not %d of %d", m.Family, m.SharedExperts, m.SharedExpertFFN)
	case m.MoEEvery > 1:
		return fmt.Errorf("model.moe_every = %d: %s's MoE layers are every layer past the dense ones", m.MoEEvery, m.Family)
	case m.Bias != BiasNone || m.MLP != "swiglu":
		return fmt.Errorf("model: %s's projections have no biases and its MLPs are gated (a clamped SwiGLU)", m.Family)
	case m.RotaryPct <= 0 || m.RotaryPct > 1 || int(float64(m.HeadDim)*m.RotaryPct) < 2:
		return fmt.Errorf("model.rotary_pct = %v: partial_rotary_factor must rotate at least two of head_dim = %d's dimensions, at most all", m.RotaryPct, m.HeadDim)
	}
	return requireQKNorm("head")(m)
}

// m3TextTensors lists the language model's parameters in registration
// order: the embedding; each layer's attention (q, k, v, o, the per-head
// q and k norms, the indexer on block-sparse layers: l.410-418), MLP
// (MiniMaxM3VLSparseMoeBlock's router, fused experts and shared expert,
// l.245-248, or the dense MLP) and two norms; the final norm; lm_head.
func m3TextTensors(m Model, l *tensorList) {
	d := m.dims()
	l.add("model.embed_tokens.weight", "embedding", d.v, d.h)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("model.layers.%d.", i)
		attnQKVO(m, l, p+"self_attn.")
		qkNormTensors(m, l, p+"self_attn.")
		if m.BlockSparseLayer(i) {
			blockSparseIndexerTensors(m, l, p+"self_attn.indexer.")
		}
		if m.IsMoELayer(i) {
			l.linear(p+"mlp.gate", "router", d.h, int64(m.Experts), false)
			fusedExperts(m, l, p+"mlp.experts.")
			mlpFusedGateUp(m, l, p+"mlp.shared_experts.", int64(m.SharedExpertFFN), -1)
		} else {
			mlpFusedGateUp(m, l, p+"mlp.", int64(m.FFN), -1)
		}
		l.norm(p+"input_layernorm", false, d.h)
		l.norm(p+"post_attention_layernorm", false, d.h)
	}
	l.headSide()
	l.norm("model.norm", false, d.h)
	lmHead(m, l, "lm_head", "score")
}

const minimaxM3VLTextModelType = "minimax_m3_vl_text"
