package vram

import (
	"fmt"
	"math"
)

// SGLang 0.5.23 runs DeepSeek-V4 (Model.Compressed) in its own pool,
// DeepSeekV4TokenToKVPool (srt/mem_cache/deepseek_v4_memory_pool.py:943),
// sized by DSV4PoolConfigurator (srt/model_executor/pool_configurator.py:
// 1067-1713; paths inside the sglang package): one sliding-window pool
// over every layer, per rate a pool of compressed rows in 256-token pages
// (page_size forced to 256, srt/arg_groups/model_overrides/deepseek_v4.py:
// 51-61), the CSA layers' indexer keys, and the compressors' fp32 states.
// It prices the budget per "full" token (a token of context), the
// sliding-window pool as a ratio of the full tokens, and takes the HCA
// layers' states, sized per request slot, off the budget first.

// sglangDSV4SWARatio is swa_full_tokens_ratio as SGLang 0.5.23 runs
// DeepSeek-V4: the model override sets 0.1 where the launch gives none
// (model_overrides/deepseek_v4.py:43-49), the configurator's own default
// too (pool_configurator.py:1046).
const sglangDSV4SWARatio = 0.1

// sglangDSV4RunningRequests is max_running_requests' DeepSeek-V4 default
// (srt/arg_groups/deepseek_v4_hook.py:136-143).
const sglangDSV4RunningRequests = 256

// SGLangCompressed is how SGLang 0.5.23 prices a DeepSeek-V4 pool.
type SGLangCompressed struct {
	// BytesPerFullToken is what a token of context costs across the
	// pools (_get_bytes_per_full_token, l.1437-1446): SWARatio × a
	// sliding-window slot's bytes, plus each CSA and HCA layer's
	// compressed rows and indexer keys.
	BytesPerFullToken float64 `json:"bytes_per_full_token"`
	BytesPerSWAToken  float64 `json:"bytes_per_swa_token"`
	SWARatio          float64 `json:"swa_full_tokens_ratio"`
	// MaxRunningRequests are the request slots (one more for padding)
	// the HCA states are sized for; HCAState is those states, taken off
	// the budget before the tokens.
	MaxRunningRequests int   `json:"max_running_requests"`
	HCAState           Bytes `json:"hca_state"`
	// The pools' sizes, in tokens (rows for C4State).
	SWATokens  int64 `json:"swa_tokens"`
	C4Tokens   int64 `json:"c4_tokens"`
	C128Tokens int64 `json:"c128_tokens"`
	C4State    int64 `json:"c4_state_rows"`
}

// checkCompressed refuses a model with compressed attention where the
// release does not run it, or with settings it refuses.
func (s SGLang) checkCompressed(m Model, rel sglangRelease) error {
	switch {
	case m.Compressed == nil:
		return nil
	case !rel.compressedPool:
		return fmt.Errorf("sglang: SGLang %s does not run %s: it has no DeepseekV4ForCausalLM (no srt/models/deepseek_v4.py; 0.5.23 adds it with its DeepSeekV4TokenToKVPool)", rel.Version, m.Family)
	case s.KVCacheDType != DTypeUnset && s.KVCacheDType != FP8E4M3 && s.KVCacheDType != BF16:
		return fmt.Errorf("sglang: AssertionError: %s is not supported for DeepseekV4ForCausalLM (fp8_e4m3 or bfloat16: srt/arg_groups/overrides.py:891-913)", s.KVCacheDType)
	case s.KVCacheDType == BF16:
		return fmt.Errorf("sglang: kv_cache_dtype bf16 for DeepSeek-V4: its pool is modelled for fp8_e4m3, what \"auto\" resolves to (srt/arg_groups/overrides.py:902-904)")
	case s.MaxRunningRequests < 0:
		return fmt.Errorf("sglang: max_running_requests must be ≥ 1, got %d", s.MaxRunningRequests)
	}
	return nil
}

// sglangDSV4PageBytes is what one slot of a pool whose pages hold n rows
// costs: the V4 row — qk_nope fp8, qk_rope bf16, a UE8M0 scale a 64 nope
// values and a pad byte, 584 B for V4-Flash (pool_configurator.py:1108;
// memory_pool.py:295-305) — in pages padded to 576 B
// (ceil(n · row / 576) · 576, memory_pool.py:307-321).
func sglangDSV4PageBytes(m Model, n int) float64 {
	rope := int64(float64(m.HeadDim) * m.RotaryPct)
	nope := int64(m.HeadDim) - rope
	row := nope + 2*rope + nope/64 + 1
	return float64(cdiv64(int64(n)*row, 576)*576) / float64(n)
}

// compressedPool sizes the pool as calculate_pool_sizes does
// (pool_configurator.py:1638-1700), in ratio mode (swa_full_tokens_ratio
// given, as the override gives it): full tokens = (budget − fixed) /
// bytes per full token, floored to the 256-token page; the sliding-window
// pool int(full × ratio) floored to the page, the compressed pools full/4
// and full/128, the CSA state rings 8 rows a sliding-window page
// (l.1463-1502). The pool is replicated on every TP rank: wkv and wqkv_a
// are replicated and each rank keeps the one key-value head
// (srt/models/deepseek_v4.py:1025-1037, 1095-1115).
func (s SGLang) compressedPool(m Model, p *SGLangKVPool) {
	c := m.Compressed
	csa, hca := float64(len(c.CSA)), float64(len(c.HCA))
	hd, di := int64(m.HeadDim), int64(m.IndexHeadDim)
	const page = 256
	// bytes_per_swa_token (l.1372-1388): a sliding-window slot in every
	// layer, and the CSA states' ring of 8 fp32 rows a page (kv and
	// score, overlapping: 2 · 2 · head_dim, the indexer's at its width;
	// get_compress_state_ring_size, memory_pool.py:60-79).
	swa := sglangDSV4PageBytes(m, page)*float64(m.Layers) + 8.0/page*float64(2*2*(hd+di)*4)*csa
	// _compressed_bytes_per_full_token (l.1390-1405): a CSA layer's row
	// a 4 tokens and its indexer key (unpadded, memory_pool.py:53-57),
	// an HCA layer's row a 128.
	perFull := sglangDSV4SWARatio*swa + csa*(sglangDSV4PageBytes(m, page/c.CSARate)+float64(dsaIndexKeyBytes(m)))/float64(c.CSARate) +
		hca*sglangDSV4PageBytes(m, page/c.HCARate)/float64(c.HCARate)
	running := s.MaxRunningRequests
	if running == 0 {
		running = sglangDSV4RunningRequests
	}
	// _get_c128_state_fixed_bytes (l.1504-1530): a ring of 128 fp32 rows
	// of 2 · head_dim per request slot (one more for padding), plus a
	// ring and a row, padded to 128 rows, in every HCA layer.
	rows := cdiv64(int64(running+1)*128+128+1, 128) * 128
	cc := &SGLangCompressed{BytesPerFullToken: perFull, BytesPerSWAToken: swa, SWARatio: sglangDSV4SWARatio, MaxRunningRequests: running,
		HCAState: Bytes(rows * 2 * hd * 4 * int64(len(c.HCA)))}
	full := int64(math.Max(0, float64(p.Rest-cc.HCAState)) / perFull)
	full = full / page * page
	cc.SWATokens = int64(float64(full)*sglangDSV4SWARatio) / page * page
	cc.C4Tokens, cc.C128Tokens, cc.C4State = full/int64(c.CSARate), full/int64(c.HCARate), cc.SWATokens/page*8
	p.Compressed, p.Tokens, p.CellSize, p.RunningCap = cc, full, Bytes(math.Ceil(perFull)), running
	p.Notes = append(p.Notes, cc.notes(m)...)
	if full > 0 && int64(m.SlidingWindow)+page >= cc.SWATokens {
		// validate_swa_pool_size (pool_configurator.py:198-216).
		p.Err = fmt.Sprintf("ValueError: SWA pool (%d tokens) cannot hold even one request: the prefill admission floor is sliding_window_size (%d) + page_size (%d). Increase --swa-full-tokens-ratio or the total KV budget.", cc.SWATokens, m.SlidingWindow, page)
	}
}

// notes say how SGLang prices the pool.
func (cc *SGLangCompressed) notes(m Model) []string {
	return []string{
		fmt.Sprintf("DeepSeek-V4's pool (DeepSeekV4TokenToKVPool): %.2f B per token of context — swa_full_tokens_ratio %.1f × %.2f B of a sliding-window slot (584 B rows in 256-token pages padded to 576 B, in all %d layers, and the CSA compressors' fp32 rings), the CSA layers' compressed rows and indexer keys a 4 tokens, the HCA layers' rows a 128; the ratio is the value DeepSeek-V4's model override sets when the launch gives none (a launch that leaves it unset in a way the override does not see would size the sliding-window pool from the request cap instead, not modelled)",
			cc.BytesPerFullToken, cc.SWARatio, cc.BytesPerSWAToken, m.Layers),
		fmt.Sprintf("the HCA layers' compressor states take %v off the budget first: 128 fp32 rows of 2 × head_dim per request slot, for max_running_requests %d and a padding slot; the pools then hold %d sliding-window tokens, %d CSA and %d HCA compressed rows and %d CSA state rows; the pool is replicated on every TP rank",
			cc.HCAState, cc.MaxRunningRequests, cc.SWATokens, cc.C4Tokens, cc.C128Tokens, cc.C4State),
	}
}
