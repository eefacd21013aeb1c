package vram

import "testing"

// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
// Transformer Models", §4 and Table 2: activation bytes per transformer layer
// for a GPT block in 16-bit with dropout (1-byte masks), LayerNorm, GELU,
// ffn = 4h and a materialised attention matrix:
//
//	no parallelism          sbh·34 + 5·a·s²·b
//	tensor parallel t       sbh·(10 + 24/t) + 5·a·s²·b/t
//	tensor + sequence par.  sbh·34/t + 5·a·s²·b/t
//	+ selective recompute   sbh·34/t
//	full recompute          sbh·2
//
// The engine's inventory also keeps LayerNorm's fp32 mean and rstd
// (8 bytes per token per norm, two norms), which the paper leaves out.
func TestKorthikantiTable2(t *testing.T) {
	const s, b, h, a, L = 1024, 2, 1024, 16, 4
	gpt := Model{Family: "gpt2", Layers: L, Hidden: h, Heads: a, FFN: 4 * h, Vocab: 1000, MaxPosition: s}
	sbh := int64(s * b * h)
	att := int64(5 * a * s * s * b)
	for _, tc := range []struct {
		name     string
		tp       int
		sp       bool
		want     int64 // Saved (or SavedSelective / Input)
		selected string
	}{
		{"no parallelism", 1, false, 34*sbh + att, "saved"},
		{"selective", 1, false, 34 * sbh, "selective"},
		{"full recompute", 1, false, 2 * sbh, "input"},
		{"tp=4", 4, false, 10*sbh + 24*sbh/4 + att/4, "saved"},
		{"tp=4+sp", 4, true, 34*sbh/4 + att/4, "saved"},
		{"tp=4+sp selective", 4, true, 34 * sbh / 4, "selective"},
	} {
		tr := Training{Model: gpt, SeqLen: s, MicroBatch: b, Precision: "fp16", Attention: "eager", Framework: "megatron",
			Parallel: Parallel{TP: tc.tp, SP: tc.sp}}
		r, err := tr.resolve()
		if err != nil {
			t.Fatal(err)
		}
		blk := buildBlock(&r, 0)
		tokens := int64(s * b)
		if tc.sp {
			tokens /= int64(tc.tp)
		}
		lnStats := 2 * 8 * tokens
		var got int64
		switch tc.selected {
		case "saved":
			got = int64(blk.Saved) - lnStats
		case "selective":
			got = int64(blk.SavedSelective) - lnStats
		case "input":
			got = int64(blk.Input)
		}
		if got != tc.want {
			t.Errorf("%s: %d bytes per layer, want %d (diff %+d)", tc.name, got, tc.want, got-tc.want)
		}
	}
}
