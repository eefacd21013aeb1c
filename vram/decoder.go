package vram

// decoderBlock lists the activations of an attention block: attention
// and MLP (or MoE) with the norms and residual adds of the model's layout.
func decoderBlock(r *resolved, layer int) BlockActivations {
	b, x := decoderOps(r, layer)
	return b.finishBlock(x, layer)
}

// decoderOps builds decoderBlock's ops on its input x.
func decoderOps(r *resolved, layer int) (*actBuilder, *actT) {
	m := r.m
	p := r.blockPlan(layer)
	b := newActBuilder(r, int64(r.MicroBatch)*int64(r.SeqLen)/int64(r.cp))
	if m.Image != nil {
		b.tokens = int64(r.MicroBatch) * int64(m.Image.Tokens())
	}
	d := r.decoderDims(p, layer)
	if p.sp {
		b.seqShard = p.tp
	}
	x := b.newT(actT{name: "input", op: "input", bytes: b.size(d.hSeq, p.resid), dtype: p.resid, born: -1, lastUse: -1, external: true})
	x.id = len(b.ts)
	b.ts = append(b.ts, x)
	out := b.decoderLayout(p, d, x)
	if b.topK != nil {
		// The layer returns its top-k with its output (GLM-5's decoder
		// layer, glm_moe_dsa/modeling_glm_moe_dsa.py:615).
		b.topK.lastUse = max(b.topK.lastUse, len(b.ops)-1)
	}
	if m.hookedLayer(layer) {
		out = m.visionWrapperOf().afterLayer(b, p, layer, out)
	}
	out.keepAlive = true
	return b, x
}

// finishBlock summarizes a block's ops on its input x: the first layer's
// input needs no gradient where nothing before the blocks trains.
func (b *actBuilder) finishBlock(x *actT, layer int) BlockActivations {
	if layer == 0 && b.r.inputNoGrad() {
		b.withoutGrad(x)
	}
	return b.summarize(x)
}

// decoderLayout wires a block's sublayers on its input x as the model's
// layout places its norms and residual adds, and returns the block's output.
func (b *actBuilder) decoderLayout(p blockPlan, d blockDims, x *actT) *actT {
	m := b.r.m
	ln := m.Norm
	norm := func(name string, y *actT) *actT { return b.norm(p, name, ln, y, d.hSeq) }
	add := func(name string, xs ...*actT) *actT { return b.residualAdd(p, name, d.hSeq, xs...) }
	drop := func(name string, y *actT) *actT { return b.dropout(p, name, y, d.hSeq, p.dropHid) }
	switch {
	case m.NormPosition == "post":
		// BERT / OPT-350m: x1 = LN(x + drop(attn(x))); out = LN(x1 + drop(mlp(x1))).
		a := drop("attn_out_dropout", b.attentionSublayer(p, d, x))
		x1 := norm("attn_norm", add("attn_residual", x, a))
		x1.residual = true // the residual stream after a post-norm
		mo := drop("mlp_out_dropout", b.mlpSublayer(p, d, x1))
		return norm("mlp_norm", add("mlp_residual", x1, mo))
	case m.ParallelBlock && p.rec.parallelNorms == 2:
		// use_parallel_residual: x + attn(ln1(x)) + mlp(ln2(x)).
		a := drop("attn_out_dropout", b.attentionSublayer(p, d, norm("input_layernorm", x)))
		mo := drop("mlp_out_dropout", b.mlpSublayer(p, d, norm("post_attention_layernorm", x)))
		return add("residual", x, a, mo)
	case m.ParallelBlock:
		// GPT-J / Phi: one norm feeds both branches.
		n := norm("ln_1", x)
		a := drop("attn_out_dropout", b.attentionSublayer(p, d, n))
		mo := drop("mlp_out_dropout", b.mlpSublayer(p, d, n))
		return add("residual", x, a, mo)
	case m.NormPosition == "sandwich":
		// Gemma 2/3: x1 = x + norm(attn(norm(x))); out = x1 + norm(mlp(norm(x1))).
		a := b.branch(p, d, "attn_out", b.attentionSublayer(p, d, norm("input_layernorm", x)), "post_attention_layernorm")
		x1 := add("attn_residual", x, a)
		var mo *actT
		if p.rec.denseBesideExperts && m.IsMoELayer(d.layer) {
			mo = b.gemma4MoE(p, d, x1)
		} else {
			mo = b.mlpSublayer(p, d, norm("pre_feedforward_layernorm", x1))
		}
		mo = b.branch(p, d, "mlp_out", mo, "post_feedforward_layernorm")
		out := add("mlp_residual", x1, mo)
		if p.rec.perLayerInputs5 && m.PerLayerInput > 0 {
			out = b.perLayerInputGate(p, d, out)
		}
		return out
	case m.NormPosition == "sublayer":
		// OLMo 2: x1 = x + norm(attn(x)); out = x1 + norm(mlp(x1)).
		a := b.branch(p, d, "attn_out", b.attentionSublayer(p, d, x), "post_attention_layernorm")
		x1 := add("attn_residual", x, a)
		mo := b.branch(p, d, "mlp_out", b.mlpSublayer(p, d, x1), "post_feedforward_layernorm")
		return add("mlp_residual", x1, mo)
	}
	a := b.branch(p, d, "attn_out", b.attentionSublayer(p, d, norm("input_layernorm", x)), "")
	x1 := add("attn_residual", x, a)
	mo := b.branch(p, d, "mlp_out", b.mlpSublayer(p, d, norm("post_attention_layernorm", x1)), "")
	out := add("mlp_residual", x1, mo)
	if p.rec.holdAttnOutput {
		b.hold(a)
	}
	return out
}

// attentionSublayer is the attention on a (its input, gathered over the
// sequence where sequence parallelism needs it); the caller's variable
// holds a until the sublayer returns.
func (b *actBuilder) attentionSublayer(p blockPlan, d blockDims, a *actT) *actT {
	y := b.attention(p, d, b.gatherSeq(p, d, "attention", a))
	b.hold(a)
	return y
}

// mlpSublayer is the MLP (or MoE) on a, as attentionSublayer.
func (b *actBuilder) mlpSublayer(p blockPlan, d blockDims, a *actT) *actT {
	if b.r.ttMoE() && b.r.ep > 1 && b.r.m.IsMoELayer(d.layer) {
		// torchtitan's MoE under expert parallelism keeps the sequence
		// shard; only its shared experts gather (torchtitan_moe.go).
		y := b.torchtitanMoE(p, a, p.sp)
		b.hold(a)
		return y
	}
	y := b.mlp(p, d, b.gatherSeq(p, d, "mlp", a))
	b.hold(a)
	return y
}

// gatherSeq is a sublayer's input under sequence parallelism through
// DTensor (torchtitan's plan, and any parallelize_module plan with
// SequenceParallel norms): PrepareModuleInput all-gathers it over the
// sequence and its linears save the gathered tensor. Megatron-LM's linears
// save their shard and gather it again in backward (tensor_parallel/
// layers.py LinearWithGradAccumulationAndAsyncCommunication).
func (b *actBuilder) gatherSeq(p blockPlan, d blockDims, name string, a *actT) *actT {
	if !p.sp || b.r.Framework == FrameworkMegatron {
		return a
	}
	return b.op(opName(name, ".all_gather"), b.size(d.h, a.dtype), a.dtype, list(a))
}

// branch finishes a residual branch: a norm on its output (sandwich and
// sublayer norms), the family's residual multiplier, dropout.
func (b *actBuilder) branch(p blockPlan, d blockDims, name string, y *actT, postNorm string) *actT {
	if postNorm != "" {
		y = b.norm(p, postNorm, b.r.m.Norm, y, d.hSeq)
	}
	if p.rec.branchScale {
		y = b.op(name+".scale", b.size(d.hSeq, y.dtype), y.dtype, list(y)) // times a Python float: nothing saved
	}
	if p.rec.layerScale {
		// × a learned per-channel scale (DINOv2's LayerScale): the
		// product saves its input for the scale's gradient.
		dt := promote(y.dtype, p.baseDType)
		y = b.op(name+".layer_scale", b.size(d.hSeq, dt), dt, list(y), y)
	}
	return b.dropout(p, opName(name, "_dropout"), y, d.hSeq, p.dropHid)
}

// mlp is a block's MLP on a: the family's gated or plain MLP, or its MoE.
func (b *actBuilder) mlp(p blockPlan, d blockDims, a *actT) *actT {
	m := b.r.m
	h, f := d.h, int64(m.LayerFFN(d.layer))/p.tp
	if m.IsMoELayer(d.layer) {
		return b.moe(p, a, d.layer)
	}
	if m.Gated() {
		return b.gatedMLP(p, "", a, h, f)
	}
	u := b.linear(p, "up_proj", "up_proj", a, h, f)
	var act *actT
	switch {
	case m.MLP == "relu":
		act = b.keep(b.op("relu", b.size(f, p.e), p.e, list(u))) // threshold_backward uses the output
	case m.MLP == "relu2":
		// transformers' ReLUSquaredActivation: relu (its backward uses its
		// output), then torch.square, which saves its input, that output.
		r := b.keep(b.op("relu", b.size(f, p.e), p.e, list(u)))
		act = b.op("relu2.square", b.size(f, p.e), p.e, list(r), r)
	case m.MLP == "gelu_new" && p.pythonGELU:
		act = b.newGELU(p, "gelu", u, f)
	case m.MLP == "quick_gelu":
		// transformers' QuickGELUActivation: input * torch.sigmoid(1.702
		// * input). The scalar product saves nothing; sigmoid saves its
		// output, which the final product saves too, with the input.
		sc := b.op("quick_gelu.scale", b.size(f, p.e), p.e, list(u))
		sg := b.keep(b.op("quick_gelu.sigmoid", b.size(f, p.e), p.e, list(sc)))
		act = b.op("quick_gelu", b.size(f, p.e), p.e, list(u, sg), u, sg)
	default:
		act = b.op("gelu", b.size(f, p.e), p.e, list(u), u)
	}
	return b.linear(p, "down_proj", "down_proj", act, f, h)
}

// recurrentBlock is a hybrid's recurrent layer (a state-space mixer, a
// short convolution, a Gated DeltaNet) as the families' DecoderLayers run
// it: the first norm, the mixer (the norm's output held until it
// returns), the residual add, the second norm, the MLP or MoE, the
// residual add; each branch times the family's residual multiplier.
func recurrentBlock(r *resolved, layer int, norm1, norm2 string, mixer func(*actBuilder, blockPlan, *actT) *actT) BlockActivations {
	p := r.blockPlan(layer)
	b := newActBuilder(r, int64(r.MicroBatch)*int64(r.SeqLen))
	h := int64(r.m.Hidden)
	x := b.external("input", b.size(h, p.resid), p.resid)
	n := b.norm(p, norm1, "rmsnorm", x, h)
	y := b.branchScaled(p, "mixer", mixer(b, p, n), h)
	b.hold(n)
	sandwich := r.m.NormPosition == "sandwich"
	if sandwich {
		// post-norms on both sublayers' outputs before their residual adds
		// (LFM3's post_operator_norm and post_ffn_norm, modeling_lfm3.py:
		// 454, 460 at 5.23).
		y = b.norm(p, "post_"+norm1, "rmsnorm", y, h)
	}
	x1 := b.residualAdd(p, "mixer_residual", h, x, y)
	mo := b.mlpSublayer(p, r.decoderDims(p, layer), b.norm(p, norm2, "rmsnorm", x1, h))
	if sandwich {
		mo = b.norm(p, "post_"+norm2, "rmsnorm", mo, h)
	}
	out := b.residualAdd(p, "mlp_residual", h, x1, b.branchScaled(p, "mlp", mo, h))
	out.keepAlive = true
	return b.summarize(x)
}
