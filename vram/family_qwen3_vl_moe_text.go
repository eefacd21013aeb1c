package vram

// Qwen3-VL-MoE's language model (transformers 4.57
// models/qwen3_vl_moe/modeling_qwen3_vl_moe.py, Qwen3VLMoeTextModel; its
// config is the text_config, model_type qwen3_vl_moe_text): Qwen3's
// attention (per-head q/k RMSNorms) with, in every decoder_sparse_step-th
// layer, a router mlp.gate (softmax_topk_norm_scatter: the weights are
// always renormalized, l.138-139, and scattered into a tokens × experts
// tensor) and the experts as stacked parameters, mlp.experts.gate_up_proj
// (experts × hidden × 2·moe_intermediate_size) and down_proj (l.67-76),
// run in training in a Python loop over the experts hit, each taking its
// slices with a one-element index tensor (copies) and its gate and up as
// halves of one matmul (l.96-114). Only the vision-language wrapper
// (family qwen3_vl_moe) builds it.
func init() {
	register(&family{
		name: "qwen3_vl_moe_text", source: "transformers/models/qwen3_vl_moe/modeling_qwen3_vl_moe.py", wrappedText: true,
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, QKNorm: "head", Router: "softmax_topk_norm_scatter"},
		fromConfig: func(c *hfReader, m *Model) {
			// A key config.json leaves out takes the class's default
			// (configuration_qwen3_vl_moe.py:81-118, transformers 5.23.0):
			// head_dim hidden/heads where it is None or 0.
			c.commonOr(m, classShape{layers: 24, hidden: 2048, heads: 16, kvHeads: 16, ffn: 5632, vocab: 151936, maxPosition: 128000})
			// The wrapper's tie_word_embeddings decides (Qwen3VLMoeConfig,
			// false by default); this one (true by default, l.93) is read
			// for a text config alone.
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
			if c.optBool("attention_bias", false) {
				m.Bias = BiasAttn
			}
			qwenMoEConfig(c, m, qwenMoEDefaults{experts: 60, perToken: 4, expertFFN: 1408})
			if m.Experts > 0 {
				m.Router = "softmax_topk_norm_scatter" // norm_topk_prob is not read (l.138-139)
			}
		},
		toConfig: func(m Model, c map[string]any) {
			qwen3Config(m, c)
			writeQwenMoEConfig(m, c)
			c["norm_topk_prob"] = true
		},
		check: requireQKNorm("head"),
		recipe: func(_ Model, lib libVersion) recipe {
			if !lib.before(5, 0) {
				// transformers 5: Qwen3-MoE's router, no scatter_, and the
				// experts through grouped_mm (moe_grouped_mm.go).
				return recipe{groupedMM: true, routerLogitsDType: true, routerNoScatter: true}
			}
			return recipe{expertMLP: qwen3VLMoEExpert, autocastError: "the router's scatter_ expects self.dtype (the logits', autocast's) equal to src.dtype (the hidden states')"}
		},
		tensors: standardDecoder{attn: func(m Model, l *tensorList, p string) {
			attnQKVO(m, l, p)
			qkNormTensors(m, l, p)
		}, mlp: func(m Model, l *tensorList, p string, layer int) {
			if !m.IsMoELayer(layer) {
				denseMLP(m, l, p, layer)
				return
			}
			l.linear(p+"mlp.gate", "router", int64(m.Hidden), int64(m.Experts), false)
			stackedExperts(m, l, p+"mlp.experts.", false)
		}}.tensors,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
	})
}

// qwen3VLMoEExpert is one routed expert's ops in Qwen3VLMoeTextExperts'
// training loop (l.104-113) on its gathered tokens x: its slice of
// gate_up_proj taken with a one-element index tensor (a copy, which the
// matmul saves with x; the index's backward fills a zero tensor of the
// whole stacked parameter, hence stacked), x @ slice, gate and up its
// halves (chunk), SiLU(gate) (saves gate), up · SiLU(gate) (saves both),
// and the same for down_proj. The copies of all the experts hit are the
// stacked parameters' size (here: every expert).
func qwen3VLMoEExpert(b *actBuilder, p blockPlan, x *actT, h, f int64) *actT {
	e := int64(b.r.m.Experts)
	w := p.baseDType
	gw := b.op("experts.gate_up_proj[expert_idx]", w.Size(mulI64(e, h*2*f)), w, nil)
	gu := b.linear(p, "experts.gate_up_proj", "gate_up_proj", x, h, 2*f)
	b.ops[len(b.ops)-1].stacked = true
	b.savedByLast(gw)
	act := b.op("experts.act", b.size(f, gu.dtype), gu.dtype, list(gu), gu)
	prod := b.op("experts.up*act", b.size(f, gu.dtype), gu.dtype, list(gu, act), gu, act)
	dw := b.op("experts.down_proj[expert_idx]", w.Size(mulI64(e, f*h)), w, nil)
	out := b.linear(p, "experts.down_proj", "down_proj", prod, f, h)
	b.ops[len(b.ops)-1].stacked = true
	b.savedByLast(dw)
	return out
}
