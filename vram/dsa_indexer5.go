package vram

// DeepSeek Sparse Attention's lightning indexer in the training step, as
// transformers 5.23 runs it (models/deepseek_v32/modeling_deepseek_v32.py,
// "modeling l.N" below; glm_moe_dsa/modeling_glm_moe_dsa.py repeats it).
// DeepseekV32Indexer.forward is decorated @torch.no_grad() (l.184): none
// of its ops is recorded, its parameters never get a gradient (noGradPart,
// dsa.go), and what it makes is transient — but it is large: its scores
// matmul (l.227) multiplies q [B, S, H, D] by k^T unsqueezed to
// [B, 1, D, T], and torch.matmul broadcasts the batch dimensions by
// expanding k to [B, S, D, T] and reshaping it, a copy of B·S·T·D
// elements (measured with torch 2.15: aten.clone of (4, 256, 32, 256)
// before the bmm), S times the key.
//
// Measured dtypes (CPU, torch 2.15): q and k leave the rotary embedding in
// its cos/sin dtype (the hidden states', fp32 under autocast) and the
// concatenations keep it; .float() copies only a narrower q or k; under
// autocast torch.matmul casts both to the compute dtype first, and its
// outputs, the scale and the relu are in that dtype.

// dsaIndexTopK is index_topk, the keys the indexer keeps per query:
// DeepseekV32Config's and GlmMoeDsaConfig's default, 2048
// (configuration_deepseek_v32.py:120, configuration_glm_moe_dsa.py:125),
// which the released checkpoints keep. The engine does not read the key:
// it sizes only the indexer's [B, S, min(index_topk, T)] indices.
const dsaIndexTopK = 2048

// dsaIndexer builds one layer's indexer on x (the attention's input, the
// normed hidden states) and qResid (q_a_layernorm's output), run without
// a graph, and returns its int32 top-k indices, [B, S, min(index_topk,
// T)], which the attention's forward keeps until it returns.
func (b *actBuilder) dsaIndexer(p blockPlan, x, qResid *actT) *actT {
	m := b.r.m
	from := len(b.ops)
	h, n, d, dr := int64(m.Hidden), int64(m.IndexHeads), int64(m.IndexHeadDim), int64(m.QKRopeDim)
	t := int64(b.r.SeqLen)
	// q = wq_b(q_resid), k = k_norm(wk(x)) (l.212, 216).
	q := b.linear(p, "indexer.wq_b", "q_proj", qResid, int64(m.QLoRARank), n*d)
	k := b.linear(p, "indexer.wk", "k_proj", x, h, d)
	k = b.norm(p, "indexer.k_norm", "layernorm", k, d)
	// apply_rotary_pos_emb on the rotary parts (l.220; l.142-143):
	// q·cos, rotate_half's negated half and concatenation, ·sin, the sum,
	// in the promoted dtype of the part and cos/sin (the hidden states');
	// then the parts concatenated back (l.221-222).
	var rotated []*actT
	rope := func(name string, x *actT, heads int64) *actT {
		rd := promote(x.dtype, p.resid)
		if p.rec.indexerInterleaved {
			return b.indexerRopeInterleaved(name, x, heads, rd, &rotated)
		}
		c := b.op(name+".cos", b.size(heads*dr, rd), rd, list(x))
		neg := b.op(name+".rotate_half.neg", b.size(heads*dr/2, x.dtype), x.dtype, list(x))
		rh := b.op(name+".rotate_half", b.size(heads*dr, x.dtype), x.dtype, list(neg, x))
		s := b.op(name+".sin", b.size(heads*dr, rd), rd, list(rh))
		rot := b.op(name+".rope", b.size(heads*dr, rd), rd, list(c, s))
		rotated = append(rotated, rot) // q_rot, k_rot: locals too
		return b.op(name+".cat", b.size(heads*d, promote(rd, x.dtype)), promote(rd, x.dtype), list(rot, x))
	}
	qp, kp := q, k // q_pass and k_pass, views of these, live until the call returns
	q, k = rope("indexer.q", q, n), rope("indexer.k", k, 1)
	locals := []*actT{qp, kp, q, k}
	if p.useCache && p.hfModeling {
		// past_key_values.update_indexer(k) (l.224-225): the cache layer
		// concatenates k onto an empty tensor of its dtype
		// (cache_utils.py:333-334, 349), a copy it keeps; the scores read it.
		k = b.op("indexer.cache.k", b.size(d, k.dtype), k.dtype, list(k))
		p.holdOutput(k)
		locals = append(locals, k)
	}
	// scores = matmul(q.float(), k^T.float().unsqueeze(1)) · scale, relu
	// (l.227-228): in fp32, or under autocast cast to the compute dtype.
	md := FP32
	if p.autocast {
		md = p.e
	}
	if q.dtype != md {
		q = b.op("indexer.q.to", b.size(n*d, md), md, list(q))
	}
	if k.dtype != md {
		k = b.op("indexer.k.to", b.size(d, md), md, list(k))
	}
	kx := b.op("indexer.k.expand", md.Size(mulI64(b.tokens, t*d)), md, list(k))
	sc := b.op("indexer.scores", md.Size(mulI64(b.tokens, n*t)), md, list(q, k, kx))
	sc = b.op("indexer.scores.scale", sc.bytes, md, list(sc))
	sc = b.op("indexer.scores.relu", sc.bytes, md, list(sc))
	locals = append(locals, sc)
	// weights = weights_proj(x).float() · n^-½ (l.231), then
	// matmul(weights.unsqueeze(-2), scores) (l.232): batch dimensions
	// equal, no copy; [B, S, T] in the scores' dtype.
	w := b.linear(p, "indexer.weights_proj", "router", x, h, n)
	if w.dtype != FP32 {
		w = b.op("indexer.weights.float", b.size(n, FP32), FP32, list(w))
	}
	w = b.op("indexer.weights.scale", b.size(n, FP32), FP32, list(w))
	locals = append(locals, w)
	if md != FP32 {
		w = b.op("indexer.weights.to", b.size(n, md), md, list(w))
	}
	is := b.op("indexer.index_scores", md.Size(mulI64(b.tokens, t)), md, list(w, sc))
	// The causal mask: masked_fill of ~mask (a bool mask, SDPA's) or +
	// mask (eager's additive mask in the hidden states' dtype), l.235-238.
	if p.attnImpl == "eager" {
		md = promote(md, p.resid)
		is = b.op("indexer.index_scores+mask", md.Size(mulI64(b.tokens, t)), md, list(is))
	} else {
		inv := b.op("indexer.~mask", Bool.Size(mulI64(b.tokens, t)), Bool, nil)
		is = b.op("indexer.index_scores.masked_fill", is.bytes, md, list(is, inv))
	}
	// topk(min(index_topk, T)).indices.to(int32) (l.240-241): the values
	// and int64 indices die with the call.
	kk := min(int64(dsaIndexTopK), t)
	vals := b.op("indexer.topk.values", md.Size(mulI64(b.tokens, kk)), md, list(is))
	ix := b.op("indexer.topk.indices", INT64.Size(mulI64(b.tokens, kk)), INT64, list(is, vals))
	ix = b.op("indexer.topk_indices", INT32.Size(mulI64(b.tokens, kk)), INT32, list(ix))
	// The forward's locals (q_pass, k_pass, q_rot, k_rot, q, k, scores,
	// weights) hold their tensors until it returns.
	for _, t := range append(locals, rotated...) {
		t.lastUse = max(t.lastUse, len(b.ops)-1)
	}
	b.noGraph(from)
	return ix
}

// dsaIndexMask folds the indexer's top-k into the attention mask for eager
// and SDPA (modeling l.445-456): a bool index_mask from new_ones and an
// out-of-place scatter of topk_indices.long(), then attention_mask &
// ~index_mask (SDPA's bool mask) or attention_mask.masked_fill(index_mask,
// min) (eager's additive mask, in the hidden states' dtype) — a new mask
// per layer. The forward keeps topk_indices, index_mask and the new mask
// in its locals until it returns (after o_proj, l.476): the returned tensors are
// those three, whose lives the caller extends.
func (b *actBuilder) dsaIndexMask(p blockPlan, ix *actT) []*actT {
	from := len(b.ops)
	maps := mulI64(b.tokens, int64(b.r.SeqLen))
	ones := b.op("index_mask.new_ones", Bool.Size(maps), Bool, nil)
	long := b.op("index_mask.topk.long", INT64.Size(mulI64(b.tokens, min(int64(dsaIndexTopK), int64(b.r.SeqLen)))), INT64, list(ix))
	im := b.op("index_mask", Bool.Size(maps), Bool, list(ones, long))
	var mask *actT
	if p.attnImpl == "eager" {
		mask = b.op("index_mask.attention_mask", p.resid.Size(maps), p.resid, list(im))
	} else {
		inv := b.op("index_mask.~", Bool.Size(maps), Bool, list(im))
		mask = b.op("index_mask.attention_mask", Bool.Size(maps), Bool, list(inv))
	}
	b.noGraph(from)
	return []*actT{ix, im, mask}
}

// indexerRopeInterleaved is GLM-5's indexer rotation
// (glm_moe_dsa/modeling_glm_moe_dsa.py:114-150, called at l.221): on the
// even and odd halves of x's rotary part (strided views), x1·cos −
// x2·sin and x2·cos + x1·sin, each product and each sum half the rotary
// width in the promoted dtype rd, concatenated (the rotated part, which
// the indexer's q_rot or k_rot holds), then concatenated with the
// pass-through part (l.222-223).
func (b *actBuilder) indexerRopeInterleaved(name string, x *actT, heads int64, rd DType, rotated *[]*actT) *actT {
	m := b.r.m
	half := heads * int64(m.QKRopeDim) / 2
	sum := func(n string) *actT {
		a := b.op(name+"."+n+".a", b.size(half, rd), rd, list(x))
		c := b.op(name+"."+n+".b", b.size(half, rd), rd, list(x))
		return b.op(name+"."+n, b.size(half, rd), rd, list(a, c))
	}
	lo, hi := sum("x1cos-x2sin"), sum("x2cos+x1sin")
	rot := b.op(name+".rope", b.size(2*half, rd), rd, list(lo, hi))
	*rotated = append(*rotated, rot)
	out := promote(rd, x.dtype)
	return b.op(name+".cat", b.size(heads*int64(m.IndexHeadDim), out), out, list(rot, x))
}
