package vram

// FSDP2 under pipeline parallelism (torch.distributed.pipelining): a
// stage's backward runs every micro-batch with gradient sync off and no
// reshard after backward (pipelining/stage.py backward_maybe_with_nosync:
// set_requires_gradient_sync(False), set_reshard_after_backward(False)),
// and only after the last micro-batch does it run every group's
// post_backward (run_post_backward). Until then each group's post_backward
// only accumulates: the unsharded gradient is converted to the reduce dtype
// and kept as unsharded_accumulated_grad (_fully_shard/_fsdp_param.py
// to_accumulated_grad_if_needed, accumulate_unsharded_grad_if_needed;
// _fsdp_param_group.py post_backward with reduce_grads False) — torch
// 2.6.0. So the stage holds every block's unsharded gradient, in fp32 under
// torchtitan's reduce_dtype (parallelize_llama.py MixedPrecisionPolicy),
// from its first backward to the end of the schedule, and its unsharded
// parameters too.

// ppAccumulates reports whether the run is FSDP2 inside pipeline stages.
func (r *resolved) ppAccumulates() bool { return r.pp > 1 && r.fsdp2() }

// fsdp2Accumulate is a group's post_backward inside the schedule: its
// unsharded gradients become the accumulated ones (gradsFull, in the reduce
// dtype), both live while the copy runs; later micro-batches add into them.
func (c *stepCompiler) fsdp2Accumulate(layer int, name string, ks ...int) {
	p := c.pass
	if !p.gradsHeld {
		c.mark(layer, name+" (accumulate)")
		for _, k := range ks {
			if c.acc[k+2] == noSlot {
				c.acc[k+2] = c.alloc(catGradients, c.unit(k).gradsFull)
			}
		}
	}
	for _, k := range ks {
		c.freeAll(&p.liveGrads[k+2])
	}
}

// fsdp2PipelineReduce is the end of the schedule: the blocks' unsharded
// parameters, kept until then, are resharded, and every group
// reduce-scatters its accumulated gradients into its shard (the
// reduce-scatter input, the largest group's, is the moment's transient).
func (c *stepCompiler) fsdp2PipelineReduce() {
	p := c.pass
	largest := max(c.embed.gradsFull, c.head.gradsFull)
	for l := c.st.first; l < c.st.last; l++ {
		largest = max(largest, c.blocks[l].gradsFull)
		c.free(p.unsharded[l])
		p.unsharded[l] = noSlot
	}
	c.mark(-1, "pipeline reduce-scatter")
	c.free(c.alloc(catTemporaries, largest))
	for _, k := range c.units() {
		if c.acc[k+2] == noSlot {
			continue
		}
		c.free(c.acc[k+2])
		c.acc[k+2] = noSlot
		if len(*c.gradsOf(k)) == 0 {
			u := c.unit(k)
			*c.gradsOf(k) = append(*c.gradsOf(k), c.allocOn(catGradients, u.grads, u.gradSizes, reduceScatterStream))
		}
	}
}
