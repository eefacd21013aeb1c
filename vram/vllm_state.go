package vram

import "fmt"

// vLLM (0.11) keeps a recurrent layer's state in the same block pool as the
// KV cache: each Mamba-2 mixer, short convolution or Gated DeltaNet layer
// is a MambaSpec (vllm/v1/kv_cache_interface.py) whose page is the sum of
// its state tensors (conv state and temporal state) for one sequence, and
// whose block size is max_model_len, so a request takes one page per such
// layer whatever its length (max_memory_usage_bytes = page_size_bytes). In
// a hybrid model the attention and state pages must be the same size:
// HybridAttentionMambaModelConfig.verify_and_update_config
// (model_executor/models/config.py, 0.11.0 l.314-400) raises the attention
// block size to 16 · cdiv(state page, 16 · one token's attention page) and
// pads the state page to the attention page; the layers are then grouped
// by kind like any hybrid (_get_kv_cache_groups_uniform_page_size).
// vLLM also turns prefix caching off for these models
// (MambaModelConfig.verify_and_update_config).

// stateKind names the model's recurrent layers (vLLM's MambaSpec.mamba_type
// "mamba2", "short_conv", "linear_attention").
func stateKind(m Model) string {
	switch {
	case m.ShortConv != nil:
		return "short convolution"
	case m.DeltaNet != nil:
		return "Gated DeltaNet"
	case m.Mamba != nil:
		return "Mamba-1"
	case m.KDA != nil:
		return "KDA"
	case m.Lightning != nil:
		return "lightning attention"
	}
	return "Mamba-2"
}

// statePage is one recurrent layer's state for one sequence on one GPU
// (MambaSpec.page_size_bytes, unpadded): the shapes vLLM's models declare
// (get_mamba_state_shape_from_config; Model.stateElems) in the dtypes they
// declare (MambaStateDtypeCalculator): Mamba-2's conv state in
// mamba_cache_dtype and its temporal state in mamba_ssm_cache_dtype, a
// short convolution's conv state in mamba_cache_dtype, Gated DeltaNet's
// two states both in mamba_cache_dtype.
func (v VLLM) statePage(m Model) (Bytes, error) {
	conv, temporal, err := m.stateElems(int64(v.TP))
	if err != nil {
		return 0, fmt.Errorf("vllm: tensor_parallel_size %d %w", v.TP, err)
	}
	convD, ssmD := v.mambaDTypes()
	switch {
	case m.DeltaNet != nil:
		ssmD = convD // gated_delta_net_state_dtype: both in mamba_cache_dtype
	case m.Lightning != nil:
		// linear_attention_state_dtype (0.14.1 mamba_utils.py:17-26):
		// mamba_cache_dtype, "auto" the model's; fp32 refused.
		if convD == FP32 {
			return 0, fmt.Errorf("vllm: mamba_cache_dtype fp32: vLLM raises \"fp32 state for minimax is not yet supported\" (mamba_utils.py linear_attention_state_dtype)")
		}
		ssmD = convD
	case m.KDA != nil:
		// kda_state_dtype: the recurrent state in fp32 whatever
		// mamba_ssm_cache_dtype (0.14.1 mamba_utils.py:84-90; 0.33's
		// layer passes none, gdn/kimi_gdn_linear_attn.py:157-164).
		ssmD = FP32
	}
	return convD.Size(conv) + ssmD.Size(temporal), nil
}

// mambaDTypes are the conv state's and the temporal state's dtypes:
// mamba_cache_dtype ("auto": the model's dtype, bf16 here) and
// mamba_ssm_cache_dtype ("auto": the conv state's).
func (v VLLM) mambaDTypes() (conv, ssm DType) {
	conv = v.MambaCacheDType
	if conv == DTypeUnset {
		conv = BF16
	}
	ssm = v.MambaSSMCacheDType
	if ssm == DTypeUnset {
		ssm = conv
	}
	return conv, ssm
}

// checkMamba validates the state settings: vLLM's MambaDType is "auto" or
// "float32" (config/cache.py).
func (v VLLM) checkMamba() error {
	for _, f := range []struct {
		name string
		d    DType
	}{{"mamba_cache_dtype", v.MambaCacheDType}, {"mamba_ssm_cache_dtype", v.MambaSSMCacheDType}} {
		if f.d != DTypeUnset && f.d != BF16 && f.d != FP32 {
			return fmt.Errorf("vllm: %s must be bf16 (\"auto\" for a bf16 model) or fp32, got %s", f.name, f.d)
		}
	}
	return nil
}

// hybridBlockSize is the attention block size a hybrid model runs with:
// the block size asked for (or the release's), raised to a · cdiv(state
// page, a · one token's attention page) when that is larger
// (HybridAttentionMambaModelConfig: "Setting attention block size to N
// tokens to ensure that attention page size is >= mamba page size"), the
// alignment a 16 tokens — the block size where it is larger and the
// release aligns to it (vllmRelease.hybridAlignBlock: 0.34's default 64)
// — or at least the release's for latent attention
// (vllmRelease.mlaHybridAlign: 0.14.1's 64, 0.33's 128).
func (v VLLM) hybridBlockSize(m Model, state Bytes, rel vllmRelease) int {
	one := v
	one.BlockSize = 1
	tok := int64(one.pageBytes(m))
	a := int64(16)
	if rel.hybridAlignBlock {
		a = max(a, int64(v.BlockSize))
	}
	if m.KVLoRARank > 0 && rel.mlaHybridAlign > 0 {
		a = max(a, int64(rel.mlaHybridAlign))
	}
	need := a * cdiv64(int64(state), a*tok)
	return max(v.BlockSize, int(min(need, 1<<30)))
}

// stateNotes say what the recurrent layers keep and how vLLM pools it.
func (c VLLMKVCache) stateNotes() []string {
	if c.StateLayers == 0 {
		return nil
	}
	pages := "one page per request per layer; vLLM turns prefix caching off for this model"
	if n := max(1, c.statePages); n > 1 {
		// vllmRelease.statePagesFor: align mode (0.33 and later) keeps the
		// state at block boundaries, with prefix caching on.
		pages = fmt.Sprintf("%d pages per request per layer: prefix caching on, the state kept at block boundaries (mamba_cache_mode \"align\")", n)
	}
	notes := []string{fmt.Sprintf("%s state: %d layer(s) on this GPU keep %v per request each, whatever its length (MambaSpec: %s)",
		c.StateKind, c.StateLayers, c.StatePageBytes, pages)}
	if c.hybrid() {
		pad := float64(c.PageBytes-c.StatePageBytes) / float64(c.StatePageBytes) * 100
		notes = append(notes, fmt.Sprintf("hybrid pages: vLLM sets the attention block size to %d tokens so that an attention page (%v) is at least the state page, and pads the state page by %.2f%% to match", c.BlockSize, c.PageBytes, pad))
	}
	return notes
}

// hybrid reports whether the cache pools attention and state pages.
func (c VLLMKVCache) hybrid() bool {
	for _, g := range c.Groups {
		if g.Kind != "mamba" {
			return c.StateLayers > 0
		}
	}
	return false
}

// PerRequestFor splits what one request of tokens takes on this GPU (at
// most max_model_len) into the attention layers' KV cache, which grows
// with the context, and the recurrent layers' state pages, which do not.
func (c VLLMKVCache) PerRequestFor(tokens int) (kv, state Bytes) {
	tokens = min(max(tokens, 1), c.MaxModelLen)
	if c.Compressed != nil {
		return c.compressedPerRequest(tokens)
	}
	for _, k := range c.kinds {
		b := Bytes(int64(k.Layers) * k.pagesFor(tokens, c.BlockSize, c.mbt, c.statePages) * int64(c.PageBytes))
		if k.Kind == "mamba" {
			state += b
		} else {
			kv += b
		}
	}
	if c.DraftPageBytes > 0 { // one full-attention group (vllm_spec.go)
		kv += Bytes(int64(c.DraftLayers) * cdiv64(int64(tokens), int64(c.BlockSize)) * int64(c.DraftPageBytes-c.PageBytes))
	}
	return kv, state
}
