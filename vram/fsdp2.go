package vram

// FSDP2 (torch.distributed.fsdp.fully_shard, per-parameter sharding) as
// PyTorch 2.15 runs it: which parameters stay unsharded and when, and the
// communication buffers of each group's all-gather and reduce-scatter
// (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py,
// _fsdp_collectives.py, _fsdp_state.py). simulation.iteration and the
// allocator replay follow these rules moment by moment.

// fsdp2 reports whether the run is FSDP2's fully_shard: ZeRO-3 by FSDP
// (full_shard or hybrid), per-parameter (version 2), parameters on the GPU.
func (r *resolved) fsdp2() bool {
	p := r.Parallel
	return p.ZeRO == 3 && (p.FSDP == "full_shard" || p.FSDP == "hybrid") && p.FSDPVersion != 1
}

// keepsUnsharded reports whether FSDP2 keeps each block's unsharded
// parameters from its forward to its backward (reshard_after_forward=False).
// Unset, it is PyTorch's default (reshard), except under torchtitan, whose
// reshard_after_forward_policy "default" keeps them when pipeline
// parallelism is on ("reshard_after_forward = not pp_enabled", torchtitan/
// models/llama3/infra/parallelize.py apply_fsdp).
func (r *resolved) keepsUnsharded() bool {
	if !r.fsdp2() {
		return false
	}
	if k := r.Parallel.ReshardAfterForward; k != nil {
		return !*k
	}
	return r.Framework == FrameworkTorchtitan && r.pp > 1
}

// rootHeld is what FSDP2 keeps unsharded from the root's pre-forward to
// its post-backward: the root group's own parameters. Wrapped as the FSDP2
// docs and torchtune do (each block, then the root), that is the embedding,
// the final norm and the output layer (_fsdp_state.py FSDPState._lazy_init:
// "For the root, do not reshard after forward"). torchtitan wraps
// tok_embeddings as a group of its own and [norm, output] as another with
// reshard_after_forward=False (apply_fsdp: "do not reshard_after_forward the
// last layers"), so its root holds nothing and headHeld keeps the head's.
// FSDP1 does the same to the root's flat parameter (torch/distributed/fsdp/
// _runtime_utils.py _post_forward_reshard: free_unsharded_flat_param = not
// state._is_root and …).
func (r *resolved) rootHeld(embed, head unitMem, st stage) Bytes {
	p := r.Parallel
	fsdp1 := p.ZeRO == 3 && (p.FSDP == "full_shard" || p.FSDP == "hybrid") && p.FSDPVersion == 1
	if !r.fsdp2() && !fsdp1 || r.Framework == FrameworkTorchtitan {
		return 0
	}
	var b Bytes
	if st.embed {
		b = addBytes(b, embed.gathered)
	}
	if st.head {
		b = addBytes(b, head.gathered)
	}
	return b
}

// headHeld is the head's unsharded parameters torchtitan keeps from the
// head's forward to its backward (see rootHeld).
func (r *resolved) headHeld(head unitMem, st stage) Bytes {
	if !r.fsdp2() || r.Framework != FrameworkTorchtitan || !st.head {
		return 0
	}
	return head.gathered
}

// Streams the replay allocates FSDP2's buffers on (Allocator.SetStream):
// the all-gather output on the all-gather copy-in stream (foreach_all_gather
// allocates it under FSDPCommContext.all_gather_copy_in_stream, in forward
// and for the backward prefetch), the reduce-scatter output, which becomes
// the sharded gradients, on the reduce-scatter stream (foreach_reduce);
// everything else, the unsharded parameters and the reduce-scatter input
// included, on the default stream.
const (
	computeStream = iota
	allGatherStream
	reduceScatterStream
)

// fsdp2Reduce is the post-backward of the group of units ks
// (FSDPParamGroup.post_backward → foreach_reduce), a moment named name: the
// reduce-scatter input kept from the previous group is freed
// (reduce_scatter_max_input_buffers, default 1: at most one retained), the
// group's allocated in the reduce dtype (gradsFull) and retained, its
// unsharded gradients freed and its sharded ones allocated on the
// reduce-scatter stream (accumulated into when they exist).
func (c *stepCompiler) fsdp2Reduce(layer int, name string, ks ...int) {
	p := c.pass
	if c.r.ppAccumulates() {
		c.fsdp2Accumulate(layer, name, ks...)
		return
	}
	c.free(p.rs)
	c.mark(layer, name)
	var in Bytes
	for _, k := range ks {
		in = addBytes(in, c.unit(k).gradsFull)
	}
	p.rs = c.alloc(catTemporaries, in)
	for _, k := range ks {
		c.freeAll(&p.liveGrads[k+2])
	}
	for _, k := range ks {
		if !p.gradsHeld {
			u := c.unit(k)
			*c.gradsOf(k) = append(*c.gradsOf(k), c.allocOn(catGradients, u.grads, u.gradSizes, reduceScatterStream))
		}
	}
}

// splitTied parts the head's unsharded gradients from the tied word
// embedding's, which the output projection created: the embedding's group
// reduces those.
func (c *stepCompiler) splitTied() {
	p := c.pass
	if p.tiedGrads <= 0 {
		return
	}
	c.freeAll(&p.liveGrads[0])
	p.liveGrads[0] = append(p.liveGrads[0], c.alloc(catGradients, p.headGrads))
	p.liveGrads[1] = append(p.liveGrads[1], c.alloc(catGradients, p.tiedGrads))
}

// fsdp2EndBackward is the root's post-backward: its (or torchtitan's
// embedding group's) gradients reduce last; the retained reduce-scatter
// input is freed when backward ends (_fsdp_state.py
// _end_backward_iteration), and inside pipeline stages the schedule's end
// reduces every group's accumulated gradients (fsdp2_pipeline.go).
func (c *stepCompiler) fsdp2EndBackward() {
	p := c.pass
	var ks []int
	if c.st.embed {
		ks = append(ks, -1)
	}
	if c.st.head && c.r.headHeld(c.head, c.st) == 0 {
		ks = append(ks, -2)
	}
	c.fsdp2Reduce(-1, "root reduce-scatter", ks...)
	c.free(p.rs)
	p.rs = noSlot
	if c.r.ppAccumulates() && p.last {
		c.fsdp2PipelineReduce()
	}
}
