package vram

import (
	"fmt"

	"github.com/vramlab/vramlab/vram/internal/strictjson"
)

// Nemotron-H and Nemotron 3 (transformers 5.23 models/nemotron_h/
// modeling_nemotron_h.py; configuration_nemotron_h.py): a hybrid whose
// every layer is one sublayer behind one RMSNorm and a residual add
// (NemotronHBlock, l.931-989) — a Mamba-2 mixer ("linear_attention", M),
// attention without positions ("full_attention", *: no rotary embedding,
// no biases, l.869-920), a squared-ReLU MLP ("mlp", -) or a mixture of
// experts ("moe", E) — as layers_block_type (or the older
// hybrid_override_pattern string) lists them. The MoE (l.713-754) is a
// DeepSeek-V3-style sigmoid router with an fp32 e_score_correction_bias
// buffer (l.757-795), ungated experts fused as transformers 5 keeps them
// (up_proj [E, I, L], down_proj [E, L, I], l.652-710), one ungated shared
// expert, and for Nemotron 3's latent MoE (moe_latent_size = L) a
// projection from the hidden width down to L before the experts and back
// after (fc1_latent_proj, fc2_latent_proj, l.734-739); without it L is
// the hidden width. The LM head is never tied (_tied_weights_keys = {},
// l.1158) and the checkpoint's MTP layers are not built
// (_keys_to_ignore_on_load_unexpected = [r"mtp.*"], l.1012). A key
// config.json leaves out takes the class's default
// (configuration_nemotron_h.py l.98-152).
func init() {
	register(&family{
		name: nemotronHModelType, gguf: ggufNemotronH, source: "transformers/models/nemotron_h/modeling_nemotron_h.py (transformers 5.23.0)",
		defaults:      Model{MLP: "relu2", Norm: "rmsnorm", Position: "none", Bias: BiasNone, Router: "sigmoid_topk_norm"},
		ssm:           true,
		loneSublayers: true,
		servingOnly:   "its modeling code is transformers 5's (grouped_mm experts, a block of one sublayer), which the training rules do not follow yet",
		only5:         true,
		recipe:        nemotronHRecipe,
		fromConfig:    nemotronHFromConfig,
		toConfig:      nemotronHToConfig,
		check:         nemotronHCheck,
		tensors:       nemotronHTensors,
		buffers: func(m Model, b *bufferList) {
			// NemotronHTopkRouter's e_score_correction_bias (l.768), kept in
			// fp32 (_keep_in_fp32_modules_strict, l.1009-1011); no rotary
			// embedding.
			for _, i := range m.SSM.MoE {
				b.add(fmt.Sprintf("model.layers.%d.mixer.gate.e_score_correction_bias", i), i, FP32, int64(m.Experts))
			}
		},
		block: nemotronHBlock,
		// The class's defaults (configuration_nemotron_h.py l.98-152,
		// layers_block_type ["linear_attention", "moe", "full_attention",
		// "mlp"] from __post_init__ l.177): one layer of each kind 4,096
		// wide, 1,968,355,712 parameters as transformers 5.23 builds it on
		// the meta device. Its docstring names
		// nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16, whose 30B the
		// defaults are not, and whose config is neither in the docstring
		// nor in the class's tests: the entry is the defaults under their
		// own name.
		presets: map[string]Preset{
			"nemotron-h-config-defaults": {Model{Name: "nemotron-h-config-defaults", Layers: 4, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 21504, Vocab: 131072, MaxPosition: 4096,
				Experts: 8, ExpertsPerToken: 2, ExpertFFN: 7688, SharedExperts: 1, SharedExpertFFN: 7688,
				SSM: &SSM{Heads: 128, HeadDim: 64, State: 128, Groups: 8, ConvKernel: 4, Chunk: 128, Attention: []int{2}, MLP: []int{3}, MoE: []int{1}}},
				"https://github.com/huggingface/transformers/blob/v5.23.0/src/transformers/models/nemotron_h/configuration_nemotron_h.py"},
		},
	})
}

// nemotronHRecipe is Nemotron-H's step at transformers 5.23: its
// RMSNorm multiplies by the weight in fp32 and casts the product back
// (NemotronHRMSNorm, l.627-631), its ungated experts run through
// grouped_mm (l.651, integrations/moe.py:481-482, 498-502), and the model
// returns lm_head(hidden_states).float() (l.1212); the Mamba-2 mixers are
// transformers 5's (mamba2_scan5.go).
func nemotronHRecipe(Model, libVersion) recipe {
	return recipe{normWeightFP32: true, groupedMM: true, groupedUngated: true, logitsFloat: true}
}

// nemotronHFromConfig reads a NemotronHConfig: the layer kinds, then each
// key under its name or its older alias (__post_init__ l.157-167), the
// class's default where both are missing.
func nemotronHFromConfig(c *hfReader, m *Model) {
	kinds := nemotronHKinds(c)
	m.Layers = len(kinds) // num_hidden_layers is derived, the key ignored (l.179-187, 239-254)
	m.Hidden, m.Vocab = c.optInt("hidden_size", 4096), c.optInt("vocab_size", 131072)
	m.Heads, m.HeadDim = c.optInt("num_attention_heads", 32), c.optInt("head_dim", 128)
	m.KVHeads = c.optInt("num_key_value_heads", 8) // an int: the strict dataclass refuses None
	m.MaxPosition, m.FFN = c.optInt("max_position_embeddings", 4096), c.optInt("intermediate_size", 21504)
	if c.optBool("mlp_bias", false) {
		m.Bias = BiasMLPOnly // the MLPs' and the latent projections' (l.643-644, 735-736)
	}
	// attention_bias is never read: NemotronHAttention's projections have
	// no bias (l.881-884).
	alias := func(key, old string, def int) int { return c.optInt(old, c.optInt(key, def)) }
	s := SSM{Heads: c.optInt("mamba_num_heads", 128), HeadDim: c.optInt("mamba_head_dim", 64), State: c.optInt("ssm_state_size", 128),
		Groups: alias("n_groups", "mamba_n_groups", 8), ConvKernel: alias("conv_kernel", "mamba_d_conv", 4), Chunk: alias("chunk_size", "mamba_chunk_size", 128),
		NoConvBias: !c.optBool("mamba_conv_bias", c.optBool("use_conv_bias", true)),
		ProjBias:   c.optBool("use_bias", false)} // in_proj's and out_proj's bias (l.428-432, 447); mamba_proj_bias is never read
	for i, k := range kinds {
		switch k {
		case "full_attention":
			s.Attention = append(s.Attention, i)
		case "mlp":
			s.MLP = append(s.MLP, i)
		case "moe":
			s.MoE = append(s.MoE, i)
		}
	}
	m.SSM = &s
	if len(s.MoE) > 0 {
		m.Experts = c.optInt("num_local_experts", c.optInt("n_routed_experts", 8)) // attribute_map (l.84)
		m.ExpertsPerToken, m.ExpertFFN = c.optInt("num_experts_per_tok", 2), c.optInt("moe_intermediate_size", 7688)
		// One shared MLP whatever n_shared_experts says (l.731).
		m.SharedExperts, m.SharedExpertFFN = 1, c.optInt("moe_shared_expert_intermediate_size", 7688)
		m.MoELatent = c.optIntOrNone("moe_latent_size", 0)
	}
	nemotronHUnmodelled(c, m)
}

// nemotronHUnmodelled fails on the settings that change what runs but
// are not modelled, and notes the keys transformers reads otherwise than
// their names say.
func nemotronHUnmodelled(c *hfReader, m *Model) {
	for _, k := range [][2]string{{"mlp_hidden_act", "relu2"}, {"mamba_hidden_act", "silu"}} {
		if v := c.optString(k[0], k[1]); v != k[1] && c.err == nil {
			c.fail(fmt.Sprintf("%s = %q: only the class's %q is modelled", k[0], v, k[1]))
		}
	}
	if !c.optBool("norm_topk_prob", true) && c.err == nil {
		c.fail("norm_topk_prob false: the sigmoid router without renormalization is not modelled")
	}
	if c.optBool("tie_word_embeddings", false) {
		m.note("config.json", "tie_word_embeddings is true, but NemotronHForCausalLM ties nothing (_tied_weights_keys = {}): its lm_head is counted")
	}
	if n := c.optInt("num_nextn_predict_layers", 0); n > 0 {
		m.note("config.json", fmt.Sprintf("num_nextn_predict_layers = %d: the checkpoint's multi-token-prediction layers (mtp.*), which transformers does not load, are not counted in its stored bytes", n))
	}
}

// nemotronHPattern maps hybrid_override_pattern's characters to layer
// kinds (_pattern_to_list, l.279-282).
var nemotronHPattern = map[rune]string{'M': "linear_attention", 'E': "moe", '*': "full_attention", '-': "mlp"}

// nemotronHKinds reads the layer kinds: layers_block_type (or
// layer_types, its attribute_map name), else hybrid_override_pattern,
// else the class's four layers (l.169-177); the older names "mamba" and
// "attention" read as transformers remaps them
// (configuration_utils.py remap_legacy_layer_types).
func nemotronHKinds(c *hfReader) []string {
	raw, key := c.optList("layers_block_type"), "layers_block_type"
	if raw == nil {
		raw, key = c.optList("layer_types"), "layer_types"
	}
	var kinds []string
	switch {
	case raw != nil:
		for i, v := range raw {
			s, _ := v.(string)
			if now, ok := map[string]string{"mamba": "linear_attention", "attention": "full_attention"}[s]; ok {
				s = now
			}
			if !nemotronHKind(s) {
				c.fail(fmt.Sprintf("%s[%d] = %s: want linear_attention, full_attention, mlp or moe", key, i, strictjson.Kind(v)))
				return nil
			}
			kinds = append(kinds, s)
		}
	case c.optString("hybrid_override_pattern", "") != "":
		for i, ch := range c.optString("hybrid_override_pattern", "") {
			k, ok := nemotronHPattern[ch]
			if !ok {
				c.fail(fmt.Sprintf("hybrid_override_pattern[%d] = %q: want M, E, * or -", i, ch))
				return nil
			}
			kinds = append(kinds, k)
		}
	default:
		kinds = []string{"linear_attention", "moe", "full_attention", "mlp"}
	}
	if len(kinds) == 0 && c.err == nil {
		c.fail(key + " lists no layers")
	}
	return kinds
}

// nemotronHKind reports whether s is one of validate_layer_type's kinds
// (l.215).
func nemotronHKind(s string) bool {
	return s == "linear_attention" || s == "full_attention" || s == "mlp" || s == "moe"
}

// nemotronHToConfig writes the keys NemotronHConfig reads.
func nemotronHToConfig(m Model, c map[string]any) {
	s := *m.SSM
	kinds := make([]string, m.Layers)
	for i := range kinds {
		switch {
		case m.IsMoELayer(i):
			kinds[i] = "moe"
		case m.FeedForwardLayer(i):
			kinds[i] = "mlp"
		case m.SSMLayer(i):
			kinds[i] = "linear_attention"
		default:
			kinds[i] = "full_attention"
		}
	}
	c["layers_block_type"], c["hidden_size"], c["vocab_size"] = kinds, m.Hidden, m.Vocab
	c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"] = m.Heads, m.KVHeads, m.HeadDim
	c["max_position_embeddings"], c["intermediate_size"], c["mlp_bias"] = m.MaxPosition, m.FFN, m.Bias == BiasMLPOnly
	c["mamba_num_heads"], c["mamba_head_dim"], c["ssm_state_size"], c["n_groups"] = s.Heads, s.HeadDim, s.State, s.Groups
	c["conv_kernel"], c["chunk_size"], c["use_conv_bias"], c["use_bias"] = s.ConvKernel, s.Chunk, !s.NoConvBias, s.ProjBias
	c["tie_word_embeddings"], c["mlp_hidden_act"], c["mamba_hidden_act"] = false, "relu2", "silu"
	if m.Experts > 0 {
		c["n_routed_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"] = m.Experts, m.ExpertsPerToken, m.ExpertFFN
		c["moe_shared_expert_intermediate_size"], c["n_group"], c["topk_group"], c["norm_topk_prob"] = m.SharedExpertFFN, 1, 1, true
		c["moe_latent_size"] = nil
		if m.MoELatent > 0 {
			c["moe_latent_size"] = m.MoELatent
		}
	}
}

// nemotronHCheck reports the first rule of NemotronHBlock's layers m breaks.
func nemotronHCheck(m Model) error {
	switch {
	case m.SSM == nil:
		return fmt.Errorf("model: nemotron_h needs model.ssm (its Mamba-2 mixers and the kinds of its other layers)")
	case m.SSM.ParallelAttention || m.SSM.Norm != "":
		return fmt.Errorf("model.ssm: nemotron_h's mixers run alone with Mamba-2's gated norm (no parallel_attention, norm \"\")")
	case m.Position != "none" || m.QKNorm != "":
		return fmt.Errorf("model: nemotron_h's attention has no positional encoding and no q/k norm (position %q, qk_norm %q)", m.Position, m.QKNorm)
	case m.MLP != "relu2":
		return fmt.Errorf("model.mlp %q: nemotron_h's MLPs and experts are squared ReLU (relu2)", m.MLP)
	case m.Bias != BiasNone && m.Bias != BiasMLPOnly:
		return fmt.Errorf("model.bias %q: nemotron_h has biases on its MLPs (mlp_bias: \"mlp_only\") or none", m.Bias)
	case m.TiedEmbeddings:
		return fmt.Errorf("model.tied_embeddings: NemotronHForCausalLM never ties its lm_head (_tied_weights_keys = {})")
	case (m.Experts > 0) != (len(m.SSM.MoE) > 0):
		return fmt.Errorf("model: nemotron_h's experts are its moe_layers': set experts exactly when model.ssm.moe_layers lists layers")
	case m.Experts > 0 && (m.SharedExperts != 1 || m.DenseLayers != 0 || m.MoEEvery > 1 || m.Router != "sigmoid_topk_norm"):
		return fmt.Errorf("model: nemotron_h's MoE layers have one shared expert and the sigmoid router (shared_experts 1, router sigmoid_topk_norm, no dense_layers or moe_every)")
	case m.MoELatent != 0 && m.Experts == 0:
		return fmt.Errorf("model.moe_latent sizes the experts' latent width; set experts too")
	}
	return nil
}

// nemotronHTensors lists NemotronHForCausalLM's parameters in
// named_parameters order: the embeddings, each block's norm and mixer,
// norm_f, lm_head (l.1080-1083, 1164).
func nemotronHTensors(m Model, l *tensorList) {
	d := m.dims()
	l.add("model.embeddings.weight", "embedding", d.v, d.h)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("model.layers.%d.", i)
		l.norm(p+"norm", false, d.h)
		switch {
		case m.IsMoELayer(i):
			nemotronHMoETensors(m, l, p+"mixer.")
		case m.FeedForwardLayer(i):
			mlpGated(m, l, p+"mixer.", d.f, -1) // up_proj, down_proj (ungated, l.643-644)
		case m.SSMLayer(i):
			mamba2Mixer(m, l, p+"mixer.")
		default:
			attnQKVO(m, l, p+"mixer.") // no bias whatever mlp_bias says (l.881-884)
		}
	}
	l.headSide()
	l.norm("model.norm_f", false, d.h)
	l.linear("lm_head", "lm_head", d.h, d.v, false)
}

// nemotronHMoETensors adds NemotronHMoE's parameters under p in
// registration order (l.727-739): the fused ungated experts over the
// latent width, the router, the shared expert, the latent projections.
func nemotronHMoETensors(m Model, l *tensorList, p string) {
	e, h, f, w := int64(m.Experts), int64(m.Hidden), int64(m.ExpertFFN), int64(m.Hidden)
	if m.MoELatent > 0 {
		w = int64(m.MoELatent)
	}
	start := len(l.ts)
	l.add(p+"experts.up_proj", "up_proj", e, f, w)
	l.add(p+"experts.down_proj", "down_proj", e, w, f)
	for i := start; i < len(l.ts); i++ {
		l.ts[i].Stacked, l.ts[i].OutIn = m.Experts, true
	}
	l.linear(p+"gate", "router", h, e, false)
	mlpGated(m, l, p+"shared_experts.", int64(m.SharedExpertFFN), -1)
	if m.MoELatent > 0 {
		l.linear(p+"fc1_latent_proj", "other", h, w, m.Bias.mlp())
		l.linear(p+"fc2_latent_proj", "other", w, h, m.Bias.mlp())
	}
}

// nemotronHBlock is NemotronHBlock.forward (l.956-989), as a serving
// engine runs it or as transformers 5.23 trains it: the norm, the layer's
// one sublayer, the residual add.
func nemotronHBlock(r *resolved, layer int) BlockActivations {
	m := r.m
	p := r.blockPlan(layer)
	b := newActBuilder(r, int64(r.MicroBatch)*int64(r.SeqLen))
	h := int64(m.Hidden)
	x := b.external("input", b.size(h, p.resid), p.resid)
	n := b.norm(p, "norm", "rmsnorm", x, h)
	var y *actT
	switch {
	case m.IsMoELayer(layer):
		y = b.nemotronHMoE(p, n)
		b.hold(n)
	case m.FeedForwardLayer(layer):
		y = b.mlpSublayer(p, r.decoderDims(p, layer), n)
	case m.SSMLayer(layer):
		y = b.mambaMixer(p, r.ssmDims(), n)
		b.hold(n)
	default:
		y = b.attentionSublayer(p, r.decoderDims(p, layer), n)
	}
	out := b.residualAdd(p, "residual", h, x, y)
	out.keepAlive = true
	return b.summarize(x)
}

// nemotronHMoE is NemotronHMoE.forward (l.741-754) with the routed
// experts as a serving engine's fused kernel, or in training as
// transformers 5's grouped_mm runs them: the router, the latent
// projection down, the experts, the projection back, the shared expert
// (up, squared ReLU, down) on the layer's input, the sum.
func (b *actBuilder) nemotronHMoE(p blockPlan, x *actT) *actT {
	m := b.r.m
	h, w, f := int64(m.Hidden), int64(m.Hidden), int64(m.ExpertFFN)/p.tp
	rw := b.router(p, x, h)
	in := x
	if m.MoELatent > 0 {
		w = int64(m.MoELatent)
		in = b.linear(p, "fc1_latent_proj", "other", x, h, w)
	}
	var out *actT
	if b.r.servingEngine {
		out = b.fusedMoE(in, rw, w, f)
	} else {
		// transformers 5.23: the ungated experts through grouped_mm
		// (@use_experts_implementation(has_gate=False), l.651).
		out = b.groupedExperts(p, in, rw, w, f)
	}
	if m.MoELatent > 0 {
		out = b.linear(p, "fc2_latent_proj", "other", out, w, h)
	}
	sf := int64(m.SharedExpertFFN) / p.tp
	u := b.linear(p, "shared_experts.up_proj", "up_proj", x, h, sf)
	r := b.keep(b.op("shared_experts.relu", b.size(sf, u.dtype), u.dtype, list(u)))
	sq := b.op("shared_experts.relu2", b.size(sf, r.dtype), r.dtype, list(r), r)
	so := b.linear(p, "shared_experts.down_proj", "down_proj", sq, sf, h)
	d := promote(out.dtype, so.dtype)
	return b.op("moe.add_shared", b.size(h, d), d, list(out, so))
}

// nemotronHModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const nemotronHModelType = "nemotron_h"

// ggufNemotronH is this family's architecture name in GGUF files
// (general.architecture).
const ggufNemotronH = "nemotron_h"
