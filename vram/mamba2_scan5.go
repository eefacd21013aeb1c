package vram

// The Mamba-2 mixers' torch path from transformers 5.0 on. transformers 5
// rewrote the mixers (Mamba2Mixer.forward, transformers 5.23.0
// models/mamba2/modeling_mamba2.py:459-; BambaMixer, GraniteMoeHybrid's
// and FalconH1Mixer are copies of it): training first tries the hub's
// fused kernel (l.481-504, mamba2_split_conv1d_scan_combined), which
// returns None without mamba_ssm, then runs the convolution as
// causal_conv1d_fn (l.146-166) and the chunked scan as
// mamba2_chunk_scan (l.256-361), both hub kernels with these torch
// fallbacks. The scan contracts with torch.einsum (l.308, 315, 322, 334,
// 342) where 4.57's torch_forward summed broadcast products (4.57
// l.567-600, ssdScan): each einsum is a bmm over contiguous copies of its
// operands, which it saves, and under autocast (bmm is on the
// lower-precision list) over compute-dtype copies of those. The file
// names below are 5.23's models/mamba2/modeling_mamba2.py; bamba
// (modeling_bamba.py:467-), granitemoehybrid (l.387-) and falcon_h1
// (l.472-) hold the same functions line for line.

// mambaConv5 is causal_conv1d_fn (l.146-166) on x|B|C transposed (a view
// of the projection): hidden_states.to(weight.dtype) (l.158, a copy
// where the projection's dtype is not the weights'), conv1d with
// padding conv_kernel - 1 (saves its input, which autocast first copies
// to the compute dtype), the slice [:, :, :seq_len] (a view, which keeps
// the whole output alive) and SiLU (the activation), which saves its
// input.
func (b *actBuilder) mambaConv5(p blockPlan, d ssmDims, proj *actT) *actT {
	if p.useCache {
		// With the training cache (the hybrids' DynamicCache) the mixer
		// first hands x|B|C to cache_params.update_conv_state (l.522),
		// which keeps the last conv_kernel positions in zeros of the
		// projection's dtype (cache_utils.py:1176, copy_ at l.1226).
		p.holdOutput(b.op("cache.conv_state", proj.dtype.Size(d.batch*d.conv*d.convKernel), proj.dtype, list(proj)))
	}
	ci := proj
	if wd := p.baseDType; wd.IsFloat() && ci.dtype != wd {
		ci = b.op("conv1d.input.to_weight", b.size(d.conv, wd), wd, list(ci))
	}
	if p.autocast && ci.dtype != p.e {
		ci = b.op("conv1d.input_cast", b.size(d.conv, p.e), p.e, list(ci))
	}
	conv := b.op("conv1d", ci.dtype.Size(d.batch*(d.tokens/d.batch+d.convKernel-1)*d.conv), ci.dtype, list(ci), ci)
	act := b.op("conv.act", b.size(d.conv, conv.dtype), conv.dtype, list(conv), conv)
	if act.dtype != proj.dtype {
		// out.to(hidden_states.dtype) (l.166)
		act = b.op("conv.act.to", b.size(d.conv, proj.dtype), proj.dtype, list(act))
	}
	return act
}

// mambaDt5 is Δt as mamba2_chunk_scan makes it, in the projection's dtype:
// dt + dt_bias.to(dt.dtype) (l.276; softplus saves the sum), softplus
// (l.278; clamp saves its output) and clamp (l.279).
func (b *actBuilder) mambaDt5(d ssmDims, proj *actT) *actT {
	dd := proj.dtype
	sum := b.op("dt+dt_bias", b.size(d.heads, dd), dd, list(proj))
	sp := b.op("dt.softplus", b.size(d.heads, dd), dd, list(sum), sum)
	return b.op("dt.clamp", b.size(d.heads, dd), dd, list(sp), sp)
}

// floatCopy is t.float() (n bytes in fp32): t itself where it is fp32,
// else a copy.
func (b *actBuilder) floatCopy(name string, n Bytes, t *actT) *actT {
	if t.dtype == FP32 {
		return t
	}
	return b.op(name, n, FP32, list(t))
}

// einsumOperand is one operand of a scan einsum: its tensor, its size in
// elements, and whether torch.einsum copies it contiguous for the bmm
// (a permutation bmm cannot read in place).
type einsumOperand struct {
	t     *actT
	elems int64
	clone bool
}

// scanEinsum is one torch.einsum of the scan over two operands: each
// copied contiguous where its layout needs it (clone), then, under
// autocast, cast to the compute dtype, and the bmm, which saves what it
// multiplies; the output (out elements) is in the compute dtype under
// autocast, else fp32.
func (b *actBuilder) scanEinsum(p blockPlan, name string, out int64, x, y einsumOperand) *actT {
	operand := func(o einsumOperand) *actT {
		t := o.t
		if o.clone {
			t = b.op(name+".operand_contiguous", t.dtype.Size(o.elems), t.dtype, list(t))
		}
		if p.autocast && t.dtype != p.e {
			t = b.op(name+".operand_cast", p.e.Size(o.elems), p.e, list(t))
		}
		return t
	}
	a := operand(x)
	c := operand(y)
	od := FP32
	if p.autocast {
		od = p.e
	}
	r := b.op(name, od.Size(out), od, list(a, c), a, c)
	b.ops[len(b.ops)-1].gemm = true
	return r
}

// ssdScan5 is mamba2_chunk_scan (l.256-361) on the projection (Δt is a
// view of it) and the convolution's output (x, B and C are views of it),
// op by op; it returns the padded output, fp32.
func (b *actBuilder) ssdScan5(p blockPlan, d ssmDims, proj, act *actT) *actT {
	f := func(n int64) Bytes { return FP32.Size(n) }
	tp, hs := d.padded, d.heads*d.state
	dt := b.mambaDt5(d, proj)
	// hidden_states.float(), B and C .float().repeat_interleave (l.281-283).
	xs, bs, cs := b.ssmInputs(d, act)
	// D_residual = D[..., None] * pad_tensor_by_size(x) (l.288): F.pad
	// copies, the product saves it.
	xPad := b.op("x.pad", f(tp*d.inner), FP32, list(xs))
	dRes := b.op("D_residual", f(tp*d.inner), FP32, list(xPad), xPad)
	// x * dt[..., None].float() (l.291) saves both; A * dt.float() (l.292)
	// saves its own copy of Δt (copies where Δt is not fp32: under
	// autocast).
	dtX := b.floatCopy("dt[...,None].float", b.size(d.heads, FP32), dt)
	xdt := b.op("x*dt", b.size(d.inner, FP32), FP32, list(xs, dtX), xs, dtX)
	dtA := b.floatCopy("dt.float", b.size(d.heads, FP32), dt)
	adt := b.op("A*dt", b.size(d.heads, FP32), FP32, list(dtA), dtA)
	// reshape_into_chunks pads each to whole chunks (l.297; F.pad copies).
	xc := b.op("x.chunks", f(tp*d.inner), FP32, list(xdt))
	ac := b.op("A.chunks", f(tp*d.heads), FP32, list(adt))
	bc := b.op("B.chunks", f(tp*hs), FP32, list(bs))
	cc := b.op("C.chunks", f(tp*hs), FP32, list(cs))
	aCum := b.op("A_cumsum", f(tp*d.heads), FP32, list(ac)) // l.300
	lm := b.segmentSum("L", f(tp*d.heads*d.chunk), ac)      // l.304
	// G = einsum(C, B) over the state (l.308), M = G * L (l.311, saves
	// both), Y_diag = einsum(M, x) over the source position (l.315).
	g := b.scanEinsum(p, "G", tp*d.heads*d.chunk, einsumOperand{cc, tp * hs, true}, einsumOperand{bc, tp * hs, true})
	m := b.op("M", f(tp*d.heads*d.chunk), FP32, list(g, lm), g, lm)
	yDiag := b.scanEinsum(p, "Y_diag", tp*d.inner, einsumOperand{m, tp * d.heads * d.chunk, false}, einsumOperand{xc, tp * d.inner, true})
	// The chunks' states: exp(A_cumsum[..., -1:] - A_cumsum) (l.319, exp
	// saves its output), B * decay (l.320, saves both), einsum with x
	// (l.322).
	last := b.op("A_cumsum[-1]-A_cumsum", f(tp*d.heads), FP32, list(aCum))
	decay := b.keep(b.op("decay_states", f(tp*d.heads), FP32, list(last)))
	bDecay := b.op("B_decay", f(tp*hs), FP32, list(bc, decay), bc, decay)
	chunkStates := d.batch * d.chunks * d.inner * d.state
	st := b.scanEinsum(p, "states", chunkStates, einsumOperand{bDecay, tp * hs, true}, einsumOperand{xc, tp * d.inner, true})
	// Zeros ahead of the chunks' states (l.326-331), decayed across
	// chunks by exp(segment_sum) of the chunk ends (l.332), einsum over
	// the source chunk (l.334).
	allStates := chunkStates + d.batch*d.inner*d.state
	states := b.op("states.cat", st.dtype.Size(allStates), st.dtype, list(st))
	ends := b.op("A_cumsum.pad", f(d.batch*d.heads*(d.chunks+1)), FP32, list(aCum))
	dch := b.segmentSum("decay_chunk", f(d.batch*d.heads*(d.chunks+1)*(d.chunks+1)), ends)
	newStates := b.scanEinsum(p, "new_states", allStates, einsumOperand{dch, d.batch * d.heads * (d.chunks + 1) * (d.chunks + 1), false}, einsumOperand{states, allStates, true})
	if p.useCache {
		// With the training cache the scan returns final_state =
		// new_states[:, -1] (l.335, 358-359), which the mixer copies into
		// the cache's recurrent state (l.594: zeros_like, cache_utils.py
		// :1188, copy_ at l.1247).
		p.holdOutput(b.op("cache.recurrent_state", newStates.dtype.Size(d.batch*d.inner*d.state), newStates.dtype, list(newStates)))
	}
	// Y_off = einsum(C, new_states[:, :-1]) (l.342) * exp(A_cumsum)
	// (l.339, exp saves its output; l.343, the product saves both).
	sdo := b.keep(b.op("state_decay_out", f(tp*d.heads), FP32, list(aCum)))
	cts := b.scanEinsum(p, "C_times_states", tp*d.inner, einsumOperand{cc, tp * hs, true}, einsumOperand{newStates, chunkStates, true})
	yOff := b.op("Y_off", f(tp*d.inner), FP32, list(cts, sdo), cts, sdo)
	// (Y_diag + Y_off).contiguous() (l.348: the sum is laid out as its
	// permuted operands, so contiguous copies it), + D_residual (l.352).
	y := b.op("Y_diag+Y_off", f(tp*d.inner), FP32, list(yDiag, yOff))
	y = b.op("Y.contiguous", f(tp*d.inner), FP32, list(y))
	out := b.op("y+D_residual", f(tp*d.inner), FP32, list(y, dRes))
	// The function's locals live until it returns: Δt, the chunked x,
	// A, B and C, A_cumsum, L, G, M, Y_diag, decay_states, B_decay, the
	// decay across chunks, new_states (the states are views of it),
	// state_decay_out, C_times_states, Y_off and D_residual; under
	// autocast, where the einsums save compute-dtype copies, M and the
	// chunked x are held by nothing else.
	b.hold(dt, xc, ac, bc, cc, aCum, lm, g, m, yDiag, decay, bDecay, dch, newStates, sdo, cts, yOff, dRes)
	return out
}
