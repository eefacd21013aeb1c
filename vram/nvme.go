package vram

import "fmt"

// ZeRO-Infinity: DeepSpeed's ZeRO-3 offloading to NVMe instead of host
// memory (deepspeed/runtime/swap_tensor, DeepSpeed 0.16.9). The GPU side
// is the CPU offload's; what changes is the host memory:
//
//   - optimizer on NVMe: the fp32 master, gradient and Adam states of one
//     sub-group at a time go through a pool of offload_optimizer.buffer_count
//     (4) pinned fp32 buffers, each as large as the largest sub-group
//     (swap_tensor/utils.py SwapBufferManager, sized in stage3.py
//     _configure_tensor_swapping), in place of the whole partition's; the
//     bf16 gradient buffer stays in host memory (stage3.py
//     grad_partitions_flat_buffer);
//   - parameters on NVMe: up to offload_param.max_in_cpu elements stay in
//     the pinned host buffer (stage3.py _create_fp16_partitions_with_defragmentation),
//     beside a swap pool of buffer_count × buffer_size (5 × 1e8) elements
//     (swap_tensor/partitioned_param_swapper.py), and one sub-group's
//     write-back buffer once the partition exceeds max_in_cpu.
//
// With the defaults (sub_group_size and max_in_cpu 1e9) a partition under
// 1e9 elements keeps as much in host memory as CPU offload does; a smaller
// sub_group_size is what saves it.

// nvmeParamPool is offload_param's swap pool: buffer_count × buffer_size.
const nvmeParamPool = 5 * 1e8

// resolveNVMe reads where DeepSpeed's offload lives.
func (r *resolved) resolveNVMe(c DeepSpeed) error {
	for _, d := range []struct{ field, v string }{{"offload_optimizer_device", c.OffloadOptimizerDevice}, {"offload_param_device", c.OffloadParamDevice}} {
		if err := oneOf("parallel.deepspeed."+d.field, orDefault(d.v, "cpu"), "cpu", "nvme"); err != nil {
			return err
		}
	}
	r.ds.optNVMe, r.ds.paramNVMe = c.OffloadOptimizerDevice == "nvme", c.OffloadParamDevice == "nvme"
	off := r.offloadOf()
	switch {
	case (r.ds.optNVMe || r.ds.paramNVMe) && r.Parallel.ZeRO != 3:
		return fmt.Errorf("parallel.deepspeed: NVMe offload (ZeRO-Infinity) runs at zero_stage 3, not %d", r.Parallel.ZeRO)
	case r.ds.optNVMe && !off.optimizer:
		return fmt.Errorf("parallel.deepspeed.offload_optimizer_device nvme needs parallel.cpu_offload \"optimizer\" or \"optimizer+params\"")
	case r.ds.paramNVMe && !off.params:
		return fmt.Errorf("parallel.deepspeed.offload_param_device nvme needs parallel.cpu_offload \"optimizer+params\"")
	}
	return nil
}

// nvmeHost is h, the host memory of CPU offload for a rank whose partition
// has n trainable elements, as ZeRO-Infinity keeps it instead.
func (r *resolved) nvmeHost(h Breakdown, n int64) Breakdown {
	largest := min(n, r.ds.subGroup)
	if r.ds.optNVMe {
		h.OptimizerStates = FP32.Size(4 * largest)     // the pool: 4 buffers of one sub-group
		h.Gradients = max(0, h.Gradients-FP32.Size(n)) // the fp32 gradients are in it
	}
	if r.ds.paramNVMe {
		if keep := r.WeightsDType.Size(r.ds.maxInCPU); h.Parameters > keep {
			h.Parameters = addBytes(keep, r.WeightsDType.Size(largest))
		}
		h.Parameters = addBytes(h.Parameters, r.WeightsDType.Size(nvmeParamPool))
	}
	return h
}
