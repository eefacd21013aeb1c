package vram

// torch_chunk_gated_delta_rule as transformers 5 runs it
// (5.23.0 models/qwen3_next/modeling_qwen3_next.py:369-510, the fallback
// of @use_kernel_func_from_hub_with_fallback("chunk_gated_delta_rule",
// "fla") without flash-linear-attention), selected by recipe.deltaRule5.
// Against 4.57's (deltanet_rule.go):
//   - q and k enter un-repeated; repeat_interleave to the value heads
//     runs inside the rule (l.410-412);
//   - x.transpose(1, 2).to(float32, memory_format=contiguous) (l.415-418):
//     under autocast one fp32 copy of each compute-dtype input (no
//     compute-dtype copy first), at which the repeated q and k die; an
//     fp32 input is returned as its transposed view (deltaFP32); the L2
//     norms then run on these (l.420-422);
//   - query * scaling (l.425) saves nothing (a Python scalar);
//   - the triangular system is solved by torch.linalg.solve_triangular
//     (l.465-467), which saves the system and its result: no row loop, no
//     clones;
//   - the query's and the key's decays are applied once before the chunk
//     loop (l.477-479), whose matmuls read slices of them.
// What each op saves was measured with torch 2.15 on the CPU (autograd's
// graph of one Qwen3NextGatedDeltaNet forward, fp32 and bf16 autocast).

// chunkGatedDeltaRule5 is the rule on q and k (key-head wide, x's
// dtype), v, g (fp32) and β; it returns the output in q's dtype.
func (b *actBuilder) chunkGatedDeltaRule5(p blockPlan, d deltaDims, qk, v, g, beta *actT) *actT {
	s := b.deltaOperands5(p, d, qk, v, g, beta)
	b.deltaChunks5(p, s)
	if p.useCache {
		p.holdOutput(s.state) // the final state, copied into the cache (l.755)
	}
	// core_attn_out[:, :, :seq].transpose(1, 2).to(initial_dtype,
	// memory_format=contiguous) (l.509): one copy.
	e := qk.dtype
	return b.op("core_attn_out.to", b.size(d.nv*d.dv, e), e, list(s.out))
}

// deltaFP32 is x.transpose(1, 2).to(torch.float32,
// memory_format=torch.contiguous_format) (l.415-418): one fp32 copy of a
// compute-dtype x; an fp32 x is returned as it is, the transposed view
// (torch 2.15, measured: same-dtype .to does not copy), whose layout the
// elementwise ops and F.pad after it keep.
func (b *actBuilder) deltaFP32(name string, x *actT, width int64) *actT {
	if x.dtype == FP32 {
		return x
	}
	return b.op(name+".float", b.size(width, FP32), FP32, list(x))
}

// deltaMatmul5 is one of the rule's batched matmuls over whole chunks
// (l.460-461): in fp32 its operands keep the heads-after-tokens layout of
// the inputs (deltaFP32), which torch.matmul cannot fold into a batch of
// matrices, so it copies both, and bmm saves the copies; under autocast
// the compute-dtype casts are those copies.
func (b *actBuilder) deltaMatmul5(p blockPlan, name string, out int64, x *actT, xn int64, y *actT, yn int64) *actT {
	if !p.autocast && (x.dtype == FP32 || y.dtype == FP32) {
		x = b.op(name+".a.copy", FP32.Size(xn), FP32, list(x))
		y = b.op(name+".b.copy", FP32.Size(yn), FP32, list(y))
	}
	return b.deltaMatmul(p, name, out, x, xn, y, yn)
}

// deltaOperands5 runs the rule up to the chunk loop (l.407-479).
func (b *actBuilder) deltaOperands5(p blockPlan, d deltaDims, qk, v, g, beta *actT) *deltaRule {
	s := &deltaRule{d: d, padded: d.batch * d.chunks * deltaChunk}
	f := func(n int64) Bytes { return FP32.Size(n) }
	q, k := qk, qk
	if d.rep > 1 { // l.410-412
		q = b.op("query.repeat_interleave", b.size(d.nv*d.dk, qk.dtype), qk.dtype, list(qk))
		k = b.op("key.repeat_interleave", b.size(d.nv*d.dk, qk.dtype), qk.dtype, list(qk))
	}
	qf, kf := b.deltaFP32("query", q, d.nv*d.dk), b.deltaFP32("key", k, d.nv*d.dk)
	vf, bf, gf := b.deltaFP32("value", v, d.nv*d.dv), b.deltaFP32("beta", beta, d.nv), b.deltaFP32("g", g, d.nv)
	qn := b.l2norm("query", qf, d.nv*d.dk, d.nv) // l.420-422
	kn := b.l2norm("key", kf, d.nv*d.dk, d.nv)
	tp := s.padded
	qs := b.op("query*scale", f(tp*d.nv*d.dk), FP32, list(qn)) // l.425
	// F.pad (l.429-430): copies even when nothing is padded.
	qp := b.op("query.pad", f(tp*d.nv*d.dk), FP32, list(qs))
	s.k = b.op("key.pad", f(tp*d.nv*d.dk), FP32, list(kn))
	vp := b.op("value.pad", f(tp*d.nv*d.dv), FP32, list(vf))
	bp := b.op("beta.pad", f(tp*d.nv), FP32, list(bf))
	gp := b.op("g.pad", f(tp*d.nv), FP32, list(gf))
	vBeta := b.op("v_beta", f(tp*d.nv*d.dv), FP32, list(vp, bp), vp, bp) // l.437-438
	s.kBeta = b.op("k_beta", f(tp*d.nv*d.dk), FP32, list(s.k, bp), s.k, bp)
	s.gCum = b.op("g.cumsum", f(tp*d.nv), FP32, list(gp)) // l.450
	// pairwise_decay (l.455-457): the difference, masked_fill, exp (saving
	// its output).
	maps := f(tp * d.nv * deltaChunk)
	diff := b.op("decay.diff", maps, FP32, list(s.gCum))
	mf := b.op("decay.masked_fill", maps, FP32, list(diff))
	s.decay = b.keep(b.op("decay.exp", maps, FP32, list(mf)))
	// ut_system and intra_chunk_attn (l.460-461): each product saves the
	// matmul's output and the decay.
	kk := b.deltaMatmul5(p, "k_beta@key", tp*d.nv*deltaChunk, s.kBeta, tp*d.nv*d.dk, s.k, tp*d.nv*d.dk)
	ut := b.op("ut_system", maps, FP32, list(kk, s.decay), kk, s.decay)
	qk2 := b.deltaMatmul5(p, "query@key", tp*d.nv*deltaChunk, qp, tp*d.nv*d.dk, s.k, tp*d.nv*d.dk)
	s.attn = b.op("intra_chunk_attn", maps, FP32, list(qk2, s.decay), qk2, s.decay)
	// decayed_k_beta (l.462), then the two solves (l.465-467), each
	// saving the system and its result.
	ce := b.keep(b.op("cum_decay.exp", f(tp*d.nv), FP32, list(s.gCum)))
	dkb := b.op("decayed_k_beta", f(tp*d.nv*d.dk), FP32, list(s.kBeta, ce), s.kBeta, ce)
	s.value = b.keep(b.op("solve_triangular.new_values", f(tp*d.nv*d.dv), FP32, list(ut, vBeta), ut))
	s.kCumDecay = b.keep(b.op("solve_triangular.k_cumdecay", f(tp*d.nv*d.dk), FP32, list(ut, dkb), ut))
	// zeros in new_values' dtype (fp32), zeros_like(new_values) (l.474-476).
	s.state = b.op("state.zeros", f(d.batch*d.nv*d.dk*d.dv), FP32, nil)
	s.out = b.op("core_attn_out.zeros", f(tp*d.nv*d.dv), FP32, list(s.value))
	// The decays applied once (l.477-479).
	qe := b.keep(b.op("query.cum_decay.exp", f(tp*d.nv), FP32, list(s.gCum)))
	s.q = b.op("query*decay", f(tp*d.nv*d.dk), FP32, list(qp, qe), qp, qe)
	kdiff := b.op("key.decay.diff", f(tp*d.nv), FP32, list(s.gCum))
	ke := b.keep(b.op("key.decay.exp", f(tp*d.nv), FP32, list(kdiff)))
	s.k = b.op("key*decay", f(tp*d.nv*d.dk), FP32, list(s.k, ke), s.k, ke)
	s.gCum = b.keep(b.op("chunk_decay", f(d.batch*d.nv*d.chunks), FP32, list(s.gCum)))
	return s
}

// deltaChunks5 is the scan over the chunks (l.482-489). The slices of the
// decayed query and key that the matmuls read are copies (they cannot be
// viewed as a batch of matrices), which the matmuls save; the first
// chunk's state is zeros without a gradient, so its query slice is not
// saved.
func (b *actBuilder) deltaChunks5(p blockPlan, s *deltaRule) {
	d := s.d
	f := func(n int64) Bytes { return FP32.Size(n) }
	bh := d.batch * d.nv
	cc, ck, cv, kv := bh*deltaChunk*deltaChunk, bh*deltaChunk*d.dk, bh*deltaChunk*d.dv, bh*d.dk*d.dv
	for i := int64(0); i < d.chunks; i++ {
		mm := b.deltaMatmul
		if i == 0 {
			mm = b.deltaMatmulZeros
		}
		vPrime := mm(p, "k_cumdecay_i@state", cv, s.kCumDecay, ck, s.state, kv)
		vd := promote(FP32, vPrime.dtype)
		vNew := b.op("v_new", vd.Size(cv), vd, list(s.value, vPrime))
		qi := s.q
		if !p.autocast {
			qi = b.op("query_i.copy", f(ck), FP32, list(s.q))
		}
		inter := mm(p, "query_i@state", cv, qi, ck, s.state, kv)
		av := b.deltaMatmul(p, "intra_i@v_new", cv, s.attn, cc, vNew, cv)
		od := promote(inter.dtype, av.dtype)
		sum := b.op("inter+intra", od.Size(cv), od, list(inter, av))
		b.op("core_attn_out[i]=", 0, FP32, list(s.out, sum))
		if i == d.chunks-1 && !p.useCache {
			// The final state is dropped (output_final_state false, l.492):
			// its update's graph dies with it, saving nothing.
			scaled := b.op("state*chunk_decay", f(kv), FP32, list(s.state, s.gCum))
			upd := b.op("key_iᵀ@v_new", f(kv), FP32, list(s.k, vNew))
			s.state = b.op("state", f(kv), FP32, list(scaled, upd))
			return
		}
		scaled := b.op("state*chunk_decay", f(kv), FP32, list(s.state, s.gCum), s.state, s.gCum)
		ki := s.k
		if !p.autocast {
			ki = b.op("key_i.copy", f(ck), FP32, list(s.k))
		}
		upd := b.deltaMatmul(p, "key_iᵀ@v_new", kv, ki, ck, vNew, cv)
		s.state = b.op("state", f(kv), FP32, list(scaled, upd))
	}
}

// deltaMatmulZeros is a matmul of the first chunk by the initial state z,
// zeros without a gradient (l.474): it saves only what x's gradient needs,
// z (its compute-dtype cast under autocast, which casts x too).
func (b *actBuilder) deltaMatmulZeros(p blockPlan, name string, out int64, x *actT, xn int64, z *actT, zn int64) *actT {
	if p.autocast && x.dtype != p.e {
		x = b.op(name+".a.cast", p.e.Size(xn), p.e, list(x))
	}
	if p.autocast && z.dtype != p.e {
		z = b.op(name+".b.cast", p.e.Size(zn), p.e, list(z))
	}
	dt := promote(x.dtype, z.dtype)
	if p.autocast {
		dt = p.e
	}
	o := b.op(name, dt.Size(out), dt, list(x, z), z)
	b.ops[len(b.ops)-1].gemm = true
	return o
}
