package vram

import "fmt"

// Kimi Delta Attention layers (Kimi Team 2025, "Kimi Linear"), as
// transformers 5.23.0's KimiLinearDeltaAttention builds them
// (models/kimi_linear/modeling_kimi_linear.py:569-715): Gated DeltaNet's
// delta rule with a per-channel decay in place of a per-head one, q, k and
// v projected separately and convolved together, the decay from a
// low-rank forget gate, the output gated through a low-rank projection.
// The engine lists their parameters (Model.KDA), the serving engines'
// profile path of them (kdaProfile), their state (Model.stateElems;
// vLLM's and SGLang's pools) and their training forward as transformers
// 5.23 runs it (kda5.go).

// kdaTensors adds a KimiLinearDeltaAttention's parameters under p in
// named_parameters order (module registration order, l.585-604): q_proj,
// k_proj and v_proj; the depthwise conv1d over q|k|v (no bias); the
// forget gate (KimiLinearForgetGate l.319-328: its own dt_bias and A_log,
// then f_a_proj to one head's width and f_b_proj back to every channel);
// b_proj (β, one per head); g_a_proj and g_b_proj (the output gate); the
// gated RMSNorm over one head; o_proj. No projection has a bias.
func kdaTensors(m Model, l *tensorList, p string) {
	d, h := *m.KDA, int64(m.Hidden)
	w, hd := d.width(), int64(d.HeadDim)
	l.linear(p+"q_proj", "q_proj", h, w, false)
	l.linear(p+"k_proj", "k_proj", h, w, false)
	l.linear(p+"v_proj", "v_proj", h, w, false)
	l.add(p+"conv1d.weight", "other", 3*w, 1, int64(d.ConvKernel))
	l.add(p+"forget_gate.dt_bias", "other", w)
	l.add(p+"forget_gate.A_log", "other", 1, 1, int64(d.Heads), 1)
	l.linear(p+"forget_gate.f_a_proj", "in_proj", h, hd, false)
	l.linear(p+"forget_gate.f_b_proj", "in_proj", hd, w, false)
	l.linear(p+"b_proj", "in_proj", h, int64(d.Heads), false)
	l.linear(p+"g_a_proj", "in_proj", h, hd, false)
	l.linear(p+"g_b_proj", "in_proj", hd, w, false)
	l.norm(p+"o_norm", false, hd)
	l.linear(p+"o_proj", "o_proj", w, h, false)
}

// resolveKDA checks what a plan asks of a model with KDA layers: a
// serving engine's forward (vLLM's profile run) takes the layers' profile
// path (kdaProfile); a training forward transformers 5.23's torch path
// (kda5.go).
func (r *resolved) resolveKDA() error {
	if r.m.KDA == nil {
		return nil
	}
	if err := r.refuseRecurrent("Kimi Delta Attention", "KimiDeltaAttention"); err != nil {
		return err
	}
	if !r.servingEngine {
		r.notes = append(r.notes, fmt.Sprintf("kda: the Kimi Delta Attention layers run transformers' torch path (chunk_kimi_delta_attention, as on a CPU or without the flash-linear-attention kernels): each chunk of %d tokens keeps its chunk × chunk × head_dim decay map and products; the fla kernels save far less, which is not modelled", deltaChunk))
	}
	return nil
}

// kdaBlock is a Kimi Delta Attention layer (KimiLinearDecoderLayer with
// layer_type "linear_attention"): input_layernorm, the KDA
// (kimiDeltaAttention), post_attention_layernorm, the MLP or MoE.
func kdaBlock(r *resolved, layer int) BlockActivations {
	return recurrentBlock(r, layer, "input_layernorm", "post_attention_layernorm", (*actBuilder).kimiDeltaAttention)
}

// kdaProfile is vLLM 0.33's KimiLinearGatedDeltaNetAttention.forward in
// the profile run (gdn/kimi_gdn_linear_attn.py:328-377): in_proj_qkvgfab
// (q|k|v, β and the forget gate's first projection), g_a_proj then
// g_b_proj, f_b_proj, the empty core output — _forward returns at once
// without attention metadata (l.391-392), skipping the conv, the delta
// rule and o_norm — and o_proj; each width sharded over tensor
// parallelism (f_a and g_a whole). 0.14.1's layers/kda.py:248-284 runs q,
// k and v apart and the gate's fp32 output and o_norm too, a few more
// tensors of the layer's width, not modelled apart.
func (b *actBuilder) kdaProfile(p blockPlan, x *actT) *actT {
	d := *b.r.m.KDA
	h, hd := int64(b.r.m.Hidden), int64(d.HeadDim)
	w, heads := b.r.recurrentShard(d.width()), b.r.recurrentShard(int64(d.Heads))
	proj := b.linear(p, "in_proj_qkvgfab", "in_proj", x, h, 3*w+heads+hd)
	ga := b.linear(p, "g_a_proj", "in_proj", x, h, hd)
	g2 := b.linear(p, "g_b_proj", "in_proj", ga, hd, w)
	g1 := b.linear(p, "f_b_proj", "in_proj", proj, hd, w)
	e := proj.dtype
	core := b.op("core_attn_out", b.size(w, e), e, nil)
	out := b.linear(p, "o_proj", "o_proj", core, w, h)
	b.hold(proj, g1, g2) // forward's locals until it returns
	return out
}
