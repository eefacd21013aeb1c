package vram

// torchtitan's MoE layer as torchtitan 0.3.0 (the PyPI wheel) runs it:
// torchtitan/models/common/moe.py (TokenChoiceTopKRouter, MoE,
// RoutedExperts, GroupedExperts), torchtitan/models/common/token_dispatcher.py
// (LocalTokenDispatcher at expert parallelism 1, AllToAllTokenDispatcher's
// all-to-alls and _permute above it: the "standard" comm_backend every
// shipped config uses, config_utils.py l.416-420), torchtitan/ops/
// scatter_add.py and torchtitan/distributed/fsdp.py for the expert weights'
// layout. Line numbers are the wheel's. /work/notes/torchtitan-moe.md has
// the reading; examples/measure/torchtitan_moe.py traces it on the CPU
// (vram/testdata/torchtitan_moe).
//
// Routing is taken balanced: every expert gets T·K/E of a rank's T tokens'
// T·K slots, so each rank's grouped GEMMs run on N = T·K rows. With
// expert_imbalance x > 1 and expert parallelism, the rank that holds the
// busiest expert receives x times that expert's share and the balanced
// share of its others: N·(e−1+x)/e rows for e local experts. At EP 1 every
// expert is local and the rows stay N.
//
// The standard dispatcher pads nothing: only the MXFP8 converter's
// TorchAOTokenDispatcher pads each expert's group to pad_multiple
// (token_dispatcher.py l.631-775, components/quantization/mx.py l.161,187),
// which the engine does not run.

// ttMoE reports whether the run's MoE layers are torchtitan's: torchtitan
// with routed experts that are SwiGLU without biases (GroupedExperts'
// w1/w2/w3, moe.py l.35-53). gpt-oss's experts (biases, their own
// GptOssGroupedExperts) keep the transformers rule.
func (r *resolved) ttMoE() bool {
	m := r.m
	return r.Framework == FrameworkTorchtitan && m.Experts > 0 && m.Gated() && !m.Bias.mlp() && !r.rec.parallelExperts
}

// ttRouter is the torchtitan router the model's routing stands for:
// score_func sigmoid or softmax (moe.py l.303-308) and route_norm (l.333-335).
// torchtitan's configs: Qwen3-MoE softmax with route_norm
// (qwen3/__init__.py l.179-180), DeepSeek-V3 671B sigmoid with route_norm,
// route_scale 2.5 and 8 groups of which 4 (deepseek_v3/__init__.py
// l.566-571), its 16B softmax without.
func (m Model) ttRouter() (sigmoid, norm bool) {
	switch m.Router {
	case "sigmoid_topk_norm":
		return true, true
	case "topk_sigmoid":
		return true, false
	case "softmax_topk", "softmax_topk_scaled", "topk_softmax":
		return false, false
	}
	return false, true
}

// ttMoERows is the rows a rank's grouped GEMMs run on for t local tokens:
// N = t·K balanced, more on the busiest rank under expert parallelism.
func (r *resolved) ttMoERows(t int64) int64 {
	n := mulI64(t, int64(r.m.ExpertsPerToken))
	if r.ep <= 1 || r.ExpertImbalance <= 1 {
		return n
	}
	e := float64(r.expertsPerRank())
	return int64(float64(n) * (e - 1 + r.ExpertImbalance) / e)
}

// torchtitanMoE builds MoE.forward (moe.py l.403-461) on x, the ffn_norm's
// output: gathered over the sequence (all tokens, EP 1) or the rank's
// sequence shard (sharded: expert parallelism under sequence parallelism,
// where the MoE keeps the shard, moe_sharding.py l.279-281).
func (b *actBuilder) torchtitanMoE(p blockPlan, x *actT, sharded bool) *actT {
	// The routed tokens of this rank: with EP the router and the experts
	// see the sequence shard (moe_sharding.py l.100-112, 201-210).
	T := b.tokens
	if b.r.ep > 1 && p.sp {
		T = b.tokens / p.tp
	}
	scores, top := b.ttRouterOps(p, x, T)
	routedOut := b.ttRouted(p, x, T, scores, top)
	if b.r.m.SharedExperts == 0 {
		return routedOut
	}
	// Shared experts: FeedForward on the whole sequence (its input
	// gathered to Replicate, moe_sharding.py l.172-177), w2's output
	// reduced to the MoE's output layout (l.178-182), added (l.459-460).
	h := int64(b.r.m.Hidden)
	xs := x
	if sharded && p.tp > 1 {
		xs = b.op("shared_experts.all_gather", b.size(h, x.dtype), x.dtype, list(x))
	}
	sf := int64(b.r.m.SharedExperts) * int64(b.r.m.SharedExpertFFN) / p.tp
	so := b.gatedMLP(p, "shared_experts.", xs, h, sf)
	if sharded && p.tp > 1 {
		so = b.op("shared_experts.reduce_scatter", so.dtype.Size(mulI64(T, h)), so.dtype, list(so))
	}
	d := promote(routedOut.dtype, so.dtype)
	routedOut.aliasGrad, so.aliasGrad = routedOut.dtype == d, so.dtype == d
	return b.op("moe.add_shared", d.Size(mulI64(T, h)), d, list(routedOut, so))
}

// ttSize is rows × width elements of d.
func ttSize(rows, width int64, d DType) Bytes { return d.Size(mulI64(rows, width)) }

// ttRouterOps is TokenChoiceTopKRouter.forward (moe.py l.284-342) on T
// tokens of x: the scores (saved) and the top-k scores.
func (b *actBuilder) ttRouterOps(p blockPlan, x *actT, T int64) (scores, top *actT) {
	m := b.r.m
	h, E, K := int64(m.Hidden), int64(m.Experts), int64(m.ExpertsPerToken)
	// The gate under autocast(float32) (l.298-299): F.linear casts x and
	// the weight to fp32 copies, which mm saves; SAC recomputes it,
	// whatever its count (activation_checkpoint.py l.196-198, 265-266).
	xf := x
	if x.dtype != FP32 {
		xf = b.op("router.x.float", ttSize(T, h, FP32), FP32, list(x))
	}
	logits := b.op("router.gate", ttSize(T, E, FP32), FP32, list(xf), xf)
	b.ops[len(b.ops)-1].gemm = true
	b.ops[len(b.ops)-1].weights = mulI64(h, E)
	if p.baseDType != FP32 {
		b.side("router.gate.weight.float", FP32.Size(mulI64(h, E)), FP32)
	}
	sigmoid, norm := m.ttRouter()
	name := "router.softmax"
	if sigmoid {
		name = "router.sigmoid"
	}
	// sigmoid and softmax save their output (l.303-306).
	scores = b.keep(b.op(name, ttSize(T, E, FP32), FP32, list(logits)))
	// scores + expert_bias_E (load_balance_coeff, default 1e-3,
	// config_utils.py l.317): a new tensor that saves nothing (l.310-312).
	choice := b.op("router.scores_for_choice", ttSize(T, E, FP32), FP32, list(scores))
	if g := int64(m.ExpertGroups); g > 1 {
		choice = b.ttGroupLimited(T, E, g, choice)
	}
	// topk (l.318-320): the values are dropped; TopkBackward and the
	// gather (l.324) save the indices. SAC must save topk's outputs
	// (activation_checkpoint.py l.51-53).
	b.op("router.topk", ttSize(T, K, FP32), FP32, list(choice))
	b.side("router.topk_indices", ttSize(T, K, INT64), INT64)
	b.ops[len(b.ops)-1].sacSave = true
	top = b.op("router.gather", ttSize(T, K, FP32), FP32, list(scores))
	if norm {
		// l.333-335: the sum plus 1e-20, then the division saves both.
		den := b.op("router.denominator", ttSize(T, 1, FP32), FP32, list(top))
		top = b.op("router.route_norm", ttSize(T, K, FP32), FP32, list(top, den), top, den)
	}
	// × route_scale (l.336), a Python float: nothing saved.
	return scores, b.op("router.route_scale", ttSize(T, K, FP32), FP32, list(top))
}

// ttRouted is RoutedExperts.forward (moe.py l.137-178) after the routing
// map (l.432-437): dispatch, the grouped experts, combine.
func (b *actBuilder) ttRouted(p blockPlan, x *actT, T int64, scores, top *actT) *actT {
	m := b.r.m
	h, E, K := int64(m.Hidden), int64(m.Experts), int64(m.ExpertsPerToken)
	N := mulI64(T, K)
	// The one-hot routing map and its per-expert count, no gradient;
	// tokens_per_expert_E accumulates under no_grad (l.444-446).
	rmap := b.op("moe.routing_map", ttSize(T, E, Bool), Bool, list(scores))
	counts := b.op("moe.num_tokens_per_expert", INT64.Size(E), INT64, list(rmap))

	// Dispatch: _local_reorder (token_dispatcher.py l.70-106): argsort of
	// the expert ids (saved by the scores' index), the scores in that order,
	// the token of each slot (// top_k, saved by the gather of x and by the
	// combine's scatter_add) and x gathered in expert order.
	order := b.op("moe.argsort", ttSize(N, 1, INT64), INT64, list(counts))
	sorted := b.op("moe.scores_sorted", ttSize(N, 1, FP32), FP32, list(top, order), order)
	b.ops[len(b.ops)-1].scatter = true
	tokIdx := b.op("moe.token_indices", ttSize(N, 1, INT64), INT64, list(order))
	routed := b.op("moe.routed_input", ttSize(N, h, x.dtype), x.dtype, list(x, tokIdx), tokIdx)
	b.ops[len(b.ops)-1].scatter = true
	R := N
	var perm *actT
	if b.r.ep > 1 {
		// The counts' all-to-all and the host copies of the splits run
		// under no_grad (l.449-463); the tokens' all-to-all (l.465-470,
		// _functional_collectives.all_to_all_single, whose backward is the
		// reverse all-to-all and saves only the splits); then _permute from
		// rank-major to expert-major order (l.501-553): int64 index
		// arithmetic over the R received rows (seg_ids, the gathered starts,
		// an arange: four R-long tensors at once), the permuted_indices the
		// row gather saves.
		R = b.r.ttMoERows(T)
		a2a := b.op("moe.dispatch.all_to_all", ttSize(R, h, routed.dtype), routed.dtype, list(routed))
		b.ops[len(b.ops)-1].sacSave = true
		perm = b.op("moe.permuted_indices", ttSize(R, 1, INT64), INT64, list(a2a))
		b.workspace(3 * ttSize(R, 1, INT64))
		routed = b.op("moe.permuted_input", ttSize(R, h, a2a.dtype), a2a.dtype, list(a2a, perm), perm)
		b.ops[len(b.ops)-1].scatter = true
	}
	out := b.ttGroupedExperts(p, routed, R, h)
	if b.r.ep > 1 {
		// combine (l.562-628): _unpermute into new_empty (its index_put_
		// saves the indices already saved), the reverse all-to-all.
		un := b.op("moe.unpermute", ttSize(R, h, out.dtype), out.dtype, list(out, perm))
		out = b.op("moe.combine.all_to_all", ttSize(N, h, un.dtype), un.dtype, list(un))
		b.ops[len(b.ops)-1].sacSave = true
	}
	return b.ttCombine(x, out, sorted, tokIdx, T, N)
}

// ttCombine scores and scatter_adds the expert outputs out (token_dispatcher.py
// l.156-169, 614-627): zeros_like(x), the outputs in fp32 times their
// scores (the product saves both: N × hidden in fp32), cast back,
// deterministic_scatter_add (which saves its index, scatter_add.py
// l.36-42: an expanded view of the token indices).
func (b *actBuilder) ttCombine(x, out, sorted, tokIdx *actT, T, N int64) *actT {
	h := int64(b.r.m.Hidden)
	zeros := b.op("moe.combine.zeros", ttSize(T, h, x.dtype), x.dtype, nil)
	of := b.op("moe.combine.output.float", ttSize(N, h, FP32), FP32, list(out))
	prod := b.op("moe.combine.scored", ttSize(N, h, FP32), FP32, list(of, sorted), of, sorted)
	// The scores' gradient: grad · output at full size, summed over hidden.
	b.gradWorkspace(ttSize(N, h, FP32))
	back := prod
	if x.dtype != FP32 {
		back = b.op("moe.combine.scored.to", ttSize(N, h, x.dtype), x.dtype, list(prod))
	}
	return b.op("moe.combine.scatter_add", ttSize(T, h, x.dtype), x.dtype, list(zeros, back, tokIdx), tokIdx)
}

// ttGroupLimited is _get_node_limited_routing_scores (moe.py l.242-282) on
// choice: top-2 within each of g groups (saves its indices), their sum,
// the top groups (saves its indices), a bool mask of the others and
// masked_fill (saves the mask). The groups kept are g/2, as the engine's
// DeepSeek-V2 rule takes topk_group (torchtitan's DeepSeek-V3 671B: 8
// groups, 4 kept).
func (b *actBuilder) ttGroupLimited(T, E, g int64, choice *actT) *actT {
	sz := ttSize
	kept := max(1, g/2)
	b.op("router.group_top2", sz(T, 2*g, FP32), FP32, list(choice))
	b.side("router.group_top2_indices", sz(T, 2*g, INT64), INT64)
	gs := b.op("router.group_scores", sz(T, g, FP32), FP32, list(choice))
	b.op("router.group_topk", sz(T, kept, FP32), FP32, list(gs))
	b.side("router.group_topk_indices", sz(T, kept, INT64), INT64)
	mask := b.op("router.group_mask", sz(T, g, Bool), Bool, list(gs))
	return b.op("router.group_masked", sz(T, E, FP32), FP32, list(choice, mask), mask)
}

// ttGroupedExperts is GroupedExperts.forward (moe.py l.55-108) on rows of
// routed input: offsets (cumsum, int32, saved by each grouped GEMM), w1
// and w3 through torch._grouped_mm on x.bfloat16() (each saves its input
// and weight), SiLU (saves its input), the product (saves both), w2 (saves
// its input), .type_as(x). The GEMMs run in bf16 whatever the weights: a
// fp32 input or weight is copied to bf16 first, the copy saved. SAC saves
// no grouped GEMM (aten._grouped_mm is neither in torch's
// compute_intensive_ops nor in torchtitan's list).
func (b *actBuilder) ttGroupedExperts(p blockPlan, x *actT, rows, h int64) *actT {
	m := b.r.m
	e := b.r.expertsPerRank()
	f := int64(m.ExpertFFN)
	if b.r.ep <= 1 {
		f /= p.tp // EP 1 under TP: w1/w3 Shard(1), w2 Shard(2) (moe_sharding.py l.50-68)
	}
	sz := func(width int64, d DType) Bytes { return d.Size(mulI64(rows, width)) }
	xb := x
	if x.dtype != BF16 {
		xb = b.op("experts.x.bfloat16", sz(h, BF16), BF16, list(x))
	}
	gemm := func(name string, in *actT, k, n int64) *actT {
		y := b.op(name, sz(n, BF16), BF16, list(in), in)
		op := &b.ops[len(b.ops)-1]
		op.gemm, op.weights = true, mulI64(e, mulI64(k, n))
		if p.baseDType != BF16 {
			b.side(name+".weight.bfloat16", BF16.Size(mulI64(e, mulI64(k, n))), BF16).weightCopy = true
		}
		return y
	}
	h1 := gemm("experts.w1", xb, h, f)
	b.side("experts.offsets", INT32.Size(e), INT32)
	act := b.op("experts.silu", sz(f, BF16), BF16, list(h1), h1)
	h3 := gemm("experts.w3", xb, h, f)
	prod := b.op("experts.silu*w3", sz(f, BF16), BF16, list(act, h3), act, h3)
	out := gemm("experts.w2", prod, f, h)
	if x.dtype != BF16 {
		out = b.op("experts.type_as", sz(h, x.dtype), x.dtype, list(out))
	}
	return out
}

// ttExpertStored is a torchtitan routed-expert tensor's layout under
// expert parallelism (ok false otherwise): split over the EP ranks by
// expert and not over TP (div = ep), FSDP-sharded over efsdp (shard), and
// what a rank stores of it (ttExpertShard under FSDP).
func (r *resolved) ttExpertStored(t Tensor, n int64, quant bool, zero int) (div, shard int64, stored Bytes, ok bool) {
	if quant || !r.ttMoE() || r.ep <= 1 || t.Expert < 0 && t.Stacked == 0 {
		return 0, 0, 0, false
	}
	div, shard = int64(r.ep), r.ttEFSDP()
	stored = r.WeightsDType.Size(n / div)
	if zero == 3 {
		stored = r.ttExpertShard(t, n)
	}
	return div, shard, stored, true
}

// ttEFSDP is the FSDP degree of torchtitan's routed experts under expert
// parallelism: efsdp = dp_shard·cp·tp / ep (parallel_dims.py l.277-279,
// l.401): EP borrows its ranks from the data, context and tensor ranks, and
// the experts are FSDP-sharded over the rest (fsdp.py l.224-226, 296-301).
// The engine's FSDP degree stands for dp_shard·cp.
func (r *resolved) ttEFSDP() int64 {
	return max(1, int64(r.shard)*int64(r.tp)/int64(max(1, r.ep)))
}

// ttExpertShard is what one routed-expert tensor takes on a rank under EP
// and FSDP: torchtitan stacks each of w1, w2, w3 as [E, ·, ·], shards it
// over EP on the experts (moe_sharding.py l.29-47), and FSDP2 shards each
// rank's [E/ep, ·, ·] over efsdp on dim 0, or on dim 1 when efsdp·ep
// exceeds the experts (fsdp.py l.224-233), padding the sharded dim to a
// multiple of efsdp. A per-expert tensor of the model's list ([out, in],
// one of E) gets 1/E of the rank's stacked share.
func (r *resolved) ttExpertShard(t Tensor, n int64) Bytes {
	E := int64(r.m.Experts)
	ep := int64(max(1, r.ep))
	e := E / ep
	ef := r.ttEFSDP()
	per := n // elements of one expert's matrix
	rows := int64(1)
	if len(t.Shape) > 0 {
		rows = t.Shape[0]
	}
	if t.Stacked > 0 {
		per = n / max(1, int64(t.Stacked))
		if len(t.Shape) > 1 {
			rows = t.Shape[1]
		}
	}
	cols := per / max(1, rows)
	var local int64
	if ef*ep > E {
		local = mulI64(e, mulI64((rows+ef-1)/ef, cols))
	} else {
		local = mulI64((e+ef-1)/ef, per)
	}
	if t.Stacked > 0 {
		return r.WeightsDType.Size(local)
	}
	return r.WeightsDType.Size(local) / Bytes(E)
}
