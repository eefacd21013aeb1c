package vram

import "fmt"

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
func (s SGLang) sglangStateLayer(m Model) (Bytes, error) {
	if m.DeltaNet == nil && (m.SSM == nil || !m.SSM.ParallelAttention) {
		return 0, fmt.Errorf("sglang: %q keeps recurrent state in layers SGLang 0.5.3 pools only for Qwen3-Next and Falcon-H1 (later releases add NemotronH, Granite-4.0-H and LFM2 with another sizing); not modelled", m.Family)
	}
	conv, temporal, err := m.stateElems(int64(s.TP))
	if err != nil {
		return 0, fmt.Errorf("sglang: tp_size %d %w", s.TP, err)
	}
	return BF16.Size(conv) + s.MambaSSMDType.Size(temporal), nil
}

// sglangState fills the pool's state figures: the per-request state over
// the recurrent layers, the slots, and what they take off the budget.
func (s SGLang) sglangState(m Model, p *SGLangKVPool) error {
	layer, err := s.sglangStateLayer(m)
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
	if p.MambaSlots == 0 {
		p.MambaSlots = 512
		if s.MaxRunningRequests > 0 {
			p.MambaSlots = s.MaxRunningRequests
		}
	}
	p.StateReserved = p.StatePerRequest * Bytes(p.MambaSlots)
	p.State = p.StatePerRequest * Bytes(p.MambaSlots+1) // the padding slot
	p.Notes = append(p.Notes, fmt.Sprintf("recurrent state: %d layer(s) keep %v per request whatever its length (bf16 conv, %s temporal state); SGLang 0.5.3 reserves %d request slots (max_mamba_cache_size) = %v before the KV pool, counts a token over the %d attention layers only, caps running requests at the slots and turns the radix cache off",
		n, p.StatePerRequest, s.MambaSSMDType, p.MambaSlots, p.StateReserved, m.attentionLayers(0, m.Layers)))
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
