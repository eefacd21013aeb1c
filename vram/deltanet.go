package vram

import "fmt"

// Gated DeltaNet layers (Yang, Kautz & Hatamizadeh 2024, "Gated Delta
// Networks") as transformers' Qwen3NextGatedDeltaNet runs them without the
// flash-linear-attention and causal_conv1d kernels — on a CPU, or on a GPU
// without them: torch_chunk_gated_delta_rule over chunks of 64 tokens, op
// by op, with its two Python loops (the rows of each chunk's triangular
// solve, whose clones the products save; then the chunks, each saving the
// state it read).

// deltaChunk is torch_chunk_gated_delta_rule's chunk_size default, which
// Qwen3NextGatedDeltaNet.forward does not change.
const deltaChunk = 64

// resolveDeltaNet checks what a plan asks of a model with Gated DeltaNet
// layers against what the engine models of them.
func (r *resolved) resolveDeltaNet() error {
	if r.m.DeltaNet == nil {
		return nil
	}
	if err := r.refuseRecurrent("Gated DeltaNet", "Qwen3NextGatedDeltaNet"); err != nil {
		return err
	}
	if r.servingEngine {
		return nil // the profile path, noted by refuseRecurrent
	}
	r.notes = append(r.notes, fmt.Sprintf("delta_net: the Gated DeltaNet layers run transformers' torch path (torch_chunk_gated_delta_rule, as on a CPU or without the flash-linear-attention kernels): each chunk of %d tokens keeps its triangular solve's row clones and its chunk × chunk maps; the fla kernels save far less, which is not modelled", deltaChunk))
	return nil
}

// deltaNetTensors adds a Qwen3NextGatedDeltaNet's parameters under p in
// named_parameters order: its own (dt_bias, A_log), then conv1d,
// in_proj_qkvz, in_proj_ba, the gated norm and out_proj.
func deltaNetTensors(m Model, l *tensorList, p string) {
	d, h := *m.DeltaNet, int64(m.Hidden)
	nv := int64(d.ValueHeads)
	l.add(p+"dt_bias", "other", nv)
	l.add(p+"A_log", "other", nv)
	l.add(p+"conv1d.weight", "other", d.convDim(), 1, int64(d.ConvKernel))
	l.linear(p+"in_proj_qkvz", "in_proj", h, 2*d.keyDim()+2*d.valueDim(), false)
	l.linear(p+"in_proj_ba", "in_proj", h, 2*nv, false)
	l.norm(p+"norm", false, int64(d.ValueDim))
	l.linear(p+"out_proj", "out_proj", d.valueDim(), h, false)
}

// deltaNetBlock is a Gated DeltaNet layer (Qwen3NextDecoderLayer with
// layer_type "linear_attention"): input_layernorm, the DeltaNet,
// post_attention_layernorm, the MLP or MoE.
func deltaNetBlock(r *resolved, layer int) BlockActivations {
	return recurrentBlock(r, layer, "input_layernorm", "post_attention_layernorm", (*actBuilder).gatedDeltaNet)
}

// deltaDims are the sizes one DeltaNet layer works with on one micro-batch.
type deltaDims struct {
	batch, seq, chunks int64 // sequences, tokens a sequence, chunks a sequence
	nv, dk, dv         int64 // value heads (q and k repeated to them), head widths
	kd, vd, conv       int64 // q's (and k's) width, v's (and z's), q|k|v's
	kernel, rep        int64 // conv taps, value heads per key head
}

func (r *resolved) deltaDims() deltaDims {
	d := *r.m.DeltaNet
	seq := int64(r.SeqLen)
	sh := r.recurrentShard
	return deltaDims{batch: int64(r.MicroBatch), seq: seq, chunks: (seq + deltaChunk - 1) / deltaChunk,
		nv: sh(int64(d.ValueHeads)), dk: int64(d.KeyDim), dv: int64(d.ValueDim), kd: sh(d.keyDim()), vd: sh(d.valueDim()), conv: sh(d.convDim()),
		kernel: int64(d.ConvKernel), rep: int64(d.ValueHeads / d.KeyHeads)}
}

// gatedDeltaNet is Qwen3NextGatedDeltaNet.forward on x (the norm's
// output) in training: no previous state.
func (b *actBuilder) gatedDeltaNet(p blockPlan, x *actT) *actT {
	if b.r.servingEngine {
		return b.deltaNetProfile(x)
	}
	d := b.r.deltaDims()
	h := int64(b.r.m.Hidden)
	qkvz := b.linear(p, "in_proj_qkvz", "in_proj", x, h, 2*d.kd+2*d.vd)
	ba := b.linear(p, "in_proj_ba", "in_proj", x, h, 2*d.nv)
	e := qkvz.dtype
	// fix_query_key_value_ordering, then query and key flattened: each a
	// reshape of a strided slice of the grouped projection (a copy; b and
	// a are views when a key head serves one value head).
	v := b.op("value.reshape", b.size(d.vd, e), e, list(qkvz))
	z := b.op("z.reshape", b.size(d.vd, e), e, list(qkvz))
	bb, aa := ba, ba
	if d.rep > 1 {
		bb = b.op("b.reshape", b.size(d.nv, e), e, list(ba))
		aa = b.op("a.reshape", b.size(d.nv, e), e, list(ba))
	}
	q0 := b.op("query.reshape", b.size(d.kd, e), e, list(qkvz))
	k0 := b.op("key.reshape", b.size(d.kd, e), e, list(qkvz))
	mixed := b.op("mixed_qkv.cat", b.size(d.conv, e), e, list(q0, k0, v))
	act := b.deltaConv(p, d, mixed)
	beta := b.keep(b.op("beta.sigmoid", b.size(d.nv, bb.dtype), bb.dtype, list(bb)))
	g := b.deltaDecay(d, aa)
	if p.rec.deltaRule5 {
		core := b.chunkGatedDeltaRule5(p, d, act, act, g, beta)
		return b.linear(p, "out_proj", "out_proj", b.deltaGatedNorm(p, d, core, z), d.vd, h)
	}
	q, k := act, act
	if d.rep > 1 {
		q = b.op("query.repeat_interleave", b.size(d.nv*d.dk, e), e, list(act))
		k = b.op("key.repeat_interleave", b.size(d.nv*d.dk, e), e, list(act))
	}
	core := b.chunkGatedDeltaRule(p, d, q, k, act, g, beta)
	return b.linear(p, "out_proj", "out_proj", b.deltaGatedNorm(p, d, core, z), d.vd, h)
}

// deltaConv is causal_conv1d_fn's torch fallback on mixed, q|k|v in
// the compute dtype, with SiLU (as a training forward runs it, the cache's
// conv state first where there is one).
func (b *actBuilder) deltaConv(p blockPlan, d deltaDims, mixed *actT) *actT {
	e := mixed.dtype
	if p.useCache {
		// The cache's conv state: F.pad of the transposed q|k|v to the last
		// kernel positions, kept with the returned past_key_values.
		p.holdOutput(b.op("conv_state", e.Size(d.batch*d.conv*d.kernel), e, list(mixed)))
	}
	// conv1d saves its input (a transposed view of q|k|v); its output is
	// kernel − 1 longer and the [..., :seq] slice SiLU saves keeps all of
	// it.
	conv := b.op("conv1d", e.Size(d.batch*(d.seq+d.kernel-1)*d.conv), e, list(mixed), mixed)
	if p.autocast && !p.frozen {
		b.side("conv1d.weight_cast", p.e.Size(d.conv*d.kernel), p.e)
	}
	return b.op("conv.silu", b.size(d.conv, e), e, list(conv), conv)
}

// deltaDecay is g = -exp(A_log.float()) · softplus(a.float() + dt_bias)
// in fp32: softplus saves its input, the product the softplus output.
func (b *actBuilder) deltaDecay(d deltaDims, a *actT) *actT {
	af := a
	if a.dtype != FP32 {
		af = b.op("a.float", b.size(d.nv, FP32), FP32, list(a))
	}
	sum := b.op("a+dt_bias", b.size(d.nv, FP32), FP32, list(af))
	sp := b.op("a.softplus", b.size(d.nv, FP32), FP32, list(sum), sum)
	return b.op("g", b.size(d.nv, FP32), FP32, list(sp), sp)
}

// l2norm is x · rsqrt(sum(x · x) + eps) over each head (in x's dtype): the
// square saves x, rsqrt its output, the product both.
func (b *actBuilder) l2norm(name string, x *actT, width, heads int64) *actT {
	dt := x.dtype
	sq := b.op(name+".x*x", b.size(width, dt), dt, list(x), x)
	sum := b.op(name+".sum+eps", b.size(heads, dt), dt, list(sq))
	inv := b.keep(b.op(name+".rsqrt", b.size(heads, dt), dt, list(sum)))
	return b.op(name+".l2norm", b.size(width, dt), dt, list(x, inv), x, inv)
}

// headsFirstFP32 is x.transpose(1, 2).contiguous().to(torch.float32): a
// copy in x's dtype, then an fp32 copy unless it already is one.
func (b *actBuilder) headsFirstFP32(name string, x *actT, width int64) *actT {
	c := b.op(name+".contiguous", b.size(width, x.dtype), x.dtype, list(x))
	if c.dtype != FP32 {
		c = b.op(name+".float", b.size(width, FP32), FP32, list(c))
	}
	return c
}
