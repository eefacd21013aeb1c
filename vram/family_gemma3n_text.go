package vram

import "fmt"

// Gemma 3n's language model (transformers 5.23.0
// models/gemma3n/modeling_gemma3n.py, Gemma3nTextModel l.1577-1636 and
// Gemma3nForCausalLM l.1787-1799; its config is Gemma3nTextConfig,
// configuration_gemma3n.py l.34-232, model_type gemma3n_text). Gemma 3's
// sandwich-norm decoder (Gemma3nTextDecoderLayer l.1258-1278; RMSNorms of
// x · weight in fp32, l.129-150) with a global layer every fifth
// (layer_types, else that pattern, l.141-144) and:
//   - q_norm and k_norm per head and a weightless v_norm (l.1179-1197);
//   - Alternating Updates (Gemma3nTextAltUp l.987-1010) in every layer: a
//     per-channel output scale, the correction and prediction
//     coefficients, a modality router and its norm, and a
//     router_input_scale buffer; around the blocks altup_num_inputs − 1
//     projections in and as many out (l.1616-1622);
//   - a learned low-rank residual in every layer (Gemma3nTextLaurelBlock
//     l.931-946: laurel_rank, and a norm);
//   - per-layer embeddings (l.1601-1614; in each layer a gate, a
//     projection back and a norm, l.1276-1278), always built;
//   - the last num_kv_shared_layers layers reuse the keys and values of
//     the last earlier layer of their kind and build no k_proj, v_proj or
//     k_norm (l.1175-1193; kv_sharing_modes, configuration_gemma3n.py
//     l.206-232); the checkpoint stores them, transformers skips them
//     (_keys_to_ignore_on_load_unexpected, l.1626-1633): storedOnly;
//   - intermediate_size per layer (l.130-139; the engine models one width
//     for every layer) and activation_sparsity_pattern, a Gaussian top-k
//     on the first ten layers' gate (l.959-984; Model.SparseLayers).
//
// vLLM's carve gives the KV-shared layers no cache (Model.KVSharedLayer);
// SGLang's pool still sizes one for every layer. Training follows
// transformers 5.23 (gemma3n_text5.go: the AltUp stack through the
// layers, Laurel, the per-layer input path, the sparse gate;
// kvshare5.go: the KV-shared layers' keys and values), checked
// against the family's CPU traces at 5.23.0; 4.x's training differs and is
// refused (has4). The released checkpoints are the audio-image-text
// model, family gemma3n; this family is its language model, which
// Gemma3nForCausalLM also builds alone.
func init() {
	register(&family{
		name: gemma3nTextModelType, source: "transformers/models/gemma3n/modeling_gemma3n.py (transformers 5.23.0)",
		perLayerInputs: true, altUp: true, kvShared: true,
		servingOnly: gemma3nServingOnly,
		has4:        gemma3nHas4,
		defaults:    Model{MLP: "geglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, NormPosition: "sandwich", QKNorm: "head"},
		fromConfig:  gemma3nTextFromConfig,
		toConfig:    gemma3nTextToConfig,
		check:       gemma3nTextCheck,
		tensors:     gemma3nTextTensors,
		buffers:     gemma3nTextBuffers,
		storedOnly:  gemma3nTextStoredOnly,
		block:       gemma3nBlock,
		recipe: func(Model, libVersion) recipe {
			return recipe{normWeightFP32: true, embedScale: true, localRotary: true, powNorm: true, perLayerInputs5: true, perLayerScaleInPlace: true, altUp: true}
		},
		// Gemma3nTextConfig's defaults are google/gemma-3n-E4B's language
		// model (the class's checkpoint, configuration_gemma3n.py l.34):
		// 6,835,235,568 parameters on the meta device (transformers
		// 5.23.0, Gemma3nForCausalLM of Gemma3nTextConfig()).
		presets: map[string]Preset{
			"gemma-3n-e4b-text": {gemma3nTextE4B("google/gemma-3n-E4B (text)"), hf("google/gemma-3n-E4B")},
		},
	})
}

// gemma3nHas4 is why the language model's training is modelled at
// transformers 5 only: 4.x's Gemma 3n reuses keys and values through the
// cache alone, so in training its KV-shared layers project their own
// (with k_proj and v_proj the 5.x model does not build), which is not
// traced.
const gemma3nHas4 = "transformers 4.x's KV-shared layers reuse keys and values only through the cache, so its training projects them in every layer; only 5.23's training, which passes them between layers, is traced"

// gemma3nServingOnly is why the Gemma 3n families plan serving only
// where their traces at transformers 5.23 do not lift it
// (transformers5Traced): the language model alone trains as 5.23 runs it
// (gemma3n_text5.go), the audio-image-text model's towers do not.
const gemma3nServingOnly = "its modeling code is transformers 5's: the language model alone (Gemma3nForCausalLM) trains as transformers 5.23 runs it, traced; the audio-image-text model's towers and embedders are not in the training rules yet"

// gemma3nTextFromConfig reads a Gemma3nTextConfig, each key missing
// taking the class's default (configuration_gemma3n.py l.96-127).
func gemma3nTextFromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden = c.optInt("num_hidden_layers", 35), c.optInt("hidden_size", 2048)
	m.FFN = c.perLayerInt("intermediate_size", 16384, m.Layers)
	m.Heads, m.KVHeads = c.optInt("num_attention_heads", 8), c.optInt("num_key_value_heads", 2)
	m.HeadDim, m.Vocab = c.optInt("head_dim", 256), c.optInt("vocab_size", 262400)
	m.MaxPosition = c.optInt("max_position_embeddings", 32768)
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
	if c.optBool("attention_bias", false) {
		m.Bias = BiasAttn
	}
	if act := c.optString("hidden_activation", "gelu_pytorch_tanh"); act != "gelu_pytorch_tanh" && c.err == nil {
		c.fail(fmt.Sprintf("hidden_activation %q: Gemma 3n's MLPs are modelled with gelu_pytorch_tanh", act))
	}
	m.SlidingWindow = c.optInt("sliding_window", 512)
	m.FinalSoftcap = c.optFloat("final_logit_softcapping", 30)
	gemma3nLayerTypes(c, m)
	gemma3nRopeTypes(c)
	m.PerLayerInput = c.optInt("hidden_size_per_layer_input", 256)
	m.PerLayerVocab = c.optInt("vocab_size_per_layer_input", 262144)
	m.AltUpInputs, m.LaurelRank = c.optInt("altup_num_inputs", 4), c.optInt("laurel_rank", 64)
	if i := c.optInt("altup_active_idx", 0); c.err == nil && (i < 0 || i >= m.AltUpInputs) {
		c.fail(fmt.Sprintf("altup_active_idx = %d must be in [0, altup_num_inputs = %d)", i, m.AltUpInputs))
	}
	m.KVSharedLayers = c.optInt("num_kv_shared_layers", 15)
	gemma3nSparseLayers(c, m)
}

// gemma3nSparseLayers reads activation_sparsity_pattern, one target
// sparsity per layer (configuration_gemma3n.py l.152-162: without it the
// first ten layers take 0.95 where there are more than ten, else none),
// into m's SparseLayers: the layers whose target is above 0 take the
// Gaussian top-k (Gemma3nTextMLP l.959-967), which the engine models for
// a run of first layers, as the released configs have it.
func gemma3nSparseLayers(c *hfReader, m *Model) {
	v, ok := c.c["activation_sparsity_pattern"]
	if c.err != nil || !ok || v == nil {
		if m.Layers > 10 {
			m.SparseLayers = 10
		}
		return
	}
	l, isList := v.([]any)
	if !isList || len(l) != m.Layers {
		c.fail(fmt.Sprintf("activation_sparsity_pattern must list one sparsity for each of num_hidden_layers = %d layers", m.Layers))
		return
	}
	for i, e := range l {
		f, isNum := e.(float64)
		switch {
		case !isNum || f < 0 || f >= 1:
			c.fail(fmt.Sprintf("activation_sparsity_pattern[%d] = %v must be a sparsity in [0, 1)", i, e))
			return
		case f > 0 && i > m.SparseLayers:
			c.fail(fmt.Sprintf("activation_sparsity_pattern[%d] = %v: only a run of sparse first layers is modelled", i, e))
			return
		case f > 0:
			m.SparseLayers = i + 1
		}
	}
}

// gemma3nLayerTypes reads layer_types, else the class's pattern (every
// fifth layer global, l.141-144), into m's GlobalEvery.
func gemma3nLayerTypes(c *hfReader, m *Model) {
	if c.err != nil {
		return
	}
	if _, ok := c.c["layer_types"]; !ok || c.c["layer_types"] == nil {
		raw := make([]any, m.Layers)
		for i := range raw {
			raw[i] = "sliding_attention"
			if (i+1)%5 == 0 {
				raw[i] = "full_attention"
			}
		}
		c.c["layer_types"] = raw
	}
	c.layerTypes(m)
}

// gemma3nRopeTypes checks rope_parameters (one entry per layer kind,
// l.177-204): only the default RoPE, whose buffers are head_dim / 2, is
// modelled.
func gemma3nRopeTypes(c *hfReader) {
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
		if t, _ := entry["rope_type"].(string); t != "" && t != "default" {
			c.fail(fmt.Sprintf("rope_parameters.%s.rope_type %q: only the default RoPE is modelled", kind, t))
			return
		}
	}
}

// gemma3nTextToConfig writes a Gemma3nTextConfig.
func gemma3nTextToConfig(m Model, c map[string]any) {
	writeCommonConfig(m, c)
	c["attention_bias"] = m.Bias == BiasAttn
	c["hidden_activation"] = "gelu_pytorch_tanh"
	if m.SlidingWindow > 0 {
		c["sliding_window"] = m.SlidingWindow
	}
	writeLayerTypes(m, c, "sliding_attention")
	c["final_logit_softcapping"] = gemma4Float(m.FinalSoftcap)
	c["hidden_size_per_layer_input"], c["vocab_size_per_layer_input"] = m.PerLayerInput, m.PerLayerVocab
	c["altup_num_inputs"], c["altup_active_idx"], c["laurel_rank"] = m.AltUpInputs, 0, m.LaurelRank
	c["num_kv_shared_layers"] = m.KVSharedLayers
	// The released configs' target sparsity (0.95) on the sparse layers;
	// the target changes no size.
	pattern := make([]gemma4Float, m.Layers)
	for i := 0; i < m.SparseLayers && i < m.Layers; i++ {
		pattern[i] = 0.95
	}
	c["activation_sparsity_pattern"] = pattern
}

// gemma3nTextCheck is the language model's rules.
func gemma3nTextCheck(m Model) error {
	if err := requireNormPosition("sandwich")(m); err != nil {
		return err
	}
	if err := requireQKNorm("head")(m); err != nil {
		return err
	}
	switch {
	case m.MLP != "geglu":
		return fmt.Errorf("model.mlp %q: %s's MLPs are gelu_pytorch_tanh-gated (geglu)", m.MLP, m.Family)
	case m.Norm != "rmsnorm" || m.Position != "rope" || m.RotaryPct != 1:
		return fmt.Errorf("model: %s has RMSNorms and a rotary embedding over every head dimension (norm rmsnorm, position rope, rotary_pct 1)", m.Family)
	case m.Bias != BiasNone && m.Bias != BiasAttn:
		return fmt.Errorf("model.bias %q: %s's attention_bias puts biases on q, k, v and o (\"attention\"), or none", m.Bias, m.Family)
	case m.AttnSoftcap != 0 || m.AttentionChunk != 0 || m.NoRopeGlobal || m.NoRopeEvery != 0 || m.GlobalFirst:
		return fmt.Errorf("model: %s has no attention soft-capping, chunked attention or layers without the rotary embedding", m.Family)
	case m.Experts > 0 || m.GlobalHeadDim != 0 || m.GlobalKVHeads != 0 || m.GlobalKEqV:
		return fmt.Errorf("model: %s has no experts and its global layers are shaped as the local ones", m.Family)
	case !(m.FinalSoftcap > 0):
		return fmt.Errorf("model.final_softcap = %v: %s divides the logits by final_logit_softcapping (a float, never null), so it must be > 0", m.FinalSoftcap, m.Family)
	case m.PerLayerInput < 1 || m.PerLayerVocab < 1:
		return fmt.Errorf("model: per_layer_input = %d and per_layer_vocab = %d must be ≥ 1: %s always builds its per-layer embeddings", m.PerLayerInput, m.PerLayerVocab, m.Family)
	case m.AltUpInputs < 1 || m.LaurelRank < 1:
		return fmt.Errorf("model: altup_inputs = %d and laurel_rank = %d must be ≥ 1: every %s layer has AltUp and a Laurel block", m.AltUpInputs, m.LaurelRank, m.Family)
	case m.SparseLayers < 0 || m.SparseLayers > m.Layers:
		return fmt.Errorf("model.sparse_layers = %d must be in [0, layers = %d]: the first layers whose MLP takes a Gaussian top-k", m.SparseLayers, m.Layers)
	case m.Layers > blockKinds:
		return fmt.Errorf("model.layers = %d: the engine builds each of %s's layers apart (Model.blockKind), at most %d", m.Layers, m.Family, blockKinds)
	case m.DoubleWideMLP:
		return fmt.Errorf("model.double_wide_mlp: %s's KV-shared layers' MLPs are as wide as the others' (Gemma 4's use_double_wide_mlp)", m.Family)
	}
	if err := gemma3nWrapperCheck(m); err != nil {
		return err
	}
	return kvSharingCheck(m)
}

// gemma3nWrapperCheck is the rules of the language model inside family
// gemma3n: Gemma3nModel always builds its MobileNetV5 tower and its audio
// tower (modeling_gemma3n.py l.1928-1934), so a model with that wrapper
// has both, of their families.
func gemma3nWrapperCheck(m Model) error {
	if m.Vision == nil || m.Vision.Family != gemma3nModelType {
		return nil
	}
	switch {
	case m.Vision.Tower.Family != gemma3nVisionModelType:
		return fmt.Errorf("model.vision.tower.family %q: a %s model's vision tower is %s (timm's MobileNetV5)", m.Vision.Tower.Family, gemma3nModelType, gemma3nVisionModelType)
	case m.Audio == nil || m.Audio.Tower.Family != gemma3nAudioModelType:
		return fmt.Errorf("model.audio: a %s model always has its audio tower, model.audio.tower of family %s", gemma3nModelType, gemma3nAudioModelType)
	}
	return nil
}

// gemma3nTextTensors lists the language model's parameters in
// registration order: the embedding, the layers (attention, MLP, four
// norms, AltUp, Laurel, the per-layer input's three), the final norm, the
// per-layer embeddings' three, AltUp's projections in and out
// (l.1587-1622), the output layer (Gemma3nForCausalLM l.1798, tied by
// default).
func gemma3nTextTensors(m Model, l *tensorList) {
	h, n := int64(m.Hidden), int64(m.AltUpInputs)
	l.add("model.embed_tokens.weight", "embedding", int64(m.Vocab), h)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("model.layers.%d.", i)
		gemma3nAttention(m, l, p+"self_attn.", !m.KVSharedLayer(i))
		mlpGated(m, l, p+"mlp.", int64(m.FFN), -1)
		for _, nm := range []string{"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"} {
			l.norm(p+nm, false, h)
		}
		l.add(p+"altup.correct_output_scale", "norm", h)
		l.linear(p+"altup.correction_coefs", "other", n, n, false)
		l.linear(p+"altup.prediction_coefs", "other", n, n*n, false)
		l.linear(p+"altup.modality_router", "router", h, n, false)
		l.norm(p+"altup.router_norm", false, h)
		l.linear(p+"laurel.linear_left", "other", h, int64(m.LaurelRank), false)
		l.linear(p+"laurel.linear_right", "other", int64(m.LaurelRank), h, false)
		l.norm(p+"laurel.post_laurel_norm", false, h)
		w := int64(m.PerLayerInput)
		l.linear(p+"per_layer_input_gate", "other", h, w, false)
		l.linear(p+"per_layer_projection", "other", w, h, false)
		l.norm(p+"post_per_layer_input_norm", false, h)
	}
	l.headSide()
	l.norm("model.norm", false, h)
	l.outside()
	w, all := int64(m.PerLayerInput), int64(m.Layers)*int64(m.PerLayerInput)
	// A lookup table, as a position table is.
	l.add("model.embed_tokens_per_layer.weight", "position", int64(m.PerLayerVocab), all)
	l.linear("model.per_layer_model_projection", "other", h, all, false)
	l.norm("model.per_layer_projection_norm", false, w)
	for k := int64(0); k < n-1; k++ {
		l.linear(fmt.Sprintf("model.altup_projections.%d", k), "other", h, h, false)
	}
	l.headSide()
	for k := int64(0); k < n-1; k++ {
		l.linear(fmt.Sprintf("model.altup_unembed_projections.%d", k), "other", h, h, false)
	}
	lmHead(m, l, "lm_head", "score")
}

// gemma3nAttention adds a Gemma3nTextAttention's parameters under p
// (l.1179-1197): q_proj, q_norm, and where the layer keeps its own keys
// and values (kv) k_proj, v_proj, k_norm; o_proj.
func gemma3nAttention(m Model, l *tensorList, p string, kv bool) {
	h, q, k := int64(m.Hidden), int64(m.Heads)*int64(m.HeadDim), int64(m.KVHeads)*int64(m.HeadDim)
	bias := m.Bias == BiasAttn
	l.linear(p+"q_proj", "q_proj", h, q, bias)
	l.add(p+"q_norm.weight", "norm", int64(m.HeadDim))
	if kv {
		l.linear(p+"k_proj", "k_proj", h, k, bias)
		l.linear(p+"v_proj", "v_proj", h, k, bias)
		l.add(p+"k_norm.weight", "norm", int64(m.HeadDim))
	}
	l.linear(p+"o_proj", "o_proj", q, h, bias)
}

// gemma3nTextStoredOnly lists the KV-shared layers' key/value projections
// and k_norm, which the checkpoint stores and transformers does not load
// (l.1626-1633).
func gemma3nTextStoredOnly(m Model, l *tensorList) {
	h, k := int64(m.Hidden), int64(m.KVHeads)*int64(m.HeadDim)
	bias := m.Bias == BiasAttn
	for i := m.Layers - m.KVSharedLayers; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("model.layers.%d.self_attn.", i)
		l.linear(p+"k_proj", "k_proj", h, k, bias)
		l.linear(p+"v_proj", "v_proj", h, k, bias)
		l.add(p+"k_norm.weight", "norm", int64(m.HeadDim))
	}
}

// gemma3nTextBuffers lists the language model's buffers in
// named_buffers' order (a module's own before its children's): the two
// per-layer scales of Gemma3nTextModel itself (l.1624-1625), embed_scale,
// each layer's AltUp router_input_scale, the rotary embedding's two
// buffers per layer kind present (sorted by name, l.1519-1532) and the
// per-layer embeddings' embed_scale, all fp32 and none persistent.
func gemma3nTextBuffers(m Model, b *bufferList) {
	b.add("model.per_layer_projection_scale", -1, FP32)
	b.add("model.per_layer_input_scale", -1, FP32)
	b.add("model.embed_tokens.embed_scale", -1, FP32)
	for i := 0; i < m.Layers; i++ {
		b.add(fmt.Sprintf("model.layers.%d.altup.router_input_scale", i), i, FP32)
	}
	global, local := false, false
	for i := 0; i < m.Layers; i++ {
		global, local = global || !m.LocalLayer(i), local || m.LocalLayer(i)
	}
	if global {
		b.add("model.rotary_emb.full_attention_inv_freq", -1, FP32, int64(m.HeadDim/2))
		b.add("model.rotary_emb.full_attention_original_inv_freq", -1, FP32, int64(m.HeadDim/2))
	}
	if local {
		b.add("model.rotary_emb.sliding_attention_inv_freq", -1, FP32, int64(m.HeadDim/2))
		b.add("model.rotary_emb.sliding_attention_original_inv_freq", -1, FP32, int64(m.HeadDim/2))
	}
	b.add("model.embed_tokens_per_layer.embed_scale", -1, FP32)
}

// gemma3nTextE4B is the language model of the released Gemma 3n E4B
// (Gemma3nTextConfig's defaults, which are its text_config).
func gemma3nTextE4B(name string) Model {
	return Model{Name: name, Family: "gemma3n_text", Layers: 35, Hidden: 2048, Heads: 8, KVHeads: 2, HeadDim: 256, FFN: 16384,
		Vocab: 262400, MaxPosition: 32768, TiedEmbeddings: true, SlidingWindow: 512, GlobalEvery: 5, FinalSoftcap: 30,
		PerLayerInput: 256, PerLayerVocab: 262144, AltUpInputs: 4, LaurelRank: 64, KVSharedLayers: 15, SparseLayers: 10}
}

// gemma3nTextModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const gemma3nTextModelType = "gemma3n_text"
