package vram

import (
	"strings"
	"testing"
)

// SGLang 0.5.3's hybrid pools: the state of max_mamba_cache_size requests
// comes off the KV budget first, a token's cell counts the attention
// layers only, the slots cap the running requests.
func TestSGLangHybridState(t *testing.T) {
	free, weights := Bytes(78*GiB), Bytes(40*GiB)
	for _, tc := range []struct {
		preset       string
		s            SGLang
		perReq, cell Bytes
		slots        int
	}{
		// Qwen3-Next at TP 4: 36 DeltaNet layers of conv (8192/4, 3) bf16 and
		// temporal (32/4, 128, 128) fp32; 12 attention layers of one KV head
		// of 256 (2 over 4 ranks, at least one).
		{"qwen3-next-80b-a3b", SGLang{Version: "0.5.3", TP: 4}, 36 * (2048*3*2 + 8*128*128*4), 12 * 256 * 2 * 2, 512},
		// bf16 temporal state, 256 slots from --max-running-requests.
		{"qwen3-next-80b-a3b", SGLang{Version: "0.5.3", TP: 4, MambaSSMDType: BF16, MaxRunningRequests: 256}, 36 * (2048*3*2 + 8*128*128*2), 12 * 256 * 2 * 2, 256},
		// Falcon-H1: every layer attends and has a Mamba-2 mixer: conv
		// (1536 + 2·128, 3) bf16, temporal (128, 64, 24) fp32.
		{"falcon-h1-0.5b-instruct", SGLang{Version: "0.5.3", MaxMambaCacheSize: 100}, 36 * (1792*3*2 + 128*64*24*4), 36 * 2 * 64 * 2 * 2, 100},
	} {
		p, err := tc.s.KVPool(MustPreset(tc.preset), free, weights)
		if err != nil {
			t.Fatal(tc.preset, err)
		}
		reserved := tc.perReq * Bytes(tc.slots)
		rest := free - weights - Bytes(float64(free)*0.12) - reserved
		if p.StatePerRequest != tc.perReq || p.MambaSlots != tc.slots || p.StateReserved != reserved || p.State != tc.perReq*Bytes(tc.slots+1) {
			t.Errorf("%s: state %v per request, %d slots, reserved %v, allocated %v; want %v, %d, %v", tc.preset, p.StatePerRequest, p.MambaSlots, p.StateReserved, p.State, tc.perReq, tc.slots, reserved)
		}
		if p.CellSize != tc.cell || p.Rest != rest || p.Tokens != int64(rest)/int64(tc.cell) {
			t.Errorf("%s: cell %v, rest %v, tokens %d; want %v, %v, %d", tc.preset, p.CellSize, p.Rest, p.Tokens, tc.cell, rest, int64(rest)/int64(tc.cell))
		}
		if c := p.MaxConcurrencyFor(16); c != float64(tc.slots) {
			t.Errorf("%s: %v requests of 16 tokens; the slots cap them at %d", tc.preset, c, tc.slots)
		}
		if !strings.Contains(strings.Join(p.Notes, "\n"), "radix cache off") {
			t.Errorf("%s: notes %q", tc.preset, p.Notes)
		}
	}
	// 0.5.3's MambaPool line for Qwen3-Next at TP 4 with 512 (+1) slots:
	// "conv_state size: 0.21GB, ssm_state size: 9.02GB".
	p, _ := (SGLang{Version: "0.5.3", TP: 4}).KVPool(MustPreset("qwen3-next-80b-a3b"), free, weights)
	if conv := 36 * 513 * Bytes(2048*3*2); formatGiB(conv) != "0.21" || formatGiB(p.State-conv) != "9.02" {
		t.Errorf("conv %s GiB, ssm %s GiB", formatGiB(conv), formatGiB(p.State-conv))
	}
	for name, tc := range map[string]struct {
		s    SGLang
		m    string
		want string
	}{
		"dtype":      {SGLang{Version: "0.5.3", MambaSSMDType: FP16}, "qwen3-next-80b-a3b", "mamba_ssm_dtype must be fp32"},
		"tp":         {SGLang{Version: "0.5.3", TP: 3}, "qwen3-next-80b-a3b", "tp_size 3 must divide"},
		"nemotron_h": {SGLang{Version: "0.5.3.post1"}, "nemotron-h-config-defaults", "SGLang 0.5.3 pools only for Qwen3-Next and Falcon-H1"},
	} {
		if _, err := tc.s.KVPool(MustPreset(tc.m), free, weights); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
