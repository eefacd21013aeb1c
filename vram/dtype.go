package vram

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// DType is an element storage format. The zero DType means "not set" and
// takes a documented default wherever it appears.
type DType uint8

const (
	DTypeUnset DType = iota
	FP32             // IEEE float32
	TF32             // TensorFloat-32: a compute mode; stored as float32
	FP16             // IEEE float16
	BF16             // bfloat16
	FP8E4M3          // float8 e4m3 (weights, activations)
	FP8E5M2          // float8 e5m2 (gradients)
	INT8             // 8-bit integer (LLM.int8 weights, 8-bit optimizer states)
	INT4             // 4-bit integer, two per byte (GPTQ/AWQ weights, 4-bit optimizer states)
	NF4              // bitsandbytes 4-bit NormalFloat
	FP4              // bitsandbytes 4-bit float
	INT32            // index tensors (GPTQ g_idx)
	INT64            // token ids
	Bool             // masks
	FP64             // float64 (stored only: checkpoints, buffers)
	INT16            // 16-bit integer (stored only)
	FP8E8M0          // float8 e8m0: power-of-two block scales (MXFP4, MXFP8)
	FP6              // 6-bit floats (e2m3, e3m2: MXFP6), stored only
	MXFP4            // OCP microscaling fp4: e2m1 values, one e8m0 scale per 32 (gpt-oss's experts)
	NVFP4            // NVIDIA's fp4: e2m1 values, one fp8 e4m3 scale per 16 and an fp32 scale per tensor
)

var dtypeNames = map[DType]string{
	FP32: "fp32", TF32: "tf32", FP16: "fp16", BF16: "bf16", FP8E4M3: "fp8_e4m3", FP8E5M2: "fp8_e5m2",
	INT8: "int8", INT4: "int4", NF4: "nf4", FP4: "fp4", INT32: "int32", INT64: "int64", Bool: "bool",
	FP64: "fp64", INT16: "int16", FP8E8M0: "fp8_e8m0", FP6: "fp6", MXFP4: "mxfp4", NVFP4: "nvfp4",
}

// dtypeAliases are other spellings accepted by ParseDType (PyTorch and
// safetensors names among them).
var dtypeAliases = map[string]DType{
	"float32": FP32, "f32": FP32, "float": FP32, "float16": FP16, "f16": FP16, "half": FP16,
	"bfloat16": BF16, "fp8": FP8E4M3, "float8_e4m3fn": FP8E4M3, "f8_e4m3": FP8E4M3, "e4m3": FP8E4M3,
	"float8_e5m2": FP8E5M2, "f8_e5m2": FP8E5M2, "e5m2": FP8E5M2, "i8": INT8, "u8": INT8, "uint8": INT8,
	"i32": INT32, "i64": INT64, "long": INT64, "gptq4": INT4, "awq4": INT4,
}

// String returns the short name: "bf16".
func (d DType) String() string {
	if s, ok := dtypeNames[d]; ok {
		return s
	}
	if d == DTypeUnset {
		return "unset"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// ParseDType accepts the short names (fp32, bf16, nf4, …) and PyTorch /
// safetensors spellings (float16, BF16, F8_E4M3, …), case-insensitively.
func ParseDType(s string) (DType, error) {
	k := strings.ToLower(strings.TrimSpace(s))
	k = strings.TrimPrefix(k, "torch.")
	for d, n := range dtypeNames {
		if n == k {
			return d, nil
		}
	}
	if d, ok := dtypeAliases[k]; ok {
		return d, nil
	}
	return DTypeUnset, fmt.Errorf("unknown dtype %q; known: fp32, tf32, fp16, bf16, fp8_e4m3, fp8_e5m2, int8, int4, nf4, fp4, mxfp4, nvfp4", s)
}

// MarshalText writes the short name.
func (d DType) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads any name ParseDType accepts, and "unset" (what
// MarshalText writes for the zero value: the default).
func (d *DType) UnmarshalText(b []byte) error {
	if string(b) == "unset" {
		*d = DTypeUnset
		return nil
	}
	v, err := ParseDType(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Bits is the storage width of one element, without block scales.
func (d DType) Bits() int {
	switch d {
	case FP32, TF32, INT32:
		return 32
	case FP16, BF16, INT16:
		return 16
	case FP8E4M3, FP8E5M2, FP8E8M0, INT8, Bool:
		return 8
	case FP6:
		return 6
	case INT4, NF4, FP4, MXFP4, NVFP4:
		return 4
	case INT64, FP64:
		return 64
	}
	return 0
}

// Size is the storage of n elements, rounded up to whole bytes (4-bit types
// pack two per byte). Block scales of quantized formats are not included:
// see Quant.Size.
func (d DType) Size(n int64) Bytes {
	return (mulBytes(n, Bytes(d.Bits())) + 7) / 8
}

// promote is the dtype of an elementwise result of a and b (PyTorch's type
// promotion between floats: the wider type; bf16 with fp16 gives fp32).
func promote(a, b DType) DType {
	switch {
	case a == b:
		return a
	case a == FP32 || b == FP32 || a == FP64 || b == FP64:
		if a == FP64 || b == FP64 {
			return FP64
		}
		return FP32
	case a.IsFloat() && b.IsFloat():
		if a.Bits() != b.Bits() {
			if a.Bits() > b.Bits() {
				return a
			}
			return b
		}
		return FP32 // bf16 with fp16
	case a.IsFloat():
		return a
	}
	return b
}

// IsFloat reports whether d holds floating-point values a model can compute in.
func (d DType) IsFloat() bool {
	switch d {
	case FP32, TF32, FP16, BF16, FP8E4M3, FP8E5M2:
		return true
	}
	return false
}

// validKV checks d as a serving engine's kv_cache_dtype (vLLM, SGLang,
// TGI take the same).
func (d DType) validKV() error {
	switch d {
	case FP32, FP16, BF16, FP8E4M3, FP8E5M2:
		return nil
	}
	return fmt.Errorf("kv_cache_dtype %v: want fp16, bf16, fp32 or fp8", d)
}

// DTypeNames are the short names DType writes, sorted: what a plan's
// dtype fields hold (ParseDType also reads PyTorch's and safetensors'
// spellings).
func DTypeNames() []string {
	return slices.Sorted(maps.Values(dtypeNames))
}
