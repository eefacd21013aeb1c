package vram

import (
	"fmt"
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
)

var dtypeNames = map[DType]string{
	FP32: "fp32", TF32: "tf32", FP16: "fp16", BF16: "bf16", FP8E4M3: "fp8_e4m3", FP8E5M2: "fp8_e5m2",
	INT8: "int8", INT4: "int4", NF4: "nf4", FP4: "fp4", INT32: "int32", INT64: "int64", Bool: "bool",
	FP64: "fp64", INT16: "int16", FP8E8M0: "fp8_e8m0", FP6: "fp6",
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
	return DTypeUnset, fmt.Errorf("unknown dtype %q; known: fp32, tf32, fp16, bf16, fp8_e4m3, fp8_e5m2, int8, int4, nf4, fp4", s)
}

// MarshalText writes the short name.
func (d DType) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads any name ParseDType accepts.
func (d *DType) UnmarshalText(b []byte) error {
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
	case INT4, NF4, FP4:
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

// Quant describes how weights are stored when they are quantized: the element
// type and its block-scale layout. The zero Quant (or one whose DType is a
// plain float) means unquantized.
type Quant struct {
	DType DType `json:"dtype"`
	// GroupSize is the number of elements that share one scale. Zero means the
	// format's default: 64 for bitsandbytes nf4/fp4 (bitsandbytes
	// functional.quantize_4bit blocksize=64), 128 for GPTQ/AWQ int4.
	GroupSize int `json:"group_size,omitempty"`
	// DoubleQuant quantizes the nf4/fp4 block scales themselves to 8 bits in
	// blocks of 256 (QLoRA, Dettmers et al. 2023, §3 "Double Quantization").
	DoubleQuant bool `json:"double_quant,omitempty"`
	// ActOrder: GPTQ with desc_act; the checkpoint then carries g_idx (int32
	// per input feature) — present in AutoGPTQ checkpoints either way.
	ActOrder bool `json:"act_order,omitempty"`
}

// Quantized reports whether q is a quantized (non-float) format.
func (q Quant) Quantized() bool {
	switch q.DType {
	case INT8, INT4, NF4, FP4:
		return true
	}
	return false
}

func (q Quant) group() int {
	if q.GroupSize > 0 {
		return q.GroupSize
	}
	switch q.DType {
	case NF4, FP4:
		return 64
	case INT4:
		return 128
	}
	return 0
}

// Size is the device storage of a weight matrix of rows×cols elements in
// format q, scales included.
//
//   - nf4/fp4 (bitsandbytes Params4bit): 4 bits per element plus one fp32
//     absmax per block of GroupSize elements; with double quantization the
//     absmax values become 8-bit with one fp32 scale per 256 of them
//     (QLoRA §3: 32/64 = 0.5 bits/param → 8/64 + 32/(64·256) ≈ 0.127).
//   - int4 (GPTQ/AWQ): packed 4-bit qweight, one fp16 scale and one 4-bit
//     zero point per group of GroupSize input rows per output column
//     (AutoGPTQ QuantLinear: qweight, qzeros, scales), plus g_idx (int32 per
//     input feature).
//   - int8 (bitsandbytes LLM.int8, Int8Params): 1 byte per element plus one
//     fp32 row scale (SCB) per output row (Dettmers et al. 2022, §3.1).
//   - plain float types: rows·cols elements.
func (q Quant) Size(rows, cols int64) Bytes {
	n := mulI64(rows, cols)
	switch q.DType {
	case NF4, FP4:
		g := int64(q.group())
		blocks := (n + g - 1) / g
		scales := mulBytes(blocks, 4)
		if q.DoubleQuant {
			scales = addBytes(Bytes(blocks), mulBytes((blocks+255)/256, 4))
		}
		return addBytes(NF4.Size(n), scales)
	case INT4:
		g := int64(q.group())
		groups := (cols + g - 1) / g // cols = input features
		perGroup := addBytes(mulBytes(mulI64(rows, groups), 2), INT4.Size(mulI64(rows, groups)))
		return addBytes(addBytes(INT4.Size(n), perGroup), INT32.Size(cols))
	case INT8:
		return addBytes(Bytes(n), mulBytes(rows, 4))
	case DTypeUnset:
		return BF16.Size(n)
	}
	return q.DType.Size(n)
}
