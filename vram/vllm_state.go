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
	}
	return "Mamba-2"
}

// statePage is one recurrent layer's state for one sequence on one GPU
// (MambaSpec.page_size_bytes, unpadded), from the shapes and dtypes
// vLLM's models declare (get_mamba_state_shape_from_config /
// get_mamba_state_dtype_from_config; layers/mamba/mamba_utils.py
// MambaStateShapeCalculator and MambaStateDtypeCalculator):
//   - Mamba-2 (mamba2.py, bamba.py, falcon_h1.py, granitemoehybrid.py):
//     conv (conv_kernel − 1, (inner + 2 · n_groups · state) / tp) in
//     mamba_cache_dtype, temporal (heads / tp, head_dim, state) in
//     mamba_ssm_cache_dtype; n_groups not divisible by tp is raised to tp
//     (extra_groups_for_head_shards);
//   - short convolution (lfm2.py): conv (conv_L_cache − 1, conv_dim / tp),
//     conv_dim being the hidden size;
//   - Gated DeltaNet (qwen3_next.py): conv (kernel − 1, (2 · key heads ·
//     key dim + value heads · value dim) / tp) and temporal (value heads /
//     tp, key dim, value dim), both in mamba_cache_dtype.
//
// vLLM's divide asserts that tp divides each sharded width.
func (v VLLM) statePage(m Model) (Bytes, error) {
	tp := int64(v.TP)
	div := func(what string, n int64) (int64, error) {
		if n%tp != 0 {
			return 0, fmt.Errorf("vllm: tensor_parallel_size %d must divide the %s (%d): vLLM shards the recurrent state evenly", tp, what, n)
		}
		return n / tp, nil
	}
	conv, ssm := v.mambaDTypes()
	switch {
	case m.ShortConv != nil:
		w, err := div("short convolution's width", int64(m.Hidden))
		if err != nil {
			return 0, err
		}
		return conv.Size(int64(m.ShortConv.Kernel-1) * w), nil
	case m.DeltaNet != nil:
		d := m.DeltaNet
		w, err := div("DeltaNet convolution's width", d.convDim())
		if err != nil {
			return 0, err
		}
		h, err := div("DeltaNet value heads", int64(d.ValueHeads))
		if err != nil {
			return 0, err
		}
		return conv.Size(int64(d.ConvKernel-1)*w + h*int64(d.KeyDim)*int64(d.ValueDim)), nil
	}
	s := m.SSM.Normalize()
	groups := int64(s.Groups)
	if groups%tp != 0 {
		groups = tp // extra_groups_for_head_shards: groups + (tp − groups)
	}
	w, err := div("Mamba-2 convolution's width", s.inner()+2*groups*int64(s.State))
	if err != nil {
		return 0, err
	}
	h, err := div("Mamba-2 heads", int64(s.Heads))
	if err != nil {
		return 0, err
	}
	return conv.Size(int64(s.ConvKernel-1)*w) + ssm.Size(h*int64(s.HeadDim)*int64(s.State)), nil
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
// the block size asked for (or 16), raised to 16 · cdiv(state page, 16 ·
// one token's attention page) when that is larger
// (HybridAttentionMambaModelConfig: "Setting attention block size to N
// tokens to ensure that attention page size is >= mamba page size").
func (v VLLM) hybridBlockSize(m Model, state Bytes) int {
	one := v
	one.BlockSize = 1
	tok := int64(one.pageBytes(m))
	need := 16 * cdiv64(int64(state), 16*tok)
	return max(v.BlockSize, int(min(need, 1<<30)))
}

// stateNotes say what the recurrent layers keep and how vLLM pools it.
func (c VLLMKVCache) stateNotes() []string {
	if c.StateLayers == 0 {
		return nil
	}
	notes := []string{fmt.Sprintf("%s state: %d layer(s) on this GPU keep %v per request each, whatever its length (MambaSpec: one page per request per layer); vLLM turns prefix caching off for this model",
		c.StateKind, c.StateLayers, c.StatePageBytes)}
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
	for _, k := range c.kinds {
		b := Bytes(int64(k.Layers) * k.pagesFor(tokens, c.BlockSize, c.mbt) * int64(c.PageBytes))
		if k.Kind == "mamba" {
			state += b
		} else {
			kv += b
		}
	}
	return kv, state
}
