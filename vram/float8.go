package vram

import "fmt"

// float8 training as torchao runs it (torchao/float8, the "float8" model
// converter of torchtitan): the block linears become Float8Linear, whose
// matmul_with_hp_or_float8_args casts the input and the weight to float8
// e4m3 with a scale each (one per tensor for "tensorwise", one per row for
// "rowwise"), multiplies with torch._scaled_mm, and saves for backward the
// high-precision input and weight (ctx.save_for_backward(input_hp,
// weight_hp_t)), recasting them there beside the output gradient. So the
// saved activations are the bf16 run's; the float8 copies are transient.
// torchtitan leaves the output layer in bf16 (the converter's filter_fqns
// default ["output"]). With FSDP2 and Float8AllGather (torchao's
// enable_fsdp_float8_all_gather, tensorwise only) the sharded weights are
// cast before the all-gather, so the all-gather buffers and unsharded
// weights are float8, and the forward casts no weight.

// resolveFloat8 checks the float8 fields.
func (r *resolved) resolveFloat8() error {
	if r.Float8 == "" || r.Float8 == "none" {
		r.Float8 = ""
		if r.Float8AllGather {
			return fmt.Errorf("float8_all_gather applies to float8 training; set float8 \"tensorwise\"")
		}
		return nil
	}
	if err := oneOf("float8", r.Float8, "none", "tensorwise", "rowwise", "rowwise_with_gw_hp"); err != nil {
		return err
	}
	if r.ComputeDType != BF16 {
		return fmt.Errorf("float8 %q casts bf16 matmuls (torchao); the plan computes in %s", r.Float8, r.ComputeDType)
	}
	if r.Float8AllGather && (r.Float8 != "tensorwise" || !r.fsdp2()) {
		return fmt.Errorf("float8_all_gather is FSDP2's float8 all-gather of tensorwise-scaled weights: it needs float8 \"tensorwise\" and fsdp full_shard or hybrid (version 2)")
	}
	return nil
}

// float8Linear reports whether the linear of role runs in float8:
// convert_to_float8_training swaps nn.Linear modules, which transformers'
// Conv1D (GPT-2's matmuls) is not.
func (r *resolved) float8Linear(role string) bool {
	return r.Float8 != "" && role != "lm_head" && role != "router" && !r.rec.conv1D
}

// float8Scratch adds a float8 linear's transient copies to the op just
// recorded: the input and (unless all-gathered in float8) the weight cast
// for the forward's scaled matmul, and in its backward the output
// gradient, the input and the weight cast again. "rowwise_with_gw_hp"
// (torchao 0.18.0 float8/config.py:353-376) computes the weight's
// gradient in high precision from the saved input and the output gradient
// as they are (ScalingType.DISABLED: float8_linear.py:161-165, 179-182), so
// its backward casts only the output gradient and the weight, for the
// input's gradient.
func (b *actBuilder) float8Scratch(in, out int64) {
	w := FP8E4M3.Size(mulI64(in, out))
	fwd := b.size(in, FP8E4M3)
	if !b.r.Float8AllGather {
		fwd = addBytes(fwd, w)
	}
	b.workspace(fwd)
	bwd := addBytes(b.size(out, FP8E4M3), w)
	if b.r.Float8 != "rowwise_with_gw_hp" {
		bwd = addBytes(bwd, b.size(in, FP8E4M3))
	}
	b.gradWorkspace(bwd)
}

// float8Training reports whether torchao's float8 training runs on g:
// torchtitan 0.3.0's Float8LinearConverter refuses any GPU but "NVIDIA
// SM89 or later, or AMD gfx942 (MI300) or later" (has_cuda_capability(8,
// 9) or has_rocm_capability(9, 4): components/quantization/float8.py:84-
// 93), the parts with float8 tensor cores (Ada, Hopper, Blackwell; the
// MI300 line's CDNA3 and CDNA4). A bare capacity has no architecture, so
// no float8.
func (g GPU) float8Training() bool {
	return g.ComputeCapability >= 89 || g.mi300Class()
}
