package vram

// Kimi Delta Attention's training forward as transformers 5.23.0 runs it
// on a CPU (models/kimi_linear/modeling_kimi_linear.py): the torch
// fallbacks of @use_kernel_func_from_hub_with_fallback — causal_conv1d_fn
// (l.380-397) and chunk_kimi_delta_attention (l.465-563) — without the
// causal_conv1d and flash-linear-attention kernels. The chunked rule is
// Gated DeltaNet's older one (deltanet_rule.go: heads-first fp32 copies,
// the triangular solve row by row, a loop over the chunks) with the decay
// per channel instead of per head, which turns the chunk × chunk decay map
// into chunk × chunk × head_dim (l.517) and the two q·k and k_β·k products
// into elementwise ones over that map, summed (l.518, 545), where Gated
// DeltaNet has matmuls. What each op saves, and which locals outlive their
// last use, were measured with torch 2.15 on the CPU (one
// KimiLinearDeltaAttention forward under saved_tensors_hooks and a storage
// tracker, fp32 and bf16 autocast, 200 and 256 tokens).

// kdaDims are KDA's sizes as the DeltaNet rules read them: q, k and v of
// one width, one head per key head.
func (r *resolved) kdaDims() deltaDims {
	d := *r.m.KDA
	seq := int64(r.SeqLen)
	w := d.width()
	return deltaDims{batch: int64(r.MicroBatch), seq: seq, chunks: (seq + deltaChunk - 1) / deltaChunk,
		nv: int64(d.Heads), dk: int64(d.HeadDim), dv: int64(d.HeadDim), kd: w, vd: w, conv: 3 * w,
		kernel: int64(d.ConvKernel), rep: 1}
}

// kimiDeltaAttention is KimiLinearDeltaAttention.forward on x (the norm's
// output) in training (l.609-715): q_proj, k_proj and v_proj concatenated
// (l.623-630), the causal convolution (kdaConv), the forget gate (kdaGate)
// and β = sigmoid(b_proj(x)) (l.678-679), the chunked rule, the output
// gate g_b_proj(g_a_proj(x)) (l.711), the gated norm and o_proj
// (l.712-713). The convolution's output (whose views query, key and value
// are), g, β and the gate are the forward's locals until it returns.
func (b *actBuilder) kimiDeltaAttention(p blockPlan, x *actT) *actT {
	if b.r.servingEngine {
		return b.kdaProfile(p, x)
	}
	d := b.r.kdaDims()
	h := int64(b.r.m.Hidden)
	q := b.linear(p, "q_proj", "q_proj", x, h, d.kd)
	k := b.linear(p, "k_proj", "k_proj", x, h, d.kd)
	v := b.linear(p, "v_proj", "v_proj", x, h, d.vd)
	mixed := b.op("mixed_qkv.cat", b.size(d.conv, q.dtype), q.dtype, list(q, k, v))
	act := b.kdaConv(p, d, mixed)
	g := b.kdaGate(p, d, x)
	bb := b.linear(p, "b_proj", "in_proj", x, h, d.nv)
	beta := b.keep(b.op("beta.sigmoid", b.size(d.nv, bb.dtype), bb.dtype, list(bb)))
	core, final := b.chunkKDA(p, d, act, g, beta)
	if p.useCache {
		// update_recurrent_state(state.to(float32)) (l.707-708): the cache's
		// zeros_like copy of the fp32 state (cache_utils.py:1186-1189, 1247).
		st := final[len(final)-1]
		p.holdOutput(b.op("cache.recurrent_state", FP32.Size(d.batch*d.nv*d.dk*d.dv), FP32, list(st)))
	}
	ga := b.linear(p, "g_a_proj", "in_proj", x, h, d.dk)
	gate := b.linear(p, "g_b_proj", "in_proj", ga, d.dk, d.vd)
	out := b.linear(p, "o_proj", "o_proj", b.kdaGatedNorm(p, d, core, gate), d.vd, h)
	b.hold(append([]*actT{act, g, beta, gate}, final...)...)
	return out
}

// kdaConv is causal_conv1d_fn's fallback on mixed, q|k|v transposed
// (l.380-397), with SiLU: F.conv1d on hidden_states.to(weight.dtype)
// (l.388-394) — under autocast a copy in the fp32 weights' dtype, which
// autocast's conv1d casts back to the compute dtype (the copy it saves),
// the weight cast beside it; in fp32 the convolution saves mixed itself.
// Its output is kernel − 1 longer, all of which SiLU saves. With a cache,
// update_conv_state first keeps a zeros conv state of the last kernel
// positions in mixed's dtype (cache_utils.py:1161-1232), which the
// returned past_key_values holds.
func (b *actBuilder) kdaConv(p blockPlan, d deltaDims, mixed *actT) *actT {
	e := mixed.dtype
	if p.useCache {
		p.holdOutput(b.op("conv_state", e.Size(d.batch*d.conv*d.kernel), e, list(mixed)))
	}
	in := mixed
	if wd := p.baseDType; e != wd {
		in = b.op("mixed_qkv.to", b.size(d.conv, wd), wd, list(in))
	}
	if p.autocast && in.dtype != p.e {
		in = b.op("mixed_qkv.autocast", b.size(d.conv, p.e), p.e, list(in))
	}
	ce := in.dtype
	conv := b.op("conv1d", ce.Size(d.batch*(d.seq+d.kernel-1)*d.conv), ce, list(in), in)
	if p.autocast && !p.frozen {
		b.side("conv1d.weight_cast", p.e.Size(d.conv*d.kernel), p.e)
	}
	return b.op("conv.silu", b.size(d.conv, ce), ce, list(conv), conv)
}

// kdaGate is KimiLinearForgetGate.forward (l.330-342): f_b_proj(f_a_proj(x)),
// .float() + dt_bias (l.334), then −exp(A_log) · softplus written out
// (l.336-342): g > 20 (where saves the mask), exp(g) (saving its output),
// 1 + exp (which log saves), log, where (which the product saves), the
// product. exp(A_log) and its negation are one number a head. Every
// elementwise op is one fp32 value a channel.
func (b *actBuilder) kdaGate(p blockPlan, d deltaDims, x *actT) *actT {
	h := int64(b.r.m.Hidden)
	fa := b.linear(p, "forget_gate.f_a_proj", "in_proj", x, h, d.dk)
	fb := b.linear(p, "forget_gate.f_b_proj", "in_proj", fa, d.dk, d.kd)
	f := func(n int64) Bytes { return b.size(n, FP32) }
	ff := fb
	if fb.dtype != FP32 {
		ff = b.op("forget_gate.float", f(d.kd), FP32, list(fb))
	}
	g := b.op("g+dt_bias", f(d.kd), FP32, list(ff))
	rate := b.keep(b.op("A_log.exp", FP32.Size(d.nv), FP32, nil))
	b.keep(b.op("g>20", b.size(d.kd, Bool), Bool, list(g)))
	ex := b.keep(b.op("g.exp", f(d.kd), FP32, list(g)))
	one := b.op("1+exp", f(d.kd), FP32, list(ex))
	lg := b.op("log", f(d.kd), FP32, list(one), one)
	sp := b.op("softplus.where", f(d.kd), FP32, list(g, lg))
	neg := b.keep(b.op("-decay_rate", FP32.Size(d.nv), FP32, list(rate)))
	return b.op("g", f(d.kd), FP32, list(neg, sp), sp)
}

// kdaGatedNorm is KimiLinearRMSNormGated(core, gate) over each head
// (l.82-94): the input in fp32 (a copy unless it is; the product with
// the rsqrt saves it), rsqrt (saved), the weight's fp32 product (saving
// the normed input) in fp32, times sigmoid(gate.float()) (sigmoid saves
// its output, the product the normed input), cast back to the input's
// dtype.
func (b *actBuilder) kdaGatedNorm(p blockPlan, d deltaDims, core, gate *actT) *actT {
	e := core.dtype
	f := func(n int64) Bytes { return b.size(n, FP32) }
	hf := core
	if e != FP32 {
		hf = b.op("o_norm.float", f(d.vd), FP32, list(core))
	}
	b.op("o_norm.pow", f(d.vd), FP32, list(hf))
	rs := b.keep(b.op("o_norm.rsqrt", f(d.nv), FP32, list(hf)))
	nm := b.op("o_norm.scaled", f(d.vd), FP32, list(hf, rs), hf, rs)
	w := b.op("o_norm.weight", f(d.vd), FP32, list(nm), nm)
	gf := gate
	if gate.dtype != FP32 {
		gf = b.op("gate.float", f(d.vd), FP32, list(gate))
	}
	sg := b.keep(b.op("gate.sigmoid", f(d.vd), FP32, list(gf)))
	out := b.op("o_norm*sigmoid(gate)", f(d.vd), FP32, list(w, sg), w, sg)
	if e != FP32 {
		out = b.op("o_norm.to", b.size(d.vd, e), e, list(out))
	}
	return out
}
