package vram

// The activations of a mixture-of-experts MLP: the router (one of
// Model.Router's variants), the routed experts — run one at a time over
// their tokens, the way transformers loops over them in Python, or every
// expert on every token where the family batches them (recipe.denseExperts)
// — and the shared experts every token passes through.

// gatedMLP is act(gate(x)) · up(x) through down: SiLU/GELU save their
// input, the product both factors (modeling_llama.py LlamaMLP). prefix
// names the ops (a shared expert's); the roles stay gate/up/down_proj.
func (b *actBuilder) gatedMLP(p blockPlan, prefix string, x *actT, h, f int64) *actT {
	if p.rec.fusedGateUp {
		// One gate|up matmul: one autocast copy of its input, and gate and
		// up are the two halves of its output (SiLU saves one, the product
		// the other: together the whole output), each with a gradient of
		// its own until the chunk's backward joins them.
		xc := b.castIn(p, prefix+"gate_up_proj", x)
		g := b.linear(p, prefix+"gate_up_proj.gate", "gate_up_proj", xc, h, f)
		u := b.linear(p, prefix+"gate_up_proj.up", "up_proj", xc, h, f)
		if p.rec.mlpGate != nil {
			return b.linear(p, prefix+"down_proj", "down_proj", p.rec.mlpGate(b, p, g, u, f), f, h)
		}
		return b.linear(p, prefix+"down_proj", "down_proj", b.gateTimesUp(prefix, g, u, f), f, h)
	}
	g := b.linear(p, prefix+"gate_proj", "gate_proj", x, h, f)
	u := b.linear(p, prefix+"up_proj", "up_proj", x, h, f)
	return b.linear(p, prefix+"down_proj", "down_proj", b.gateTimesUp(prefix, g, u, f), f, h)
}

// gateTimesUp is act_fn(gate) · up in the projections' output dtypes (the
// compute dtype, or fp32 where a 4-bit projection returns its fp32
// input's): the activation saves its input, the product both factors.
func (b *actBuilder) gateTimesUp(prefix string, g, u *actT, f int64) *actT {
	act := b.op(prefix+"act", b.size(f, g.dtype), g.dtype, list(g), g)
	d := promote(act.dtype, u.dtype)
	return b.op(prefix+"act*up", b.size(f, d), d, list(act, u), act, u)
}

// moe builds layer's MoE MLP on x, the norm's output in the residual
// region (width h per token).
func (b *actBuilder) moe(p blockPlan, x *actT, layer int) *actT {
	if b.r.ttMoE() {
		return b.torchtitanMoE(p, x, false)
	}
	m := b.r.m
	h := int64(m.Hidden)
	f := int64(m.ExpertFFN) / p.tp
	var first *actT
	if p.rec.sharedFirst && m.SharedExperts > 0 {
		first = b.sharedExperts(p, x, h, !p.rec.sharedGateLast)
	}
	if p.rec.parallelExperts {
		return b.withShared(p, x, h, b.parallelExperts(p, x, h, f), first)
	}
	rw := b.router(p, x, h)
	if p.rec.denseExperts {
		return b.denseMoE(p, x, rw, h, f)
	}
	var out *actT
	switch {
	case p.rec.fusedMoE:
		out = b.fusedMoE(x, rw, h, f)
	case p.rec.groupedMM:
		out = b.groupedExperts(p, x, rw, h, f)
	case p.rec.sortedExperts:
		out = b.sortedExperts(p, x, rw, h, f)
	default:
		out = b.loopExperts(p, x, rw, h, f)
	}
	if first != nil && p.rec.sharedGateLast {
		first = b.sharedGate(p, x, h, first)
	}
	return b.withShared(p, x, h, out, first)
}

// withShared adds the shared experts' output (first, when they ran before
// the routed experts) to the routed experts' out.
func (b *actBuilder) withShared(p blockPlan, x *actT, h int64, out, first *actT) *actT {
	if b.r.m.SharedExperts == 0 {
		return out
	}
	so := first
	if so == nil {
		so = b.sharedExperts(p, x, h, true)
	}
	d := promote(out.dtype, so.dtype)
	// add hands its output's gradient to inputs of its dtype as is.
	out.aliasGrad, so.aliasGrad = out.dtype == d, so.dtype == d
	return b.op("moe.add_shared", b.size(h, d), d, list(out, so))
}

// sharedExperts is one MLP of SharedExperts · SharedExpertFFN on every
// token: after the routed experts (modeling_qwen2_moe.py,
// modeling_deepseek_v3.py; Llama 4 adds the routed output into the shared
// expert's in place) or before them (sharedFirst). gate: with the shared
// expert's gate (sharedExpertGate), unless it runs apart (sharedGateLast).
func (b *actBuilder) sharedExperts(p blockPlan, x *actT, h int64, gate bool) *actT {
	m := b.r.m
	sf := int64(m.SharedExperts) * int64(m.SharedExpertFFN) / p.tp
	so := b.gatedMLP(p, "shared_expert.", x, h, sf)
	if gate {
		so = b.sharedGate(p, x, h, so)
	}
	return so
}

// sharedGate is Qwen2-MoE's sigmoid(shared_expert_gate(x)) · so on the
// shared expert's output so (sharedExpertGate; so as it is without):
// sigmoid saves its output, the product both factors.
func (b *actBuilder) sharedGate(p blockPlan, x *actT, h int64, so *actT) *actT {
	if !p.rec.sharedExpertGate {
		return so
	}
	g := b.linear(p, "shared_expert_gate", "router", x, h, 1)
	sg := b.keep(b.op("shared_expert_gate.sigmoid", b.size(1, g.dtype), g.dtype, list(g)))
	d := promote(sg.dtype, so.dtype)
	return b.op("shared_expert.gated", b.size(h, d), d, list(sg, so), sg, so)
}

// fusedMoE is the routed experts as a serving engine runs them, without
// autograd: vLLM's fused_experts_impl (fused_moe.py) works on chunks of at
// most VLLM_FUSED_MOE_CHUNK_SIZE (32768) tokens with one buffer shared by
// the gate|up output and the down output (cache13: tokens × k × max(2f,
// h)), one for the activation (cache2: tokens × k × f) and the output.
func (b *actBuilder) fusedMoE(x, rw *actT, h, f int64) *actT {
	k := int64(b.r.m.ExpertsPerToken)
	chunk := mulI64(min(b.tokens, 32768), k)
	d := x.dtype
	c13 := b.op("experts.fused.cache13", d.Size(mulI64(chunk, max(2*f, h))), d, list(x, rw))
	c2 := b.op("experts.fused.cache2", d.Size(mulI64(chunk, f)), d, list(c13))
	return b.op("experts.fused.output", b.size(h, d), d, list(c13, c2))
}

// floatTopKRouter is the routing of GraniteMoE's TopKGating (and
// transformers 5's GraniteMoeHybridTopKRouter, modeling_granitemoehybrid.py:
// 832-836): the logits in fp32, their top k (saves the indices), softmax
// over them (saves its output), cast to the hidden states' dtype.
func (b *actBuilder) floatTopKRouter(p blockPlan, x *actT, h int64) *actT {
	m := b.r.m
	k, e := int64(m.ExpertsPerToken), int64(m.Experts)
	logits := b.linear(p, "router.layer", "router", x, h, e)
	lf := logits
	if lf.dtype != FP32 {
		lf = b.op("router.logits.float", b.size(e, FP32), FP32, list(logits))
	}
	top := b.op("router.topk", b.size(k, FP32), FP32, list(lf))
	b.side("router.topk_indices", b.size(k, INT64), INT64)
	gates := b.keep(b.op("router.softmax", b.size(k, FP32), FP32, list(top)))
	if x.dtype != FP32 {
		gates = b.op("router.gates.type_as", b.size(k, x.dtype), x.dtype, list(gates))
	}
	return gates
}

// router turns x into the experts' routing weights: a [tokens, k] tensor
// (softmax_topk*, sigmoid_topk_norm) or [tokens, experts] with zeros off
// the top k (topk_softmax, topk_sigmoid), in the dtype the experts'
// outputs are multiplied in.
func (b *actBuilder) router(p blockPlan, x *actT, h int64) *actT {
	if p.rec.floatTopKRouter {
		return b.floatTopKRouter(p, x, h)
	}
	m := b.r.m
	k, e := int64(m.ExpertsPerToken), int64(m.Experts)
	hd := x.dtype
	switch m.Router {
	case "topk_softmax":
		// modeling_gpt_oss.py GptOssTopKRouter: F.linear with a bias, topk
		// (saves its indices), softmax over the k values in their dtype
		// (saves its output), scattered into zeros_like(logits).
		logits := b.linear(p, "router", "router", x, h, e)
		top := b.op("router.topk", b.size(k, logits.dtype), logits.dtype, list(logits))
		b.side("router.topk_indices", b.size(k, INT64), INT64)
		sm := b.keep(b.op("router.softmax", b.size(k, top.dtype), top.dtype, list(top)))
		if p.rec.routerNoScatter {
			return sm
		}
		return b.op("router.scores", b.size(e, logits.dtype), logits.dtype, list(sm))
	case "topk_sigmoid":
		// modeling_llama4.py Llama4Router: topk of the logits (saves its
		// indices), scattered into full_like(logits, -inf), sigmoid in fp32
		// (saves its output), cast back to the logits' dtype.
		logits := b.linear(p, "router", "router", x, h, e)
		b.op("router.topk", b.size(k, logits.dtype), logits.dtype, list(logits))
		b.side("router.topk_indices", b.size(k, INT64), INT64)
		sc := b.op("router.scores", b.size(e, logits.dtype), logits.dtype, list(logits))
		if sc.dtype != FP32 {
			sc = b.op("router.scores.float", b.size(e, FP32), FP32, list(sc))
		}
		sig := b.keep(b.op("router.sigmoid", b.size(e, FP32), FP32, list(sc)))
		if logits.dtype == FP32 {
			return sig
		}
		return b.op("router.sigmoid.to", b.size(e, logits.dtype), logits.dtype, list(sig))
	case "sigmoid_topk_norm":
		// modeling_deepseek_v3.py DeepseekV3TopkRouter: float logits,
		// sigmoid (saves its output), gather of the top k (saves the
		// indices), divided in place by their sum (saves a copy of the
		// values and the sum), times routed_scaling_factor.
		logits := b.floatLogits(p, x, h, e)
		sig := b.keep(b.op("router.sigmoid", b.size(e, logits.dtype), logits.dtype, list(logits)))
		top := b.op("router.gather", b.size(k, sig.dtype), sig.dtype, list(sig))
		b.side("router.topk_indices", b.size(k, INT64), INT64)
		b.side("router.weights.original", b.size(k, sig.dtype), sig.dtype) // div_'s copy of self
		b.side("router.weight_sum", b.size(1, sig.dtype), sig.dtype)
		return b.op("router.weights", b.size(k, sig.dtype), sig.dtype, list(top))
	}
	switch m.Router {
	case "softmax_topk_norm_scatter":
		if !p.rec.routerNoScatter {
			return b.scatterRouter(p, x, h)
		}
	case "softmax_gather_norm":
		return b.gatherRouter(p, x, h)
	case "softmax_topk_scaled":
		return b.scaledRouter(p, x, h)
	}
	// softmax_topk(_norm): modeling_mixtral.py MixtralSparseMoeBlock and
	// Qwen-MoE: softmax over the experts in fp32 (saves its output), topk
	// (saves its indices), with norm_topk_prob the weights divided by
	// their sum in place (saves both), cast to the hidden dtype.
	logits := b.linear(p, "router", "router", x, h, e)
	sm := b.keep(b.op("router_softmax", b.size(e, FP32), FP32, list(logits)))
	top := b.op("router.topk", b.size(k, FP32), FP32, list(sm))
	b.side("router.topk_indices", b.size(k, INT64), INT64)
	if m.Router == "softmax_topk_norm" || m.Router == "softmax_topk_norm_scatter" {
		b.keep(top)
		b.side("router.weight_sum", b.size(1, FP32), FP32)
	}
	if p.rec.routerLogitsDType {
		hd = logits.dtype
	}
	return b.op("router.weights", b.size(k, hd), hd, list(top))
}

// scatterRouter is Qwen3-VL-MoE's router (modeling_qwen3_vl_moe.py
// Qwen3VLMoeTextSparseMoeBlock.forward l.141-152): the logits, softmax in
// fp32 (saves its output), top-k (saves its indices), divided by their sum
// out of place (saves both), cast to the hidden states' dtype and
// scattered into zeros_like(logits): every token's weight for every expert,
// in the logits' dtype (scatter_ needs the two dtypes equal, so autocast
// over wider weights raises; recipe.autocastError).
func (b *actBuilder) scatterRouter(p blockPlan, x *actT, h int64) *actT {
	m := b.r.m
	k, e := int64(m.ExpertsPerToken), int64(m.Experts)
	logits := b.linear(p, "router", "router", x, h, e)
	sm := b.keep(b.op("router_softmax", b.size(e, FP32), FP32, list(logits)))
	top := b.op("router.topk", b.size(k, FP32), FP32, list(sm))
	b.side("router.topk_indices", b.size(k, INT64), INT64)
	sum := b.op("router.weight_sum", b.size(1, FP32), FP32, list(top))
	w := b.op("router.weights", b.size(k, FP32), FP32, list(top, sum), top, sum)
	if x.dtype != FP32 {
		w = b.op("router.weights.to", b.size(k, x.dtype), x.dtype, list(w))
	}
	return b.op("router.scores", b.size(e, logits.dtype), logits.dtype, list(w))
}

// floatLogits is a router's F.linear(x.float(), weight.float())
// (DeepSeek-V2/V3): x copied to fp32 unless it is, the matmul in the
// compute dtype under autocast, and without autocast a fp32 copy of a
// low-precision weight, which the matmul saves.
func (b *actBuilder) floatLogits(p blockPlan, x *actT, h, e int64) *actT {
	xf := x
	if x.dtype != FP32 {
		xf = b.op("router.x.float", b.size(h, FP32), FP32, list(x))
	}
	logits := b.linear(p, "router", "router", xf, h, e)
	if !p.autocast && p.baseDType != FP32 {
		b.side("router.weight.float", FP32.Size(mulI64(h, e)), FP32)
	}
	return logits
}

// scaledRouter is DeepSeek-V2's gate (modeling_deepseek_v2.py
// DeepseekV2MoEGate.forward): float logits, softmax in fp32 (saves its
// output), with group_limited_greedy the scores of the groups not chosen
// masked to zero (masked_fill saves its mask), top-k (saves the indices),
// times routed_scaling_factor: fp32 weights, not renormalized.
func (b *actBuilder) scaledRouter(p blockPlan, x *actT, h int64) *actT {
	m := b.r.m
	k, e := int64(m.ExpertsPerToken), int64(m.Experts)
	logits := b.floatLogits(p, x, h, e)
	sm := b.keep(b.op("router_softmax", b.size(e, FP32), FP32, list(logits)))
	if m.ExpertGroups > 1 {
		sm = b.op("router.group_masked", b.size(e, FP32), FP32, list(sm))
		b.side("router.group_mask", b.size(e, Bool), Bool)
	}
	top := b.op("router.topk", b.size(k, FP32), FP32, list(sm))
	b.side("router.topk_indices", b.size(k, INT64), INT64)
	return b.op("router.weights", b.size(k, FP32), FP32, list(top))
}

// sortedExperts runs the routed experts as DeepSeek-V2's MoE.moe does:
// the tokens counted per expert, the (token, slot) pairs sorted by expert
// (argsort) and the tokens
// gathered in that order (hidden_states[indices // k]: both index tensors
// saved), each expert's MLP on its slice, the outputs concatenated (the
// list and the result live until moe returns), put back in slot order
// (new_x[indices] = outs), cast to the weights' dtype, scaled in place by
// them (mul_ saves a clone of its input and the weights) and summed over
// the k slots, cast back. Its locals (the counts, the sorted tokens, the
// outputs, new_x) live until it returns.
func (b *actBuilder) sortedExperts(p blockPlan, x, rw *actT, h, f int64) *actT {
	k, e := int64(b.r.m.ExpertsPerToken), int64(b.r.m.Experts)
	// cnts: a [tokens, experts] int64 count, scattered with ones.
	counts := b.op("experts.counts", b.size(e, INT64), INT64, list(rw))
	tokens := b.tokens
	b.tokens = mulI64(tokens, k)
	sorted := b.op("experts.sorted_tokens", b.size(h, x.dtype), x.dtype, list(x))
	b.side("experts.sort_index", b.size(1, INT64), INT64)
	b.side("experts.token_index", b.size(1, INT64), INT64)
	first := len(b.ops)
	var out *actT
	if p.rec.expertMLP != nil {
		out = p.rec.expertMLP(b, p, sorted, h, f)
	} else {
		out = b.gatedMLP(p, "", sorted, h, f)
	}
	b.allExperts(first, true)
	// Each expert reads a slice of the sorted tokens: its backward makes
	// a gradient of the whole (SliceBackward's zeros), added into the
	// one the experts before it made.
	for i := first; i < len(b.ops); i++ {
		for _, in := range b.ops[i].ins {
			if in == sorted {
				b.ops[i].scatter = true
			}
		}
	}
	outs := b.op("experts.cat", b.size(h, out.dtype), out.dtype, list(out))
	unsorted := b.op("experts.unsorted", b.size(h, outs.dtype), outs.dtype, list(outs))
	typed := unsorted
	if typed.dtype != rw.dtype {
		typed = b.op("experts.to", b.size(h, rw.dtype), rw.dtype, list(unsorted))
	}
	b.op("experts.routing_weight", 0, rw.dtype, list(typed, rw), rw)
	b.side("experts.routing_weight.original", b.size(h, rw.dtype), rw.dtype)
	// The weights' gradient: grad · original at full size, then summed
	// over the hidden width.
	b.gradWorkspace(b.size(h, rw.dtype))
	if typed == unsorted {
		// No cast: mul_ ran on a view of new_x, so its backward is
		// autograd's CopySlices, which copies the gradient into a new
		// tensor of the base's size and hands the view's function a clone
		// of its slice (torch/csrc/autograd/functions/tensor.cpp).
		b.gradWorkspace(2 * b.size(h, rw.dtype))
	}
	b.tokens = tokens
	sum := b.op("experts.sum", b.size(h, rw.dtype), rw.dtype, list(typed))
	b.hold(counts, sorted, out, outs, unsorted) // moe's locals, until it returns
	if sum.dtype == x.dtype {
		return sum
	}
	return b.op("experts.output.to", b.size(h, x.dtype), x.dtype, list(sum))
}

// parallelExperts is GraniteMoE's MoE (modeling_granitemoehybrid.py
// GraniteMoeHybridMoE.forward): the gate (TopKGating: logits.float(),
// top-k, which saves the indices, softmax over the k in fp32, which saves
// its output, type_as the hidden states), the (token, slot) pairs sorted
// by expert and the gates and tokens gathered in that order (both index
// tensors saved), ParallelExperts' input_linear — one F.linear per expert
// on its split of the tokens with a select of the stacked weight, the
// outputs concatenated — chunked into gate and up (SiLU saves gate, the
// product both: the whole concatenation), output_linear the same way, the
// outputs times the gates (saves both) and index_add'ed into zeros (which
// saves them again).
func (b *actBuilder) parallelExperts(p blockPlan, x *actT, h, f int64) *actT {
	k := int64(b.r.m.ExpertsPerToken)
	gates := b.floatTopKRouter(p, x, h)
	tokens := b.tokens
	b.tokens = mulI64(tokens, k)
	bg := b.op("router.batch_gates", b.size(1, gates.dtype), gates.dtype, list(gates))
	b.side("router.sorted_index", b.size(1, INT64), INT64)
	in := b.op("experts.expert_inputs", b.size(h, x.dtype), x.dtype, list(x))
	b.side("experts.batch_index", b.size(1, INT64), INT64)
	gu := b.expertLinear(p, "experts.input_linear", "gate_up_proj", in, h, 2*f)
	act := b.op("experts.act", b.size(f, gu.dtype), gu.dtype, list(gu), gu)
	prod := b.op("experts.act*up", b.size(f, gu.dtype), gu.dtype, list(act, gu), act, gu)
	down := b.expertLinear(p, "experts.output_linear", "down_proj", prod, f, h)
	d := promote(down.dtype, bg.dtype)
	scaled := b.op("experts.gated_output", b.size(h, d), d, list(down, bg), down, bg)
	b.tokens = tokens
	// zeros.index_add(0, batch_index, source), out of place, saves its
	// source as well as the index.
	return b.op("experts.index_add", b.size(h, d), d, list(scaled), scaled)
}

// expertLinear is ParallelExperts.forward: one F.linear per expert on its
// split of x with a select of the stacked weight (whose backward makes a
// gradient of the whole parameter), the outputs concatenated (the list
// lives until the concatenation exists).
func (b *actBuilder) expertLinear(p blockPlan, name, role string, x *actT, in, out int64) *actT {
	first := len(b.ops)
	y := b.linear(p, name, role, x, in, out)
	b.ops[len(b.ops)-1].stacked = true
	b.allExperts(first, true)
	return b.op(name+".cat", b.size(out, y.dtype), y.dtype, list(y))
}

// gatherRouter is ERNIE 4.5's router (modeling_ernie4_5_moe.py
// Ernie4_5_MoeSparseMoeBlock.forward), with autocast disabled: the gate, an
// fp32 nn.Linear kept in fp32 (_keep_in_fp32_modules_strict), on
// x.float(); softmax in fp32 (saves its output); the experts chosen by
// top-k of the softmax plus e_score_correction_bias (moe_statics: a new
// tensor, nothing saved); the chosen probabilities gathered (saves the
// indices), divided by their sum clamped to moe_norm_min (clamp saves the
// sum, the division both operands) and cast to the hidden dtype.
func (b *actBuilder) gatherRouter(p blockPlan, x *actT, h int64) *actT {
	m := b.r.m
	k, e := int64(m.ExpertsPerToken), int64(m.Experts)
	xf := x
	if x.dtype != FP32 {
		xf = b.op("router.x.float", b.size(h, FP32), FP32, list(x))
	}
	fp32 := p
	fp32.autocast, fp32.e = false, FP32
	logits := b.linear(fp32, "router", "router", xf, h, e)
	sm := b.keep(b.op("router_softmax", b.size(e, FP32), FP32, list(logits)))
	b.op("router.statics", b.size(e, FP32), FP32, list(sm))
	b.side("router.topk_indices", b.size(k, INT64), INT64)
	top := b.op("router.gather", b.size(k, FP32), FP32, list(sm))
	sum := b.keep(b.op("router.weight_sum", b.size(1, FP32), FP32, list(top)))
	clamped := b.op("router.weight_sum.clamp", b.size(1, FP32), FP32, list(sum))
	w := b.op("router.weights", b.size(k, FP32), FP32, list(top, clamped), top, clamped)
	if x.dtype == FP32 {
		return w
	}
	return b.op("router.weights.to", b.size(k, x.dtype), x.dtype, list(w))
}

// loopExperts runs the routed experts as transformers' Python loop does:
// final = zeros, then for each expert its tokens gathered
// (hidden_states[top_x], whose backward scatters into a full-size zero
// tensor), its MLP, the output scaled by those tokens' routing weights (the
// product saves both) and index_add_ed into final (which saves the scaled
// source). Over all experts the gathered tokens are k copies of each token.
func (b *actBuilder) loopExperts(p blockPlan, x, rw *actT, h, f int64) *actT {
	m := b.r.m
	k := int64(m.ExpertsPerToken)
	acc := x.dtype
	if m.Router == "sigmoid_topk_norm" {
		acc = rw.dtype // zeros_like(hidden_states, dtype=topk_weights.dtype)
	}
	final := b.op("experts.output", b.size(h, acc), acc, nil)
	first := len(b.ops)
	tokens := b.tokens
	b.tokens = mulI64(tokens, k)
	gathered := b.op("experts.gather", b.size(h, x.dtype), x.dtype, list(x))
	b.ops[len(b.ops)-1].scatter = true
	// torch.where(expert_mask[e]) returns views of one nonzero result:
	// (slot, token) pairs, int64.
	b.side("experts.token_index", b.size(2, INT64), INT64)
	var out *actT
	if p.rec.expertMLP != nil {
		out = p.rec.expertMLP(b, p, gathered, h, f)
	} else {
		out = b.gatedMLP(p, "", gathered, h, f)
	}
	slice := b.op("experts.token_weights", b.size(1, rw.dtype), rw.dtype, list(rw))
	wd := promote(out.dtype, slice.dtype)
	weighted := b.op("experts.routing_weight", b.size(h, wd), wd, list(out, slice), out, slice)
	if wd != acc {
		weighted = b.op("experts.to", b.size(h, acc), acc, list(weighted))
	}
	b.op("experts.index_add", 0, acc, list(weighted, final), weighted)
	b.tokens = tokens
	b.allExperts(first, true)
	if acc != x.dtype {
		final = b.op("experts.output.to", b.size(h, x.dtype), x.dtype, list(final))
	}
	return final
}

// denseMoE is modeling_llama4.py Llama4TextMoe.forward: every expert on
// every token (denseExperts), then the shared expert, then the routed
// outputs summed over the experts and added into the shared expert's output
// in place. The scaled tokens (routed_in), the routed outputs and the
// scores stay referenced by the function until it returns.
func (b *actBuilder) denseMoE(p blockPlan, x, rw *actT, h, f int64) *actT {
	m := b.r.m
	routed, scaled := b.denseExperts(p, x, rw, h, f)
	so := b.gatedMLP(p, "shared_expert.", x, h, int64(m.SharedExperts)*int64(m.SharedExpertFFN)/p.tp)
	sum := b.op("experts.sum", b.size(h, routed.dtype), routed.dtype, list(routed))
	b.op("moe.add_shared", 0, so.dtype, list(sum, so))
	b.hold(scaled, rw)
	return so
}

// denseExperts runs every expert on every token (modeling_llama4.py
// Llama4TextExperts): the tokens repeated once per expert and scaled by
// their scores (the product saves both), one batched matmul into the fused
// gate|up (whose chunks, views of it, SiLU and the product save) and one
// into down. It returns the experts' outputs and the scaled tokens.
func (b *actBuilder) denseExperts(p blockPlan, x, rw *actT, h, f int64) (out, scaled *actT) {
	e := b.r.expertsPerRank()
	first := len(b.ops)
	tokens := b.tokens
	b.tokens = mulI64(tokens, e)
	rep := b.op("experts.repeat", b.size(h, x.dtype), x.dtype, list(x))
	sc := b.op("experts.scores", b.size(1, rw.dtype), rw.dtype, list(rw)) // transpose + reshape: a copy
	d := promote(rep.dtype, sc.dtype)
	in := b.op("experts.scaled_input", b.size(h, d), d, list(rep, sc), rep, sc)
	gu := b.linear(p, "experts.gate_up_proj", "gate_up_proj", in, h, 2*f)
	act := b.op("experts.act", b.size(f, p.e), p.e, list(gu), gu)
	prod := b.op("experts.act*up", b.size(f, p.e), p.e, list(act, gu), act, gu)
	out = b.linear(p, "experts.down_proj", "down_proj", prod, f, h)
	b.tokens = tokens
	b.allExperts(first, false)
	return out, in
}

// allExperts scales the ops from first on, built for one expert's weights,
// to the rank's experts: their weight gradients and autocast's weight
// copies (each expert's matmul saves its own). loop marks them as the
// per-expert loop whose backward runs one expert at a time.
func (b *actBuilder) allExperts(first int, loop bool) {
	n := b.r.expertsPerRank()
	for i := first; i < len(b.ops); i++ {
		op := &b.ops[i]
		op.weights = mulI64(op.weights, n)
		op.expert = loop
		for _, t := range op.outs {
			if t.weightCopy {
				t.bytes = mulBytes(n, t.bytes)
			}
		}
	}
}
