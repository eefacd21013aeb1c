package vram

// Optimizer state per trainable tensor, as each implementation allocates it.

// bnb8bitMinSize: bitsandbytes 8-bit optimizers keep tensors with fewer
// elements than this in 32-bit (bitsandbytes optim/optimizer.py
// Optimizer8bit, min_8bit_size=4096).
const bnb8bitMinSize = 4096

// bnbPagedMinSize: paged optimizers page only tensors with at least this many
// elements (bitsandbytes optim/optimizer.py get_state_buffer: numel ≥ 1e5).
const bnbPagedMinSize = 100000

// bnbBlock is the block size of bitsandbytes blockwise 8-bit optimizer
// states: one fp32 absmax per 256 values (functional.py
// optimizer_update_8bit_blockwise; Dettmers et al. 2022 "8-bit Optimizers via
// Block-wise Quantization", §2).
const bnbBlock = 256

// stateBytes is the optimizer state of one trainable tensor of n elements
// and shape dims, and whether that state lives in paged (unified) memory
// that the PyTorch allocator does not count.
func (r *resolved) stateBytes(n int64, shape []int64, paramDType DType) (b Bytes, paged bool) {
	st := r.OptimizerStateDType
	if st == DTypeUnset {
		// torch.optim creates states with zeros_like(param): the dtype of what
		// it updates (the fp32 master copy when there is one).
		st = paramDType
		if r.MasterWeights != DTypeUnset {
			st = r.MasterWeights
		}
	}
	moments := func(k int64) Bytes { return mulBytes(k, st.Size(n)) }
	switch r.Optimizer {
	case "none", "sgd":
		return 0, false
	case "sgd_momentum", "lion":
		return moments(1), false // momentum_buffer / exp_avg
	case "adam", "adamw":
		return moments(2), false // exp_avg, exp_avg_sq
	case "paged_adamw":
		return moments(2), n >= bnbPagedMinSize
	case "adamw_8bit", "adam_8bit", "paged_adamw_8bit":
		paged = r.Optimizer == "paged_adamw_8bit" && n >= bnbPagedMinSize
		if n < bnb8bitMinSize {
			return mulBytes(2, FP32.Size(n)), paged
		}
		blocks := (n + bnbBlock - 1) / bnbBlock
		return mulBytes(2, addBytes(Bytes(n), mulBytes(blocks, 4))), paged
	case "adamw_4bit":
		// torchao AdamW4bit: 4-bit states with one fp32 scale per 128 values
		// (torchao/optim/subclass_4bit.py, block_size=128).
		blocks := (n + 127) / 128
		return mulBytes(2, addBytes(INT4.Size(n), mulBytes(blocks, 4))), false
	case "adafactor":
		// transformers Adafactor with beta1=None (default): factored second
		// moment for matrices (a row and a column vector), full for vectors;
		// fp32 (optimization.py Adafactor._get_options / step).
		if len(shape) >= 2 {
			rows, cols := shape[0], int64(1)
			for _, d := range shape[1:] {
				cols *= d
			}
			return FP32.Size(rows + cols), false
		}
		return FP32.Size(n), false
	case "custom":
		return Bytes(float64(n)*r.CustomStateBytes + 0.5), false
	}
	return 0, false
}

// stepTemporary is the extra memory the optimizer step allocates, given the
// total trainable elements, the largest trainable tensor and their state.
//   - foreach (torch.optim default on CUDA, _multi_tensor_adam): the step
//     computes exp_avg_sq.sqrt() for the whole parameter group at once, one
//     state-sized temporary (torch/optim/adam.py _multi_tensor_adam).
//   - fused: the step is one kernel with no temporaries.
//   - for_loop: one parameter at a time: a temporary the size of the largest.
func (r *resolved) stepTemporary(total, largest int64, d DType) Bytes {
	switch r.Optimizer {
	case "none", "sgd":
		return 0
	case "adafactor":
		// update = grad² + eps, one tensor at a time, in fp32.
		return mulBytes(2, FP32.Size(largest))
	case "adamw_8bit", "adam_8bit", "paged_adamw_8bit", "paged_adamw", "adamw_4bit":
		return 0 // fused bitsandbytes/torchao kernels
	}
	switch r.OptimizerImpl {
	case "fused":
		return 0
	case "for_loop":
		return d.Size(largest)
	}
	if r.OptimizerInBackward {
		return d.Size(largest)
	}
	return d.Size(total)
}
