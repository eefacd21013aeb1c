package vram

import (
	"fmt"
	"strings"
)

// SGLang 0.5.3 keeps a hybrid model's recurrent state in a MambaPool beside
// the KV pool (sglang/srt/model_executor/model_runner.py; mem_cache/
// memory_pool.py): for Qwen3-Next (Gated DeltaNet) and Falcon-H1 (Mamba-2
// beside attention in every layer), the architectures that release runs
// this way (model_runner.py l.1300-1306). It
//   - turns the radix cache off ("Hybrid GDN model detected, disable radix
//     cache", l.357-359) and defaults max_mamba_cache_size to
//     --max-running-requests, else 512 (l.360-374);
//   - takes max_mamba_cache_size × the per-request state off the pool's
//     budget before it counts tokens (profile_max_num_token, l.1291-1296),
//     and counts a token's cell over the full-attention layers only
//     (l.1270-1271);
//   - caps the request slots at max_mamba_cache_size (init_memory_pool,
//     l.1431-1442) and allocates one more slot for padding
//     (MambaPool: conv_state and temporal_state of [layers, size + 1, …]).
//
// A layer's state (configs/qwen3_next.py l.285-327, configs/falcon_h1.py
// l.298-355): the shapes vLLM declares too (Model.stateElems), the conv
// state in bf16 and the temporal state in --mamba-ssm-dtype (default
// float32).

// sglangStateLayer is one recurrent layer's state for one request on one
// GPU, or an error naming what SGLang 0.5.3 does not run.
func (s SGLang) sglangStateLayer(m Model, rel sglangRelease) (Bytes, error) {
	switch {
	case rel.stateKinds == nil && m.DeltaNet == nil && (m.SSM == nil || !m.SSM.ParallelAttention):
		return 0, fmt.Errorf("sglang: %q keeps recurrent state in layers SGLang %s pools only for Qwen3-Next and Falcon-H1 (0.5.23 adds Mamba-2 mixers and short convolutions); not modelled", m.Family, rel.Version)
	case rel.stateKinds != nil && !rel.stateKinds[stateKind(m)]:
		return 0, fmt.Errorf("sglang: %q keeps %s state, and SGLang %s pools %s layers; not modelled", m.Family, stateKind(m), rel.Version, strings.Join(sortedKeys(rel.stateKinds), ", "))
	case rel.stateKinds != nil && m.attentionLayers(0, m.Layers) == 0:
		return 0, fmt.Errorf("sglang: %q has no attention layers: SGLang %s then sizes its token pool by a fixed count (_zero_kv_max_tokens), not modelled", m.Family, rel.Version)
	}
	conv, temporal, err := m.stateElems(int64(s.TP))
	if err != nil {
		return 0, fmt.Errorf("sglang: tp_size %d %w", s.TP, err)
	}
	return BF16.Size(conv) + s.MambaSSMDType.Size(temporal), nil
}

// sglangState fills the pool's state figures: the per-request state over
// the recurrent layers, the slots, and what they take off the budget —
// slots as given, else (0.5.3) max_running_requests or 512 with the radix
// cache off, or (0.5.23, kv_cache_configurator.py:3345-3409) as many as
// mamba_full_memory_ratio's 0.9/1.9 of the budget after the slack holds,
// less one, the radix cache kept on and running requests capped at a
// fifth of the slots (_calculate_mamba_ratio: 3 plus 2 tracking slots).
func (s SGLang) sglangState(m Model, p *SGLangKVPool, rel sglangRelease) error {
	layer, err := s.sglangStateLayer(m, rel)
	if err != nil {
		return err
	}
	n := 0
	for i := 0; i < m.Layers; i++ {
		if m.RecurrentLayer(i) {
			n++
		}
	}
	p.StateLayers, p.StatePerRequest = n, layer*Bytes(n)
	p.MambaSlots = s.MaxMambaCacheSize
	how := fmt.Sprintf("SGLang %s reserves %%d request slots (max_mamba_cache_size) = %%v before the KV pool, counts a token over the %d attention layers only, caps running requests at the slots and turns the radix cache off", rel.Version, m.attentionLayers(0, m.Layers))
	switch {
	case p.MambaSlots == 0 && rel.autoMambaSlots:
		budget := max(0, p.Free-p.Weights-p.Reserved-p.MMReservation)
		p.MambaSlots = max(0, int(float64(budget)*0.9/1.9/float64(p.StatePerRequest))-1)
		p.RunningCap = p.MambaSlots / 5
		how = fmt.Sprintf("SGLang %s gives the state 0.9/1.9 of the budget after the slack (mamba_full_memory_ratio): %%d request slots (max_mamba_cache_size) and a padding slot = %%v before the KV pool, counts a token over the %d attention layers only, keeps the radix cache on and caps running requests at a fifth of the slots, %d", rel.Version, m.attentionLayers(0, m.Layers), p.MambaSlots/5)
	case p.MambaSlots == 0:
		p.MambaSlots = 512
		if s.MaxRunningRequests > 0 {
			p.MambaSlots = s.MaxRunningRequests
		}
	}
	p.StateReserved = p.StatePerRequest * Bytes(p.MambaSlots)
	p.State = p.StatePerRequest * Bytes(p.MambaSlots+1) // the padding slot
	if rel.autoMambaSlots {
		p.StateReserved = p.State // 0.5.23 takes the padding slot off the budget too (l.3404-3409)
	}
	p.Notes = append(p.Notes, fmt.Sprintf("recurrent state: %d layer(s) keep %v per request whatever its length (bf16 conv, %s temporal state); "+how,
		n, p.StatePerRequest, s.MambaSSMDType, p.MambaSlots, p.StateReserved))
	return nil
}

// checkState validates the state settings.
func (s SGLang) checkState() error {
	switch {
	case s.MambaSSMDType != FP32 && s.MambaSSMDType != BF16:
		return fmt.Errorf("sglang: mamba_ssm_dtype must be fp32 (float32, the default) or bf16 (bfloat16), got %s", s.MambaSSMDType)
	case s.MaxMambaCacheSize < 0 || s.MaxMambaCacheSize > 1<<20:
		return fmt.Errorf("sglang: max_mamba_cache_size must be in [1, %d], got %d", 1<<20, s.MaxMambaCacheSize)
	case s.MaxRunningRequests < 0 || s.MaxRunningRequests > 1<<20:
		return fmt.Errorf("sglang: max_running_requests must be in [1, %d], got %d", 1<<20, s.MaxRunningRequests)
	}
	return nil
}
