package vram

// Gated short convolutions (LFM2's Lfm2ShortConv, modeling_lfm2.py) as
// transformers' slow_forward runs them — the path it takes on a CPU and on
// a GPU without the causal_conv1d kernels: in_proj to B, C and x (the
// three thirds of one output, transposed to channels first), B · x, a
// depthwise Conv1d of Kernel taps padded by Kernel − 1 on both sides and
// cut back to the sequence, C times that, out_proj.

// resolveShortConv checks what a plan asks of a model with short
// convolutions against what the engine models of them.
func (r *resolved) resolveShortConv() error {
	if r.m.ShortConv == nil {
		return nil
	}
	if err := r.refuseRecurrent("short-convolution", "Lfm2ShortConv"); err != nil {
		return err
	}
	if r.servingEngine {
		return nil // the profile path, noted by refuseRecurrent
	}
	r.notes = append(r.notes, "short_conv: the convolution layers run transformers' slow_forward (Lfm2ShortConv, as on a CPU or without the causal_conv1d kernels): their Conv1d keeps its padded output, which the CUDA kernel does not; that path is not modelled")
	return nil
}

// shortConvTensors adds an Lfm2ShortConv's parameters under p: the
// depthwise conv (hidden × 1 × kernel), in_proj (to 3 · hidden) and
// out_proj, each with a bias under conv_bias.
func shortConvTensors(m Model, l *tensorList, p string) {
	c, h := m.ShortConv, int64(m.Hidden)
	l.add(p+"conv.weight", "other", h, 1, int64(c.Kernel))
	if c.Bias {
		l.add(p+"conv.bias", "bias", h)
	}
	l.linear(p+"in_proj", "in_proj", h, 3*h, c.Bias)
	l.linear(p+"out_proj", "out_proj", h, h, c.Bias)
}

// shortConvBlock is a convolution layer (Lfm2DecoderLayer without
// attention): operator_norm, the short convolution, ffn_norm, the gated MLP.
func shortConvBlock(r *resolved, layer int) BlockActivations {
	if r.blockPlan(layer).rec.shortConv5 {
		return recurrentBlock(r, layer, "operator_norm", "ffn_norm", (*actBuilder).shortConv5)
	}
	return recurrentBlock(r, layer, "operator_norm", "ffn_norm", (*actBuilder).shortConv)
}

// shortConv is Lfm2ShortConv.slow_forward on x (the norm's output).
func (b *actBuilder) shortConv(p blockPlan, x *actT) *actT {
	m := b.r.m
	// w: the channels on this rank (all of them outside a serving
	// engine's tensor parallelism); h: the block's width.
	h, w, k := int64(m.Hidden), b.r.recurrentShard(int64(m.Hidden)), int64(m.ShortConv.Kernel)
	if b.r.servingEngine {
		return b.shortConvProfile(p, x, w)
	}
	batch, seq := int64(b.r.MicroBatch), int64(b.r.SeqLen)
	proj := b.linear(p, "in_proj", "in_proj", x, h, 3*w)
	d := proj.dtype
	// B · x multiplies two thirds of the projection (views of it), and
	// saves both: the projection.
	bx := b.op("B*x", b.size(w, d), d, list(proj), proj)
	if p.useCache {
		// The prefill's conv state: F.pad(Bx, (L_cache − seq, 0)), the last
		// L_cache positions, copied into the cache and dropped.
		b.op("conv_state", d.Size(batch*w*k), d, list(bx))
	}
	// Conv1d saves its input (and, under autocast, the cast weight); its
	// output is seq + kernel − 1 long, and the [..., :seqlen] view that C
	// multiplies keeps all of it.
	conv := b.op("conv", d.Size(batch*(seq+k-1)*w), d, list(bx), bx)
	if p.autocast && !p.frozen {
		b.side("conv.weight_cast", p.e.Size(w*k), p.e)
	}
	// C · conv saves both (C a view of the projection). Its result is laid
	// out as C is (tokens × hidden), so .transpose(-1, -2).contiguous() is
	// that tensor itself, which out_proj saves.
	y := b.op("C*conv", b.size(w, d), d, list(proj, conv), proj, conv)
	return b.linear(p, "out_proj", "out_proj", y, w, h)
}
