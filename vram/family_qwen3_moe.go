package vram

// Qwen3-MoE (transformers/models/qwen3_moe/modeling_qwen3_moe.py): Qwen3's
// attention (per-head q/k RMSNorms, no biases) with a sparse MLP —
// mlp.gate, a router with softmax over the experts and top-k, renormalized
// with norm_topk_prob, and experts mlp.experts.N of moe_intermediate_size
// run in a Python loop — in every decoder_sparse_step-th block; the others
// keep a dense MLP of intermediate_size.
func init() {
	register(&family{
		name: qwen3MoeModelType, source: "transformers/models/qwen3_moe/modeling_qwen3_moe.py",
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, QKNorm: "head"},
		fromConfig: func(c *hfReader, m *Model) {
			// A key config.json leaves out takes the class's default
			// (configuration_qwen3_moe.py:81-112, transformers 5.23.0).
			c.commonOr(m, classShape{layers: 24, hidden: 2048, heads: 32, kvHeads: 4, ffn: 6144, vocab: 151936, maxPosition: 32768})
			// head_dim left out is hidden_size / num_attention_heads
			// (getattr(config, "head_dim", …)), unlike Qwen3's default of
			// 128.
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			if c.optBool("attention_bias", false) {
				m.Bias = BiasAttn
			}
			if c.optBool("use_sliding_window", false) {
				c.fail("use_sliding_window: Qwen3-MoE's sliding-window layers are not modelled")
			}
			qwenMoEConfig(c, m, qwenMoEDefaults{experts: 128, perToken: 8, expertFFN: 768})
		},
		toConfig: func(m Model, c map[string]any) {
			qwen3Config(m, c)
			writeQwenMoEConfig(m, c)
		},
		check: requireQKNorm("head"),
		// transformers 5: the experts through grouped_mm (moe_grouped_mm.go).
		recipe: func(_ Model, lib libVersion) recipe {
			return recipe{groupedMM: !lib.before(5, 0), routerLogitsDType: !lib.before(5, 0)}
		},
		tensors: standardDecoder{attn: func(m Model, l *tensorList, p string) {
			attnQKVO(m, l, p)
			qkNormTensors(m, l, p)
		}, mlp: qwenMoEMLP}.tensors,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		presets: map[string]Preset{
			"qwen3-30b-a3b": {Model{Name: "Qwen/Qwen3-30B-A3B", Layers: 48, Hidden: 2048, Heads: 32, KVHeads: 4, HeadDim: 128, FFN: 6144, Vocab: 151936, MaxPosition: 40960,
				Experts: 128, ExpertsPerToken: 8, ExpertFFN: 768, Router: "softmax_topk_norm"}, hf("Qwen/Qwen3-30B-A3B")},
			"qwen3-235b-a22b": {Model{Name: "Qwen/Qwen3-235B-A22B", Layers: 94, Hidden: 4096, Heads: 64, KVHeads: 4, HeadDim: 128, FFN: 12288, Vocab: 151936, MaxPosition: 40960,
				Experts: 128, ExpertsPerToken: 8, ExpertFFN: 1536, Router: "softmax_topk_norm"}, hf("Qwen/Qwen3-235B-A22B")},
			// Qwen's FP8 release: block fp8 (e4m3, 128×128 scales: "The FP8
			// models of Qwen3 are block-wise quant", QwenLM/Qwen3
			// docs/source/deployment/vllm.md) on every linear layer but the
			// routers and the output layer, which stay bf16.
			"qwen3-235b-a22b-fp8": {Model{Name: "Qwen/Qwen3-235B-A22B-FP8", Layers: 94, Hidden: 4096, Heads: 64, KVHeads: 4, HeadDim: 128, FFN: 12288, Vocab: 151936, MaxPosition: 40960,
				Experts: 128, ExpertsPerToken: 8, ExpertFFN: 1536, Router: "softmax_topk_norm",
				Release: &Release{Method: "fp8", Format: Quant{DType: FP8E4M3, Block: 128}, DType: BF16, Skip: "lm_head",
					Source: "the release's quantization_config (fp8, e4m3, weight_block_size [128, 128])"}}, hf("Qwen/Qwen3-235B-A22B-FP8")},
		},
	})
}

// qwenMoEDefaults are a Qwen MoE config class's defaults for the expert
// keys: num_experts, num_experts_per_tok, moe_intermediate_size,
// norm_topk_prob.
type qwenMoEDefaults struct {
	experts, perToken, expertFFN int
	normTopK                     bool
}

// qwenMoEConfig reads the expert keys Qwen2-MoE and Qwen3-MoE share, a
// key left out taking the class's default d (num_experts 0: dense).
func qwenMoEConfig(c *hfReader, m *Model, d qwenMoEDefaults) {
	m.Experts = c.optInt("num_experts", d.experts)
	if m.Experts == 0 {
		return
	}
	m.ExpertsPerToken, m.ExpertFFN = c.optInt("num_experts_per_tok", d.perToken), c.optInt("moe_intermediate_size", d.expertFFN)
	m.MoEEvery = c.optInt("decoder_sparse_step", 1)
	if m.MoEEvery == 0 {
		c.fail("decoder_sparse_step must be ≥ 1")
	}
	m.Router = "softmax_topk"
	if c.optBool("norm_topk_prob", d.normTopK) {
		m.Router = "softmax_topk_norm"
	}
	if l := c.optList("mlp_only_layers"); len(l) > 0 {
		c.fail("mlp_only_layers: dense layers listed one by one are not modelled; decoder_sparse_step interleaves them")
	}
}

// writeQwenMoEConfig writes the expert keys of qwenMoEConfig.
func writeQwenMoEConfig(m Model, c map[string]any) {
	c["num_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"] = m.Experts, m.ExpertsPerToken, m.ExpertFFN
	c["decoder_sparse_step"] = max(1, m.MoEEvery)
	c["norm_topk_prob"] = m.Router == "softmax_topk_norm"
	c["mlp_only_layers"] = []int{}
}

// qwenMoEMLP lists a Qwen-MoE block's MLP: the router and experts (and the
// shared expert with its gate, Qwen2-MoE) in MoE blocks, a dense MLP in
// the others.
func qwenMoEMLP(m Model, l *tensorList, p string, layer int) {
	if !m.IsMoELayer(layer) {
		denseMLP(m, l, p, layer)
		return
	}
	routedExperts(m, l, p+"mlp.")
	if m.SharedExperts > 0 {
		mlpGated(m, l, p+"mlp.shared_expert.", int64(m.SharedExpertFFN)*int64(m.SharedExperts), -1)
		l.linear(p+"mlp.shared_expert_gate", "router", int64(m.Hidden), 1, false)
	}
}

const qwen3MoeModelType = "qwen3_moe"
