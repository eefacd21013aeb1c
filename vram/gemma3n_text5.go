package vram

import "fmt"

// Gemma 3n's language model as transformers 5.23.0 trains it
// (models/gemma3n/modeling_gemma3n.py; recipe.altUp): every layer runs on
// a stack of altup_num_inputs copies of the hidden state, built before
// the layers and merged after them.
//   - Before the layers (Gemma3nTextModel.forward l.1674-1688,
//     altUpStack): the scaled embeddings h0 and altup_num_inputs − 1
//     projections of them, each rescaled to h0's RMS magnitude, stacked.
//   - Each layer (Gemma3nTextDecoderLayer.forward l.1280-1329,
//     gemma3nBlock): AltUp's prediction of the stack (predict,
//     l.1012-1040), the sandwich-normed attention and MLP on the active
//     copy with the Laurel block beside the attention (l.931-946), AltUp's
//     correction of the stack by the layer's output (correct,
//     l.1042-1075), then the per-layer input path on the corrected active
//     copy, added in place to the other copies.
//   - After the layers (l.1713-1727, altUpMerge): the copies but the
//     first unprojected and rescaled to the first's magnitude, stacked and
//     averaged, before the final norm.
//   - The last num_kv_shared_layers layers read the keys and values of
//     the last earlier layer of their kind (the "store" layer) from a dict
//     the model's forward passes every layer (l.1214-1231, 1690-1705):
//     training reads them as inference does, and the reading layers'
//     gradients flow back into the store layer's keys and values.
//   - activation_sparsity_pattern's layers take a Gaussian top-k of their
//     MLP's gate (Gemma3nTextMLP._gaussian_topk, l.959-984).
// The RMSNorms are Gemma4's (torch.pow, recipe.powNorm); the per-layer
// inputs are built as Gemma 4's (recipe.perLayerInputs5), their
// projection scaled in place (l.1768-1770, recipe.perLayerScaleInPlace).

// gemma3nBlock is layer's Gemma3nTextDecoderLayer.forward
// (modeling_gemma3n.py l.1280-1329 at 5.23.0) on the AltUp stack
// (gemma3nLayer), with what waits through its backward for other layers:
// the per-layer inputs' gradient, the shared keys' and values' gradients
// and what the store layers' recomputations leave alive (kvshare5.go).
func gemma3nBlock(r *resolved, layer int) BlockActivations {
	b, x, mul := gemma3nLayer(r, layer)
	b.perLayerInputsGrad(layer, mul)
	b.kvSharingWaits(r, layer)
	return b.finishBlock(x, layer)
}

// gemma3nLayer builds layer's ops on its input x, the stack: AltUp's
// prediction, the normed active copy, the Laurel block, the attention and
// the MLP between their sandwich norms, AltUp's correction, the per-layer
// input path on the scaled first corrected copy, added in place to the
// others. The layer's Python locals (the prediction, the normed active
// copy, the Laurel output, each branch's output and sum) live until it
// returns. It returns the builder (its kv what the attention read), the
// input and the per-layer input product's op.
func gemma3nLayer(r *resolved, layer int) (*actBuilder, *actT, int) {
	m := r.m
	p := r.blockPlan(layer)
	b := newActBuilder(r, int64(r.MicroBatch)*int64(r.SeqLen)/int64(r.cp))
	d := r.decoderDims(p, layer)
	x := b.external("input", b.size(int64(m.AltUpInputs)*d.h, p.resid), p.resid)
	pred := b.altUpPredict(p, d, x)
	an := b.norm(p, "input_layernorm", m.Norm, pred, d.h) // predictions[altup_active_idx], a view
	laurel := b.laurel(p, d, an)
	o := b.gemma3nAttention(p, d, an)
	attn := b.norm(p, "post_attention_layernorm", m.Norm, o, d.h)
	gd := promote(pred.dtype, attn.dtype)
	gated := b.op("attn_gated", b.size(d.h, gd), gd, list(pred, attn))
	sd := promote(gd, laurel.dtype)
	sum := b.op("attn_gated+laurel", b.size(d.h, sd), sd, list(gated, laurel))
	al := b.op("attn_laurel", sum.bytes, sum.dtype, list(sum)) // / math.sqrt(2): nothing saved
	fn := b.norm(p, "pre_feedforward_layernorm", m.Norm, al, d.h)
	mo := b.gemma3nMLP(p, d, fn)
	mn := b.norm(p, "post_feedforward_layernorm", m.Norm, mo, d.h)
	yd := promote(al.dtype, mn.dtype)
	y := b.op("attn_ffw_laurel_gated", b.size(d.h, yd), yd, list(al, mn))
	out := b.altUpCorrect(p, d, pred, y)
	// corrected_predictions[altup_active_idx].clone(), times
	// correct_output_scale (a parameter: the product saves both).
	first := b.op("altup.first_prediction", b.size(d.h, out.dtype), out.dtype, list(out))
	cd := promote(first.dtype, p.baseDType)
	sc := b.op("altup.correct_output_scale", b.size(d.h, cd), cd, list(first), first)
	b.ops[len(b.ops)-1].trains = !p.frozen
	pl, mul := b.perLayerInputPath(p, d, sc)
	// corrected_predictions[1:] += first_prediction: in place, no new tensor.
	b.op("altup.corrected[1:]+=", 0, out.dtype, list(out, pl))
	b.hold(pred, an, laurel, attn, gated, al, fn, mo, mn, y)
	out.keepAlive = true
	return b, x, mul
}

// gemma3nAttention is Gemma3nTextAttention.forward on a, the normed active
// copy (modeling_gemma3n.py l.1199-1255 at 5.23.0): q_proj, q_norm; a
// KV-shared layer attends with its source layer's keys and values
// (sharedKVAttention); a layer of its own projects them, normalizes them
// (k_norm; v_norm without a weight) and rotates q and k, the cache
// copying k and v under use_cache, a store layer's staying in the dict
// (dictHolds); then attention and o_proj (attendAndProject). It returns
// o_proj's output; b.kv says what attention read.
func (b *actBuilder) gemma3nAttention(p blockPlan, d blockDims, a *actT) *actT {
	m := b.r.m
	s := qkv{kd: d.kvDim}
	s.q = b.linear(p, "q_proj", "q_proj", a, d.h, d.qDim)
	s.q = b.headNorm(p, "q_norm", m.Norm, s.q, d.qDim, d.heads)
	if m.KVSharedLayer(d.layer) {
		return b.sharedKVAttention(p, d, a, s.q)
	}
	s.k = b.linear(p, "k_proj", "k_proj", a, d.h, d.kvDim)
	s.v = b.linear(p, "v_proj", "v_proj", a, d.h, d.vWidth())
	s.k = b.headNorm(p, "k_norm", m.Norm, s.k, d.kvDim, d.kvHeads)
	b.rope(p, d, &s)
	s.v = b.headNorm(p, "v_norm", "l2", s.v, d.vWidth(), d.kvHeads)
	if p.useCache && !p.rec.cacheKeepsKV {
		s.k = b.op("cache.k", b.size(s.kd, s.k.dtype), s.k.dtype, list(s.k))
		s.v = b.op("cache.v", b.size(d.vWidth(), s.k.dtype), s.k.dtype, list(s.v))
	}
	if p.useCache {
		p.holdOutput(s.k, s.v)
	}
	b.dictHolds(p, d.layer, s.k, s.v)
	b.kv = kvRead{at: len(b.ops), k: s.k, v: s.v}
	return b.attendAndProject(p, d, a, s)
}

// altUpPredict is Gemma3nTextAltUp.predict on the stack x
// (modeling_gemma3n.py l.1012-1040 at 5.23.0): the router's modalities of
// the active copy, prediction_coefs on them (its weight clamped in
// place: no tensor), torch.matmul of the permuted stack (a view) by the
// coefficients, which bmm saves (under autocast its copies), the stack
// added in place, .contiguous() (a copy: the product is permuted) and
// .type_as(x).
func (b *actBuilder) altUpPredict(p blockPlan, d blockDims, x *actT) *actT {
	n := int64(b.r.m.AltUpInputs)
	mod := b.altUpModalities(p, "altup.predict", x, d.h)
	coefs := b.linear(p, "altup.prediction_coefs", "other", mod, n, n*n)
	xc, cc := b.castIn(p, "altup.predict.matmul.x", x), b.castIn(p, "altup.predict.matmul.coefs", coefs)
	prod := b.op("altup.predict.matmul", b.size(n*d.h, p.e), p.e, list(xc, cc), xc, cc)
	b.ops[len(b.ops)-1].gemm = true
	pred := b.op("altup.predictions.contiguous", prod.bytes, prod.dtype, list(prod))
	if pred.dtype != x.dtype {
		pred = b.op("altup.predictions.type_as", b.size(n*d.h, x.dtype), x.dtype, list(pred))
	}
	return pred
}

// altUpModalities is Gemma3nTextAltUp.compute_router_modalities on y's
// active copy (modeling_gemma3n.py l.1005-1010 at 5.23.0): router_norm,
// times router_input_scale (a buffer: a new tensor, nothing saved),
// modality_router (saves its input), tanh of its output in fp32 (saves
// its result), cast back to y's dtype.
func (b *actBuilder) altUpModalities(p blockPlan, name string, y *actT, h int64) *actT {
	n := int64(b.r.m.AltUpInputs)
	rn := b.norm(p, name+".router_norm", b.r.m.Norm, y, h)
	sc := b.op(name+".router_input_scale", b.size(h, rn.dtype), rn.dtype, list(rn))
	lg := b.linear(p, name+".modality_router", "router", sc, h, n)
	if lg.dtype != FP32 {
		lg = b.op(name+".float", b.size(n, FP32), FP32, list(lg))
	}
	t := b.keep(b.op(name+".tanh", b.size(n, FP32), FP32, list(lg)))
	if y.dtype != FP32 {
		t = b.op(name+".type_as", b.size(n, y.dtype), y.dtype, list(t))
	}
	return t
}

// altUpCorrect is Gemma3nTextAltUp.correct(pred, y) (modeling_gemma3n.py
// l.1042-1075 at 5.23.0): the router's modalities of y, the innovation
// y − pred[active] repeated over the stack (a new tensor), the correction
// coefficients (F.linear by the clamped weight, + 1), their product with
// the innovation (saves both), pred added in place; the product is
// contiguous, in y's dtype. It returns the corrected stack.
func (b *actBuilder) altUpCorrect(p blockPlan, d blockDims, pred, y *actT) *actT {
	n := int64(b.r.m.AltUpInputs)
	mod := b.altUpModalities(p, "altup.correct", y, d.h)
	id := promote(y.dtype, pred.dtype)
	inn := b.op("altup.innovation", b.size(d.h, id), id, list(y, pred))
	rep := b.op("altup.innovation.repeat", b.size(n*d.h, id), id, list(inn))
	cw := b.linear(p, "altup.correction_coefs", "other", mod, n, n)
	c1 := b.op("altup.correction_coefs+1", cw.bytes, cw.dtype, list(cw))
	cd := promote(rep.dtype, c1.dtype)
	out := b.op("altup.corrected", b.size(n*d.h, cd), cd, list(rep, c1), rep, c1)
	if out.dtype != y.dtype {
		out = b.op("altup.corrected.type_as", b.size(n*d.h, y.dtype), y.dtype, list(out))
	}
	return out
}

// laurel is Gemma3nTextLaurelBlock.forward on a (modeling_gemma3n.py
// l.941-946 at 5.23.0): linear_left, linear_right, post_laurel_norm, and
// a plus the normed output.
func (b *actBuilder) laurel(p blockPlan, d blockDims, a *actT) *actT {
	r := int64(b.r.m.LaurelRank)
	l := b.linear(p, "laurel.linear_left", "other", a, d.h, r)
	l = b.linear(p, "laurel.linear_right", "other", l, r, d.h)
	nl := b.norm(p, "laurel.post_laurel_norm", b.r.m.Norm, l, d.h)
	od := promote(a.dtype, nl.dtype)
	return b.op("laurel.add", b.size(d.h, od), od, list(a, nl))
}

// gemma3nMLP is Gemma3nTextMLP.forward on a (modeling_gemma3n.py
// l.959-966 at 5.23.0): gate_proj, the Gaussian top-k on a sparse layer's
// gate, gelu_pytorch_tanh (saves its input), up_proj, the product (saves
// both factors), down_proj.
func (b *actBuilder) gemma3nMLP(p blockPlan, d blockDims, a *actT) *actT {
	f := int64(b.r.m.FFN) / p.tp
	g := b.linear(p, "gate_proj", "gate_proj", a, d.h, f)
	if d.layer < b.r.m.SparseLayers {
		g = b.gaussianTopK(g, f)
	}
	act := b.op("act", b.size(f, g.dtype), g.dtype, list(g), g)
	u := b.linear(p, "up_proj", "up_proj", a, d.h, f)
	pd := promote(act.dtype, u.dtype)
	return b.linear(p, "down_proj", "down_proj", b.op("act*up", b.size(f, pd), pd, list(act, u), act, u), f, d.h)
}

// gaussianTopK is Gemma3nTextMLP._gaussian_topk on the gate g
// (modeling_gemma3n.py l.968-984 at 5.23.0), in g's dtype (neither mean
// nor std is on autocast's lists): the mean and the biased std over the
// features (std saves its input and its result), the cutoff mean + std ·
// the target's normal quantile, g − cutoff (a new tensor) and relu (saves
// its output).
func (b *actBuilder) gaussianTopK(g *actT, f int64) *actT {
	dt := g.dtype
	mean := b.op("gate.mean", b.size(1, dt), dt, list(g))
	std := b.keep(b.op("gate.std", b.size(1, dt), dt, list(g), g))
	cut := b.op("gate.cutoff", b.size(1, dt), dt, list(mean, std))
	s := b.op("gate-cutoff", b.size(f, dt), dt, list(g, cut))
	return b.keep(b.op("gate.relu", b.size(f, dt), dt, list(s)))
}

// altUpStack is the stack the layers run on, from h0, the scaled
// embeddings (Gemma3nTextModel.forward, modeling_gemma3n.py l.1674-1688
// at 5.23.0): h0's RMS magnitude, and for each of altup_num_inputs − 1
// projections of h0 that projection rescaled to it (altUpRescaled);
// torch.stack of h0 and them (a new tensor, nothing saved). The list
// keeps the rescaled copies until the loop after the layers rebinds it,
// and the last projection's output (altup_proj, never rebound) until the
// forward returns: both held to the forward's end.
func (b *actBuilder) altUpStack(p blockPlan, h0 *actT, h int64) *actT {
	n := int64(b.r.m.AltUpInputs)
	tm := b.rmsMagnitude("altup.target_magnitude", h0, h)
	parts := b.altUpRescaledCopies(p, "altup_projections", h0, tm, h)
	return b.op("altup.stack", b.size(n*h, h0.dtype), h0.dtype, parts)
}

// altUpRescaledCopies is x and, for each of altup_num_inputs − 1
// projections named prefix.0, prefix.1, …, x's projection rescaled to the
// magnitude tm (altUpRescaled): the list altUpStack and altUpMerge stack.
// The list keeps the rescaled copies, and the last projection's output,
// until the forward returns.
func (b *actBuilder) altUpRescaledCopies(p blockPlan, prefix string, x, tm *actT, h int64) []*actT {
	n := int64(b.r.m.AltUpInputs)
	parts := []*actT{x}
	for i := int64(1); i < n; i++ {
		c, proj := b.altUpRescaled(p, fmt.Sprintf("%s.%d", prefix, i-1), x, x, tm, h)
		c.forwardHeld = true
		if i == n-1 {
			proj.forwardHeld = true
		}
		parts = append(parts, c)
	}
	return parts
}

// altUpMerge is the model's merge of the last layer's stack x before the
// final norm (modeling_gemma3n.py l.1713-1727 at 5.23.0): the first
// copy's RMS magnitude, each other copy through its
// altup_unembed_projections rescaled to it (altUpRescaled), torch.stack
// of the first and them, the mean over the stack (nothing saved). The
// list keeps the rescaled copies, and the last projection's output, until
// the forward returns.
func (b *actBuilder) altUpMerge(p blockPlan, x *actT, h int64) *actT {
	n := int64(b.r.m.AltUpInputs)
	tm := b.rmsMagnitude("altup.unembed.target_magnitude", x, h) // hidden_states[0], a view
	parts := b.altUpRescaledCopies(p, "altup_unembed_projections", x, tm, h)
	st := b.op("altup.unembed.stack", b.size(n*h, x.dtype), x.dtype, parts)
	return b.op("altup.unembed.mean", b.size(h, x.dtype), x.dtype, list(st))
}

// rmsMagnitude is torch.mean(y**2, dim=-1, keepdim=True) ** 0.5 on y, h
// wide (a view of it where y is the stack): y**2 saves y, the mean saves
// nothing, ** 0.5 saves the mean.
func (b *actBuilder) rmsMagnitude(name string, y *actT, h int64) *actT {
	sq := b.op(name+".pow", b.size(h, y.dtype), y.dtype, list(y), y)
	mn := b.op(name+".mean", b.size(1, y.dtype), y.dtype, list(sq))
	return b.op(name, b.size(1, y.dtype), y.dtype, list(mn), mn)
}

// altUpRescaled is one projected copy rescaled to the target magnitude tm
// (modeling_gemma3n.py l.1680-1686, 1716-1722 at 5.23.0): the projection
// of x (h wide; a view of it where x is the stack: under autocast its own
// cast copy), .to(like's dtype), its own magnitude (y**2 saves y, the
// mean, clamp saves the mean, sqrt saves its result), y · tm and the
// quotient by the magnitude (each saves both operands). It returns the
// copy and the projection's output.
func (b *actBuilder) altUpRescaled(p blockPlan, name string, x, like, tm *actT, h int64) (*actT, *actT) {
	in := x
	if p.autocast && x.dtype != p.e && x.dtype.IsFloat() {
		in = b.op(name+".cast", b.size(h, p.e), p.e, list(x)) // of the copy alone
	}
	proj := b.linear(p, name, "other", in, h, h)
	y := proj
	if y.dtype != like.dtype {
		y = b.op(name+".to", b.size(h, like.dtype), like.dtype, list(proj))
	}
	d := y.dtype
	sq := b.op(name+".pow", b.size(h, d), d, list(y), y)
	mn := b.op(name+".mean", b.size(1, d), d, list(sq))
	cl := b.op(name+".clamp", b.size(1, d), d, list(mn), mn)
	nm := b.keep(b.op(name+".sqrt", b.size(1, d), d, list(cl)))
	md := promote(d, tm.dtype)
	prod := b.op(name+"*target", b.size(h, md), md, list(y, tm), y, tm)
	return b.op(name+"/magnitude", b.size(h, md), md, list(prod, nm), prod, nm), proj
}
