package vram

import "fmt"

// vLLM's V0 fallback. From 0.8 vLLM runs its V1 engine, which the carve
// models, but up to 0.10.1.1 its oracle (EngineArgs._is_v1_supported_
// oracle, 0.9.2 engine/arg_utils.py:1306-1470, 0.10.1 l.1362-1520) falls
// back to the V0 engine, whose memory the carve does not model, for:
//   - a GPU of compute capability below 8.0 (l.1355-1363 at 0.9.2);
//   - an fp8 KV cache without FlashAttention 3, i.e. on a CUDA GPU other
//     than Hopper (l.1365-1382; attention/utils/fa_utils.py:66-68);
//   - a model with recurrent state (Mamba, hybrids, MiniMax-Text-01's
//     lightning attention: "V1 mamba models are unoptimized", l.1402-1405),
//     which VLLM_USE_V1=1 runs on V1 as an experiment (_warn_or_fallback);
//   - an architecture marked SupportsV0Only (is_v1_compatible, l.1396-1400;
//     in 0.9.2 Jamba and MiniMax-Text-01, none of the engine's families in
//     0.10.1).
// With VLLM_USE_V1=1 (VLLM.UseV1) every fallback but the recurrent one
// stops instead: "VLLM_USE_V1=1 is not supported with …"
// (_raise_or_fallback, l.1726-1729). 0.10.2's oracle keeps none of these
// (l.1431-1520). V0 keeps a recurrent model's state outside the KV blocks,
// in a MambaCacheManager of max_num_seqs slots the profile run allocates
// (0.9.2 model_executor/models/mamba_cache.py:25-43, counted in the
// profiled peak, worker/worker.py:256-272), and sizes a block over the
// attention layers alone (worker/cache_engine.py:128-141), where the carve
// models V1's pages holding both; the V0 rules the validation applies to
// older logs (V1's carve with V0's defaults) do not cover that either.

// vllmV0FallbackUntil is the first release whose oracle no longer falls
// back for these.
const vllmV0FallbackUntil = "0.10.2"

// vllmV0Only are the families SupportsV0Only marks in the releases read,
// with the first release read that no longer marks them.
var vllmV0Only = map[string]struct{ names, until string }{
	jambaModelType:   {"['JambaForCausalLM']", "0.10.1"},
	minimaxModelType: {"['MiniMaxText01ForCausalLM']", "0.10.1"},
}

// checkV0Fallback refuses a model the release (asked; empty: the row's)
// would run on the V0 engine, or that VLLM_USE_V1=1 stops.
func (v VLLM) checkV0Fallback(m Model, rel vllmRelease) error {
	asked := orDefault(v.Version, rel.Version)
	if !releaseBefore("vllm", asked, vllmV0FallbackUntil) {
		return nil
	}
	if o, ok := vllmV0Only[m.Family]; ok && releaseBefore("vllm", asked, o.until) {
		return v.v0Fallback(asked, o.names)
	}
	if !m.recurrent() || v.UseV1 {
		return nil
	}
	return fmt.Errorf("vllm: vLLM %s runs %s, a model with recurrent state, on its V0 engine unless VLLM_USE_V1=1 (use_v1: \"Mamba is experimental on VLLM_USE_V1=1. Falling back to V0 Engine.\", engine/arg_utils.py:1402-1405 at 0.9.2, 1428-1431 at 0.10.1), whose state cache beside the KV blocks (MambaCacheManager of max_num_seqs slots) is not modelled; vLLM %s and later run it on V1", asked, m.Family, vllmV0FallbackUntil)
}

// checkV0GPU refuses a launch the release would run on the V0 engine on
// g, or that VLLM_USE_V1=1 stops there.
func (v VLLM) checkV0GPU(g GPU, rel vllmRelease) error {
	asked := orDefault(v.Version, rel.Version)
	if !releaseBefore("vllm", asked, vllmV0FallbackUntil) || g.platform() != platformCUDA || g.ComputeCapability == 0 {
		return nil
	}
	switch {
	case g.ComputeCapability < 80:
		return v.v0Fallback(asked, "Compute Capability < 8.0")
	case (v.KVCacheDType == FP8E4M3 || v.KVCacheDType == FP8E5M2) && g.ComputeCapability/10 != 9:
		return v.v0Fallback(asked, "--kv-cache-dtype")
	}
	return nil
}

// v0Fallback is the refusal of a launch that falls back to V0 for
// feature, or stops under VLLM_USE_V1=1.
func (v VLLM) v0Fallback(asked, feature string) error {
	if v.UseV1 {
		return fmt.Errorf("vllm: NotImplementedError: VLLM_USE_V1=1 is not supported with %s. (vLLM %s engine/arg_utils.py _raise_or_fallback)", feature, asked)
	}
	return fmt.Errorf("vllm: vLLM %s: %s is not supported by the V1 Engine. Falling back to V0. (engine/arg_utils.py _raise_or_fallback): the V0 engine's memory is not modelled; vLLM %s and later run it on V1", asked, feature, vllmV0FallbackUntil)
}
