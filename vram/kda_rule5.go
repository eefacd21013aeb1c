package vram

// chunk_kimi_delta_attention's torch fallback (transformers 5.23.0
// models/kimi_linear/modeling_kimi_linear.py:465-563) op by op, on q, k
// and v (views of the convolution's output, in its dtype), the fp32 decay
// g (one value a channel) and β, with use_qk_l2norm_in_kernel. It returns
// the attention output in q's dtype, tokens × heads × head width. Sizes
// are the padded sequence's from F.pad on (l.494-502): whole chunks of
// deltaChunk tokens, however many of the last are padding.

// kdaRule holds the fp32 chunked operands the rule's loops read.
type kdaRule struct {
	d             deltaDims
	padded        int64 // batch × chunks × chunk tokens
	q, k          *actT // scaled query, key (padded, heads first)
	kBeta         *actT
	gCum          *actT // g's cumulative sum per chunk, per channel
	decay         *actT // decay_mask: batch × heads × chunks × chunk × chunk × head_dim
	attn          *actT // -(k_β·k over the decay), solved row by row
	value         *actT // v_β, then attn @ v_β
	kCumDecay     *actT
	state, out    *actT
	locals        []*actT // the rule's locals until it returns
	maps, channel int64   // a chunk × chunk map's and a chunk × head_dim slice's elements, all heads
}

// chunkKDA is the rule on act (q|k|v, whose views q, k and v are), g and
// β. It returns the output and, with a cache, what the final state's
// update made, which the forward's last_recurrent_state holds until it
// returns (l.695-708).
func (b *actBuilder) chunkKDA(p blockPlan, d deltaDims, act, g, beta *actT) (out *actT, final []*actT) {
	s := b.kdaOperands(d, act, g, beta)
	b.kdaSolve(p, s)
	final = b.kdaChunks(p, s)
	// core_attn_out[:, :, :seq].transpose(1, 2).contiguous().to(initial_dtype)
	// (l.559-561): one copy in its dtype, another where that is not q's.
	out = b.op("core_attn_out.contiguous", b.size(d.vd, s.out.dtype), s.out.dtype, list(s.out))
	if out.dtype != act.dtype {
		out = b.op("core_attn_out.to", b.size(d.vd, act.dtype), act.dtype, list(out))
	}
	b.hold(s.locals...)
	return out, final
}

// kdaOperands runs the rule up to the triangular solve (l.480-518): the
// heads-first fp32 copies (x.transpose(1, 2).contiguous().to(float32),
// l.481-483: a copy in x's dtype, then an fp32 one unless it is fp32), the
// L2 norms (l.486-488; l.400-408: x·x, its sum, sqrt saved, x / sqrt
// saving both), F.pad (a copy even with nothing to pad) with q · scale
// after it (l.498-502), v · β and k · β (l.503-504), g's cumulative sum
// (l.514, a local until the rule returns), the two chunk masks
// (l.515-516), the decay map (l.517: the difference, the masked fill, exp
// saving its output) and the first attn (l.518: k_β·k over the map, saved
// by the product with the decay, that product, its sum over head_dim, the
// masked fill and the negation).
func (b *actBuilder) kdaOperands(d deltaDims, act, g, beta *actT) *kdaRule {
	s := &kdaRule{d: d, padded: d.batch * d.chunks * deltaChunk}
	f := func(n int64) Bytes { return FP32.Size(n) }
	tp := s.padded
	s.maps = tp * d.nv * deltaChunk
	s.channel = d.batch * d.nv * deltaChunk * d.dk
	qf, kf := b.headsFirstFP32("query", act, d.kd), b.headsFirstFP32("key", act, d.kd)
	vf, bf := b.headsFirstFP32("value", act, d.vd), b.headsFirstFP32("beta", beta, d.nv)
	gf := b.headsFirstFP32("g", g, d.kd)
	qn := b.l2norm("query", qf, d.kd, d.nv)
	kn := b.l2norm("key", kf, d.kd, d.nv)
	qp := b.op("query.pad", f(tp*d.kd), FP32, list(qn))
	s.q = b.op("query.pad*scale", f(tp*d.kd), FP32, list(qp))
	s.k = b.op("key.pad", f(tp*d.kd), FP32, list(kn))
	vp := b.op("value.pad", f(tp*d.vd), FP32, list(vf))
	gp := b.op("g.pad", f(tp*d.kd), FP32, list(gf))
	bp := b.op("beta.pad", f(tp*d.nv), FP32, list(bf))
	s.value = b.op("v_beta", f(tp*d.vd), FP32, list(vp, bp), vp, bp)
	s.kBeta = b.op("k_beta", f(tp*d.kd), FP32, list(s.k, bp), s.k, bp)
	s.gCum = b.op("g.cumsum", f(tp*d.kd), FP32, list(gp))
	b.keep(b.op("mask.triu", Bool.Size(deltaChunk*deltaChunk), Bool, nil))
	b.keep(b.op("strict_mask.triu", Bool.Size(deltaChunk*deltaChunk), Bool, nil))
	wide := f(s.maps * d.dk)
	diff := b.op("decay.diff", wide, FP32, list(s.gCum))
	mf := b.op("decay.masked_fill", wide, FP32, list(diff))
	s.decay = b.keep(b.op("decay_mask", wide, FP32, list(mf)))
	kk := b.op("k_beta*key", wide, FP32, list(s.kBeta, s.k), s.kBeta, s.k)
	kd := b.op("k_beta*key*decay", wide, FP32, list(kk, s.decay), kk, s.decay)
	// The product's gradient is sum's expanded one, a view; the map's
	// part of its gradient is a fresh map (kdaDecaySlice).
	kd.aliasGrad = true
	b.gradWorkspace(wide)
	sum := b.op("attn.sum", f(s.maps), FP32, list(kd))
	fill := b.op("attn.masked_fill", f(s.maps), FP32, list(sum))
	s.attn = b.op("attn.neg", f(s.maps), FP32, list(fill))
	s.locals = []*actT{s.gCum}
	return s
}

// kdaSolve is the triangular solve row by row (l.519-522, Gated
// DeltaNet's: deltaRowSolve), attn + I (l.524), value = attn @ v_β and
// k_cumdecay = attn @ (k_β · exp(g)) (l.525-526, exp saving its output;
// under autocast each matmul casts its operands anew), the zero state in
// value's dtype and core_attn_out = zeros_like(value) (l.528-533). value
// is read chunk by chunk and lives until the rule returns.
func (b *actBuilder) kdaSolve(p blockPlan, s *kdaRule) {
	d := s.d
	f := func(n int64) Bytes { return FP32.Size(n) }
	tp := s.padded
	b.deltaRowSolve(d.batch*d.nv*d.chunks, s.attn)
	eye := b.op("attn+eye", f(s.maps), FP32, list(s.attn))
	s.value = b.deltaMatmul(p, "attn@v_beta", tp*d.vd, eye, s.maps, s.value, tp*d.vd)
	ge := b.keep(b.op("g.exp", f(tp*d.kd), FP32, list(s.gCum)))
	kbg := b.op("k_beta*g.exp", f(tp*d.kd), FP32, list(s.kBeta, ge), s.kBeta, ge)
	s.kCumDecay = b.deltaMatmul(p, "k_cumdecay", tp*d.kd, eye, s.maps, kbg, tp*d.kd)
	vd := s.value.dtype
	s.state = b.op("state.zeros", vd.Size(d.batch*d.nv*d.dk*d.dv), vd, nil)
	s.out = b.op("core_attn_out.zeros", vd.Size(tp*d.vd), vd, list(s.value))
	b.keep(b.op("chunk_mask.triu", Bool.Size(deltaChunk*deltaChunk), Bool, nil)) // l.535
	s.locals = append(s.locals, s.value, s.out)
}

// kdaChunks is the loop over the chunks (l.536-555). Each chunk: the
// inter-chunk term (q_i · exp(g_i)) @ state (l.543), the intra-chunk map
// (l.545: q_i·k_i over the chunk's decay map, the first product saved by
// the second, summed over head_dim, masked), v_new = v_i − k_cumdecay_i @
// state (l.547-548, saved by the two matmuls reading it), its output
// written into core_attn_out in place (l.550), and the state's update
// (l.551-554), in fp32 from the first chunk on (its decay is fp32). The
// first chunk's state is zeros without a gradient (deltaMatmulZeros). The
// last update feeds no output: without a cache the rule drops it
// (l.557-558) and its graph dies; with one the forward holds it until it
// returns (what it made comes back as final). Every exp saves its output.
func (b *actBuilder) kdaChunks(p blockPlan, s *kdaRule) (final []*actT) {
	d := s.d
	f := func(n int64) Bytes { return FP32.Size(n) }
	bh := d.batch * d.nv
	cc, ck, cv, kv := bh*deltaChunk*deltaChunk, s.channel, bh*deltaChunk*d.dv, bh*d.dk*d.dv
	for i := int64(0); i < d.chunks; i++ {
		mm := b.deltaMatmul
		if i == 0 {
			mm = b.deltaMatmulZeros
		}
		ge := b.keep(b.op("g_i.exp", f(ck), FP32, list(s.gCum)))
		qe := b.op("q_i*g_i.exp", f(ck), FP32, list(s.q, ge), s.q, ge)
		inter := mm(p, "attn_inter", cv, qe, ck, s.state, kv)
		qk := b.op("q_i*k_i", f(cc*d.dk), FP32, list(s.q, s.k), s.q, s.k)
		di := b.kdaDecaySlice(s, i == d.chunks-1)
		qkd := b.op("q_i*k_i*decay", f(cc*d.dk), FP32, list(qk, di), qk, s.decay)
		qkd.aliasGrad = true          // sum's expanded gradient, a view
		b.gradWorkspace(f(cc * d.dk)) // the slice's gradient
		sum := b.op("attn_intra.sum", f(cc), FP32, list(qkd))
		intra := b.op("attn_intra.masked_fill", f(cc), FP32, list(sum))
		vPrime := mm(p, "v_prime", cv, s.kCumDecay, ck, s.state, kv)
		vd := promote(s.value.dtype, vPrime.dtype)
		vNew := b.op("v_new", vd.Size(cv), vd, list(s.value, vPrime))
		av := b.deltaMatmul(p, "attn_intra@v_new", cv, intra, cc, vNew, cv)
		od := promote(inter.dtype, av.dtype)
		out := b.op("attn_inter+attn_intra@v_new", od.Size(cv), od, list(inter, av))
		b.op("core_attn_out[i]=", 0, s.out.dtype, list(s.out, out))
		gl := b.keep(b.op("g_last.exp", f(bh*d.dk), FP32, list(s.gCum)))
		diff := b.op("g_last-g_i", f(ck), FP32, list(s.gCum))
		de := b.keep(b.op("g_last-g_i.exp", f(ck), FP32, list(diff)))
		sd := promote(s.state.dtype, FP32)
		if i == d.chunks-1 {
			scaled := b.op("state*g_last.exp", sd.Size(kv), sd, list(s.state, gl))
			kw := b.op("k_i*decay", f(ck), FP32, list(s.k, de))
			upd := b.op("k_iᵀ@v_new", f(kv), FP32, list(kw, vNew))
			s.state = b.op("state", f(kv), FP32, list(scaled, upd))
			if p.useCache {
				final = []*actT{kw, s.state} // the matmul's saved operand, the state
			}
			return final
		}
		scaled := b.op("state*g_last.exp", sd.Size(kv), sd, list(s.state, gl), s.state, gl)
		kw := b.op("k_i*decay", f(ck), FP32, list(s.k, de), s.k, de)
		upd := b.deltaMatmul(p, "k_iᵀ@v_new", kv, kw, ck, vNew, cv)
		nd := promote(scaled.dtype, upd.dtype)
		s.state = b.op("state", nd.Size(kv), nd, list(scaled, upd))
	}
	return final
}

// kdaDecaySlice is decay_mask[:, :, i] (l.545), a view, as its backward
// runs: select_backward copies the slice's gradient into a zeros map
// (torch/csrc/autograd/FunctionsManual.cpp), which autograd's input buffer
// adds to the map's waiting gradient out of place — the map, its new part
// and their sum live at once, after the product's backward let its saved
// tensors go. The slice read first in backward (the last chunk's, first)
// starts the buffer: its zeros map is the waiting gradient.
func (b *actBuilder) kdaDecaySlice(s *kdaRule, first bool) *actT {
	di := b.op("decay_mask[i]", 0, FP32, list(s.decay))
	if !first {
		b.gradWorkspace(FP32.Size(2 * s.maps * s.d.dk))
	}
	return di
}
