package vram

import "fmt"

// Mistral 4 (transformers 5.23 models/mistral4/modeling_mistral4.py;
// configuration_mistral4.py): DeepSeek-V2's multi-head latent attention
// (Mistral4Attention, l.363-419: q_a_proj, q_a_layernorm, q_b_proj,
// kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj; biases on
// q_a_proj, kv_a_proj_with_mqa and o_proj under attention_bias) whose cache
// keeps the compressed latent and the shared rotary key (l.471-473), with
// a Llama-4-style per-position query scale (l.477-481); the first
// first_k_dense_replace layers dense (l.513-516), the others a softmax
// router weight (Mistral4TopkRouter, a bare Parameter named gate.weight,
// l.139, with no correction bias), transformers 5's fused experts
// (l.179-180) and the shared experts as one MLP of n_shared_experts ·
// moe_intermediate_size (l.220-222), registered experts, gate,
// shared_experts (l.218-222). No multi-token-prediction layers
// (_keys_to_ignore_on_load_unexpected = [], l.571). transformers 5.23 maps
// mistral4 to Mistral4ForCausalLM in its pretraining and image-text-to-text
// auto tables, not in AutoModelForCausalLM's (models/auto/modeling_auto.py
// l.711, l.1225). A key config.json leaves out takes the class's default
// (configuration_mistral4.py l.75-109).
func init() {
	register(&family{
		name: mistral4ModelType, source: "transformers/models/mistral4/modeling_mistral4.py (transformers 5.23.0)",
		defaults:        Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Router: "softmax_topk_norm"},
		latentAttention: true,
		servingOnly:     "its modeling code is transformers 5's (grouped_mm experts, MLA's compressed cache, a per-position query scale), which the training rules do not follow yet",
		only5:           true,
		fromConfig:      mistral4FromConfig,
		// DeepSeek-V3's 5.x attention and experts: the experts through
		// grouped_mm (moe_grouped_mm.go; @use_experts_implementation,
		// l.170-207), the latent cache and expand_kv (mla5.go; l.421-438,
		// 473, 483). The router is the engine's softmax path (l.145-167:
		// softmax over the experts, top-k, renormalized in place); its
		// group scores' top-k and mask (l.149-160: int64 indices and a
		// bool tokens × experts a layer) and the per-position query scale
		// (l.477-481: query_states times a [1, 1, seq, 1] tensor, a new
		// query of the same size, the scale saved) are not modelled. Its
		// softmax carries no dtype (l.148): CUDA's autocast puts it in
		// fp32, as the engine does; the CPU's keeps it in bf16, so the
		// amp_bf16 CPU traces lie some 25 KB a MoE layer below.
		recipe: func(_ Model, lib libVersion) recipe { return recipe{groupedMM: true, latentCache: true} },
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			delete(c, "head_dim") // __post_init__ sets it to qk_nope + qk_rope (l.131)
			c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"] = m.Experts, m.ExpertsPerToken, m.SharedExperts
			c["moe_intermediate_size"], c["first_k_dense_replace"] = m.ExpertFFN, m.DenseLayers
			c["attention_bias"] = m.Bias == BiasQKVOnly
			c["q_lora_rank"], c["kv_lora_rank"] = m.QLoRARank, m.KVLoRARank
			if m.QLoRARank == 0 {
				c["q_lora_rank"] = nil
			}
			c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"] = m.QKNopeDim, m.QKRopeDim, m.VHeadDim
			c["n_group"], c["topk_group"] = 1, 1
			c["norm_topk_prob"] = m.Router == "softmax_topk_norm"
		},
		check: func(m Model) error {
			switch {
			case m.KVLoRARank < 1 || m.QKNopeDim < 1 || m.QKRopeDim < 1 || m.VHeadDim < 1:
				return fmt.Errorf("model: mistral4 needs kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim ≥ 1")
			case m.Experts < 1 || m.ExpertsPerToken < 1:
				return fmt.Errorf("model: mistral4 needs experts and experts_per_token ≥ 1")
			case m.Bias != BiasNone && m.Bias != BiasQKVOnly:
				return fmt.Errorf("model.bias %q: mistral4's attention_bias puts biases on q_a_proj, kv_a_proj_with_mqa and o_proj, or none", m.Bias)
			case m.Router != "softmax_topk_norm" && m.Router != "softmax_topk":
				return fmt.Errorf("model.router %q: mistral4's router is a softmax over the experts, top-k, renormalized under norm_topk_prob (softmax_topk_norm) or not (softmax_topk)", m.Router)
			case m.ExpertGroups > 1:
				return fmt.Errorf("model.expert_groups = %d: mistral4's group-limited routing is not modelled", m.ExpertGroups)
			}
			return nil
		},
		tensors: standardDecoder{attn: mlaTensors, mlp: func(m Model, l *tensorList, p string, layer int) {
			if !m.IsMoELayer(layer) {
				denseMLP(m, l, p, layer)
				return
			}
			fusedExperts(m, l, p+"mlp.experts.")
			l.add(p+"mlp.gate.weight", "router", int64(m.Experts), int64(m.Hidden))
			mlpGated(m, l, p+"mlp.shared_experts.", int64(m.SharedExpertFFN)*int64(m.SharedExperts), -1)
		}}.tensors,
		buffers: func(m Model, b *bufferList) {
			// inv_freq and original_inv_freq (l.84-85) over the rotary
			// part: partial_rotary_factor is qk_rope / (qk_nope + qk_rope)
			// (configuration_mistral4.py l.124, 132).
			rope := int64(m.QKRopeDim) / 2
			b.add("model.rotary_emb.inv_freq", -1, FP32, rope)
			b.add("model.rotary_emb.original_inv_freq", -1, FP32, rope)
		},
		// Mistral Small 4 (the checkpoint the config class's docstring
		// names, configuration_mistral4.py l.23): the class's defaults
		// (l.75-109), 36 layers of 128 experts, 4 a token, one shared:
		// 118,972,826,624 parameters as transformers 5.23 builds
		// Mistral4ForCausalLM on the meta device. Only the language model:
		// whether the hub release wraps it with a vision tower was not
		// checked here.
		presets: map[string]Preset{
			"mistral-small-4-119b": {Model{Name: "mistralai/Mistral-Small-4-119B-2603", Layers: 36, Hidden: 4096, Heads: 32, KVHeads: 32, FFN: 12288, Vocab: 131072, MaxPosition: 1048576,
				Experts: 128, ExpertsPerToken: 4, SharedExperts: 1, ExpertFFN: 2048,
				QLoRARank: 1024, KVLoRARank: 256, QKNopeDim: 64, QKRopeDim: 64, VHeadDim: 128, HeadDim: 128}, hf("mistralai/Mistral-Small-4-119B-2603")},
		},
	})
}

// mistral4FromConfig reads a mistral4 config.json, each key with
// Mistral4Config's default (configuration_mistral4.py l.75-109).
func mistral4FromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden = c.optInt("num_hidden_layers", 36), c.optInt("hidden_size", 4096)
	m.Heads = c.optInt("num_attention_heads", 32)
	m.FFN, m.Vocab = c.optInt("intermediate_size", 12288), c.optInt("vocab_size", 131072)
	m.MaxPosition = c.optInt("max_position_embeddings", 1048576)
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
	if c.optBool("attention_bias", false) {
		m.Bias = BiasQKVOnly
	}
	// attribute_map: num_local_experts is n_routed_experts (l.71-73).
	m.Experts = c.optInt("n_routed_experts", c.optInt("num_local_experts", 128))
	m.ExpertsPerToken = c.optInt("num_experts_per_tok", 4)
	m.SharedExperts, m.ExpertFFN = c.optInt("n_shared_experts", 1), c.optInt("moe_intermediate_size", 2048)
	m.DenseLayers = c.optInt("first_k_dense_replace", 0)
	m.QLoRARank, m.KVLoRARank = c.optIntOrNone("q_lora_rank", 1024), c.optInt("kv_lora_rank", 256)
	m.QKRopeDim, m.QKNopeDim = c.optInt("qk_rope_head_dim", 64), c.optInt("qk_nope_head_dim", 64)
	m.VHeadDim = c.optInt("v_head_dim", 128)
	m.HeadDim = m.QKNopeDim + m.QKRopeDim // __post_init__ (l.131)
	// kv_b_proj makes every query head's key and value (l.407-411);
	// num_key_value_heads only sets eager attention's repeat.
	m.KVHeads = m.Heads
	m.Router = "softmax_topk_norm"
	if !c.optBool("norm_topk_prob", true) {
		m.Router = "softmax_topk" // l.163-165
	}
	// n_group and topk_group (default 1, l.91-92) only limit which
	// experts a token may pick (l.149-161): no tensor of their own, and
	// serving memory does not depend on them, so they are not read.
}

// mistral4ModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const mistral4ModelType = "mistral4"
