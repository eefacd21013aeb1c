package vram

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Quant describes how weights are stored when they are quantized: the element
// type and its block-scale layout. The zero Quant (or one whose DType is a
// plain float) means unquantized. In a plan it is an object, or a string
// naming the element type alone ("nf4", "mxfp4").
type Quant struct {
	DType DType `json:"dtype"`
	// GroupSize is the number of elements that share one scale. Zero means the
	// format's default: 64 for bitsandbytes nf4/fp4 (bitsandbytes
	// functional.quantize_4bit blocksize=64), 128 for GPTQ/AWQ int4, 32 for
	// mxfp4 (the OCP MX format's block).
	GroupSize int `json:"group_size,omitempty"`
	// DoubleQuant quantizes the nf4/fp4 block scales themselves to 8 bits in
	// blocks of 256 (QLoRA, Dettmers et al. 2023, §3 "Double Quantization").
	DoubleQuant bool `json:"double_quant,omitempty"`
	// ActOrder: GPTQ with desc_act; the checkpoint then carries g_idx (int32
	// per input feature) — present in AutoGPTQ checkpoints either way.
	ActOrder bool `json:"act_order,omitempty"`
	// Block is the side of the square blocks of an fp8 weight that share one
	// fp32 scale (weight_block_size [128, 128]: DeepSeek-V3, Qwen3 FP8,
	// stored as weight_scale_inv [⌈out/128⌉, ⌈in/128⌉]).
	Block int `json:"block,omitempty"`
	// PerChannel: an fp8 weight with one fp32 scale per output row (fbgemm
	// and compressed-tensors "channel").
	PerChannel bool `json:"per_channel,omitempty"`
	// Layout is how an int4 weight is packed: "gptq" (default: qweight,
	// qzeros, scales and g_idx), "awq" (no g_idx), or "symmetric"
	// (compressed-tensors pack-quantized with symmetric scales: weight_packed
	// and weight_scale only).
	Layout string `json:"layout,omitempty"`
}

// Quantized reports whether q is a quantized format: integer or 4-bit
// elements, or fp8 with block or channel scales (a checkpoint's storage,
// not a dtype to compute in).
func (q Quant) Quantized() bool {
	switch q.DType {
	case INT8, INT4, NF4, FP4, MXFP4, NVFP4:
		return true
	case FP8E4M3, FP8E5M2:
		return q.Block > 0 || q.PerChannel
	}
	return false
}

// SameFormat reports whether q names format f: the same dtype, and each
// setting q gives (group, block, channel scales, layout) f's.
func (q Quant) SameFormat(f Quant) bool {
	return q.DType == f.DType && (q.GroupSize == 0 || q.group() == f.group()) && (q.Block == 0 || q.Block == f.Block) &&
		(!q.PerChannel || f.PerChannel) && (q.Layout == "" || q.Layout == f.Layout) && q.DoubleQuant == f.DoubleQuant && q.ActOrder == f.ActOrder
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
	case MXFP4:
		return 32
	case NVFP4:
		return 16
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
//     input feature); AWQ has no g_idx (AutoAWQ WQLinear); a symmetric
//     compressed-tensors weight has scales alone, in bf16
//     (compressed_tensors pack_quantized.py).
//   - int8 (bitsandbytes LLM.int8, Int8Params): 1 byte per element plus one
//     fp32 row scale (SCB) per output row (Dettmers et al. 2022, §3.1).
//   - mxfp4 (OCP MX v1.0; transformers integrations/mxfp4.py): two e2m1
//     values per byte (*_blocks) and one e8m0 scale byte per 32 input
//     elements (*_scales).
//   - nvfp4 (NVIDIA ModelOpt's NVFP4 export, compressed-tensors'
//     nvfp4-pack-quantized): two e2m1 values per byte (weight /
//     weight_packed), one fp8 e4m3 scale per 16 input elements
//     (weight_scale) and two fp32 per-tensor scales (weight_scale_2 and
//     input_scale; weight_global_scale and input_global_scale): vLLM's
//     ModelOptNvFp4LinearMethod.create_weights,
//     model_executor/layers/quantization/modelopt.py (0.33.0).
//   - fp8 with Block: one byte per element plus an fp32 scale per
//     Block×Block tile (weight_scale_inv, DeepSeek-V3 README_WEIGHTS.md);
//     PerChannel: an fp32 scale per output row (fbgemm_fp8 weight_scale);
//     tensor-wise fp8 and plain floats: rows·cols elements (a per-tensor
//     scale of a few bytes is not counted).
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
		groups := mulI64(rows, (cols+g-1)/g) // per output row, along the input features
		switch q.Layout {
		case "symmetric":
			return addBytes(INT4.Size(n), BF16.Size(groups))
		case "awq":
			return addBytes(INT4.Size(n), addBytes(FP16.Size(groups), INT4.Size(groups)))
		}
		perGroup := addBytes(FP16.Size(groups), INT4.Size(groups))
		return addBytes(addBytes(INT4.Size(n), perGroup), INT32.Size(cols))
	case INT8:
		return addBytes(Bytes(n), mulBytes(rows, 4))
	case MXFP4:
		g := int64(q.group())
		return addBytes(MXFP4.Size(n), Bytes(mulI64(rows, (cols+g-1)/g)))
	case NVFP4:
		g := int64(q.group())
		return addBytes(addBytes(NVFP4.Size(n), Bytes(mulI64(rows, (cols+g-1)/g))), FP32.Size(2))
	case FP8E4M3, FP8E5M2:
		switch {
		case q.Block > 0:
			b := int64(q.Block)
			return addBytes(Bytes(n), FP32.Size(mulI64((rows+b-1)/b, (cols+b-1)/b)))
		case q.PerChannel:
			return addBytes(Bytes(n), FP32.Size(rows))
		}
	case DTypeUnset:
		return BF16.Size(n)
	}
	return q.DType.Size(n)
}

// String names the format as a reader would: "nf4 (double quant)", "fp8
// e4m3, 128×128 block scales", "mxfp4".
func (q Quant) String() string {
	s := q.DType.String()
	switch {
	case q.Block > 0:
		s += fmt.Sprintf(", %d×%d block scales", q.Block, q.Block)
	case q.PerChannel:
		s += ", per-channel scales"
	case q.DoubleQuant:
		s += " (double quant)"
	case q.DType == INT4 && q.Layout != "":
		s += " (" + q.Layout + ")"
	}
	return s
}

// ParseQuant reads a weight format by name: a dtype ParseDType knows
// ("nf4", "int4", "mxfp4", "fp8", "bf16") with its default layout.
func ParseQuant(s string) (Quant, error) {
	d, err := ParseDType(s)
	if err != nil {
		return Quant{}, err
	}
	return Quant{DType: d}, nil
}

// UnmarshalJSON reads a Quant from an object (its fields, spelled exactly)
// or from a string naming the element type ("quantized_base": "nf4").
func (q *Quant) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := ParseQuant(s)
		if err != nil {
			return err
		}
		*q = v
		return nil
	}
	type plain Quant // without this method
	var v plain
	if err := strictDecode(b, &v, ""); err != nil {
		return err
	}
	switch q2 := Quant(v); {
	case q2.Layout != "" && q2.Layout != "gptq" && q2.Layout != "awq" && q2.Layout != "symmetric":
		return fmt.Errorf("layout %q: want gptq, awq or symmetric", q2.Layout)
	case q2.Block < 0 || q2.Block > 1<<16 || q2.GroupSize < 0 || q2.GroupSize > 1<<20:
		return fmt.Errorf("block and group_size must be in [1, 65536] and [1, 2^20]")
	case (q2.Block > 0 || q2.PerChannel) && q2.DType != FP8E4M3 && q2.DType != FP8E5M2:
		return fmt.Errorf("block and per_channel scales apply to fp8 weights, not %s", q2.DType)
	case q2.Layout != "" && q2.DType != INT4:
		return fmt.Errorf("layout applies to int4 weights, not %s", strings.ToLower(q2.DType.String()))
	}
	*q = Quant(v)
	return nil
}
