package vram

import (
	"math"
	"strings"
	"testing"
)

// TestSGLangCompressed: SGLang 0.5.23's DSV4 pool. A sliding-window slot
// is 585 B a layer (256 rows × 584 = 149,504 → 149,760 a page) in 43
// layers, plus the CSA rings, 8/256 × (2·2·512·4 + 2·2·128·4 = 10,240) in
// 21 layers: 25,155 + 6,720 = 31,875 B. A full token: 0.1 × 31,875 +
// 21 × (37,440/64/4 = 146.25 + 132/4 = 33) + 20 × 1,728/2/128 (6.75) =
// 3,187.5 + 3,764.25 + 135 = 7,086.75 B. The HCA states: (257 × 128 +
// 128 + 1 = 33,025 rows → 33,152) × 2 × 512 × 4 B × 20 layers =
// 2,715,811,840 B. With 100 GiB free, 50 GiB of weights and
// mem_fraction_static 0.75, the budget is 25 GiB = 26,843,545,600 B:
// (26,843,545,600 − 2,715,811,840) / 7,086.75 = 3,404,626.x, floored to
// 256: 3,404,544 tokens; sliding-window int(340,454.4) → 340,224, CSA rows
// 851,136, HCA rows 26,598, CSA state rows 340,224/256 × 8 = 10,632.
func TestSGLangCompressed(t *testing.T) {
	m := MustPreset("deepseek-v4-flash")
	for _, tp := range []int{1, 8} {
		p, err := SGLang{TP: tp, MemFractionStatic: 0.75}.KVPool(m, 100*GiB, 50*GiB)
		if err != nil {
			t.Fatal(err)
		}
		cc := p.Compressed
		if cc == nil || cc.BytesPerSWAToken != 31875 || cc.BytesPerFullToken != 7086.75 || cc.HCAState != 2715811840 || cc.MaxRunningRequests != 256 {
			t.Fatalf("TP %d: %+v", tp, cc)
		}
		if p.Rest != 26843545600 || p.Tokens != 3404544 || cc.SWATokens != 340224 || cc.C4Tokens != 851136 || cc.C128Tokens != 26598 || cc.C4State != 10632 || p.Err != "" {
			t.Errorf("TP %d: budget %v, %d tokens, pools %+v, %s", tp, p.Rest, p.Tokens, cc, p.Err)
		}
		if got := p.MaxConcurrencyFor(4096); got != 256 || math.Abs(p.MaxConcurrencyFor(1<<20)-3404544.0/(1<<20)) > 1e-12 {
			t.Errorf("TP %d: concurrency %v at 4,096 tokens (want max_running_requests 256), %v at 1M", tp, got, p.MaxConcurrencyFor(1<<20))
		}
	}
	if _, err := (SGLang{Version: "0.5.3", MemFractionStatic: 0.75}).KVPool(m, 100*GiB, 50*GiB); err == nil || !strings.Contains(err.Error(), "SGLang 0.5.3 does not run deepseek_v4") {
		t.Errorf("0.5.3: %v", err)
	}
	if _, err := (SGLang{MemFractionStatic: 0.75, KVCacheDType: FP8E5M2}).KVPool(m, 100*GiB, 50*GiB); err == nil || !strings.Contains(err.Error(), "is not supported for DeepseekV4ForCausalLM") {
		t.Errorf("fp8_e5m2: %v", err)
	}
}
