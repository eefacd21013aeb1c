package vram

import "fmt"

// The Mamba-2 mixer's activations as transformers' torch path runs it
// (modeling_mamba2.py Mamba2Mixer.torch_forward, the training branch: no
// cache), the path transformers takes on a CPU and on a GPU without the
// mamba_ssm and causal_conv1d kernels. The chunked scan (Dao & Gu 2024,
// §7, "the SSD algorithm") works on chunks of Chunk tokens, in fp32, and
// materializes products of Chunk × Chunk per chunk and head; each of them
// is summed at once, so autograd keeps their factors, not the products.

// resolveSSM checks what a plan asks of a model with state-space mixers
// against what the engine models of them — transformers' Mamba2Mixer on
// each GPU's whole batch, in full — and says which path runs.
func (r *resolved) resolveSSM() error {
	if r.m.SSM == nil {
		return nil
	}
	if err := r.refuseRecurrent("state-space (Mamba-2)", "Mamba2Mixer"); err != nil {
		return err
	}
	if r.servingEngine {
		return nil // the profile path, noted by refuseRecurrent
	}
	s := r.m.SSM.Normalize()
	path := "Mamba2Mixer.torch_forward"
	if !r.lib.before(5, 0) {
		path = "the torch fallbacks of causal_conv1d_fn and mamba2_chunk_scan"
	}
	r.notes = append(r.notes, fmt.Sprintf("ssm: the Mamba-2 mixers run transformers' torch path (%s, as on a CPU or without the mamba_ssm and causal_conv1d kernels): the chunked scan keeps products of %d × %d per chunk and head; with the CUDA kernels (mamba_split_conv1d_scan_combined) it saves far less, which is not modelled", path, s.Chunk, s.Chunk))
	return nil
}

// ssmDims are the sizes one mixer works with on one micro-batch: tokens
// (batch × length) and the padded tokens of whole chunks.
type ssmDims struct {
	batch, tokens, padded  int64 // sequences, batch × length, batch × chunks × chunk
	chunks, chunk          int64
	heads, inner, state    int64 // H, H·P, N
	conv, proj, convKernel int64 // conv_dim, in_proj's output width, d_conv
	groups                 int64
}

func (r *resolved) ssmDims() ssmDims {
	s := *r.m.SSM
	batch, seq := int64(r.MicroBatch), int64(r.SeqLen)
	q := int64(s.Chunk)
	c := (seq + q - 1) / q
	// Under a serving engine's tensor parallelism each rank has heads/tp
	// heads and groups/tp groups, n_groups raised to tp when tp does not
	// divide it (MambaStateShapeCalculator.extra_groups_for_head_shards).
	groups := int64(s.Groups)
	if tp := int64(max(1, r.tp)); groups%tp != 0 {
		groups = tp
	}
	heads, inner, groups := r.recurrentShard(int64(s.Heads)), r.recurrentShard(s.inner()), r.recurrentShard(groups)
	conv := inner + 2*groups*int64(s.State)
	return ssmDims{batch: batch, tokens: batch * seq, padded: batch * c * q, chunks: c, chunk: q,
		heads: heads, inner: inner, state: int64(s.State), groups: groups,
		conv: conv, proj: inner + conv + heads, convKernel: int64(s.ConvKernel)}
}

// mambaBlock is Mamba2Block: an RMSNorm, the mixer, the residual add (in
// fp32 with residual_in_fp32, Mamba2Config's default).
func mambaBlock(r *resolved, layer int) BlockActivations {
	p := r.blockPlan(layer)
	d := r.ssmDims()
	b := newActBuilder(r, d.tokens)
	h := int64(r.m.Hidden)
	x := b.external("input", b.size(h, p.resid), p.resid)
	res := x
	if p.resid != FP32 {
		res = b.op("residual.float", b.size(h, FP32), FP32, list(x))
	}
	n := b.norm(p, "norm", "rmsnorm", x, h)
	y := b.mambaMixer(p, d, n)
	b.hold(res, n)
	out := b.residualAdd(p, "residual", h, res, y)
	out.keepAlive = true
	return b.summarize(x)
}

// ssmDecoderBlock is a hybrid's state-space layer (modeling_bamba.py
// BambaDecoderLayer with layer_type "mamba"; GraniteMoeHybrid's, Jamba's):
// input_layernorm, the mixer, pre_ff_layernorm, the MLP or MoE.
func ssmDecoderBlock(r *resolved, layer int) BlockActivations {
	return recurrentBlock(r, layer, "input_layernorm", "pre_ff_layernorm", func(b *actBuilder, p blockPlan, n *actT) *actT {
		return b.mambaMixer(p, r.ssmDims(), n)
	})
}

// branchScaled is a branch's output times the family's residual
// multiplier (GraniteMoeHybrid's residual_multiplier: a Python float, so a
// new tensor and nothing saved), or y as is.
func (b *actBuilder) branchScaled(p blockPlan, name string, y *actT, h int64) *actT {
	if !p.rec.branchScale {
		return y
	}
	return b.op(name+".scale", b.size(h, y.dtype), y.dtype, list(y))
}

// mambaMixer builds the mixer on x (the norm's output, width hidden).
func (b *actBuilder) mambaMixer(p blockPlan, d ssmDims, x *actT) *actT {
	if b.r.servingEngine {
		return b.mambaProfile(p, d, x)
	}
	h := int64(b.r.m.Hidden)
	in := x
	if p.rec.ssmInputScale {
		// Falcon-H1's input_states * ssm_in_multiplier (a Python float: a
		// new tensor, nothing saved), which in_proj saves.
		in = b.op("mixer_in.scale", b.size(h, x.dtype), x.dtype, list(x))
	}
	proj := b.linear(p, "in_proj", "in_proj", in, h, d.proj)
	if p.rec.ssmProjScale {
		// Falcon-H1's projected_states * mup_vector (a buffer in the weights'
		// dtype, so nothing of the product is saved): gate, x|B|C and dt are
		// views of this product.
		dd := promote(proj.dtype, p.baseDType)
		proj = b.op("in_proj.mup", b.size(d.proj, dd), dd, list(proj))
	}
	var y, act *actT
	if b.r.lib.before(5, 0) {
		y = b.ssdScan(p, d, proj)
	} else {
		// transformers 5's causal_conv1d_fn and mamba2_chunk_scan
		// (mamba2_scan5.go); the convolution's output is a local of the
		// mixer's forward until it returns (hidden_states_B_C and its
		// split views, 5.23 l.528-545).
		act = b.mambaConv5(p, d, proj)
		y = b.ssdScan5(p, d, proj, act)
	}
	var gated *actT
	switch b.r.m.SSM.Norm {
	case "before_gate":
		gated = b.normBeforeGate(p, d, y, proj)
	case "none":
		gated = b.siluGate(d, y, proj)
	default:
		gated = b.gatedNorm(p, d, y, proj)
	}
	if gated.dtype != x.dtype {
		gated = b.op("scan_output.to", b.size(d.inner, x.dtype), x.dtype, list(gated))
	}
	b.hold(proj)
	if act != nil {
		b.hold(act)
	}
	return b.linear(p, "out_proj", "out_proj", gated, d.inner, h)
}

// mambaDt is Δt: softplus(dt + dt_bias) (softplus saves the sum), clamped
// to time_step_limit (clamp saves its input), per token and head.
func (b *actBuilder) mambaDt(p blockPlan, d ssmDims, proj *actT) *actT {
	dd := promote(proj.dtype, p.baseDType)
	sum := b.op("dt+dt_bias", b.size(d.heads, dd), dd, list(proj))
	sp := b.op("dt.softplus", b.size(d.heads, dd), dd, list(sum), sum)
	return b.op("dt.clamp", b.size(d.heads, dd), dd, list(sp), sp)
}

// ssmInputs are x, B and C in fp32 (copies unless the convolution ran in
// fp32), B and C repeated to every head of their group (repeat_interleave:
// new tensors).
func (b *actBuilder) ssmInputs(d ssmDims, act *actT) (xs, bs, cs *actT) {
	xs, bs, cs = act, act, act
	if act.dtype != FP32 {
		xs = b.op("x.float", b.size(d.inner, FP32), FP32, list(act))
		bs = b.op("B.float", b.size(d.groups*d.state, FP32), FP32, list(act))
		cs = b.op("C.float", b.size(d.groups*d.state, FP32), FP32, list(act))
	}
	bs = b.op("B.repeat_interleave", b.size(d.heads*d.state, FP32), FP32, list(bs))
	cs = b.op("C.repeat_interleave", b.size(d.heads*d.state, FP32), FP32, list(cs))
	return xs, bs, cs
}

// ssdScan is the convolution and the chunked scan of torch_forward before
// transformers 5, op by op, on fp32 x, B, C and Δt; it returns y (padded
// tokens × inner, fp32).
func (b *actBuilder) ssdScan(p blockPlan, d ssmDims, proj *actT) *actT {
	// conv1d over x|B|C transposed (a view of the projection, which it
	// saves; under autocast a copy in the compute dtype where the
	// projection is wider), padded by conv_kernel - 1 on both sides: its
	// output is longer by that, and the slice SiLU reads keeps all of it.
	ci := proj
	if p.autocast && proj.dtype != p.e {
		ci = b.op("conv1d.input_cast", b.size(d.conv, p.e), p.e, list(proj))
	}
	conv := b.op("conv1d", ci.dtype.Size(d.batch*(d.tokens/d.batch+d.convKernel-1)*d.conv), ci.dtype, list(ci), ci)
	act := b.op("conv.act", b.size(d.conv, conv.dtype), conv.dtype, list(conv), conv)
	dt := b.mambaDt(p, d, proj)
	xs, bs, cs := b.ssmInputs(d, act)
	f := func(n int64) Bytes { return FP32.Size(n) }
	tp := d.padded
	// D_residual = D · pad(x): F.pad copies; the product saves both.
	xPad := b.op("x.pad", f(tp*d.inner), FP32, list(xs))
	dRes := b.op("D_residual", f(tp*d.inner), FP32, list(xPad), xPad)
	// x · Δt and A · Δt, each saving both factors.
	xdt := b.op("x*dt", b.size(d.inner, FP32), FP32, list(xs, dt), xs, dt)
	adt := b.op("A*dt", b.size(d.heads, FP32), FP32, list(dt), dt)
	// reshape_into_chunks pads each to whole chunks (F.pad: copies).
	xc := b.op("x.chunks", f(tp*d.inner), FP32, list(xdt))
	ac := b.op("A.chunks", f(tp*d.heads), FP32, list(adt))
	bc := b.op("B.chunks", f(tp*d.heads*d.state), FP32, list(bs))
	cc := b.op("C.chunks", f(tp*d.heads*d.state), FP32, list(cs))
	aCum := b.op("A_cumsum", f(tp*d.heads), FP32, list(ac))
	// L = exp(segment_sum(A)): masked_fill, cumsum, masked_fill over
	// chunk × chunk per head; exp saves its output.
	lm := b.segmentSum("L", f(tp*d.heads*d.chunk), ac)
	// G = (C · B).sum(-1), M = (G · L).sum(-1), Y_diag = (M · x).sum(3):
	// each product saves its factors and is summed at once.
	gi := b.product("G_intermediate", f(tp*d.chunk*d.heads*d.state), list(cc, bc), cc, bc)
	g := b.op("G", f(tp*d.chunk*d.heads), FP32, list(gi))
	mi := b.product("M_intermediate", f(tp*d.chunk*d.heads), list(g, lm), g, lm)
	mm := b.op("M", f(tp*d.chunk*d.heads), FP32, list(mi))
	yi := b.product("Y_diag_intermediate", f(tp*d.chunk*d.inner), list(mm, xc), mm, xc)
	yDiag := b.op("Y_diag", f(tp*d.inner), FP32, list(yi))
	// The chunks' states: decay within each chunk (exp saves its
	// output), B · decay, (B_decay · x).sum(2).
	last := b.op("A_cumsum[-1]-A_cumsum", f(tp*d.heads), FP32, list(aCum))
	decay := b.keep(b.op("decay_states", f(tp*d.heads), FP32, list(last)))
	bDecay := b.op("B_decay", f(tp*d.heads*d.state), FP32, list(bc, decay), bc, decay)
	si := b.product("states_intermediate", f(tp*d.inner*d.state), list(bDecay, xc), bDecay, xc)
	chunkStates := d.batch * d.chunks * d.inner * d.state
	st := b.op("states", f(chunkStates), FP32, list(si))
	// The state entering each chunk: zeros ahead of the chunks' states,
	// decayed across chunks by exp(segment_sum) of the chunk ends.
	states := b.op("states.cat", f(chunkStates+d.batch*d.inner*d.state), FP32, list(st))
	ends := b.op("A_cumsum.pad", f(d.batch*d.heads*(d.chunks+1)), FP32, list(aCum))
	dch := b.segmentSum("decay_chunk", f(d.batch*d.heads*(d.chunks+1)*(d.chunks+1)), ends)
	ni := b.product("new_states_intermediate", f(d.batch*(d.chunks+1)*(d.chunks+1)*d.inner*d.state), list(dch, states), dch, states)
	newStates := b.op("new_states", f(d.batch*(d.chunks+1)*d.inner*d.state), FP32, list(ni))
	// Y_off = (C · states).sum(-1) · exp(A_cumsum): the product saves C and
	// the states (a view of new_states), the scaling both factors.
	sdo := b.keep(b.op("state_decay_out", f(tp*d.heads), FP32, list(aCum)))
	cts := b.product("C_times_states", f(tp*d.inner*d.state), list(cc, newStates), cc, newStates)
	cSum := b.op("C_times_states.sum", f(tp*d.inner), FP32, list(cts))
	yOff := b.op("Y_off", f(tp*d.inner), FP32, list(cSum, sdo), cSum, sdo)
	y := b.op("Y_diag+Y_off", f(tp*d.inner), FP32, list(yDiag, yOff))
	return b.op("y+D_residual", f(tp*d.inner), FP32, list(y, dRes))
}

// product is a broadcast product summed at once (x[..., None] ·
// y[:, None]).sum(d): the sum's backward hands it an expanded view of its
// gradient (no memory), and the product's backward makes a gradient of
// the broadcast size for each factor before reducing them to their shapes
// (MulBackward0's outputs, summed to size by the engine afterwards): one
// product-sized buffer per factor.
func (b *actBuilder) product(name string, n Bytes, ins []*actT, saves ...*actT) *actT {
	t := b.op(name, n, FP32, ins, saves...)
	t.aliasGrad = true
	b.gradWorkspace(mulBytes(int64(len(saves)), n))
	return t
}

// segmentSum is exp(segment_sum(a)) over n bytes of chunk × chunk (or
// chunks × chunks) entries: a expanded (a view), masked_fill (a copy),
// cumsum, masked_fill with -inf, exp, which saves its output.
func (b *actBuilder) segmentSum(name string, n Bytes, a *actT) *actT {
	m1 := b.op(name+".masked_fill", n, FP32, list(a))
	cs := b.op(name+".cumsum", n, FP32, list(m1))
	m2 := b.op(name+".masked_fill_inf", n, FP32, list(cs))
	return b.keep(b.op(name+".exp", n, FP32, list(m2)))
}

// normBeforeGate is Falcon-H1's FalconH1RMSNormGated with
// norm_before_gate: an RMSNorm of y in fp32 per group (pow saves y, rsqrt
// its output, the product both, the weight's product its input), then the
// product with silu(gate.float()) (silu saves its input, the product both).
func (b *actBuilder) normBeforeGate(p blockPlan, d ssmDims, y, proj *actT) *actT {
	b.op("norm.pow", b.size(d.inner, FP32), FP32, list(y), y)
	rs := b.keep(b.op("norm.rsqrt", b.size(d.groups, FP32), FP32, list(y)))
	nrm := b.op("norm.scaled", b.size(d.inner, FP32), FP32, list(y, rs), y, rs)
	wd := promote(p.baseDType, FP32)
	w := b.op("norm.weight", b.size(d.inner, wd), wd, list(nrm), nrm)
	g := proj
	if proj.dtype != FP32 {
		g = b.op("gate.float", b.size(d.inner, FP32), FP32, list(proj))
	}
	sg := b.op("gate.silu", b.size(d.inner, FP32), FP32, list(g), g)
	return b.op("norm*silu(gate)", b.size(d.inner, wd), wd, list(w, sg), w, sg)
}

// siluGate is y · silu(gate) without a norm (Falcon-H1 without
// mamba_rms_norm): silu runs in the gate's dtype and saves its input (a
// view of the projection), the fp32 product both factors.
func (b *actBuilder) siluGate(d ssmDims, y, proj *actT) *actT {
	sg := b.op("gate.silu", b.size(d.inner, proj.dtype), proj.dtype, list(proj), proj)
	return b.op("y*silu(gate)", b.size(d.inner, FP32), FP32, list(y, sg), y, sg)
}

// gatedNorm is MambaRMSNormGated(y, gate) in fp32: y · silu(gate.float())
// (silu saves its input, the product both factors), then an RMSNorm whose
// pow saves the gated tensor, rsqrt its output, the product both, and the
// weight's product its input. y is the padded scan output; its first
// tokens are read as views.
func (b *actBuilder) gatedNorm(p blockPlan, d ssmDims, y, proj *actT) *actT {
	g := proj
	if proj.dtype != FP32 {
		g = b.op("gate.float", b.size(d.inner, FP32), FP32, list(proj))
	}
	sg := b.op("gate.silu", b.size(d.inner, FP32), FP32, list(g), g)
	yg := b.op("y*silu(gate)", b.size(d.inner, FP32), FP32, list(y, sg), y, sg)
	b.op("norm.pow", b.size(d.inner, FP32), FP32, list(yg), yg)
	// One statistic a token before transformers 5; from 5.0 one a group
	// of inner / n_groups (5.23 mamba2/modeling_mamba2.py:117-121,
	// MambaRMSNormGated's group_size, l.431).
	groups := int64(1)
	if !b.r.lib.before(5, 0) {
		groups = d.groups
	}
	rs := b.keep(b.op("norm.rsqrt", b.size(groups, FP32), FP32, list(yg)))
	// pow(2).mean() backward, as normOf has it: four fp32 tensors of the
	// gated tensor's size at once.
	b.gradWorkspace(4 * b.size(d.inner, FP32))
	nrm := b.op("norm.scaled", b.size(d.inner, FP32), FP32, list(yg, rs), yg, rs)
	wd := promote(p.baseDType, FP32)
	return b.op("norm.weight", b.size(d.inner, wd), wd, list(nrm), nrm)
}
