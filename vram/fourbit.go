package vram

import (
	"fmt"
	"strconv"
	"strings"
)

// Bitsandbytes is the bitsandbytes release a 4-bit base runs with when a
// plan names none (Training.Bitsandbytes).
const Bitsandbytes = "0.48.2"

// fourBit is how a 4-bit (nf4/fp4) frozen base runs its matmuls: the
// library's autograd function, what it rebuilds on each call and what it
// keeps for backward.
type fourBit struct {
	// torchao: torchtune's NF4Tensor (torchao
	// quantization/quantize_/workflows/nf4/nf4_tensor.py LinearNF4), not
	// bitsandbytes' MatMul4Bit.
	torchao bool
	// stateDType is the dtype the weight was quantized from, which
	// dequantization returns (bitsandbytes' QuantState.dtype).
	stateDType DType
	// savesInput: the matmul keeps its input until backward.
	savesInput bool
}

// resolveFourBit reads how the plan's 4-bit base runs.
//
//   - torchtune quantizes with torchao: LinearNF4.forward saves only the NF4
//     weight and multiplies by weight.to(input.dtype), one compute-dtype copy
//     per call, rebuilt in backward (nf4_tensor.py LinearNF4).
//   - everyone else runs bitsandbytes' MatMul4Bit: F.dequantize_4bit(B,
//     quant_state).to(A.dtype) in forward and again in backward
//     (autograd/_functions.py MatMul4Bit), a QuantState.dtype copy plus a
//     compute-dtype one when they differ. litgpt builds its layers under
//     Lightning's BitsandbytesPrecision, which quantizes from
//     weight.to(dtype=torch.half) (lightning 2.1.0
//     src/lightning/fabric/plugins/precision/bitsandbytes.py:224), so its
//     state is fp16; transformers quantizes the weight as loaded, in the
//     compute dtype.
//   - before bitsandbytes 0.43.2 MatMul4Bit kept its input on ctx.tensors
//     = (A, B) until backward; "fix QLoRA mem bug: delete useless buffered
//     activation" (#1270, 9e753741) made it (None, B).
func (r *resolved) resolveFourBit() error {
	q := r.QuantizedBase.DType
	if q != NF4 && q != FP4 {
		if r.Bitsandbytes != "" {
			return fmt.Errorf("bitsandbytes applies to a 4-bit base (quantized_base nf4 or fp4), not %s", orDefault(q.String(), "an unquantized one"))
		}
		return nil
	}
	if r.Framework == FrameworkTorchtune {
		if r.Bitsandbytes != "" {
			return fmt.Errorf("bitsandbytes: torchtune runs its 4-bit base with torchao's NF4Tensor, not bitsandbytes; drop the field")
		}
		r.q4 = fourBit{torchao: true, stateDType: r.ComputeDType}
		return nil
	}
	v, err := parseRelease("bitsandbytes", r.Bitsandbytes, Bitsandbytes)
	if err != nil {
		return err
	}
	r.q4 = fourBit{stateDType: r.ComputeDType, savesInput: v.older(0, 43, 2)}
	if r.Framework == FrameworkLitGPT {
		r.q4.stateDType = FP16
	}
	return nil
}

// dequantized is what one call of a 4-bit linear with in × out weights
// rebuilds: the state-dtype weight and, when the compute dtype differs, its
// copy in that dtype (both live while .to() runs).
func (q fourBit) dequantized(e DType, weights int64) Bytes {
	b := e.Size(weights)
	if q.stateDType != e && q.stateDType != DTypeUnset {
		b = addBytes(b, q.stateDType.Size(weights))
	}
	return b
}

// release is a library's major.minor.patch.
type release = Version

// parseRelease reads a release such as "0.43.2" of lib; empty is pinned.
func parseRelease(lib, s, pinned string) (release, error) {
	if s == "" {
		s = pinned
	}
	var v release
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, fmt.Errorf("%s %q: want a release such as %q", lib, s, pinned)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 999 {
			return v, fmt.Errorf("%s %q: want a release such as %q", lib, s, pinned)
		}
		v[i] = n
	}
	return v, nil
}

// older reports whether v comes before major.minor.patch.
func (v Version) older(major, minor, patch int) bool { return v.Less(Version{major, minor, patch}) }

// dequantizedFor is what one call of a bitsandbytes 4-bit linear with in ×
// out weights rebuilds when its matmul's input A is of dtype a
// (MatMul4Bit.forward, bitsandbytes 0.48.2 autograd/_functions.py:373:
// F.linear(A, F.dequantize_4bit(B, state).to(A.dtype).t())): the
// state-dtype weight, its copy in A's dtype when they differ, and under
// autocast F.linear's copy in the compute dtype e when A's is not it.
func (q fourBit) dequantizedFor(a, e DType, autocast bool, weights int64) Bytes {
	if q.stateDType == DTypeUnset {
		return q.dequantized(e, weights)
	}
	b := q.stateDType.Size(weights)
	if a != q.stateDType {
		b = addBytes(b, a.Size(weights))
	}
	if autocast && a != e {
		b = addBytes(b, e.Size(weights))
	}
	return b
}
