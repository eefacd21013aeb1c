package vram

import (
	"fmt"

	"github.com/vramlab/vramlab/vram/internal/strictjson"
)

// MiMo-V2-Flash (transformers 5.23 models/mimo_v2_flash/
// modeling_mimo_v2_flash.py; configuration_mimo_v2_flash.py): a decoder
// whose layers attend over a sliding window (sliding_window, 129: the
// reference's window of 128 plus the query, l.131-133 of the config) or
// globally — layer 0 and every sixth by default (__post_init__ l.113-118)
// — with q and k heads of head_dim (192) and values of v_head_dim (128),
// a rotary embedding over int(head_dim · 0.334) of each head with a theta
// per layer kind (the rotary module's <kind>_inv_freq and
// <kind>_original_inv_freq buffers, l.66-86), and sliding layers of their
// own shape: twice the key/value heads and a learned sink logit per head
// (MiMoV2FlashAttention, l.337-361; eager attention only of transformers'
// own: _supports_sdpa and _supports_flex_attn are false, l.458-460). The
// MLP is dense in the layers mlp_layer_types names "dense" (the first, by
// default: l.120-121) and otherwise DeepSeek-V3's sigmoid router with an
// fp32 e_score_correction_bias over transformers 5's fused experts, with no
// shared experts (l.129-226). Each layer registers its attention and MLP
// before its norms (l.412-417). The checkpoint's multi-token-prediction
// layers (model.mtp.*) are stored and not built
// (_keys_to_ignore_on_load_unexpected, l.470). A key config.json leaves
// out takes the class's default (configuration l.78-110).
//
// Left out: the engine keeps one key/value width for every layer
// (kv_heads × head_dim for k and for v), so a serving plan's KV cache
// takes the global layers' four heads of 192 for k and v in every layer
// (the sliding layers keep eight heads, and values are 128 wide); the
// layer kinds, windows and counts are the model's.
func init() {
	register(&family{
		name: mimoV2FlashModelType, source: "transformers/models/mimo_v2_flash/modeling_mimo_v2_flash.py (transformers 5.23.0)",
		defaults:     Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Router: "sigmoid_topk_norm"},
		valueHeadDim: true,
		attention:    []string{"eager", "flash2", "flash3"},
		servingOnly:  "its modeling code is transformers 5's (grouped_mm experts, sliding layers with their own heads and sinks), which the training rules do not follow yet",
		only5:        true,
		recipe:       mimoRecipe,
		fromConfig:   mimoFromConfig,
		toConfig:     mimoToConfig,
		check:        mimoCheck,
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			l.add("model.embed_tokens.weight", "embedding", d.v, d.h)
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf("model.layers.%d.", i)
				mimoAttention(m, l, p+"self_attn.", m.LocalLayer(i))
				if m.IsMoELayer(i) {
					fusedExperts(m, l, p+"mlp.experts.")
					l.linear(p+"mlp.gate", "router", d.h, int64(m.Experts), false)
				} else {
					denseMLP(m, l, p, i)
				}
				l.norm(p+"input_layernorm", false, d.h)
				l.norm(p+"post_attention_layernorm", false, d.h)
			}
			l.headSide()
			l.norm("model.norm", false, d.h)
			lmHead(m, l, "lm_head", "score")
		},
		buffers:    mimoBuffers,
		storedOnly: mimoMTP,
		// MiMo-V2-Flash: the class's defaults (configuration l.78-127, "Per-
		// layer rope defaults matching the XiaomiMiMo/MiMo-V2-Flash
		// pretrained thetas"): 48 layers 4,096 wide, 64 heads over 4 key/
		// value heads (8 in the 39 sliding layers), 256 experts of 2,048 (8
		// a token) after one dense layer of 16,384 —
		// 308,778,768,832 parameters as transformers 5.23 builds it on the
		// meta device, the 309B the release states. The checkpoint's
		// multi-token-prediction layers are model.mtp.layers.{0,1,2}
		// (vLLM's mimo_v2_flash_mtp.py, _map_weight_name).
		presets: map[string]Preset{
			"mimo-v2-flash": {Model{Name: "XiaomiMiMo/MiMo-V2-Flash", Layers: 48, Hidden: 4096, Heads: 64, KVHeads: 4, HeadDim: 192, VHeadDim: 128, FFN: 16384, Vocab: 152576, MaxPosition: 131072,
				Experts: 256, ExpertsPerToken: 8, ExpertFFN: 2048, DenseLayers: 1, SlidingWindow: 129, GlobalEvery: 6, GlobalFirst: true, RotaryPct: 0.334, MTPLayers: 3},
				hf("XiaomiMiMo/MiMo-V2-Flash")},
		},
	})
}

// mimoRecipe is MiMo-V2-Flash's step at transformers 5.23: the rotary
// embedding's cos and sin per layer kind (l.72-85, 545-547), the sliding
// layers' doubled key/value heads and sinks (l.341, 360; every layer
// subtracts the row max, l.316-322), v scaled by attention_value_scale
// (l.379) and transformers 5's grouped_mm experts (l.158, 188).
func mimoRecipe(Model, libVersion) recipe {
	return recipe{localRotary: true, localKVDouble: true, localSinks: true, valueScale: true, groupedMM: true}
}

// mimoFromConfig reads a MiMoV2FlashConfig, the class's default for every
// key left out.
func mimoFromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden = c.optInt("num_hidden_layers", 48), c.optInt("hidden_size", 4096)
	m.Heads, m.KVHeads = c.optInt("num_attention_heads", 64), c.optInt("num_key_value_heads", 4)
	m.HeadDim, m.VHeadDim = c.optInt("head_dim", 192), c.optInt("v_head_dim", 128)
	m.FFN, m.Vocab = c.optInt("intermediate_size", 16384), c.optInt("vocab_size", 152576)
	m.MaxPosition = c.optInt("max_position_embeddings", 131072)
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
	if c.optBool("attention_bias", false) {
		m.Bias = BiasQKVOnly // q, k and v; o_proj has none (l.352-357)
	}
	m.Experts = c.optInt("num_local_experts", c.optInt("n_routed_experts", 256)) // attribute_map (l.75)
	m.ExpertsPerToken, m.ExpertFFN = c.optInt("num_experts_per_tok", 8), c.optInt("moe_intermediate_size", 2048)
	m.DenseLayers = mlpLayerTypes(c, m.Layers) // the same mlp_layer_types, the same default
	m.SlidingWindow = c.optInt("sliding_window", 129)
	if w := c.optIntOrNone("sliding_window_size", 0); w > 0 {
		m.SlidingWindow = w + 1 // l.132-133
	}
	mimoLayerTypes(c, m)
	m.RotaryPct = mimoRotary(c)
	m.MTPLayers = c.optInt("num_nextn_predict_layers", 0)
	if v := c.optString("hidden_act", "silu"); v != "silu" && c.err == nil {
		c.fail(fmt.Sprintf("hidden_act = %q: only the class's \"silu\" is modelled", v))
	}
	if !c.optBool("norm_topk_prob", true) && c.err == nil {
		c.fail("norm_topk_prob false: the sigmoid router without renormalization is not modelled")
	}
}

// mimoLayerTypes reads layer_types into GlobalEvery and GlobalFirst:
// global exactly at every period-th layer, and at layer 0 too where
// GlobalFirst; missing, the class's layer 0 and every sixth.
func mimoLayerTypes(c *hfReader, m *Model) {
	m.GlobalEvery, m.GlobalFirst = 6, true
	raw := c.optList("layer_types")
	if raw == nil || c.err != nil {
		return
	}
	if len(raw) != m.Layers {
		c.fail(fmt.Sprintf("layer_types lists %d layers for num_hidden_layers = %d", len(raw), m.Layers))
		return
	}
	global := make([]bool, len(raw))
	locals := 0
	for i, v := range raw {
		switch v {
		case "full_attention":
			global[i] = true
		case "sliding_attention":
			locals++
		default:
			c.fail(fmt.Sprintf("layer_types[%d] = %s: want full_attention or sliding_attention", i, strictjson.Kind(v)))
			return
		}
	}
	if locals == 0 {
		m.SlidingWindow, m.GlobalEvery, m.GlobalFirst = 0, 0, false
		return
	}
	for _, first := range []bool{false, true} {
		for period := 0; period <= len(raw); period++ {
			fits := true
			for i := range global {
				if global[i] != (period > 0 && (i+1)%period == 0 || first && i == 0) {
					fits = false
					break
				}
			}
			if fits {
				m.GlobalEvery, m.GlobalFirst = period, first
				return
			}
		}
	}
	c.fail("layer_types: the global layers are not every n-th layer (and perhaps layer 0); this pattern is not modelled")
}

// mimoRotary reads rope_parameters, one entry per layer kind (l.122-127):
// the rotated fraction, which must be one for both kinds (the thetas
// change no size). Missing, the class's 0.334.
func mimoRotary(c *hfReader) float64 {
	sub, ok := c.c["rope_parameters"].(map[string]any)
	if !ok {
		if c.c["rope_parameters"] != nil && c.err == nil {
			c.fail(fmt.Sprintf("rope_parameters must be an object of one entry per layer kind, got %s", strictjson.Kind(c.c["rope_parameters"])))
		}
		return 0.334
	}
	pct := -1.0
	for _, kind := range []string{"full_attention", "sliding_attention"} {
		e, ok := sub[kind].(map[string]any)
		if !ok {
			continue
		}
		r := hfReader{c: e}
		f := r.optFloat("partial_rotary_factor", 0.334) // compute_default_rope_parameters' default (l.106)
		if t := r.optString("rope_type", "default"); t != "default" && c.err == nil {
			c.fail(fmt.Sprintf("rope_parameters.%s.rope_type = %q: only \"default\" is modelled", kind, t))
		}
		if r.err != nil && c.err == nil {
			c.fail(fmt.Sprintf("rope_parameters.%s: %v", kind, r.err))
		}
		if pct >= 0 && f != pct && c.err == nil {
			c.fail("rope_parameters: the layer kinds' partial_rotary_factor differ; one for both is modelled")
		}
		pct = f
	}
	if pct < 0 {
		return 0.334
	}
	return pct
}

// mimoToConfig writes the keys MiMoV2FlashConfig reads.
func mimoToConfig(m Model, c map[string]any) {
	writeCommonConfig(m, c)
	c["v_head_dim"], c["attention_bias"] = m.VHeadDim, m.Bias == BiasQKVOnly
	c["n_routed_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"] = m.Experts, m.ExpertsPerToken, m.ExpertFFN
	c["n_group"], c["topk_group"], c["norm_topk_prob"], c["hidden_act"] = 1, 1, true, "silu"
	mlp := make([]string, m.Layers)
	for i := range mlp {
		mlp[i] = "sparse"
		if !m.IsMoELayer(i) {
			mlp[i] = "dense"
		}
	}
	c["mlp_layer_types"] = mlp
	writeLayerTypes(m, c, "sliding_attention")
	c["sliding_window"] = max(1, m.SlidingWindow)
	rope := map[string]any{}
	for _, kind := range []string{"full_attention", "sliding_attention"} {
		rope[kind] = map[string]any{"rope_type": "default", "rope_theta": map[string]float64{"full_attention": 5e6, "sliding_attention": 1e4}[kind], "partial_rotary_factor": m.RotaryPct}
	}
	c["rope_parameters"] = rope
}

// mimoCheck reports the first rule of MiMo-V2-Flash's layers m breaks.
func mimoCheck(m Model) error {
	switch {
	case m.Experts < 1 || m.ExpertsPerToken < 1:
		return fmt.Errorf("model: mimo_v2_flash needs experts and experts_per_token ≥ 1")
	case m.SharedExperts != 0 || m.MoEEvery > 1:
		return fmt.Errorf("model: mimo_v2_flash's MoE layers have no shared experts and follow its dense ones (no shared_experts or moe_every)")
	case m.VHeadDim < 1:
		return fmt.Errorf("model.v_head_dim must be ≥ 1: mimo_v2_flash's values have a width of their own")
	case m.Bias != BiasNone && m.Bias != BiasQKVOnly:
		return fmt.Errorf("model.bias %q: mimo_v2_flash's attention_bias puts biases on q, k and v (\"qkv_only\"), or none", m.Bias)
	case m.Position != "rope" || m.QKNorm != "" || m.AttentionChunk != 0 || m.NoRopeGlobal || m.NoRopeEvery != 0:
		return fmt.Errorf("model: mimo_v2_flash rotates q and k in every layer, with sliding windows and no q/k norm")
	case m.SlidingWindow > 0 && (2*m.KVHeads > m.Heads || m.Heads%(2*m.KVHeads) != 0):
		return fmt.Errorf("model.kv_heads = %d: mimo_v2_flash's sliding layers have twice as many (l.341), which must divide heads = %d", m.KVHeads, m.Heads)
	}
	return nil
}

// mimoAttention adds MiMoV2FlashAttention's parameters under p: a sliding
// layer's sinks first (its own parameter, l.360) and its doubled key/value
// heads (l.341), q and k of head_dim, v and o of v_head_dim (l.352-357).
func mimoAttention(m Model, l *tensorList, p string, sliding bool) {
	h, hd, vd := int64(m.Hidden), int64(m.HeadDim), int64(m.VHeadDim)
	heads, kv := int64(m.Heads), int64(m.KVHeads)
	if sliding {
		l.add(p+"sinks", "other", heads)
		kv *= 2
	}
	bias := m.Bias == BiasQKVOnly
	l.linear(p+"q_proj", "q_proj", h, heads*hd, bias)
	l.linear(p+"k_proj", "k_proj", h, kv*hd, bias)
	l.linear(p+"v_proj", "v_proj", h, kv*vd, bias)
	l.linear(p+"o_proj", "o_proj", heads*vd, h, false)
}

// mimoBuffers lists the routers' correction biases and the rotary
// embedding's buffers, one pair per layer kind present, in sorted kind
// order (sorted(set(config.layer_types)), l.72-85).
func mimoBuffers(m Model, b *bufferList) {
	for i := m.DenseLayers; i < m.Layers; i++ {
		b.add(fmt.Sprintf("model.layers.%d.mlp.gate.e_score_correction_bias", i), i, FP32, int64(m.Experts))
	}
	full, sliding := false, false
	for i := 0; i < m.Layers; i++ {
		full, sliding = full || !m.LocalLayer(i), sliding || m.LocalLayer(i)
	}
	rot := int64(float64(m.HeadDim) * m.RotaryPct)
	for _, k := range []struct {
		name string
		has  bool
	}{{"full_attention", full}, {"sliding_attention", sliding}} {
		if k.has {
			b.add("model.rotary_emb."+k.name+"_inv_freq", -1, FP32, (rot+1)/2)
			b.add("model.rotary_emb."+k.name+"_original_inv_freq", -1, FP32, (rot+1)/2)
		}
	}
}

// mimoMTP lists the checkpoint's multi-token-prediction layers as vLLM's
// loader names them (mimo_v2_flash_mtp.py: model.mtp.layers.N.*): enorm,
// hnorm and eh_proj [hidden, 2·hidden], a sliding layer's attention (its
// sink as attention_sink_bias, the name transformers renames to sinks,
// conversion_mapping.py l.2263), a dense MLP of intermediate_size, the
// block's two norms (the second pre_mlp_layernorm) and final_layernorm.
func mimoMTP(m Model, l *tensorList) {
	d := m.dims()
	for k := 0; k < m.MTPLayers; k++ {
		i := m.Layers + k
		p := fmt.Sprintf("model.mtp.layers.%d.", k)
		l.block(i)
		l.norm(p+"enorm", false, d.h)
		l.norm(p+"hnorm", false, d.h)
		l.add(p+"eh_proj.weight", "other", d.h, 2*d.h)
		start := len(l.ts)
		mimoAttention(m, l, p+"self_attn.", true)
		l.ts[start].Name = p + "self_attn.attention_sink_bias"
		mlpGated(m, l, p+"mlp.", d.f, -1)
		l.norm(p+"input_layernorm", false, d.h)
		l.norm(p+"pre_mlp_layernorm", false, d.h)
		l.norm(p+"final_layernorm", false, d.h)
	}
}

// mimoV2FlashModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const mimoV2FlashModelType = "mimo_v2_flash"
