package vram

import "fmt"

// DeepSeek-V3 (transformers/models/deepseek_v3/modeling_deepseek_v3.py):
// multi-head latent attention (low-rank q and kv with a decoupled rotary
// part), the first first_k_dense_replace blocks dense, then a router, routed
// experts and shared experts (one MLP of width n_shared · expert_ffn) per
// block. A key config.json leaves out takes the class's default
// (configuration_deepseek_v3.py:82-117, transformers 5.23.0).
func init() {
	register(&family{
		name: "deepseek_v3", source: "transformers/models/deepseek_v3/modeling_deepseek_v3.py",
		defaults:        Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Router: "sigmoid_topk_norm"},
		latentAttention: true,
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden = c.optInt("num_hidden_layers", 61), c.optInt("hidden_size", 7168)
			m.Heads = c.optInt("num_attention_heads", 128)
			m.KVHeads = c.optIntNull("num_key_value_heads", 128, m.Heads)
			m.FFN, m.Vocab = c.optInt("intermediate_size", 18432), c.optInt("vocab_size", 129280)
			m.MaxPosition = c.optInt("max_position_embeddings", 4096)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if c.optBool("attention_bias", false) {
				m.Bias = BiasQKVOnly
			}
			if c.optBool("mlp_bias", false) {
				m.Bias = BiasAll
			}
			// attribute_map: num_local_experts is n_routed_experts,
			// num_mtp_layers num_nextn_predict_layers (l.77-80).
			m.Experts = c.optInt("n_routed_experts", c.optInt("num_local_experts", 256))
			m.ExpertsPerToken = c.optInt("num_experts_per_tok", 8)
			m.SharedExperts, m.ExpertFFN = c.optInt("n_shared_experts", 1), c.optInt("moe_intermediate_size", 2048)
			m.DenseLayers = c.optInt("first_k_dense_replace", 3)
			m.QLoRARank, m.KVLoRARank = c.optIntOrNone("q_lora_rank", 1536), c.optInt("kv_lora_rank", 512)
			m.QKNopeDim, m.QKRopeDim = c.optInt("qk_nope_head_dim", 128), c.optInt("qk_rope_head_dim", 64)
			m.VHeadDim = c.optInt("v_head_dim", 128)
			m.HeadDim = m.QKNopeDim + m.QKRopeDim
			m.MTPLayers = c.optInt("num_nextn_predict_layers", c.optInt("num_mtp_layers", 1))
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			delete(c, "head_dim")
			c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"] = m.Experts, m.ExpertsPerToken, m.SharedExperts
			c["moe_intermediate_size"], c["first_k_dense_replace"] = m.ExpertFFN, m.DenseLayers
			c["q_lora_rank"], c["kv_lora_rank"] = m.QLoRARank, m.KVLoRARank
			c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"] = m.QKNopeDim, m.QKRopeDim, m.VHeadDim
			c["n_group"], c["topk_group"] = 1, 1
		},
		// transformers 5: the experts through grouped_mm (moe_grouped_mm.go),
		// the latent cache (mla5.go).
		recipe: func(_ Model, lib libVersion) recipe {
			return recipe{groupedMM: !lib.before(5, 0), latentCache: !lib.before(5, 0)}
		},
		check: func(m Model) error {
			if m.KVLoRARank < 1 || m.QKNopeDim < 1 || m.QKRopeDim < 1 || m.VHeadDim < 1 {
				return fmt.Errorf("model: deepseek_v3 needs kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim ≥ 1")
			}
			return nil
		},
		tensors: standardDecoder{attn: mlaTensors, mlp: func(m Model, l *tensorList, p string, layer int) {
			if !m.IsMoELayer(layer) {
				denseMLP(m, l, p, layer)
				return
			}
			// mlp.gate (its e_score_correction_bias is a buffer:
			// DeepseekV3TopkRouter.register_buffer), routed experts, and the
			// shared experts as one MLP.
			routedExperts(m, l, p+"mlp.")
			if m.SharedExperts > 0 {
				mlpGated(m, l, p+"mlp.shared_experts.", int64(m.SharedExpertFFN)*int64(m.SharedExperts), -1)
			}
		}}.tensors,
		buffers: func(m Model, b *bufferList) {
			b.add("model.rotary_emb.inv_freq", -1, FP32, int64(m.QKRopeDim)/2)
			for i := m.DenseLayers; i < m.Layers; i++ {
				b.add(fmt.Sprintf("model.layers.%d.mlp.gate.e_score_correction_bias", i), i, FP32, int64(m.Experts))
			}
		},
		// The multi-token-prediction layers of the checkpoint are not part
		// of the transformers model (_keys_to_ignore_on_load_unexpected =
		// [r"model\.layers\.61.*"]); they are stored all the same.
		storedOnly: deepseekMTP,
		aliases:    []string{"kimi_k2"},
		// As released: every linear layer in fp8 e4m3 with 128×128 block
		// scales, the embeddings, the output layer, the norms and the
		// routers in bf16 (quantization_config {quant_method fp8, fmt e4m3,
		// weight_block_size [128, 128]}; DeepSeek-V3 README_WEIGHTS.md,
		// inference/model.py: Linear weights fp8 unless the head, Gate.weight
		// a bf16 Parameter); the checkpoint's total_size is 688,574,839,360
		// bytes with its multi-token-prediction layer. Kimi-K2-Instruct is
		// the same architecture with 384 experts, 64 heads, one dense layer
		// and no MTP layer, released in the same block fp8 (Kimi-K2
		// README: "stored in block-fp8 format").
		presets: map[string]Preset{
			"deepseek-v3": {Model{Name: "deepseek-ai/DeepSeek-V3", Layers: 61, Hidden: 7168, Heads: 128, FFN: 18432, Vocab: 129280, MaxPosition: 163840,
				Experts: 256, ExpertsPerToken: 8, SharedExperts: 1, ExpertFFN: 2048, DenseLayers: 3,
				QLoRARank: 1536, KVLoRARank: 512, QKNopeDim: 128, QKRopeDim: 64, VHeadDim: 128, HeadDim: 192, MTPLayers: 1, Release: blockFP8Release}, hf("deepseek-ai/DeepSeek-V3")},
			"deepseek-r1": {Model{Name: "deepseek-ai/DeepSeek-R1", Layers: 61, Hidden: 7168, Heads: 128, FFN: 18432, Vocab: 129280, MaxPosition: 163840,
				Experts: 256, ExpertsPerToken: 8, SharedExperts: 1, ExpertFFN: 2048, DenseLayers: 3,
				QLoRARank: 1536, KVLoRARank: 512, QKNopeDim: 128, QKRopeDim: 64, VHeadDim: 128, HeadDim: 192, MTPLayers: 1, Release: blockFP8Release}, hf("deepseek-ai/DeepSeek-R1")},
			"kimi-k2-instruct": {Model{Name: "moonshotai/Kimi-K2-Instruct", Layers: 61, Hidden: 7168, Heads: 64, FFN: 18432, Vocab: 163840, MaxPosition: 131072,
				Experts: 384, ExpertsPerToken: 8, SharedExperts: 1, ExpertFFN: 2048, DenseLayers: 1,
				QLoRARank: 1536, KVLoRARank: 512, QKNopeDim: 128, QKRopeDim: 64, VHeadDim: 128, HeadDim: 192, Release: blockFP8Release}, hf("moonshotai/Kimi-K2-Instruct")},
		},
	})
}

// blockFP8Release is the fp8 release with 128×128 block scales of
// DeepSeek-V3, R1 and Kimi-K2 (config.json quantization_config).
var blockFP8Release = &Release{Method: "fp8", Format: Quant{DType: FP8E4M3, Block: 128}, DType: BF16,
	Source: "the release's quantization_config (fp8, e4m3, weight_block_size [128, 128])"}

// deepseekMTP lists what the checkpoint stores besides the parameters:
// each router's e_score_correction_bias (a persistent fp32 buffer), and
// the multi-token-prediction layers after the blocks (DeepSeek-V3
// README_WEIGHTS.md, "Multi-Token Prediction"): each a block like the last
// one, plus enorm and hnorm, eh_proj (bf16 in the release: DeepSeek's
// converter quantizes 1-byte tensors only, and its count of bf16 elements
// includes it) and its own copies of the embedding and the output layer
// (shared_head).
func deepseekMTP(m Model, l *tensorList) { mtpLayers(m, l, mlaTensors) }

// mtpLayers lists the routers' biases and the multi-token-prediction
// layers of DeepSeek-V3's layout, attn building each layer's attention
// (MLA; DeepSeek Sparse Attention's with its indexer, dsa.go).
func mtpLayers(m Model, l *tensorList, attn func(Model, *tensorList, string)) {
	d := m.dims()
	routerBiases(m, l, m.Layers+m.MTPLayers)
	for k := 0; k < m.MTPLayers; k++ {
		i := m.Layers + k
		p := fmt.Sprintf("model.layers.%d.", i)
		l.block(i)
		l.add(p+"embed_tokens.weight", "embedding", d.v, d.h)
		l.norm(p+"enorm", false, d.h)
		l.norm(p+"hnorm", false, d.h)
		l.add(p+"eh_proj.weight", "other", d.h, 2*d.h)
		l.norm(p+"input_layernorm", false, d.h)
		attn(m, l, p+"self_attn.")
		l.norm(p+"post_attention_layernorm", false, d.h)
		routedExperts(m, l, p+"mlp.")
		if m.SharedExperts > 0 {
			mlpGated(m, l, p+"mlp.shared_experts.", int64(m.SharedExpertFFN)*int64(m.SharedExperts), -1)
		}
		l.norm(p+"shared_head.norm", false, d.h)
		l.add(p+"shared_head.head.weight", "lm_head", d.v, d.h)
	}
}

// deepseekV3ModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const deepseekV3ModelType = "deepseek_v3"
