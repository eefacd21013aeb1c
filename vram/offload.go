package vram

// Offload to host memory as each framework runs it: what leaves the GPU,
// what host memory (most of it pinned) takes it, and what the GPU keeps or
// adds in its place. The unit inventory (params.go) asks offloadOf which
// parts of a unit leave, and books them in unitMem.host.

// offloaded says which of a unit's parts live in host memory.
type offloaded struct {
	optimizer bool // optimizer states and fp32 master weights; the step runs on the CPU
	grads     bool // sharded gradients
	params    bool // sharded parameters, copied to the GPU for each use
}

// offloadOf is the plan's offload as its framework runs it:
//   - parallel.cpu_offload "optimizer" moves the states and the step to the
//     CPU; under DeepSpeed it takes the gradients too: ZeRO-1/2 copy each
//     gradient into the CPU fp32 partition and drop it (stage_1_and_2.py
//     async_inplace_copy_grad_to_fp32_buffer_from_gpu, "param.grad = None
//     #offload only"), ZeRO-3 copies the reduced partition into its CPU
//     buffer (stage3.py partition_grads) — DeepSpeed 0.16.9;
//   - "optimizer+grads" moves the gradients as well;
//   - "optimizer+params" everything: FSDP's offload_params / CPUOffloadPolicy
//     ("this offloads gradients to CPU as well, meaning that the optimizer
//     step runs on CPU", torch/distributed/fsdp/api.py CPUOffload) and
//     ZeRO-3's offload_param.
func (r *resolved) offloadOf() offloaded {
	c := r.Parallel.CPUOffload
	return offloaded{
		optimizer: c != "none" && c != "",
		grads:     c == "optimizer+grads" || c == "optimizer+params" && !r.fsdp1Offload() || c == "optimizer" && r.ds.on,
		params:    c == "optimizer+params",
	}
}

// hostGrads is the host memory the offloaded gradients of n trainable
// elements (g on the GPU had they stayed) take on each rank. DeepSpeed
// keeps an fp32 gradient partition beside the fp32 master
// (single_partition_of_fp32_groups[i].grad, stage_1_and_2.py; the
// sub-groups' fp32 grad buffers, stage3.py), and a model-dtype one:
// ZeRO-3's grad_partitions_flat_buffer, ZeRO-1/2's accumulated_grads_in_cpu
// when gradients accumulate over micro-batches. FSDP copies the sharded
// gradient as it is (FSDP2 foreach_reduce .to("cpu"); FSDP1's _cpu_grad is
// booked with the parameters, see hostFlatGrad).
func (r *resolved) hostGrads(g Bytes, n, shard int64) Bytes {
	if !r.ds.on {
		if r.fsdp1Offload() {
			return 0
		}
		return g
	}
	h := FP32.Size(n) / Bytes(shard)
	if r.Parallel.ZeRO == 3 || r.GradAccum > 1 {
		h = addBytes(h, r.WeightsDType.Size(n)/Bytes(shard))
	}
	return h
}

// fsdp1Offload reports whether FSDP1 runs with offload_params. Its
// gradients go to the host at the end of backward, not as each unit's is
// reduced: _post_backward_hook keeps the reduced shard on the GPU as
// _saved_grad_shard (only copying it into the pinned _cpu_grad) until the
// final callback's prepare_gradient_for_optim deletes it
// (torch/distributed/fsdp/_runtime_utils.py, _flat_param.py, torch 2.6).
func (r *resolved) fsdp1Offload() bool {
	p := r.Parallel
	return p.ZeRO == 3 && p.FSDP != "none" && p.FSDPVersion == 1 && p.CPUOffload == "optimizer+params"
}

// hostFlatGrad is FSDP1's pinned CPU gradient of an offloaded flat
// parameter: zeros_like its local shard, for every flat parameter, frozen
// ones included (torch/distributed/fsdp/_flat_param.py
// init_flat_param_attributes: "Pre-allocate the sharded gradient on CPU").
func (r *resolved) hostFlatGrad(shard Bytes) Bytes {
	if r.fsdp1Offload() {
		return shard
	}
	return 0
}

// offloadStepCopy is the GPU memory DeepSpeed's ZeRO-1/2 step takes with
// the optimizer offloaded: after the CPU step each parameter group's fp32
// partition is copied back to the GPU whole before it is cast into the
// 16-bit partition (stage_1_and_2.py step: bit16_partitions[partition_id]
// .data.copy_(fp32_partition.to(get_accelerator().current_device_name())
// .data)). The Trainer's larger group (weight decay: all weights but biases
// and norms) is counted as every trainable element. ZeRO-3 copies from the
// CPU buffer directly (stage3.py _reassign_or_swap_out_partitioned_parameters),
// converting on the host.
func (r *resolved) offloadStepCopy(trainable int64) Bytes {
	if !r.ds.on || r.Parallel.ZeRO == 3 || !r.offloadOf().optimizer {
		return 0
	}
	return FP32.Size(trainable)
}

// hostMemory is the host memory one rank of stage st takes for what its
// units offload.
func (r *resolved) hostMemory(st stage, units unitMem, acts []BlockActivations) Breakdown {
	var h Breakdown
	if units.host != nil {
		h = *units.host
	}
	if r.ds.optNVMe || r.ds.paramNVMe {
		h = r.nvmeHost(h, units.trainable/r.stepShard())
	}
	h.Activations = r.hostActivations(acts, st)
	return h
}

// unshardCopy is what an unshard of an offloaded shard (stored bytes on
// the host, gathered when all-gathered) allocates on the device before the
// all-gather: the shard copied as stored, and its cast to the compute dtype
// when that differs. FSDP1: flat_param_to(device) or _mp_shard.copy_(
// _local_shard.to(device)) in pre_unshard (_flat_param.py); FSDP2:
// sharded_param_data.to(device) then _to_dtype_if_needed (_fsdp_param.py
// all_gather_inputs); ZeRO-3: ds_tensor.to(cuda) (partition_parameters.py).
func (r *resolved) unshardCopy(stored, gathered Bytes, cast bool) Bytes {
	if !cast {
		return stored
	}
	shard := Bytes(1)
	if r.Parallel.ZeRO == 3 {
		shard = Bytes(max(1, r.shard))
	}
	return addBytes(stored, gathered/shard)
}
