package vram

// transformers 5's routed experts through grouped_mm. From 5.0 a family's
// routed experts are one module whose weights are 3-D parameters
// (gate_up_proj [E, 2F, H], down_proj [E, H, F]; 5.23.0
// qwen3_moe/modeling_qwen3_moe.py:208-216) decorated
// @use_experts_implementation (integrations/moe.py:582-646, the dispatch
// at l.632-634), whose default implementation is "grouped_mm"
// (modeling_utils.py:1883-1884: `"grouped_mm" if requested_experts is
// None`); the per-expert Python loop of 4.x (moe.go loopExperts) is only
// the "eager" fallback. recipe.groupedMM, set by a family's recipe from
// transformers 5.0 on, runs groupedExperts in its place.
//
// grouped_mm_experts_forward (5.23.0 integrations/moe.py:424-536) on S =
// tokens × k (token, slot) pairs:
//   - torch.sort(expert_ids) (l.439): the sorted ids and the permutation,
//     int64 [S] each, without a gradient;
//   - hidden_states[perm // num_top_k] (l.441): one gather of S rows,
//     which saves its index (perm // k, int64 [S]); its backward is
//     new_zeros of the input's size and index_put (IndexBackward0);
//   - sample_weights[perm] (l.442): saves perm;
//   - histc of the sorted ids as fp32 (CPU) and cumsum to int32 offsets [E]
//     (l.447-449), which both grouped matmuls save;
//   - _grouped_mm(input.to(weight.dtype), gate_up_proj^T, offs) (l.490,
//     _grouped_mm l.355-383): not autocast-enabled, so the input is cast to
//     the weights' dtype (l.379) and the experts compute in it (fp32
//     weights under bf16 autocast: fp32 experts, no bf16 weight copies);
//     it saves its input and the weights;
//   - _default_apply_gate (l.596-608): gate and up are chunks of the one
//     output; act_fn saves gate (a view: the whole output lives), the
//     product saves act_fn's output and up;
//   - the down projection, one more _grouped_mm (l.511), saves its input;
//   - proj_out * sample_weights_g (l.524) saves both;
//   - inv_perm[perm] = arange (l.527-528), weighted_out[inv_perm] (l.529):
//     a gather of S rows that saves inv_perm;
//   - view(tokens, k, hidden).sum(dim=1) (l.535), which saves nothing, and
//     .to(hidden_states.dtype) (l.536).
//
// Against the loop this saves, per MoE layer, one S × H tensor fewer (the
// loop's index_add_ saved each expert's scaled output), one S-long int64
// index more and the int32 offsets.
//
// Backward: one GroupedMmBackward0 per grouped matmul makes the whole [E,
// …] weight gradient at once (in the parameter's layout, then the input's
// gradient), not expert by expert, and also for an expert no token reached
// (torch 2.15 on the CPU, measured: the weight gradient, then the input's).
// So the section is no Python loop (actOp.expert false): its weight
// gradients are the ops' own.

// groupedExperts runs the routed experts as grouped_mm_experts_forward does
// on x (the MoE input, h wide) with routing weights rw ([tokens, k]),
// inner width f.
func (b *actBuilder) groupedExperts(p blockPlan, x, rw *actT, h, f int64) *actT {
	k, e := int64(b.r.m.ExpertsPerToken), b.r.expertsPerRank()
	tokens := b.tokens
	b.tokens = mulI64(tokens, k)
	// torch.sort: sorted ids and perm (l.439).
	ids := b.op("experts.sort", b.size(1, INT64), INT64, nil)
	perm := b.op("experts.sort.perm", b.size(1, INT64), INT64, nil)
	// hidden_states[perm // num_top_k] (l.441), saving its index.
	tok := b.op("experts.token_index", b.size(1, INT64), INT64, list(perm))
	in := b.op("experts.gather", b.size(h, x.dtype), x.dtype, list(x, tok), tok)
	b.gradWorkspace(indexBackward(x))
	// sample_weights[perm] (l.442), saving perm.
	sw := b.op("experts.sample_weights", b.size(1, rw.dtype), rw.dtype, list(rw, perm), perm)
	// histc(expert_ids_g.float()) and cumsum to int32 offsets (l.447-449).
	hf := b.op("experts.histc_input", b.size(1, FP32), FP32, list(ids))
	b.tokens = tokens
	offs := b.op("experts.offsets", INT32.Size(e), INT32, list(hf))
	b.tokens = mulI64(tokens, k)
	var gb *actT
	if p.rec.groupedBias {
		gb = b.groupedBiasOf(p, "experts.gate_up_proj_bias", ids, 2*f, e)
	}
	var act *actT
	if p.rec.groupedUngated {
		// has_gate=False: act_fn on the up projection's output (l.481-482,
		// 498-502).
		up := b.groupedMM(p, "experts.up_proj", "up_proj", in, offs, h, f, e)
		act = b.ungatedAct("experts.", up, f)
	} else if gate, up := b.groupedGateUp(p, in, offs, h, f, e); p.rec.groupedGate != nil {
		act = p.rec.groupedGate(b, p, gate, up, f)
	} else {
		// _default_apply_gate: act_fn(gate) * up on the chunks (l.596-608);
		// act_fn's saved gate keeps the whole output (up too) until its
		// backward.
		d := gate.dtype
		a := b.op("experts.act", b.size(f, d), d, list(gate), gate, up)
		act = b.op("experts.act*up", b.size(f, d), d, list(a, up), a, up)
	}
	var db *actT
	if gb != nil {
		// selected_biases is reassigned: the gate|up one goes (l.504-505).
		gb.holdUntil = len(b.ops) - 1
		db = b.groupedBiasOf(p, "experts.down_proj_bias", ids, h, e)
	}
	down := b.groupedMM(p, "experts.down_proj", "down_proj", act, offs, f, h, e)
	// proj_out * sample_weights_g.unsqueeze(-1) (l.524): saves both.
	wd := promote(down.dtype, sw.dtype)
	weighted := b.op("experts.routing_weight", b.size(h, wd), wd, list(down, sw), down, sw)
	// inv_perm = empty_like(perm); inv_perm[perm] = arange (l.527-528);
	// weighted_out[inv_perm] (l.529) saves inv_perm.
	ar := b.op("experts.arange", b.size(1, INT64), INT64, nil)
	inv := b.op("experts.inv_perm", b.size(1, INT64), INT64, list(perm, ar))
	unsorted := b.op("experts.unsorted", b.size(h, wd), wd, list(weighted, inv), inv)
	b.gradWorkspace(indexBackward(weighted))
	b.tokens = tokens
	// view(tokens, k, hidden).sum(dim=1) (l.535): nothing saved.
	out := b.op("experts.sum", b.size(h, wd), wd, list(unsorted))
	// The function's locals live until it returns: the sorted ids, the
	// histc input and the reordered output (weighted_out, reassigned, so
	// the scaled output before it goes once reordered).
	b.hold(ids, hf, unsorted)
	if db != nil {
		b.hold(db)
	}
	if wd != x.dtype {
		out = b.op("experts.output.to", b.size(h, x.dtype), x.dtype, list(out))
	}
	return out
}

// ungatedAct is an ungated expert's act_fn on u (f wide): squared ReLU
// (activations.py ReLUSquaredActivation: relu, which saves its output,
// then torch.square, which saves its input) for the relu2 MLP, else an
// activation that saves its input.
func (b *actBuilder) ungatedAct(prefix string, u *actT, f int64) *actT {
	if b.r.m.MLP == "relu2" {
		r := b.keep(b.op(prefix+"relu", b.size(f, u.dtype), u.dtype, list(u)))
		return b.op(prefix+"relu2", b.size(f, r.dtype), r.dtype, list(r), r)
	}
	return b.op(prefix+"act", b.size(f, u.dtype), u.dtype, list(u), u)
}

// groupedBiasOf is a stacked bias gathered per sorted pair
// (has_bias: `self.gate_up_proj_bias[expert_ids_g]`, l.480, 506), width
// wide, saving the sorted ids; _grouped_linear adds it into the grouped
// matmul's output in place (l.418-419), so the gradient it gets is that
// output's, and its backward (IndexBackward0) makes the bias's gradient,
// e × width.
func (b *actBuilder) groupedBiasOf(p blockPlan, name string, ids *actT, width, e int64) *actT {
	d := p.baseDType
	t := b.op(name, b.size(width, d), d, list(ids), ids)
	if !p.frozen {
		b.ops[len(b.ops)-1].weights = mulI64(e, width)
	}
	t.aliasGrad = true // the grouped matmul's output's gradient, not one of its own
	return t
}

// indexBackward is what IndexBackward0 holds beside the gradients it
// reads and returns: grad.new_zeros(the input's size), into which
// index_put (out of place) writes the result, both live until it
// returns (measured, torch 2.15).
func indexBackward(in *actT) Bytes { return gradSize(in) }

// groupedGateUp is the gate|up grouped matmul (l.490) on in, returned as
// its two halves, gate and up (the chunks _apply_gate takes, views of the
// one output): each gets a gradient of its own (f wide), which
// SplitBackward joins into one of the whole output (a cat, 2f wide)
// before the grouped matmul's backward runs. An op that saves either view
// keeps the whole output: the caller saves both where a view is saved.
func (b *actBuilder) groupedGateUp(p blockPlan, in, offs *actT, h, f, e int64) (gate, up *actT) {
	gate = b.groupedMM(p, "experts.gate_up_proj", "gate_up_proj", in, offs, h, 2*f, e)
	gate.bytes = b.size(f, gate.dtype)
	b.ops[gate.born].gradWorkspace += b.size(f, gate.dtype) // the cat of both halves' gradients
	up = b.op("experts.gate_up_proj.up", b.size(f, gate.dtype), gate.dtype, nil)
	return gate, up
}

// groupedMM is _grouped_linear (integrations/moe.py:386-421): one
// _grouped_mm of x, cast to the weights' dtype (l.379), with all e
// experts' stacked weight (in × out each), saving the input and the
// offsets; its backward makes the whole stacked weight gradient.
func (b *actBuilder) groupedMM(p blockPlan, name, role string, x, offs *actT, in, out, e int64) *actT {
	wd := p.baseDType
	xc := x
	if x.dtype != wd {
		xc = b.op(name+".input.to", b.size(in, wd), wd, list(x))
	}
	var saves []*actT
	if !p.frozen {
		saves = append(saves, xc)
	}
	y := b.op(name, b.size(out, wd), wd, list(xc, offs), append(saves, offs)...)
	op := &b.ops[len(b.ops)-1]
	op.gemm = true
	if !p.frozen {
		op.weights = mulI64(e, mulI64(in, out))
	}
	if xc != x {
		b.hold(x)
	}
	return y
}
