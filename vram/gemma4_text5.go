package vram

// Gemma 4's language model as transformers 5.23.0 trains it
// (models/gemma4/modeling_gemma4.py): the saved tensors the shared decoder
// block does not have.
//   - Gemma4RMSNorm._norm (l.213-216) computes
//     x · torch.pow(mean(x²) + eps, -0.5): pow with a tensor base and a
//     scalar exponent saves its input (PowBackward0: self) and the product
//     the result, so each norm keeps two fp32 statistics per normalized
//     vector where an rsqrt keeps one (recipe.powNorm, powNormInput).
//   - v_norm, a weightless Gemma4RMSNorm on v (l.1232); on a global layer
//     with attention_k_eq_v, v is k_proj's output itself (l.1226), which
//     k_norm's pow saves already (recipe.vNorm, attention.go).
//   - the per-layer inputs (recipe.perLayerInputs5): before the layers,
//     get_per_layer_inputs (l.1753) looks each token up in
//     embed_tokens_per_layer (scaled), project_per_layer_inputs
//     (l.1781-1792) projects the embeddings to every layer's slice,
//     scales them, normalizes each slice and adds the lookup, times
//     2^-0.5: one tensor of layers × hidden_size_per_layer_input per token,
//     whose slices every layer's product saves (perLayerInputs5); after
//     its MLP each layer gates itself with its slice (l.1415-1422:
//     perLayerInputGate), then multiplies itself by layer_scalar in place
//     (l.1424: no new tensor, nothing saved, a buffer).

// powNormInput adds the input of torch.pow(mean_squared, -0.5), which pow
// saves beside the product's saving of its result (Gemma4RMSNorm._norm,
// modeling_gemma4.py l.215-216 at 5.23.0): stats bytes of fp32, made by
// the norm's statistics op, the last op built.
func powNormInput(b *actBuilder, name string, stats Bytes) {
	b.side(opName(name, ".mean_squared"), stats, FP32)
}

// perLayerLookup is the per-layer inputs' lookup in
// embed_tokens_per_layer times its embed_scale (the weights' dtype,
// get_per_layer_inputs, modeling_gemma4.py l.1713-1750 at 5.23.0). In the
// wrapper Gemma4Model.forward first builds llm_inputs_embeds, x with the
// image tokens' rows replaced by the pad token's embedding (torch.where,
// a copy, l.2389-2391), which it holds until it returns: held, which the
// caller holds through the embedding side (gemma4HeldEmbeds carries it
// past it); nil without images.
func (b *actBuilder) perLayerLookup(p blockPlan, x *actT) (look, held *actT) {
	m := b.r.m
	all := int64(m.Layers) * int64(m.PerLayerInput)
	if m.Vision != nil {
		held = b.op("llm_inputs_embeds", x.bytes, x.dtype, list(x))
	}
	look = b.op("embed_tokens_per_layer", b.size(all, p.resid), p.resid, nil)
	return b.op("embed_tokens_per_layer.scale", b.size(all, p.resid), p.resid, list(look)), held
}

// perLayerInputs5 builds the model's per-layer inputs from x, the scaled
// embeddings (with images, merged), and look, the lookup (perLayerLookup)
// (modeling_gemma4.py l.1634-1637, 1753-1792 at 5.23.0):
// per_layer_model_projection on x times a Python float
// (its input saved: under autocast its own cast copy; else x, which block
// 0 counts as its input), per_layer_projection_norm over each layer's
// slice (a Gemma4RMSNorm with weight), the sum with the lookup and the
// product with 2^-0.5. The result is kept: every layer's product saves
// its slice, a view of it, until the layers' backward.
func (b *actBuilder) perLayerInputs5(p blockPlan, x, look *actT) {
	m := b.r.m
	layers, all := int64(m.Layers), int64(m.Layers)*int64(m.PerLayerInput)
	xc := b.castIn(p, "per_layer_model_projection", x)
	var saves []*actT
	if xc != x {
		saves = append(saves, xc)
	}
	proj := b.op("per_layer_model_projection", b.size(all, xc.dtype), xc.dtype, list(xc), saves...)
	b.ops[len(b.ops)-1].mm, b.ops[len(b.ops)-1].gemm = true, true
	if !p.rec.perLayerScaleInPlace {
		proj = b.op("per_layer_model_projection.scale", b.size(all, proj.dtype), proj.dtype, list(proj))
	}
	n := b.headNorm(p, "per_layer_projection_norm", m.Norm, proj, all, layers)
	d := promote(n.dtype, look.dtype)
	sum := b.op("per_layer_inputs.add", b.size(all, d), d, list(n, look))
	b.keep(b.op("per_layer_inputs", b.size(all, d), d, list(sum)))
}

// perLayerInputGate is a layer's per-layer input path on x, its output so
// far (Gemma4TextDecoderLayer.forward, modeling_gemma4.py l.1415-1422 at
// 5.23.0): per_layer_input_gate (saves x), gelu_pytorch_tanh (saves its
// input), the product with the layer's slice of the per-layer inputs
// (saves the activation; the slice is the model's tensor,
// perLayerInputs5), per_layer_projection (saves the product),
// post_per_layer_input_norm, and the residual add.
func (b *actBuilder) perLayerInputGate(p blockPlan, d blockDims, x *actT) *actT {
	n, mul := b.perLayerInputPath(p, d, x)
	out := b.residualAdd(p, "per_layer_residual", d.hSeq, x, n)
	b.perLayerInputsGrad(d.layer, mul)
	return out
}

// perLayerInputPath is perLayerInputGate up to its residual add: the
// gate, the activation, the product with the layer's slice, the
// projection and the norm on x. It returns the norm's output and the
// product's op, which the caller hands perLayerInputsGrad once the
// layer's ops are built.
func (b *actBuilder) perLayerInputPath(p blockPlan, d blockDims, x *actT) (*actT, int) {
	w := int64(b.r.m.PerLayerInput)
	g := b.linear(p, "per_layer_input_gate", "other", x, d.h, w)
	a := b.op("per_layer_input_gate.act", b.size(w, g.dtype), g.dtype, list(g), g)
	pd := promote(a.dtype, p.resid)
	prod := b.op("per_layer_input.mul", b.size(w, pd), pd, list(a), a)
	mul := len(b.ops) - 1
	proj := b.linear(p, "per_layer_projection", "other", prod, w, d.h)
	return b.norm(p, "post_per_layer_input_norm", b.r.m.Norm, proj, d.hSeq), mul
}

// perLayerInputsGrad: the gradient of the per-layer inputs, which every
// layer's slice adds to (per_layer_inputs[:, :, i, :], modeling_gemma4.py
// l.1692 at 5.23.0: SelectBackward0 makes a zero tensor of the whole
// input's shape and copies the slice's gradient into it), exists from the
// backward of the product in the last layer (op mul), before it in every
// other layer, where the product's backward makes one more such tensor
// to add; as an encoder's output's gradient (family_whisper.go).
func (b *actBuilder) perLayerInputsGrad(layer, mul int) {
	m := b.r.m
	p := b.r.blockPlan(layer)
	g := gradSize(&actT{bytes: b.size(int64(m.Layers)*int64(m.PerLayerInput), p.resid), dtype: p.resid})
	top := layer == m.Layers-1
	for i := range b.ops {
		if !top || i <= mul {
			b.ops[i].heldGrad = addBytes(b.ops[i].heldGrad, g)
		}
	}
	if !top {
		b.ops[mul].gradWorkspace = addBytes(b.ops[mul].gradWorkspace, g)
		b.persistGrad = addBytes(b.persistGrad, g)
	}
}

// gemma4MoE is a MoE layer's feed-forward part on x1, the residual stream
// after attention (Gemma4TextDecoderLayer.forward, modeling_gemma4.py
// l.1394-1410 at 5.23.0), up to the post_feedforward_layernorm the
// caller applies: the dense MLP on pre_feedforward_layernorm(x1), then
// post_feedforward_layernorm_1; the router on x1 (gemma4Router); the
// routed experts (transformers 5's grouped_mm) on
// pre_feedforward_layernorm_2(x1), then post_feedforward_layernorm_2; the
// sum of the two.
func (b *actBuilder) gemma4MoE(p blockPlan, d blockDims, x1 *actT) *actT {
	m := b.r.m
	dense := b.gatedMLP(p, "mlp.", b.norm(p, "pre_feedforward_layernorm", m.Norm, x1, d.hSeq), d.h, int64(m.LayerFFN(d.layer))/p.tp)
	h1 := b.norm(p, "post_feedforward_layernorm_1", m.Norm, dense, d.hSeq)
	rw := b.gemma4Router(p, x1, d.h)
	x2 := b.norm(p, "pre_feedforward_layernorm_2", m.Norm, x1, d.h)
	out := b.groupedExperts(p, x2, rw, d.h, int64(m.ExpertFFN)/p.tp)
	h2 := b.norm(p, "post_feedforward_layernorm_2", m.Norm, out, d.hSeq)
	dt := promote(h1.dtype, h2.dtype)
	h1.aliasGrad, h2.aliasGrad = h1.dtype == dt, h2.dtype == dt
	return b.op("moe.add", b.size(d.hSeq, dt), dt, list(h1, h2))
}

// gemma4Router is Gemma4TextRouter.forward on x (modeling_gemma4.py
// l.1315-1336 at 5.23.0): a weightless norm, times the per-channel scale
// (saves the normed x) and a Python float, the projection (saves its
// input), softmax in fp32 (saves its output), topk (saves its indices),
// the in-place division by the sum (saves a copy of the values and the
// sum), times per_expert_scale[top_k_index] (the gather saves the
// indices, the product both factors). It returns the weights, [tokens, k]
// fp32.
func (b *actBuilder) gemma4Router(p blockPlan, x *actT, h int64) *actT {
	m := b.r.m
	k, e := int64(m.ExpertsPerToken), int64(m.Experts)
	n := b.headNorm(p, "router.norm", "l2", x, h, 1)
	sd := promote(n.dtype, p.baseDType)
	sc := b.op("router.scale", b.size(h, sd), sd, list(n), n)
	sc = b.op("router.scale_root", b.size(h, sd), sd, list(sc))
	logits := b.linear(p, "router.proj", "router", sc, h, e)
	sm := b.keep(b.op("router_softmax", b.size(e, FP32), FP32, list(logits)))
	top := b.keep(b.op("router.topk", b.size(k, FP32), FP32, list(sm)))
	b.side("router.topk_indices", b.size(k, INT64), INT64)
	b.side("router.weights.original", b.size(k, FP32), FP32) // div_'s copy of self
	b.side("router.weight_sum", b.size(1, FP32), FP32)
	g := b.op("router.per_expert_scale", b.size(k, FP32), FP32, nil)
	return b.op("router.weights", b.size(k, FP32), FP32, list(top, g), top, g)
}
