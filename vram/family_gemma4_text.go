package vram

import (
	"fmt"
	"strconv"
	"strings"
)

// Gemma 4's language model (transformers 5.23.0
// models/gemma4/modeling_gemma4.py, Gemma4TextModel l.1544-1600 and
// Gemma4ForCausalLM l.1853-1868; its config is Gemma4TextConfig,
// configuration_gemma4.py l.85-265, model_type gemma4_text). Gemma 3's
// sandwich-norm decoder (Gemma4TextDecoderLayer l.1339-1425: input,
// post-attention, pre- and post-feedforward RMSNorms, each (x · weight) in
// fp32, l.204-222) with five sliding-window layers to each global one
// (layer_types, else that pattern with the last layer forced global,
// l.189-200) and:
//   - global layers shaped apart (__post_init__ l.209-222): heads of
//     global_head_dim (512), and with attention_k_eq_v the
//     num_global_key_value_heads key/value heads and no v_proj, the keys'
//     projection serving as the values (Gemma4TextAttention l.1153-1198);
//     a per_layer_config, which transformers writes when it saves a config,
//     replaces both keys;
//   - q_norm and k_norm per head, and a weightless v_norm (l.1177-1182);
//   - a rotary embedding per layer kind, each with transformers 5's two
//     buffers of its layers' head width / 2 (l.1078-1106; the global
//     layers' "proportional" RoPE pads its unrotated angles to the same
//     size, modeling_rope_utils.py l.247-254);
//   - per-layer embeddings where hidden_size_per_layer_input is set (256 by
//     default; 0 in the large releases): a second scaled embedding of
//     num_hidden_layers · that width, a projection of the embeddings to it
//     and its norm (l.1570-1589), and in each layer a gate, a projection
//     back and a norm (l.1353-1358);
//   - with enable_moe_block, beside every layer's dense MLP a router
//     (a weightless norm, a per-channel scale, the projection, a
//     per-expert scale: l.1302-1313), transformers 5's fused experts
//     (l.1263-1272) and three more norms (l.1360-1366); the engine counts
//     the dense MLP, which runs on every token, as the layer's one shared
//     expert;
//   - a learned layer_scalar buffer in each layer (l.1351), which the
//     checkpoint stores;
//   - the last num_kv_shared_layers layers (the small releases') reuse the
//     keys and values of the last earlier layer of their kind and build no
//     k_proj, v_proj or k_norm (kvshare5.go, Gemma 3n's rule); with
//     use_double_wide_mlp their MLPs are twice intermediate_size wide
//     (Gemma4TextMLP l.1062-1067, Model.LayerFFN). transformers skips
//     their k/v projections and norms in a checkpoint
//     (_keys_to_ignore_on_load_unexpected, l.1591-1597); whether the
//     released checkpoints store them is not known here, so none are
//     counted as stored.
//
// The embeddings are scaled by sqrt(hidden) through a registered
// embed_scale (l.1428-1440). vLLM's carve gives the KV-shared layers no
// cache (Model.KVSharedLayer). Training follows transformers 5.23
// (gemma4_text5.go: the norms' torch.pow, v_norm, the per-layer inputs
// and their gate, a MoE layer's two branches; kvshare5.go: the KV-shared
// layers' keys and values), checked against the family's CPU traces at
// 5.23.0. The
// released checkpoints are the image-text model, family gemma4; this family
// is its language model, which Gemma4ForCausalLM also builds alone.
func init() {
	register(&family{
		name: gemma4TextModelType, source: "transformers/models/gemma4/modeling_gemma4.py (transformers 5.23.0)",
		globalAttention: true, perLayerInputs: true, kvShared: true,
		servingOnly: gemma4ServingOnly,
		only5:       true,
		defaults:    Model{MLP: "geglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, NormPosition: "sandwich", QKNorm: "head"},
		fromConfig:  gemma4TextFromConfig,
		toConfig:    gemma4TextToConfig,
		check:       gemma4TextCheck,
		tensors:     gemma4TextTensors,
		buffers:     gemma4TextBuffers,
		block:       gemma4Block,
		recipe: func(Model, libVersion) recipe {
			return recipe{normWeightFP32: true, embedScale: true, localRotary: true, sharedFirst: true, powNorm: true, vNorm: true, perLayerInputs5: true,
				groupedMM: true, denseBesideExperts: true}
		},
		// The released 31B and 26B-A4B's language models alone (their
		// text_config; the released models with their tower are gemma4's
		// presets, where the shapes' sources are given).
		presets: map[string]Preset{
			"gemma-4-31b-text":     {gemma4Text31B("google/gemma-4-31B-it (text)"), hf("google/gemma-4-31B-it")},
			"gemma-4-26b-a4b-text": {gemma4Text26B("google/gemma-4-26B-A4B-it (text)"), hf("google/gemma-4-26B-A4B-it")},
		},
	})
}

// gemma4ServingOnly is why the Gemma 4 families plan serving only.
const gemma4ServingOnly = "its modeling code is transformers 5's (global layers of their own head width and key/value heads, per-layer embeddings, a dense MLP beside grouped_mm experts), which the training rules do not follow yet"

// gemma4TextFromConfig reads a Gemma4TextConfig, each key missing taking
// the class's default (configuration_gemma4.py l.151-182).
func gemma4TextFromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden = c.optInt("num_hidden_layers", 30), c.optInt("hidden_size", 2304)
	m.FFN = c.optInt("intermediate_size", 9216)
	m.Heads, m.KVHeads = c.optInt("num_attention_heads", 8), c.optInt("num_key_value_heads", 4)
	m.HeadDim, m.Vocab = c.optInt("head_dim", 256), c.optInt("vocab_size", 262144)
	m.MaxPosition = c.optInt("max_position_embeddings", 131072)
	// The wrapper's tie_word_embeddings decides there (Gemma4Config
	// l.381); this one is read for a text config alone (l.166).
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
	if c.optBool("attention_bias", false) {
		m.Bias = BiasAttn
	}
	if act := c.optString("hidden_activation", "gelu_pytorch_tanh"); act != "gelu_pytorch_tanh" && c.err == nil {
		c.fail(fmt.Sprintf("hidden_activation %q: Gemma 4's MLPs are modelled with gelu_pytorch_tanh", act))
	}
	m.SlidingWindow = c.optInt("sliding_window", 512)
	m.FinalSoftcap = c.optFloat("final_logit_softcapping", 0)
	// "all" halves the window (l.185-187) and attends both ways: not
	// modelled; "vision" changes the image tokens' masks only.
	if b := c.optString("use_bidirectional_attention", ""); b != "" && b != "vision" && c.err == nil {
		c.fail(fmt.Sprintf("use_bidirectional_attention %q: only causal text attention (null, or \"vision\") is modelled", b))
	}
	gemma4LayerTypes(c, m)
	gemma4GlobalShape(c, m)
	gemma4RopeTypes(c)
	if w := c.optIntOrNone("hidden_size_per_layer_input", 256); w > 0 {
		m.PerLayerInput, m.PerLayerVocab = w, c.optInt("vocab_size_per_layer_input", 262144)
	}
	m.KVSharedLayers = c.optInt("num_kv_shared_layers", 0)
	// Without shared layers the flag widens no MLP (l.1062-1067).
	m.DoubleWideMLP = c.optBool("use_double_wide_mlp", false) && m.KVSharedLayers > 0
	if c.optBool("enable_moe_block", false) {
		// The class's None for these builds nothing usable: required.
		m.Experts, m.ExpertsPerToken, m.ExpertFFN = c.int("num_experts"), c.int("top_k_experts"), c.int("moe_intermediate_size")
		m.SharedExperts, m.SharedExpertFFN, m.Router = 1, m.FFN, "softmax_topk_norm"
	}
}

// gemma4LayerTypes reads layer_types, else the class's pattern (every
// sixth layer global), with the last layer forced global as __post_init__
// forces it (l.189-200), into m's GlobalEvery.
func gemma4LayerTypes(c *hfReader, m *Model) {
	raw := c.optList("layer_types")
	if c.err != nil {
		return
	}
	if raw == nil {
		raw = make([]any, m.Layers)
		for i := range raw {
			raw[i] = "sliding_attention"
			if (i+1)%6 == 0 {
				raw[i] = "full_attention"
			}
		}
	}
	for i, t := range raw {
		if t != "full_attention" && t != "sliding_attention" {
			c.fail(fmt.Sprintf("layer_types[%d] = %v: want full_attention or sliding_attention", i, t))
			return
		}
	}
	if len(raw) == m.Layers && len(raw) > 0 {
		raw = append([]any(nil), raw...)
		raw[len(raw)-1] = "full_attention"
	}
	c.c["layer_types"] = raw
	c.layerTypes(m)
}

// gemma4GlobalShape reads the global layers' head width and key/value
// heads: global_head_dim (512) and, with attention_k_eq_v,
// num_global_key_value_heads (None: the local layers'), as __post_init__
// makes them the layers' overrides (l.209-222), unless a per_layer_config
// gives the overrides itself.
func gemma4GlobalShape(c *hfReader, m *Model) {
	m.GlobalKEqV = c.optBool("attention_k_eq_v", false)
	hd, kv := c.optInt("global_head_dim", 512), m.KVHeads
	if m.GlobalKEqV {
		kv = c.optInt("num_global_key_value_heads", m.KVHeads)
	}
	if v, ok := c.c["per_layer_config"]; ok && v != nil && c.err == nil {
		hd, kv = gemma4PerLayerConfig(c, m, v)
	}
	m.GlobalHeadDim, m.GlobalKVHeads = hd, kv
}

// gemma4PerLayerConfig reads a per_layer_config (layer index → overrides
// of head_dim and num_key_value_heads): the engine models one set of
// overrides for every global layer and none for the local ones.
func gemma4PerLayerConfig(c *hfReader, m *Model, v any) (hd, kv int) {
	plc, ok := v.(map[string]any)
	if !ok {
		c.fail(fmt.Sprintf("per_layer_config must be an object (layer index → overrides), got %v", v))
		return 0, 0
	}
	hd, kv = m.HeadDim, m.KVHeads
	var global map[string]any
	seen := 0
	for i := 0; i < m.Layers; i++ {
		e, found := plc[strconv.Itoa(i)]
		entry, isMap := e.(map[string]any)
		if found {
			seen++
			if !isMap {
				c.fail(fmt.Sprintf("per_layer_config[%d] must be an object, got %v", i, e))
				return 0, 0
			}
		}
		for k := range entry {
			if k != "head_dim" && k != "num_key_value_heads" {
				c.fail(fmt.Sprintf("per_layer_config[%d].%s: only head_dim and num_key_value_heads overrides are modelled", i, k))
				return 0, 0
			}
		}
		switch {
		case m.LocalLayer(i) && len(entry) > 0:
			c.fail(fmt.Sprintf("per_layer_config[%d]: overrides on a sliding-window layer are not modelled", i))
			return 0, 0
		case m.LocalLayer(i):
		case global == nil:
			global = entry
			if global == nil {
				global = map[string]any{}
			}
		case fmt.Sprint(entry) != fmt.Sprint(global):
			c.fail(fmt.Sprintf("per_layer_config[%d] = %v: every global layer must have the same overrides (%v)", i, entry, global))
			return 0, 0
		}
	}
	if seen != len(plc) {
		c.fail(fmt.Sprintf("per_layer_config names layers outside [0, %d)", m.Layers))
		return 0, 0
	}
	sub := hfReader{c: global}
	hd, kv = sub.optInt("head_dim", hd), sub.optInt("num_key_value_heads", kv)
	if sub.err != nil {
		c.fail("per_layer_config: " + sub.err.Error())
	}
	return hd, kv
}

// gemma4RopeTypes checks rope_parameters (one entry per layer kind,
// l.202-207): the buffers are sized as the "default" and "proportional"
// kinds size them; another kind is an error.
func gemma4RopeTypes(c *hfReader) {
	v, ok := c.c["rope_parameters"]
	if !ok || v == nil || c.err != nil {
		return
	}
	rp, ok := v.(map[string]any)
	if !ok {
		c.fail(fmt.Sprintf("rope_parameters must be an object of one entry per layer kind, got %v", v))
		return
	}
	for kind, e := range rp {
		entry, ok := e.(map[string]any)
		if !ok {
			c.fail(fmt.Sprintf("rope_parameters.%s must be an object (rope_parameters holds one per layer kind)", kind))
			return
		}
		if t, _ := entry["rope_type"].(string); t != "" && t != "default" && t != "proportional" {
			c.fail(fmt.Sprintf("rope_parameters.%s.rope_type %q: only default and proportional RoPE are modelled", kind, t))
			return
		}
	}
}

// gemma4TextToConfig writes a Gemma4TextConfig: the global layers' shape
// as global_head_dim and num_global_key_value_heads where __post_init__
// can make it from them, else as a per_layer_config; the class's default
// rope_parameters (their thetas and rotated share change no size).
func gemma4TextToConfig(m Model, c map[string]any) {
	writeCommonConfig(m, c)
	c["attention_bias"] = m.Bias == BiasAttn
	c["hidden_activation"] = "gelu_pytorch_tanh"
	if m.SlidingWindow > 0 {
		c["sliding_window"] = m.SlidingWindow
	}
	writeLayerTypes(m, c, "sliding_attention")
	if m.FinalSoftcap != 0 {
		c["final_logit_softcapping"] = gemma4Float(m.FinalSoftcap)
	}
	c["rope_parameters"] = map[string]any{
		"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 10000.0},
		"full_attention":    map[string]any{"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
	}
	hd, kv := m.AttentionShape(m.Layers - 1) // the last layer is global
	c["attention_k_eq_v"] = m.GlobalKEqV
	if m.GlobalKEqV || kv == m.KVHeads {
		c["global_head_dim"] = hd
		if m.GlobalKEqV {
			c["num_global_key_value_heads"] = kv
		}
	} else {
		plc := map[string]any{}
		for i := 0; i < m.Layers; i++ {
			if !m.LocalLayer(i) {
				plc[strconv.Itoa(i)] = map[string]any{"head_dim": hd, "num_key_value_heads": kv}
			}
		}
		c["per_layer_config"] = plc
	}
	c["hidden_size_per_layer_input"] = m.PerLayerInput
	if m.PerLayerInput > 0 {
		c["vocab_size_per_layer_input"] = m.PerLayerVocab
	}
	c["num_kv_shared_layers"], c["use_double_wide_mlp"] = m.KVSharedLayers, m.DoubleWideMLP
	c["enable_moe_block"] = m.Experts > 0
	if m.Experts > 0 {
		c["num_experts"], c["top_k_experts"], c["moe_intermediate_size"] = m.Experts, m.ExpertsPerToken, m.ExpertFFN
	}
}

// gemma4TextCheck is the language model's rules.
func gemma4TextCheck(m Model) error {
	if err := requireNormPosition("sandwich")(m); err != nil {
		return err
	}
	if err := requireQKNorm("head")(m); err != nil {
		return err
	}
	hd, kv := m.AttentionShape(m.Layers - 1)
	switch {
	case m.MLP != "geglu":
		return fmt.Errorf("model.mlp %q: %s's MLPs are gelu_pytorch_tanh-gated (geglu)", m.MLP, m.Family)
	case m.Norm != "rmsnorm" || m.Position != "rope" || m.RotaryPct != 1:
		return fmt.Errorf("model: %s has RMSNorms and a rotary embedding over every head dimension (norm rmsnorm, position rope, rotary_pct 1)", m.Family)
	case m.Bias != BiasNone && m.Bias != BiasAttn:
		return fmt.Errorf("model.bias %q: %s's attention_bias puts biases on q, k, v and o (\"attention\"), or none", m.Bias, m.Family)
	case m.AttnSoftcap != 0 || m.AttentionChunk != 0 || m.NoRopeGlobal || m.NoRopeEvery != 0:
		return fmt.Errorf("model: %s has no attention soft-capping, chunked attention or layers without the rotary embedding", m.Family)
	case m.SlidingWindow > 0 && (m.GlobalEvery < 1 || m.Layers%m.GlobalEvery != 0):
		return fmt.Errorf("model.global_every = %d: %s's last layer is global (__post_init__ forces it), so layers = %d must be a multiple of global_every", m.GlobalEvery, m.Family, m.Layers)
	case m.GlobalHeadDim < 0 || m.GlobalKVHeads < 0 || hd < 1 || kv < 1 || m.Heads%kv != 0:
		return fmt.Errorf("model.global_kv_heads = %d must divide heads = %d, and global_head_dim = %d be ≥ 1", kv, m.Heads, hd)
	case (m.PerLayerInput > 0) != (m.PerLayerVocab > 0):
		return fmt.Errorf("model: per_layer_input = %d and per_layer_vocab = %d size the per-layer embeddings together: both ≥ 1, or both 0", m.PerLayerInput, m.PerLayerVocab)
	case m.Experts > 0 && (m.SharedExperts != 1 || m.SharedExpertFFN != m.FFN || m.DenseLayers != 0 || m.MoEEvery > 1 || m.Router != "softmax_topk_norm"):
		return fmt.Errorf("model: every %s layer with experts keeps its dense MLP (shared_experts 1, shared_expert_ffn = ffn = %d, no dense_layers or moe_every) and a renormalized softmax router (softmax_topk_norm)", m.Family, m.FFN)
	case m.Experts == 0 && m.SharedExperts != 0:
		return fmt.Errorf("model.shared_experts = %d: %s's dense MLP is its shared expert only beside routed experts", m.SharedExperts, m.Family)
	case m.DoubleWideMLP && (m.KVSharedLayers == 0 || m.Experts > 0):
		return fmt.Errorf("model.double_wide_mlp widens the KV-shared layers' MLPs (kv_shared_layers ≥ 1), and is not modelled beside experts (whose shared expert is the dense MLP, shared_expert_ffn = ffn)")
	}
	return kvSharingCheck(m)
}

// gemma4TextTensors lists the language model's parameters: the embedding
// and the per-layer embeddings' three (l.1559-1589), each layer's
// attention, MLP, four norms, per-layer input gate and the experts' parts
// (l.1345-1366), the final norm, the output layer (Gemma4ForCausalLM
// l.1865, tied by default).
func gemma4TextTensors(m Model, l *tensorList) {
	h := int64(m.Hidden)
	l.add("model.embed_tokens.weight", "embedding", int64(m.Vocab), h)
	if w := int64(m.PerLayerInput); w > 0 {
		all := int64(m.Layers) * w
		// A lookup table, as a position table is (not the output layer
		// when the vocabularies match).
		l.add("model.embed_tokens_per_layer.weight", "position", int64(m.PerLayerVocab), all)
		l.linear("model.per_layer_model_projection", "other", h, all, false)
		l.norm("model.per_layer_projection_norm", false, w)
	}
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("model.layers.%d.", i)
		gemma4Attention(m, l, p+"self_attn.", i)
		mlpGated(m, l, p+"mlp.", int64(m.LayerFFN(i)), -1)
		for _, n := range []string{"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"} {
			l.norm(p+n, false, h)
		}
		if w := int64(m.PerLayerInput); w > 0 {
			l.linear(p+"per_layer_input_gate", "other", h, w, false)
			l.linear(p+"per_layer_projection", "other", w, h, false)
			l.norm(p+"post_per_layer_input_norm", false, h)
		}
		if m.Experts > 0 {
			l.add(p+"router.scale", "norm", h)
			l.add(p+"router.per_expert_scale", "router", int64(m.Experts))
			l.linear(p+"router.proj", "router", h, int64(m.Experts), false)
			fusedExperts(m, l, p+"experts.")
			for _, n := range []string{"post_feedforward_layernorm_1", "post_feedforward_layernorm_2", "pre_feedforward_layernorm_2"} {
				l.norm(p+n, false, h)
			}
		}
	}
	l.headSide()
	l.norm("model.norm", false, h)
	lmHead(m, l, "lm_head", "score")
}

// gemma4Attention adds layer i's Gemma4TextAttention parameters under p
// (l.1174-1198): q_proj, q_norm; where the layer keeps its own keys and
// values (not KV-shared, l.1179-1193) k_norm, k_proj, v_proj (none on a
// global layer with attention_k_eq_v); o_proj, of the layer's head width
// and key/value heads.
func gemma4Attention(m Model, l *tensorList, p string, i int) {
	hd, kv := m.AttentionShape(i)
	h, q, k := int64(m.Hidden), int64(m.Heads)*int64(hd), int64(kv)*int64(hd)
	bias := m.Bias == BiasAttn
	l.linear(p+"q_proj", "q_proj", h, q, bias)
	l.add(p+"q_norm.weight", "norm", int64(hd))
	if !m.KVSharedLayer(i) {
		l.add(p+"k_norm.weight", "norm", int64(hd))
		l.linear(p+"k_proj", "k_proj", h, k, bias)
		if !m.GlobalKEqV || m.LocalLayer(i) {
			l.linear(p+"v_proj", "v_proj", h, k, bias)
		}
	}
	l.linear(p+"o_proj", "o_proj", q, h, bias)
}

// gemma4TextBuffers lists the language model's buffers: embed_scale, each
// layer's layer_scalar (persistent: the checkpoint stores it), the rotary
// embedding's two buffers per layer kind present, the per-layer
// embeddings' embed_scale.
func gemma4TextBuffers(m Model, b *bufferList) {
	b.add("model.embed_tokens.embed_scale", -1, FP32)
	for i := 0; i < m.Layers; i++ {
		b.add(fmt.Sprintf("model.layers.%d.layer_scalar", i), i, FP32, 1)
	}
	global, local := false, false
	for i := 0; i < m.Layers; i++ {
		global, local = global || !m.LocalLayer(i), local || m.LocalLayer(i)
	}
	if global {
		hd, _ := m.AttentionShape(m.Layers - 1)
		b.add("model.rotary_emb.full_attention_inv_freq", -1, FP32, int64(hd/2))
		b.add("model.rotary_emb.full_attention_original_inv_freq", -1, FP32, int64(hd/2))
	}
	if local {
		b.add("model.rotary_emb.sliding_attention_inv_freq", -1, FP32, int64(m.HeadDim/2))
		b.add("model.rotary_emb.sliding_attention_original_inv_freq", -1, FP32, int64(m.HeadDim/2))
	}
	if m.PerLayerInput > 0 {
		b.add("model.embed_tokens_per_layer.embed_scale", -1, FP32)
	}
}

// gemma4Block builds layer's activations as the shared decoder block does,
// with a global layer's own head width and key/value heads
// (attentionShaped), and what waits through its backward for the
// KV-shared layers (kvshare5.go).
func gemma4Block(r *resolved, layer int) BlockActivations {
	b, x := decoderOps(r.attentionShaped(layer), layer)
	b.kvSharingWaits(r, layer)
	return b.finishBlock(x, layer)
}

// gemma4Text31B and gemma4Text26B are the language models of the released
// Gemma 4 31B and 26B-A4B (gemma4's presets say where their shapes come
// from).
func gemma4Text31B(name string) Model {
	return Model{Name: name, Family: "gemma4_text", Layers: 60, Hidden: 5376, Heads: 32, KVHeads: 16, HeadDim: 256, FFN: 21504,
		Vocab: 262144, MaxPosition: 262144, TiedEmbeddings: true, SlidingWindow: 1024, GlobalEvery: 6, FinalSoftcap: 30,
		GlobalHeadDim: 512, GlobalKVHeads: 4, GlobalKEqV: true}
}

func gemma4Text26B(name string) Model {
	return Model{Name: name, Family: "gemma4_text", Layers: 30, Hidden: 2816, Heads: 16, KVHeads: 8, HeadDim: 256, FFN: 2112,
		Vocab: 262144, MaxPosition: 262144, TiedEmbeddings: true, SlidingWindow: 1024, GlobalEvery: 6, FinalSoftcap: 30,
		GlobalHeadDim: 512, GlobalKVHeads: 2, GlobalKEqV: true,
		Experts: 128, ExpertsPerToken: 8, ExpertFFN: 704, SharedExperts: 1, SharedExpertFFN: 2112, Router: "softmax_topk_norm"}
}

// gemma4Float is a float config value that JSON writes as a float even
// when whole (30.0, not 30): Gemma4TextConfig is a strict dataclass whose
// float fields refuse an int.
type gemma4Float float64

// MarshalJSON writes f with a decimal point or an exponent.
func (f gemma4Float) MarshalJSON() ([]byte, error) {
	s := strconv.FormatFloat(float64(f), 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return []byte(s), nil
}

// gemma4TextModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const gemma4TextModelType = "gemma4_text"
