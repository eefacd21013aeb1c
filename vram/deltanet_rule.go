package vram

// torch_chunk_gated_delta_rule (modeling_qwen3_next.py) op by op, on the
// value-head-wide q, k, v, the fp32 decay g and β, with the query and key
// L2-normalized first (use_qk_l2norm_in_kernel). It returns the attention
// output in q's dtype, tokens × value heads × value width.

// deltaRule holds the fp32 chunked operands the rule's loops read.
type deltaRule struct {
	d          deltaDims
	padded     int64 // batch × chunks × chunk tokens
	q, k       *actT // scaled query, key (padded, heads first)
	kBeta      *actT
	gCum       *actT // the decay's cumulative sum per chunk
	decay      *actT // decay_mask: batch × heads × chunks × chunk × chunk
	attn       *actT // the chunk's -(k_β kᵀ ∘ decay), solved row by row
	value      *actT // attn @ v_β
	kCumDecay  *actT
	state, out *actT
}

func (b *actBuilder) chunkGatedDeltaRule(p blockPlan, d deltaDims, q, k, v, g, beta *actT) *actT {
	s := b.deltaOperands(p, d, q, k, v, g, beta)
	b.deltaRows(p, s)
	b.deltaChunks(p, s)
	if p.useCache {
		p.holdOutput(s.state) // the final state, returned with past_key_values
	}
	// core_attn_out[:, :, :seq].transpose(1, 2).contiguous(), then back to
	// the input's dtype.
	out := b.op("core_attn_out.contiguous", b.size(d.nv*d.dv, s.out.dtype), s.out.dtype, list(s.out))
	if out.dtype != q.dtype {
		out = b.op("core_attn_out.to", b.size(d.nv*d.dv, q.dtype), q.dtype, list(out))
	}
	return out
}

// deltaOperands: the L2 norms, the fp32 heads-first copies, their padding
// to whole chunks (F.pad copies even when nothing is padded), q · scale,
// v · β and k · β (each saving both factors), the decay's cumulative sum,
// the decay mask (exp saves its output) and the chunk's first attn:
// -((k_β @ kᵀ) · decay).masked_fill(mask, 0).
func (b *actBuilder) deltaOperands(p blockPlan, d deltaDims, q, k, v, g, beta *actT) *deltaRule {
	s := &deltaRule{d: d, padded: d.batch * d.chunks * deltaChunk}
	f := func(n int64) Bytes { return FP32.Size(n) }
	qn := b.l2norm("query", q, d.nv*d.dk, d.nv)
	kn := b.l2norm("key", k, d.nv*d.dk, d.nv)
	qf, kf := b.headsFirstFP32("query", qn, d.nv*d.dk), b.headsFirstFP32("key", kn, d.nv*d.dk)
	vf, bf := b.headsFirstFP32("value", v, d.nv*d.dv), b.headsFirstFP32("beta", beta, d.nv)
	gf := b.headsFirstFP32("g", g, d.nv)
	tp := s.padded
	qp := b.op("query.pad", f(tp*d.nv*d.dk), FP32, list(qf))
	s.k = b.op("key.pad", f(tp*d.nv*d.dk), FP32, list(kf))
	vp := b.op("value.pad", f(tp*d.nv*d.dv), FP32, list(vf))
	bp := b.op("beta.pad", f(tp*d.nv), FP32, list(bf))
	gp := b.op("g.pad", f(tp*d.nv), FP32, list(gf))
	s.q = b.op("query*scale", f(tp*d.nv*d.dk), FP32, list(qp))
	vBeta := b.op("v_beta", f(tp*d.nv*d.dv), FP32, list(vp, bp), vp, bp)
	s.kBeta = b.op("k_beta", f(tp*d.nv*d.dk), FP32, list(s.k, bp), s.k, bp)
	s.gCum = b.op("g.cumsum", f(tp*d.nv), FP32, list(gp))
	maps := f(tp * d.nv * deltaChunk)
	diff := b.op("decay.diff", maps, FP32, list(s.gCum))
	tr := b.op("decay.tril", maps, FP32, list(diff))
	ex := b.keep(b.op("decay.exp", maps, FP32, list(tr)))
	s.decay = b.op("decay_mask", maps, FP32, list(ex))
	kk := b.deltaMatmul(p, "k_beta@key", tp*d.nv*deltaChunk, s.kBeta, tp*d.nv*d.dk, s.k, tp*d.nv*d.dk)
	pr := b.op("k_beta@key*decay", maps, FP32, list(kk, s.decay), kk, s.decay)
	neg := b.op("attn.neg", maps, FP32, list(pr))
	s.attn = b.op("attn.masked_fill", maps, FP32, list(neg))
	s.value = vBeta // replaced by attn @ v_β after the rows
	return s
}

// deltaRows is the triangular solve, row by row: for i in 1 … chunk − 1,
// row = attn[..., i, :i].clone(), sub = attn[..., :i, :i].clone(), and
// attn[..., i, :i] = row + (row.unsqueeze(-1) · sub).sum(-2) — the product
// saves both clones; the sum and the in-place write save nothing. Then
// attn + I, value = attn @ v_β and k_cumdecay = attn @ (k_β · exp(g)).
func (b *actBuilder) deltaRows(p blockPlan, s *deltaRule) {
	d := s.d
	f := func(n int64) Bytes { return FP32.Size(n) }
	b.deltaRowSolve(d.batch*d.nv*d.chunks, s.attn)
	tp := s.padded
	maps := tp * d.nv * deltaChunk
	eye := b.op("attn+eye", f(maps), FP32, list(s.attn))
	s.value = b.deltaMatmul(p, "attn@v_beta", tp*d.nv*d.dv, eye, maps, s.value, tp*d.nv*d.dv)
	ge := b.keep(b.op("g.exp", f(tp*d.nv), FP32, list(s.gCum)))
	kbg := b.op("k_beta*g.exp", f(tp*d.nv*d.dk), FP32, list(s.kBeta, ge), s.kBeta, ge)
	s.kCumDecay = b.deltaMatmul(p, "k_cumdecay", tp*d.nv*d.dk, eye, maps, kbg, tp*d.nv*d.dk)
	// The state starts as zeros .to(value) and the output as
	// zeros_like(value): in value's dtype (the compute dtype under autocast).
	vd := s.value.dtype
	s.state = b.op("state.zeros", vd.Size(d.batch*d.nv*d.dk*d.dv), vd, nil)
	s.out = b.op("core_attn_out.zeros", vd.Size(tp*d.nv*d.dv), vd, list(s.value))
}

// deltaRowSolve is the row loop of the triangular solve on attn, rows
// chunk × chunk fp32 maps (batch × heads × chunks of them), written in
// place.
func (b *actBuilder) deltaRowSolve(rows int64, attn *actT) {
	f := func(n int64) Bytes { return FP32.Size(n) }
	for i := int64(1); i < deltaChunk; i++ {
		row := b.op("attn.row.clone", f(rows*i), FP32, list(attn))
		sub := b.op("attn.sub.clone", f(rows*i*i), FP32, list(attn))
		t := b.op("row*sub", f(rows*i*i), FP32, list(row, sub), row, sub)
		sum := b.op("row*sub.sum", f(rows*i), FP32, list(t))
		u := b.op("row+sum", f(rows*i), FP32, list(row, sum))
		b.op("attn[i,:i]=", 0, FP32, list(attn, u))
	}
}

// deltaChunks is the loop over the chunks: each reads the state the
// previous left (its products save it) and writes its output into
// core_attn_out in place.
func (b *actBuilder) deltaChunks(p blockPlan, s *deltaRule) {
	d := s.d
	f := func(n int64) Bytes { return FP32.Size(n) }
	bh := d.batch * d.nv
	cc, ck, cv, kv := bh*deltaChunk*deltaChunk, bh*deltaChunk*d.dk, bh*deltaChunk*d.dv, bh*d.dk*d.dv
	for i := int64(0); i < d.chunks; i++ {
		qk := b.deltaMatmul(p, "q_i@k_i", cc, s.q, ck, s.k, ck)
		attn := b.op("q_i@k_i*decay", f(cc), FP32, list(qk, s.decay), qk, s.decay)
		vPrime := b.deltaMatmul(p, "v_prime", cv, s.kCumDecay, ck, s.state, kv)
		vd := promote(s.value.dtype, vPrime.dtype)
		vNew := b.op("v_new", vd.Size(cv), vd, list(s.value, vPrime))
		ge := b.keep(b.op("g_i.exp", f(bh*deltaChunk), FP32, list(s.gCum)))
		qe := b.op("q_i*g_i.exp", f(ck), FP32, list(s.q, ge), s.q, ge)
		inter := b.deltaMatmul(p, "attn_inter", cv, qe, ck, s.state, kv)
		av := b.deltaMatmul(p, "attn@v_new", cv, attn, cc, vNew, cv)
		od := promote(inter.dtype, av.dtype)
		sum := b.op("attn_inter+attn@v_new", od.Size(cv), od, list(inter, av))
		b.op("core_attn_out[i]=", 0, s.out.dtype, list(s.out, sum))
		gl := b.keep(b.op("g_last.exp", f(bh), FP32, list(s.gCum)))
		sd := promote(s.state.dtype, FP32)
		scaled := b.op("state*g_last.exp", sd.Size(kv), sd, list(s.state, gl), s.state, gl)
		diff := b.op("g_last-g_i", f(bh*deltaChunk), FP32, list(s.gCum))
		de := b.keep(b.op("g_last-g_i.exp", f(bh*deltaChunk), FP32, list(diff)))
		kw := b.op("k_i*decay", f(ck), FP32, list(s.k, de), s.k, de)
		upd := b.deltaMatmul(p, "k_iᵀ@v_new", kv, kw, ck, vNew, cv)
		nd := promote(scaled.dtype, upd.dtype)
		s.state = b.op("state", nd.Size(kv), nd, list(scaled, upd))
	}
}

// deltaMatmul is a matmul of the rule, out elements from x and y (their
// elements read given): under autocast each fp32 operand is cast to the
// compute dtype (a copy, which the matmul saves, anew each call: autocast
// caches only leaves) and the product is in that dtype.
func (b *actBuilder) deltaMatmul(p blockPlan, name string, out int64, x *actT, xn int64, y *actT, yn int64) *actT {
	cast := func(t *actT, n int64, which string) *actT {
		if !p.autocast || t.dtype == p.e {
			return t
		}
		return b.op(name+"."+which+".cast", p.e.Size(n), p.e, list(t))
	}
	xs, ys := cast(x, xn, "a"), cast(y, yn, "b")
	dt := promote(xs.dtype, ys.dtype)
	if p.autocast {
		dt = p.e
	}
	o := b.op(name, dt.Size(out), dt, list(xs, ys), xs, ys)
	b.ops[len(b.ops)-1].gemm = true
	return o
}

// deltaGatedNorm is Qwen3NextRMSNormGated(core, z) over each value head:
// the RMSNorm in fp32 (pow saves the fp32 input, rsqrt its output, the
// product both), cast back and weighed (the product saves its input),
// times silu(z.float()) (silu saves its input, the product both), cast
// back to the input's dtype.
func (b *actBuilder) deltaGatedNorm(p blockPlan, d deltaDims, core, z *actT) *actT {
	e := core.dtype
	hf := core
	if e != FP32 {
		hf = b.op("norm.float", b.size(d.vd, FP32), FP32, list(core))
	}
	b.op("norm.pow", b.size(d.vd, FP32), FP32, list(hf), hf)
	rs := b.keep(b.op("norm.rsqrt", b.size(d.nv, FP32), FP32, list(hf)))
	nm := b.op("norm.scaled", b.size(d.vd, FP32), FP32, list(hf, rs), hf, rs)
	back := nm
	if e != FP32 {
		back = b.op("norm.to", b.size(d.vd, e), e, list(nm))
	}
	wd := promote(p.baseDType, e)
	w := b.op("norm.weight", b.size(d.vd, wd), wd, list(back), back)
	zf := z
	if z.dtype != FP32 {
		zf = b.op("z.float", b.size(d.vd, FP32), FP32, list(z))
	}
	sg := b.op("z.silu", b.size(d.vd, FP32), FP32, list(zf), zf)
	gd := promote(wd, FP32)
	out := b.op("norm*silu(z)", b.size(d.vd, gd), gd, list(w, sg), w, sg)
	if gd != e {
		out = b.op("norm.out.to", b.size(d.vd, e), e, list(out))
	}
	return out
}
