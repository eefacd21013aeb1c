package vram

import "fmt"

// Kimi Delta Attention layers (Kimi Team 2025, "Kimi Linear"), as
// transformers 5.23.0's KimiLinearDeltaAttention builds them
// (models/kimi_linear/modeling_kimi_linear.py:569-715): Gated DeltaNet's
// delta rule with a per-channel decay in place of a per-head one, q, k and
// v projected separately and convolved together, the decay from a
// low-rank forget gate, the output gated through a low-rank projection.
// The engine lists their parameters (Model.KDA); their activations and
// the serving engines' handling of their state are not modelled yet.

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

// resolveKDA refuses what reaches the activation builder of a model with
// KDA layers: their forward is not traced, and the serving engines' state
// for them (vLLM's and SGLang's conv and recurrent state pages) is not
// counted yet, so no plan would be whole. Training and transformers'
// generate are refused before (family.servingOnly).
func (r *resolved) resolveKDA() error {
	if r.m.KDA == nil {
		return nil
	}
	return fmt.Errorf("model: %s has Kimi Delta Attention layers (model.kda), whose forward and serving-engine state are not modelled yet; its parameters, stored bytes and checkpoint are", r.m.Family)
}
