package vram

// A serving engine's profile run (vLLM 0.11's _dummy_run under
// profile_run) calls the model without attention metadata, and vLLM's
// recurrent layers then take a short path of their own, not the scan:
//   - MambaMixer2.forward_cuda (layers/mamba/mamba_mixer2.py, "if
//     attn_metadata is None"): in_proj, a contiguous clone of x|B|C, the
//     gated RMSNorm of x by the gate, out_proj;
//   - ShortConv.forward_cuda (layers/mamba/short_conv.py, "V1 profile
//     run"): in_proj, (B · x).contiguous(), C · Bx, out_proj;
//   - Qwen3NextGatedDeltaNet._forward (models/qwen3_next.py, "V1 profile
//     run"): returns at once, leaving the decoder layer's
//     torch.empty_like(hidden_states) output as it is.
// So the profile's peak holds these tensors and never the chunked scan's.

// mambaProfile is the Mamba-2 mixer's profile path on x (width hidden).
func (b *actBuilder) mambaProfile(p blockPlan, d ssmDims, x *actT) *actT {
	h := int64(b.r.m.Hidden)
	proj := b.linear(p, "in_proj", "in_proj", x, h, d.proj)
	e := proj.dtype
	xbc := b.op("x_B_C.clone", b.size(d.conv, e), e, list(proj))
	y := b.op("norm", b.size(d.inner, e), e, list(xbc, proj))
	return b.linear(p, "out_proj", "out_proj", y, d.inner, h)
}

// shortConvProfile is the short convolution's profile path on x; w is its
// width on this rank.
func (b *actBuilder) shortConvProfile(p blockPlan, x *actT, w int64) *actT {
	h := int64(b.r.m.Hidden)
	proj := b.linear(p, "in_proj", "in_proj", x, h, 3*w)
	e := proj.dtype
	bx := b.op("B*x", b.size(w, e), e, list(proj))
	y := b.op("C*Bx", b.size(w, e), e, list(proj, bx))
	return b.linear(p, "out_proj", "out_proj", y, w, h)
}

// deltaNetProfile is the Gated DeltaNet's profile path: the decoder
// layer's empty output, written by nothing.
func (b *actBuilder) deltaNetProfile(x *actT) *actT {
	h := int64(b.r.m.Hidden)
	return b.op("linear_attn.output", b.size(h, x.dtype), x.dtype, nil)
}
