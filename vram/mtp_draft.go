package vram

import "strings"

// mtpLayerBytes are the checkpoint's first n multi-token-prediction
// layers (Model.MTPLayers, listed by the family's storedOnly) on one GPU as
// rin loads them: each layer's block, enorm, hnorm, eh_proj and norms, the
// tensors named mtp.* outside the blocks, and the router's
// e_score_correction_bias as the fp32 parameter the serving engines make it
// (vLLM models/deepseek_v2.py:328-330; SGLang 0.5.23 models/deepseek_v2.py:
// 519-535, 0.5.3 l.455-466). The layers' own embedding and output layer
// are left out: vLLM and SGLang run the draft on the target's.
func mtpLayerBytes(rin Inference, m Model, n int) Bytes {
	var b Bytes
	for _, t := range m.storedOnly() {
		block := t.Layer >= m.Layers && t.Layer < m.Layers+n
		outside := t.Layer < 0 && strings.HasPrefix(t.Name, "mtp.")
		if !(block || outside) || t.Role == "embedding" || t.Role == "lm_head" {
			continue
		}
		tb := rin.tensorBytes(t)
		if t.Role == "bias" && t.DType == FP32 && !rin.asCheckpoint {
			tb = FP32.Size(t.Numel())
		}
		b = addBytes(b, tb)
	}
	return b
}
