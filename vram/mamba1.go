package vram

// The Mamba-1 mixer's activations (Gu & Dao 2023, "Mamba") as
// transformers' slow_forward runs it (modeling_jamba.py
// JambaMambaMixer.slow_forward, training: no cache, no padding mask) — the
// path it takes on a CPU, or on a GPU with use_mamba_kernels false; the
// mamba_ssm kernels (selective_scan_fn) save far less, which is not
// modelled. The scan is a Python loop over the sequence: every step's
// state (batch × inner × state, fp32) is saved by the next step's product,
// and the discretized A, B·Δt and B·Δt·x of the whole sequence (batch ×
// inner × seq × state, fp32) are saved too.

// resolveMamba1 checks what a plan asks of a model with Mamba-1 mixers.
func (r *resolved) resolveMamba1() error {
	if r.m.Mamba == nil {
		return nil
	}
	if err := r.refuseRecurrent("state-space (Mamba-1)", "JambaMambaMixer"); err != nil {
		return err
	}
	if r.servingEngine {
		return nil // the profile path, noted by Inference.stateNotes
	}
	r.notes = append(r.notes, "mamba: the Mamba-1 mixers run transformers' slow_forward (a Python loop over the sequence, as on a CPU or with use_mamba_kernels false): every step's state and the discretized A, B·Δt and B·Δt·x of the whole sequence are saved; the mamba_ssm kernels save far less, which is not modelled")
	return nil
}

// mamba1Tensors adds a JambaMambaMixer's parameters under p in
// named_parameters order: its own (A_log, D), then conv1d, in_proj,
// x_proj, dt_proj, out_proj and the three RMSNorms of Δt, B and C.
func mamba1Tensors(m Model, l *tensorList, p string) {
	s, h := *m.Mamba, int64(m.Hidden)
	i, n, k, r := int64(s.Inner), int64(s.State), int64(s.ConvKernel), int64(s.DTRank)
	l.add(p+"A_log", "other", i, n)
	l.add(p+"D", "other", i)
	l.add(p+"conv1d.weight", "other", i, 1, k)
	if s.ConvBias {
		l.add(p+"conv1d.bias", "bias", i)
	}
	l.linear(p+"in_proj", "in_proj", h, 2*i, s.ProjBias)
	l.linear(p+"x_proj", "other", i, r+2*n, false)
	l.linear(p+"dt_proj", "other", r, i, true)
	l.linear(p+"out_proj", "out_proj", i, h, s.ProjBias)
	l.norm(p+"dt_layernorm", false, r)
	l.norm(p+"b_layernorm", false, n)
	l.norm(p+"c_layernorm", false, n)
}

// mamba1Mixer is JambaMambaMixer.slow_forward on x (the norm's output).
func (b *actBuilder) mamba1Mixer(p blockPlan, x *actT) *actT {
	s := *b.r.m.Mamba
	if b.r.servingEngine {
		return b.mamba1Profile(p, x)
	}
	h := int64(b.r.m.Hidden)
	in, n, k, rk := int64(s.Inner), int64(s.State), int64(s.ConvKernel), int64(s.DTRank)
	batch, seq := int64(b.r.MicroBatch), int64(b.r.SeqLen)
	proj := b.linear(p, "in_proj", "in_proj", x, h, 2*in)
	// conv1d over x (a transposed view of the projection, which it saves),
	// padded by conv_kernel − 1 on both sides; SiLU reads the first seq
	// positions (a view that keeps all of the output) and saves it.
	conv := b.op("conv1d", proj.dtype.Size(batch*(seq+k-1)*in), proj.dtype, list(proj), proj)
	act := b.op("conv.act", b.size(in, conv.dtype), conv.dtype, list(conv), conv)
	// x_proj reads act transposed: matmul's reshape copies it, and the
	// product saves the copy. Δt, B and C are views of its output, each
	// RMS-normed.
	xt := b.op("x_proj.input", b.size(in, act.dtype), act.dtype, list(act))
	sel := b.linear(p, "x_proj", "other", xt, in, rk+2*n)
	dtn := b.norm(p, "dt_layernorm", "rmsnorm", sel, rk)
	bn := b.norm(p, "b_layernorm", "rmsnorm", sel, n)
	cn := b.norm(p, "c_layernorm", "rmsnorm", sel, n)
	dt := b.linear(p, "dt_proj", "other", dtn, rk, in)
	dt = b.op("dt.softplus", b.size(in, dt.dtype), dt.dtype, list(dt), dt)
	y, locals := b.selectiveScan(p, x.dtype, act, dt, bn, cn)
	// y + x · D (x times the fp32 parameter: fp32, saving x), then
	// y · silu(gate) (SiLU saves the gate, a view of the projection).
	xd := b.op("x*D", b.size(in, FP32), FP32, list(act), act)
	y = b.op("scan_output+x*D", b.size(in, FP32), FP32, list(y, xd))
	g := b.op("gate.act", b.size(in, proj.dtype), proj.dtype, list(proj), proj)
	y = b.op("scan_output*gate", b.size(in, FP32), FP32, list(y, g), y, g)
	// out_proj reads it transposed: a cast under autocast, then matmul's
	// reshape copy, which the product saves.
	yc := b.castIn(p, "out_proj.cast", y)
	yc = b.op("out_proj.input", b.size(in, yc.dtype), yc.dtype, list(yc))
	out := b.linear(p, "out_proj", "out_proj", yc, in, h)
	// slow_forward's locals live until it returns, whatever autograd
	// keeps: the projection, x, the selective projection, Δt, B, C and the
	// scan's whole-sequence tensors.
	b.hold(append(locals, proj, act, sel, dtn, bn, cn, dt, y)...)
	return out
}

// selectiveScan is the discretization and the recurrence of slow_forward
// on x (act), Δt and the normed B and C, md being the mixer's input dtype
// (its states' and casts'); it returns the stacked outputs and the
// whole-sequence tensors slow_forward keeps in locals.
// exp(A·Δt) saves its output; B·Δt saves Δt and B in fp32; B·Δt·x saves
// both factors (x in fp32). Each of the seq steps multiplies the previous
// state (saved) by its slice of exp(A·Δt) and adds its slice of B·Δt·x;
// its output is the state (cast to the mixer's dtype, which the product
// saves) times C's slice.
func (b *actBuilder) selectiveScan(p blockPlan, md DType, x, dt, bn, cn *actT) (*actT, []*actT) {
	s := *b.r.m.Mamba
	in, n := int64(s.Inner), int64(s.State)
	batch, seq := int64(b.r.MicroBatch), int64(b.r.SeqLen)
	big := FP32.Size(batch * in * seq * n)
	adt := b.op("A*dt", big, FP32, list(dt), dt)
	da := b.keep(b.op("discrete_A", big, FP32, list(adt)))
	bf := bn
	if bn.dtype != FP32 {
		bf = b.op("B.float", b.size(n, FP32), FP32, list(bn))
	}
	db := b.op("discrete_B", big, FP32, list(dt, bf), dt, bf)
	xf := x
	if x.dtype != FP32 {
		xf = b.op("x.float", b.size(in, FP32), FP32, list(x))
	}
	du := b.op("deltaB_u", big, FP32, list(db, xf), db, xf)
	// The loop, as one op: every step's state (fp32) is saved by the next
	// step's product and, cast to the mixer's dtype (and under autocast to
	// the compute dtype), by the step's matmul with C's slice, which it
	// also saves; the first state is zeros in the mixer's dtype. In
	// backward the steps run in reverse, releasing their states as they
	// go, so all of them are live when it starts; each step's
	// select_backward makes a zero-filled gradient of the whole exp(A·Δt)
	// and B·Δt·x for its slice (two such buffers beside the two gradients
	// they are added to) and its own state gradient.
	zero := b.op("ssm_state.zeros", md.Size(batch*in*n), md, nil)
	cd := md
	if p.autocast {
		cd = p.e
	}
	out := b.op("scan_outputs", cd.Size(batch*in*seq), cd, list(zero, da, du, cn), zero, da, cn)
	steps := seq // the states alive at once: every step's, saved for backward
	if b.r.frozen && b.r.LoRA == nil && b.r.inputNoGrad() {
		steps = 1 // without autograd (a generate's prefill) the loop keeps the current one
	}
	b.side("ssm_states", FP32.Size(batch*in*n*steps), FP32).aliasGrad = true
	if cd != FP32 {
		b.side("ssm_states.to", cd.Size(batch*in*n*steps), cd).aliasGrad = true
	}
	b.gradWorkspace(2*big + FP32.Size(batch*in*n))
	return b.op("scan_output.stack", out.bytes, out.dtype, list(out)), []*actT{da, db, du, out}
}

// mamba1Profile is a Mamba-1 mixer in a serving engine's profile run: vLLM's
// MambaMixer without attention metadata runs in_proj, then returns
// out_proj of x made contiguous (layers/mamba/mamba_mixer.py, "V1
// profile run").
func (b *actBuilder) mamba1Profile(p blockPlan, x *actT) *actT {
	in, h := int64(b.r.m.Mamba.Inner), int64(b.r.m.Hidden)
	proj := b.linear(p, "in_proj", "in_proj", x, h, 2*in)
	return b.linear(p, "out_proj", "out_proj", b.op("x.contiguous", b.size(in, proj.dtype), proj.dtype, list(proj)), in, h)
}

// mamba1Block is a Jamba Mamba layer (JambaMambaDecoderLayer):
// input_layernorm, the mixer, pre_ff_layernorm, the MLP or MoE.
func mamba1Block(r *resolved, layer int) BlockActivations {
	return recurrentBlock(r, layer, "input_layernorm", "pre_ff_layernorm", (*actBuilder).mamba1Mixer)
}
