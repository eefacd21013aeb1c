package vram

import "fmt"

// gpt-oss (transformers/models/gpt_oss/modeling_gpt_oss.py): a decoder of
// mixture-of-experts blocks only — a router with a bias (top-k logits, then
// a softmax over those k), experts kept as stacked tensors with biases and a
// clamped SwiGLU, run in a Python loop over the experts in training —
// attention with biases and a learned sink logit per head (eager attention
// only: _supports_sdpa is false), alternating sliding-window (128) and
// global layers, RMSNorms that multiply by their weight in fp32.
func init() {
	register(&family{
		name: "gpt_oss", source: "transformers/models/gpt_oss/modeling_gpt_oss.py",
		defaults:  Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasAttn, Router: "topk_softmax"},
		attention: []string{"eager", "flash2", "flash3"},
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers = c.optInt("num_hidden_layers", 36)
			m.Hidden = c.optInt("hidden_size", 2880)
			m.FFN = c.optInt("intermediate_size", 2880)
			m.Heads = c.optInt("num_attention_heads", 64)
			m.KVHeads = c.optInt("num_key_value_heads", 8)
			m.HeadDim = c.optInt("head_dim", 64)
			m.Vocab = c.optInt("vocab_size", 201088)
			m.MaxPosition = c.optInt("max_position_embeddings", 131072)
			m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
			m.Experts = c.optInt("num_local_experts", 128)
			m.ExpertsPerToken = c.optInt("num_experts_per_tok", 4)
			m.ExpertFFN = m.FFN
			m.SlidingWindow = c.optInt("sliding_window", 128)
			m.GlobalEvery = 2 // GptOssConfig's default layer_types: sliding, full, sliding, …
			c.layerTypes(m)
			if lim := c.optFloat("swiglu_limit", 7); lim != 7 {
				c.fail(fmt.Sprintf("swiglu_limit = %v: the experts' clamp changes no sizes, but only 7.0 has been traced", lim))
			}
		},
		toConfig: func(m Model, c map[string]any) {
			writeCommonConfig(m, c)
			c["num_local_experts"], c["num_experts_per_tok"] = m.Experts, m.ExpertsPerToken
			c["sliding_window"] = m.SlidingWindow
			writeLayerTypes(m, c, "sliding_attention")
		},
		check: func(m Model) error {
			switch {
			case m.Experts == 0:
				return fmt.Errorf("model: gpt_oss blocks are all mixture-of-experts; set experts and experts_per_token")
			case m.ExpertFFN != m.FFN || m.SharedExperts != 0 || m.DenseLayers != 0 || m.MoEEvery > 1:
				return fmt.Errorf("model: gpt_oss experts are ffn wide, in every block, with no shared experts (expert_ffn = ffn, no shared_experts, dense_layers or moe_every)")
			case m.Bias != BiasAttn:
				return fmt.Errorf("model.bias %q: gpt_oss has biases on the attention projections (\"attention\") and experts", m.Bias)
			}
			return nil
		},
		recipe: func(_ Model, lib libVersion) recipe {
			if !lib.before(5, 0) {
				// transformers 5: the router returns the top-k scores, and
				// the experts run through grouped_mm with their biases
				// (@use_experts_implementation(is_concatenated=False,
				// is_transposed=True, has_bias=True), l.67).
				return recipe{normWeightFP32: true, attnSinks: true, groupedMM: true, groupedBias: true, groupedGate: gptOSSGroupedGate, routerNoScatter: true}
			}
			return recipe{normWeightFP32: true, attnSinks: true, expertMLP: gptOSSExpert}
		},
		tensors: standardDecoder{attn: func(m Model, l *tensorList, p string) {
			l.add(p+"sinks", "other", int64(m.Heads)) // GptOssAttention's own parameter comes first
			attnQKVO(m, l, p)
		}, mlp: func(m Model, l *tensorList, p string, _ int) {
			l.linear(p+"mlp.router", "router", int64(m.Hidden), int64(m.Experts), true)
			stackedExperts(m, l, p+"mlp.experts.", true)
		}}.tensors,
		buffers: func(m Model, b *bufferList) { rotaryBuffer(m, b, "model.") },
		// As released: the routed experts in MXFP4, everything else in
		// bf16 (quantization_config {quant_method mxfp4,
		// modules_to_not_convert [model.layers.*.self_attn,
		// model.layers.*.mlp.router, model.embed_tokens, lm_head]}); the
		// checkpoints' total_size is 13,761,264,768 and 65,248,815,744
		// bytes.
		presets: map[string]Preset{
			"gpt-oss-20b": {Model{Name: "openai/gpt-oss-20b", Layers: 24, Hidden: 2880, Heads: 64, KVHeads: 8, HeadDim: 64, FFN: 2880, Vocab: 201088, MaxPosition: 131072,
				Experts: 32, ExpertsPerToken: 4, SlidingWindow: 128, GlobalEvery: 2, Release: gptOSSRelease}, hf("openai/gpt-oss-20b")},
			"gpt-oss-120b": {Model{Name: "openai/gpt-oss-120b", Layers: 36, Hidden: 2880, Heads: 64, KVHeads: 8, HeadDim: 64, FFN: 2880, Vocab: 201088, MaxPosition: 131072,
				Experts: 128, ExpertsPerToken: 4, SlidingWindow: 128, GlobalEvery: 2, Release: gptOSSRelease}, hf("openai/gpt-oss-120b")},
		},
	})
}

// gptOSSRelease is gpt-oss's release: MXFP4 experts, bf16 elsewhere.
var gptOSSRelease = &Release{Method: "mxfp4", Format: Quant{DType: MXFP4}, Scope: "experts", DType: BF16,
	Skip:   "model.layers.*.self_attn\nmodel.layers.*.mlp.router\nmodel.embed_tokens\nlm_head",
	Source: "the release's quantization_config (mxfp4, modules_to_not_convert)"}

// gptOSSExpert is one expert of GptOssExperts.forward's training loop on
// its gathered tokens x: current_state @ gate_up_proj[e] + bias (a select of
// the stacked weight, so autocast casts it on every call and the matmul
// saves the copy; the fp32 bias promotes the sum), gate and up as strided
// views of it (the select's backward makes a gradient of the whole stacked
// weight per expert), each clamped (clamp saves its input: the whole gate|up),
// glu = gate · sigmoid(gate · α) (sigmoid saves its output, the product
// both), (up + 1) · glu (saves both), then @ down_proj[e] + bias.
func gptOSSExpert(b *actBuilder, p blockPlan, x *actT, h, f int64) *actT {
	gu := b.linear(p, "experts.gate_up_proj", "gate_up_proj", x, h, 2*f)
	b.ops[len(b.ops)-1].stacked = true
	d := promote(gu.dtype, p.baseDType)
	gu = b.op("experts.gate_up_proj.bias", b.size(2*f, d), d, list(gu))
	gate := b.op("experts.gate.clamp", b.size(f, d), d, list(gu), gu)
	up := b.op("experts.up.clamp", b.size(f, d), d, list(gu), gu)
	ga := b.op("experts.gate*alpha", b.size(f, d), d, list(gate))
	sig := b.keep(b.op("experts.sigmoid", b.size(f, d), d, list(ga)))
	glu := b.op("experts.glu", b.size(f, d), d, list(gate, sig), gate, sig)
	up1 := b.op("experts.up+1", b.size(f, d), d, list(up))
	g := b.op("experts.gated", b.size(f, d), d, list(up1, glu), up1, glu)
	out := b.linear(p, "experts.down_proj", "down_proj", g, f, h)
	b.ops[len(b.ops)-1].stacked = true
	od := promote(out.dtype, p.baseDType)
	return b.op("experts.down_proj.bias", b.size(h, od), od, list(out))
}

// gptOSSGroupedGate is GptOssExperts._apply_gate (5.23
// gpt_oss/modeling_gpt_oss.py:81-87) on the interleaved halves of the
// grouped gate|up output: the clamps save their inputs (views: the whole
// output), gate·alpha, sigmoid (saves its output), glu (saves both), up +
// 1, the product (saves both).
func gptOSSGroupedGate(b *actBuilder, p blockPlan, gate, up *actT, f int64) *actT {
	d := gate.dtype
	gc := b.op("experts.gate.clamp", b.size(f, d), d, list(gate), gate, up)
	uc := b.op("experts.up.clamp", b.size(f, d), d, list(up), up)
	ga := b.op("experts.gate*alpha", b.size(f, d), d, list(gc))
	sig := b.keep(b.op("experts.sigmoid", b.size(f, d), d, list(ga)))
	glu := b.op("experts.glu", b.size(f, d), d, list(gc, sig), gc, sig)
	up1 := b.op("experts.up+1", b.size(f, d), d, list(uc))
	return b.op("experts.gated", b.size(f, d), d, list(up1, glu), up1, glu)
}

// gptOssModelType is the family's model_type, which the serving engines'
// tables of defaults are keyed by.
const gptOssModelType = "gpt_oss"
