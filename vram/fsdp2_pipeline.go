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
// unsharded gradients (inFlight, in live.Gradients) become the accumulated
// ones (u.gradsFull, in the reduce dtype), both live while the copy runs;
// later micro-batches add into them (gradsHeld).
func (s *simulation) fsdp2Accumulate(iter, micro, layer int, name string, live Breakdown, inFlight Bytes, u unitMem, gradsHeld bool) Breakdown {
	if !gradsHeld {
		live.Gradients = addBytes(live.Gradients, u.gradsFull)
		s.emit(iter, micro, "backward", layer, name+" (accumulate)", live, 0)
	}
	live.Gradients -= inFlight
	return live
}

// fsdp2PipelineReduce is the end of the schedule: every group of stage st
// reduce-scatters its accumulated gradients into its shard (the
// reduce-scatter input, the largest group's, is the moment's transient) and
// reshards the blocks' unsharded parameters, kept until then.
func (s *simulation) fsdp2PipelineReduce(iter, micro int, st stage, live Breakdown, su unitMem, keep bool) Breakdown {
	largest := max(s.embed.gradsFull, s.head.gradsFull)
	for l := st.first; l < st.last; l++ {
		largest = max(largest, s.blocks[l].gradsFull)
		if keep {
			live.Temporaries -= s.blocks[l].gathered
		}
	}
	s.emit(iter, micro, "backward", -1, "pipeline reduce-scatter", live, largest)
	live.Gradients = addBytes(live.Gradients-su.gradsFull, su.grads)
	return live
}

// fsdp2Accumulate in the replay: the accumulated gradients of units ks are
// allocated (once) and their unsharded ones freed.
func (tr *replayer) fsdp2Accumulate(ks ...int) {
	for _, k := range ks {
		if _, ok := tr.acc[k]; !ok {
			tr.acc[k] = tr.a.Malloc(tr.unit(k).gradsFull)
		}
		tr.freeAll(tr.live[k])
		delete(tr.live, k)
	}
}

// fsdp2PipelineReduce in the replay: each unit's accumulated gradients are
// copied into a reduce-scatter input and freed, its sharded gradients
// allocated, the input freed; then the kept unsharded parameters go.
func (tr *replayer) fsdp2PipelineReduce(kept []int) {
	for _, k := range tr.units() {
		h, ok := tr.acc[k]
		if !ok {
			continue
		}
		in := tr.a.Malloc(tr.unit(k).gradsFull)
		tr.a.Free(h)
		delete(tr.acc, k)
		if _, ok := tr.grads[k]; !ok {
			tr.a.SetStream(reduceScatterStream)
			tr.grads[k] = tr.allocAll(tr.unit(k).gradSizes)
			tr.a.SetStream(computeStream)
		}
		tr.a.Free(in)
	}
	tr.freeAll(kept)
}
