package vram

import (
	"math"
	"testing"
)

func TestDTypeSizes(t *testing.T) {
	for _, tc := range []struct {
		d    DType
		n    int64
		want Bytes
	}{
		{FP32, 7e9, 28e9}, {TF32, 1, 4}, {BF16, 7e9, 14e9}, {FP16, 3, 6}, {FP8E4M3, 10, 10},
		{INT8, 10, 10}, {INT4, 3, 2}, {NF4, 64, 32}, {Bool, 5, 5}, {INT64, 2, 16},
	} {
		if got := tc.d.Size(tc.n); got != tc.want {
			t.Errorf("%s.Size(%d) = %d, want %d", tc.d, tc.n, got, tc.want)
		}
	}
	for _, s := range []string{"bf16", "BF16", "bfloat16", "torch.float16", "F8_E4M3", "nf4"} {
		if _, err := ParseDType(s); err != nil {
			t.Errorf("ParseDType(%q): %v", s, err)
		}
	}
	if _, err := ParseDType("fp7"); err == nil {
		t.Error("ParseDType(fp7) should fail")
	}
}

// TestQuantOverhead checks block-scale overheads against the papers.
func TestQuantOverhead(t *testing.T) {
	const rows, cols = 4096, 4096
	n := float64(rows * cols)
	bitsPer := func(q Quant) float64 { return 8 * float64(q.Size(rows, cols)) / n }
	for _, tc := range []struct {
		q    Quant
		want float64 // bits per parameter
		tol  float64
	}{
		// QLoRA §3: blocksize 64 with fp32 absmax costs 32/64 = 0.5 bits/param;
		// double quantization brings it to 8/64 + 32/(64·256) = 0.127.
		{Quant{DType: NF4}, 4.5, 1e-9},
		{Quant{DType: NF4, DoubleQuant: true}, 4 + 8.0/64 + 32.0/(64*256), 1e-4},
		// GPTQ group 128: fp16 scale + 4-bit zero per group and output column,
		// plus int32 g_idx per input feature.
		{Quant{DType: INT4, GroupSize: 128}, 4 + 20.0/128 + 32.0/rows, 1e-9},
		// LLM.int8: one byte per weight plus an fp32 scale per row.
		{Quant{DType: INT8}, 8 + 32.0/cols, 1e-9},
		{Quant{DType: BF16}, 16, 0},
	} {
		if got := bitsPer(tc.q); math.Abs(got-tc.want) > tc.tol {
			t.Errorf("%+v: %.5f bits/param, want %.5f", tc.q, got, tc.want)
		}
	}
}
