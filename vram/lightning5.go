package vram

import "fmt"

// MiniMaxLightningAttention's training forward as transformers 5.23 runs
// it (5.23.0 models/minimax/modeling_minimax.py:175-271; it has no kernel
// path): qkv_proj through silu (l.184), q, k and v as views of that one
// output (l.186-194), a loop over blocks of block_size tokens (the last
// one shorter where block_size does not divide the sequence, l.212-241),
// the blocks' outputs concatenated (l.258), RMSNorm over all heads
// (l.263), the sigmoid gate from the layer's input (l.264) and out_proj
// (l.265).
//
// Each block's matmuls read slices of q, k and v, 4-D views of the
// tokens-first silu output: torch.matmul folds them into bmm's batch by
// a reshape, which for a batch of several sequences cannot be a view and
// copies (batch × heads × block × head_dim each); bmm saves the copies.
// The products with the decay buffers (the buffers' dtype: fp32 beside a
// compute-dtype operand under autocast) save only the buffers, which need
// no gradient, and keep the tokens-first layout, so the matmul after them
// copies too. The running state, K^T V decayed over the blocks, starts as
// zeros in v's dtype without a gradient (l.202-209): the first block's
// query product saves only the state.

// lightningDims are one lightning layer's sizes in elements.
type lightningDims struct {
	batch, heads, headDim int64
	seq, block            int64
	decay                 DType // the decay buffers' dtype
}

// lightningAttention is the layer on x (the input_layernorm's output),
// returning out_proj's output.
func (b *actBuilder) lightningAttention(p blockPlan, x *actT) *actT {
	m := b.r.m
	d := lightningDims{batch: int64(b.r.MicroBatch), heads: int64(m.Heads), headDim: int64(m.HeadDim),
		seq: int64(b.r.SeqLen), block: int64(m.Lightning.BlockSize), decay: p.baseDType}
	h, w := int64(m.Hidden), d.heads*d.headDim
	qkv := b.linear(p, "qkv_proj", "qkv_proj", x, h, 3*w)
	act := b.op("qkv.silu", b.size(3*w, qkv.dtype), qkv.dtype, list(qkv), qkv) // silu saves its input
	e := act.dtype
	// zeros(batch, heads, head_dim, head_dim) in value_states' dtype.
	state := b.op("attn_weights_inter.zeros", e.Size(d.batch*d.heads*d.headDim*d.headDim), e, nil)
	var outs []*actT
	for i, start := 0, int64(0); start < d.seq; i, start = i+1, start+d.block {
		cur := min(d.block, d.seq-start)
		last := start+cur >= d.seq
		var out *actT
		state, out = b.lightningStep(p, d, fmt.Sprintf("block%d.", i), act, state, cur, i == 0, last && !p.useCache)
		outs = append(outs, out)
	}
	if p.useCache {
		p.holdOutput(state) // set_linear_cache (l.268-269)
	}
	// torch.cat over the blocks (l.258), then transpose(1, 2).reshape: a
	// copy of the heads-first concatenation (l.262).
	cat := b.op("attn_output.cat", b.size(w, e), e, outs)
	flat := b.op("attn_output.reshape", b.size(w, e), e, list(cat))
	normed := b.norm(p, "norm", "rmsnorm", flat, w)
	gate := b.linear(p, "output_gate", "in_proj", x, h, w)
	sig := b.keep(b.op("output_gate.sigmoid", b.size(w, gate.dtype), gate.dtype, list(gate)))
	gd := promote(sig.dtype, normed.dtype)
	gated := b.op("sigmoid*norm", b.size(w, gd), gd, list(sig, normed), sig, normed)
	out := b.linear(p, "out_proj", "o_proj", gated, w, h)
	b.hold(act) // q, k and v are the forward's locals until it returns
	return out
}

// lightningStep is one block of cur tokens (l.213-241): the intra-block
// scores decayed and times v, the query decayed times the state, their
// sum; then the state decayed by the block and plus the decayed keys'
// K^T V. first: the state is the zeros without a gradient. dropped: the
// block is the last and its new state is thrown away (no cache), so the
// update's graph dies with it and saves nothing. It returns the new state
// and the block's output.
func (b *actBuilder) lightningStep(p blockPlan, d lightningDims, name string, act, state *actT, cur int64, first, dropped bool) (*actT, *actT) {
	e := act.dtype
	bh := d.batch * d.heads
	blk, hd, sq := bh*cur*d.headDim, bh*d.headDim*d.headDim, bh*cur*cur
	dd := promote(e, d.decay)
	// attn_weights_intra = q_i @ k_iᵀ; × diagonal_decay; @ v_i (l.227-228).
	qi, ki := b.lightningFold(p, name+"q_i", act, blk, true), b.lightningFold(p, name+"k_iᵀ", act, blk, true)
	scores := b.lightningMatmul(name+"q_i@k_iᵀ", sq, e, qi, ki)
	decayed := b.op(name+"intra*diagonal_decay", dd.Size(sq), dd, list(scores))
	dc := b.lightningFold(p, name+"intra", decayed, sq, false)
	vi := b.lightningFold(p, name+"v_i", act, blk, true)
	intra := b.lightningMatmul(name+"intra@v_i", blk, e, dc, vi)
	// attn_output_inter = (q_i × query_decay) @ state (l.231).
	qd := b.op(name+"q_i*query_decay", dd.Size(blk), dd, list(act))
	qc := b.lightningFold(p, name+"q_i*query_decay", qd, blk, true)
	sc := b.lightningFold(p, name+"state", state, hd, false)
	var inter *actT
	if first {
		inter = b.op(name+"q_i@state", e.Size(blk), e, list(qc, sc), sc)
		b.ops[len(b.ops)-1].gemm = true
	} else {
		inter = b.lightningMatmul(name+"q_i@state", blk, e, qc, sc)
	}
	out := b.op(name+"inter+intra", e.Size(blk), e, list(inter, intra)) // l.234
	// next = (k_i × key_decay)ᵀ @ v_i; state × block_decay + next (l.238-241).
	kd := b.op(name+"k_i*key_decay", dd.Size(blk), dd, list(act))
	kc := b.lightningFold(p, name+"(k_i*key_decay)ᵀ", kd, blk, true)
	vc := b.lightningFold(p, name+"v_i.again", act, blk, true)
	sd := promote(state.dtype, d.decay)
	if dropped {
		upd := b.op(name+"k_iᵀ@v_i", e.Size(hd), e, list(kc, vc))
		scaled := b.op(name+"state*block_decay", sd.Size(hd), sd, list(state))
		nd := promote(sd, e)
		return b.op(name+"state", nd.Size(hd), nd, list(scaled, upd)), out
	}
	upd := b.lightningMatmul(name+"k_iᵀ@v_i", hd, e, kc, vc)
	scaled := b.op(name+"state*block_decay", sd.Size(hd), sd, list(state))
	nd := promote(sd, e)
	return b.op(name+"state", nd.Size(hd), nd, list(scaled, upd)), out
}

// lightningFold is an operand of one of the block's matmuls as
// torch.matmul hands it to bmm: under autocast a cast to the compute
// dtype where it is wider (autocast casts anew each call), then, for a
// tokens-first operand (strided), the reshape's copy where the batch
// holds several sequences (reshape cannot fold batch and heads into one
// dimension of a view).
func (b *actBuilder) lightningFold(p blockPlan, name string, x *actT, n int64, strided bool) *actT {
	if p.autocast && x.dtype != p.e {
		x = b.op(name+".cast", p.e.Size(n), p.e, list(x))
	}
	if strided && b.r.MicroBatch > 1 {
		x = b.op(name+".reshape", x.dtype.Size(n), x.dtype, list(x))
	}
	return x
}

// lightningMatmul is bmm of x and y into out elements of dtype e, saving
// both operands.
func (b *actBuilder) lightningMatmul(name string, out int64, e DType, x, y *actT) *actT {
	o := b.op(name, e.Size(out), e, list(x, y), x, y)
	b.ops[len(b.ops)-1].gemm = true
	return o
}
