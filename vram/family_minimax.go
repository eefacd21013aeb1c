package vram

import "fmt"

// MiniMax-Text-01 (transformers 5.23.0 models/minimax/modeling_minimax.py;
// configuration_minimax.py): a hybrid of MiniMax's lightning attention
// (model.lightning; lightning.go) and grouped-query softmax attention
// (MiniMaxAttention l.392-448: q, k, v and o without biases, a rotary
// embedding over the whole head), layer_types naming which is which, and
// Mixtral's mixture of experts in every layer: a softmax router over fp32
// logits, top-k renormalized (MiniMaxTopKRouter l.451-466, its weight
// registered as mlp.gate.weight), transformers 5's fused experts of
// intermediate_size each (MiniMaxExperts l.470-479). The decoder layer
// registers self_attn first — built as softmax attention, then replaced
// in place by the lightning one on linear_attention layers (l.533, 542-547)
// — then its two norms and the MoE (l.534-541); it takes the residual
// after each norm and scales the sums by the config's α and β factors,
// which add no parameters (l.561-576). The rotary embedding computes
// inv_freq over all of head_dim (compute_default_rope_parameters
// l.302-307, no partial factor): the release's rotary_dim is not a
// MiniMaxConfig field. MiniMaxForCausalLM ties lm_head to the embedding
// when tie_word_embeddings is set (l.777).
func init() {
	register(&family{
		name: minimaxModelType, source: "transformers/models/minimax/modeling_minimax.py (transformers 5.23.0)",
		defaults:    Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Router: "softmax_topk_norm"},
		lightning:   true,
		servingOnly: "its modeling code is transformers 5's (grouped_mm experts, lightning attention with MiniMax's own cache); of it the training step is traced at 5.23, not transformers' generate",
		has4:        miniMaxHas4,
		// Mixtral's 5.x MoE block (MiniMaxTopKRouter l.451-466 is
		// MixtralTopKRouter's: the routing weights stay fp32) with the
		// experts through grouped_mm (@use_experts_implementation, l.469;
		// moe_grouped_mm.go).
		recipe:     func(Model, libVersion) recipe { return recipe{groupedMM: true} },
		fromConfig: miniMaxFromConfig,
		toConfig:   miniMaxToConfig,
		check:      miniMaxCheck,
		tensors:    miniMaxTensors,
		block: func(r *resolved, layer int) BlockActivations {
			switch {
			case !r.servingEngine:
				return miniMaxBlock(r, layer)
			case r.m.LightningLayer(layer):
				return lightningBlock(r, layer)
			}
			return decoderBlock(r, layer)
		},
		buffers: func(m Model, b *bufferList) {
			for i := 0; i < m.Layers; i++ {
				if m.LightningLayer(i) {
					lightningBuffers(m, b, fmt.Sprintf("model.layers.%d.self_attn.", i), i)
				}
			}
			rotaryBuffers5(m, b, "model.")
		},
		// No storedOnly: the lightning layers' decay buffers are persistent,
		// but _init_weights recomputes them (l.608-614) for a checkpoint that
		// does not store them, as MiniMax's own release computes them at
		// run time; the engine counts them as buffers, not stored bytes.
		//
		// MiniMaxAI/MiniMax-Text-01 (its model card, MiniMax-AI/MiniMax-01's
		// MiniMax-Text-01-Model-Card.md: 456B parameters, 80 layers, a softmax
		// attention after every 7 lightning ones, 64 heads of 128, 32 experts
		// of 9,216 with 2 a token, 6,144 wide, 200,064 tokens): MiniMaxConfig's
		// defaults are not this checkpoint's (they are a 32-layer, 4,096-wide
		// Mixtral with alternating layers, l.86-126), so the card's shape is
		// taken, with what the release's config.json adds (as copies of it in
		// public code give it: 8 key-value heads, 10,240,000 positions,
		// attn_type_list [0 ×7, 1] × 10) and the class's block_size 256. The
		// release's config.json is remote code's (model_type MiniMaxText01,
		// attn_type_list); transformers reads the converted
		// MiniMaxAI/MiniMax-Text-01-hf (the class's docstring checkpoint,
		// l.28), whose layer_types carry the same kinds. As transformers 5.23
		// builds it on the meta device: 456,089,655,296 parameters.
		presets: map[string]Preset{
			"minimax-text-01": {Model{Name: "MiniMaxAI/MiniMax-Text-01", Layers: 80, Hidden: 6144, Heads: 64, KVHeads: 8, HeadDim: 128, FFN: 9216, Vocab: 200064, MaxPosition: 10240000,
				Experts: 32, ExpertsPerToken: 2, ExpertFFN: 9216, RotaryPct: 1, Lightning: &Lightning{BlockSize: 256, Attention: miniMaxEvery(80, 8)}}, hf("MiniMaxAI/MiniMax-Text-01")},
		},
	})
}

// miniMaxEvery is every n-th layer of layers, from the n-th: MiniMax-01's
// softmax attention after each n−1 lightning layers.
func miniMaxEvery(layers, n int) []int {
	var out []int
	for i := n - 1; i < layers; i += n {
		out = append(out, i)
	}
	return out
}

// miniMaxFromConfig reads a MiniMaxConfig: a key config.json leaves out
// takes the class's default (configuration_minimax.py:86-117); num_experts
// is num_local_experts' checkpoint name (attribute_map, l.84), which wins.
func miniMaxFromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden = c.optInt("num_hidden_layers", 32), c.optInt("hidden_size", 4096)
	m.Heads = c.optInt("num_attention_heads", 32)
	// num_key_value_heads is an int (l.91): the strict dataclass refuses
	// null before __post_init__'s None branch (l.120-121) could run.
	// head_dim None is hidden_size // num_attention_heads (the modules'
	// getattr(config, "head_dim", None) or …, l.129, 399).
	if v, ok := c.c["num_key_value_heads"]; ok && v == nil {
		c.fail("num_key_value_heads null: MiniMaxConfig declares it an int (default 8), and transformers refuses None")
	}
	m.KVHeads = c.optInt("num_key_value_heads", 8)
	m.HeadDim = c.optIntOrNone("head_dim", 0)
	m.ExpertFFN, m.Vocab = c.optInt("intermediate_size", 14336), c.optInt("vocab_size", 32000)
	m.FFN = m.ExpertFFN
	m.MaxPosition = c.optInt("max_position_embeddings", 4096*32)
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
	m.Experts = c.optInt("num_experts", c.optInt("num_local_experts", 8))
	m.ExpertsPerToken = c.optInt("num_experts_per_tok", 2)
	m.SlidingWindow = c.optIntOrNone("sliding_window", 0)
	m.RotaryPct = 1
	if act := c.optString("hidden_act", "silu"); act != "silu" && c.err == nil {
		c.fail(fmt.Sprintf("hidden_act %q: minimax's experts and lightning attention are modelled with silu (the class's default)", act))
	}
	d := Lightning{BlockSize: c.optInt("block_size", 256)}
	if full, ok := c.layerKinds(m.Layers, "full_attention", "linear_attention"); ok {
		d.Attention = full
	} else {
		// __post_init__ (l.123-126): softmax attention where (i + 1) % 2 is
		// odd, the even layers.
		for i := 0; i < min(m.Layers, maxLayers); i += 2 {
			d.Attention = append(d.Attention, i)
		}
		if c.optList("attn_type_list") != nil {
			m.note("config.json", "attn_type_list: MiniMaxConfig reads layer_types only, so transformers builds its default kinds (softmax attention at the even layers, lightning at the odd) whatever attn_type_list says; the converted -hf releases spell the kinds as layer_types")
		}
	}
	m.Lightning = &d
}

// miniMaxToConfig writes a MiniMaxConfig: Mixtral's keys, block_size and
// the layer kinds spelled out.
func miniMaxToConfig(m Model, c map[string]any) {
	writeCommonConfig(m, c)
	c["intermediate_size"], c["num_local_experts"], c["num_experts_per_tok"] = m.ExpertFFN, m.Experts, m.ExpertsPerToken
	c["hidden_act"] = "silu"
	if m.SlidingWindow > 0 {
		c["sliding_window"] = m.SlidingWindow
	}
	if d := m.Lightning; d != nil {
		c["block_size"] = d.BlockSize
		writeLayerKinds(c, m.Layers, func(i int) bool { return !m.LightningLayer(i) }, "full_attention", "linear_attention")
	}
}

// miniMaxCheck is the family's rules: the lightning layers' layout, the
// mixture of experts in every layer (no shared experts, no dense layers:
// MiniMaxSparseMoeBlock, l.541), no biases or q/k norms, the rotary
// embedding over the whole head.
func miniMaxCheck(m Model) error {
	switch {
	case m.Lightning == nil:
		return fmt.Errorf("model: minimax needs model.lightning (its lightning-attention layers) with attention_layers")
	case m.Experts < 1 || m.ExpertsPerToken < 1:
		return fmt.Errorf("model: minimax needs experts and experts_per_token ≥ 1 (MiniMaxSparseMoeBlock in every layer)")
	case m.SharedExperts != 0 || m.DenseLayers != 0 || m.MoEEvery > 1:
		return fmt.Errorf("model: minimax has a mixture of experts in every layer and no shared experts")
	case m.ExpertFFN != m.FFN:
		return fmt.Errorf("model.expert_ffn = %d: minimax's experts are intermediate_size (ffn = %d) wide", m.ExpertFFN, m.FFN)
	case m.Bias != BiasNone || m.QKNorm != "":
		return fmt.Errorf("model: minimax's projections have no biases and its attention no q/k norms")
	case m.RotaryPct != 1:
		return fmt.Errorf("model.rotary_pct = %v: minimax's rotary embedding turns all of head_dim (transformers 5.23 reads no partial factor for it)", m.RotaryPct)
	}
	return nil
}

// miniMaxTensors lists a MiniMaxForCausalLM's parameters in registration
// order: the embedding; each layer's attention (lightning or softmax),
// two norms and MoE (the router's weight, then the fused experts:
// MiniMaxSparseMoeBlock l.514-515); the final norm; lm_head unless tied.
func miniMaxTensors(m Model, l *tensorList) {
	d := m.dims()
	l.add("model.embed_tokens.weight", "embedding", d.v, d.h)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("model.layers.%d.", i)
		if m.LightningLayer(i) {
			lightningTensors(m, l, p+"self_attn.")
		} else {
			attnQKVO(m, l, p+"self_attn.")
		}
		l.norm(p+"input_layernorm", false, d.h)
		l.norm(p+"post_attention_layernorm", false, d.h)
		l.linear(p+"mlp.gate", "router", d.h, int64(m.Experts), false)
		fusedExperts(m, l, p+"mlp.experts.")
	}
	l.headSide()
	l.norm("model.norm", false, d.h)
	lmHead(m, l, "lm_head", "score")
}

// minimaxModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const minimaxModelType = "minimax"

// miniMaxHas4 is what of transformers 4.57's MiniMax the engine does not
// model: its experts are a ModuleList of Mixtral MLPs (w1, w2, w3), other
// parameters' names and another loop than the fused experts the engine
// lists.
const miniMaxHas4 = "transformers 4.57 has MiniMax with a ModuleList of experts (4.57.6 models/minimax/modeling_minimax.py:441), other parameter names and loop"

// miniMaxBlock is a MiniMaxDecoderLayer as transformers 5.23 trains it
// (l.551-578): the residual is input_layernorm's output, not the layer's
// input (l.561-562), and each sum scales both terms by the config's α and
// β, Python numbers whose products are new tensors saving nothing
// (l.572, 576); the attention is lightning (lightning5.go) or
// grouped-query softmax attention by the layer's kind, the MLP the MoE.
func miniMaxBlock(r *resolved, layer int) BlockActivations {
	p := r.blockPlan(layer)
	b := newActBuilder(r, int64(r.MicroBatch)*int64(r.SeqLen))
	d := r.decoderDims(p, layer)
	h := int64(r.m.Hidden)
	x := b.external("input", b.size(h, p.resid), p.resid)
	n := b.norm(p, "input_layernorm", "rmsnorm", x, h)
	n.residual = true // the residual stream is the norm's output
	var a *actT
	if r.m.LightningLayer(layer) {
		a = b.lightningAttention(p, n)
	} else {
		a = b.attention(p, d, n)
	}
	x1 := b.miniMaxResidual(p, "attn_residual", n, a, h)
	n2 := b.norm(p, "post_attention_layernorm", "rmsnorm", x1, h)
	n2.residual = true
	out := b.miniMaxResidual(p, "mlp_residual", n2, b.mlp(p, d, n2), h)
	out.keepAlive = true
	if layer == 0 && r.inputNoGrad() {
		b.withoutGrad(x)
	}
	return b.summarize(x)
}

// miniMaxResidual is residual · α + y · β (l.572, 576).
func (b *actBuilder) miniMaxResidual(p blockPlan, name string, residual, y *actT, h int64) *actT {
	ra := b.op(name+".alpha", b.size(h, residual.dtype), residual.dtype, list(residual))
	yb := b.op(name+".beta", b.size(h, y.dtype), y.dtype, list(y))
	return b.residualAdd(p, name, h, ra, yb)
}
