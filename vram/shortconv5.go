package vram

// LFM3's short convolution as transformers 5 runs it (Lfm3ShortConv.forward,
// transformers 5.23.0 models/lfm3/modeling_lfm3.py:369-406): LFM2's gated
// convolution (shortconv.go), with the convolution as the torch
// causal_conv1d_fn of l.319-338 rather than the module's own Conv1d, and
// the training cache a DynamicCache (l.537) whose conv state
// update_conv_state keeps (cache_utils.py:1194-1226).

// shortConv5 is Lfm3ShortConv.forward on x (the norm's output): in_proj,
// B · x (saves both thirds: the projection), the cache's conv state where
// there is one, causal_conv1d_fn — hidden_states.to(weight.dtype) (l.330, a
// copy where the projection's dtype is not the weights'), F.conv1d with
// padding kernel − 1 (saves its input, which autocast first copies to the
// compute dtype; under autocast the weight's cast too), the [..., :seq]
// view (keeping the whole output), out.to(hidden_states.dtype) (l.338) —
// C · conv (saves both) and out_proj on the transposed contiguous product
// (laid out as C is: that tensor itself).
func (b *actBuilder) shortConv5(p blockPlan, x *actT) *actT {
	m := b.r.m
	h, w, k := int64(m.Hidden), b.r.recurrentShard(int64(m.Hidden)), int64(m.ShortConv.Kernel)
	if b.r.servingEngine {
		return b.shortConvProfile(p, x, w)
	}
	batch, seq := int64(b.r.MicroBatch), int64(b.r.SeqLen)
	proj := b.linear(p, "in_proj", "in_proj", x, h, 3*w)
	d := proj.dtype
	bx := b.op("B*x", b.size(w, d), d, list(proj), proj)
	if p.useCache {
		// update_conv_state (l.393): the cache's conv state, zeros of
		// batch × channels × kernel in B · x's dtype made on first use,
		// into which the last kernel positions are copied
		// (cache_utils.py:1207-1226); the returned cache keeps it.
		p.holdOutput(b.op("cache.conv_state", d.Size(batch*w*k), d, list(bx)))
	}
	ci := bx
	if wd := p.baseDType; wd.IsFloat() && ci.dtype != wd {
		ci = b.op("conv.input.to_weight", b.size(w, wd), wd, list(ci))
	}
	if p.autocast && ci.dtype != p.e {
		ci = b.op("conv.input_cast", b.size(w, p.e), p.e, list(ci))
	}
	conv := b.op("conv", ci.dtype.Size(batch*(seq+k-1)*w), ci.dtype, list(ci), ci)
	if p.autocast && !p.frozen {
		b.side("conv.weight_cast", p.e.Size(w*k), p.e)
	}
	if conv.dtype != d {
		conv = b.op("conv.to", b.size(w, d), d, list(conv))
	}
	y := b.op("C*conv", b.size(w, d), d, list(proj, conv), proj, conv)
	return b.linear(p, "out_proj", "out_proj", y, w, h)
}
