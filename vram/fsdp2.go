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
	return r.Framework == "torchtitan" && r.pp > 1
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
	if !r.fsdp2() && !fsdp1 || r.Framework == "torchtitan" {
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
	if !r.fsdp2() || r.Framework != "torchtitan" || !st.head {
		return 0
	}
	return head.gathered
}

// fsdp2Backward is what a block's backward holds beyond the live memory
// under FSDP2: its unsharded parameters, all-gathered again by its
// pre-backward when resharded after forward, and the previous block's,
// prefetched by the same pre-backward (FSDPParamGroup.pre_backward →
// _backward_prefetch; the all-gather output waits for that block's
// copy-out). Kept unsharded since the forward, the blocks need neither.
func (s *simulation) fsdp2Backward(st stage, l int, keep bool) Bytes {
	if keep {
		return 0
	}
	return addBytes(s.blocks[l].gathered, s.fsdp2Prefetched(st, l, keep))
}

// fsdp2Prefetched is the all-gather output of the block after l in
// backward order, issued by l's pre-backward and alive until that block's
// pre-backward copies it out.
func (s *simulation) fsdp2Prefetched(st stage, l int, keep bool) Bytes {
	if keep || l <= st.first {
		return 0
	}
	return s.blocks[l-1].gathered
}

// fsdp2Reduce is a group's post-backward (FSDPParamGroup.post_backward →
// foreach_reduce): the group is resharded, the reduce-scatter input kept
// from the previous group is freed (reduce_scatter_max_input_buffers,
// default 1: at most one retained), the group's input is allocated in the
// reduce dtype (u.gradsFull) and its gradients copied in while both live,
// then the unsharded gradients (inFlight, in live.Gradients) are freed
// and the sharded ones (u.grads) appear. The new input stays retained in
// *rsHeld; pending is the next group's prefetched all-gather output. The
// moment is an event named name.
func (s *simulation) fsdp2Reduce(iter, micro, layer int, name string, live Breakdown, inFlight Bytes, u unitMem, gradsHeld bool, rsHeld *Bytes, pending Bytes) Breakdown {
	if s.r.ppAccumulates() {
		return s.fsdp2Accumulate(iter, micro, layer, name, live, inFlight, u, gradsHeld)
	}
	live.Temporaries -= *rsHeld
	*rsHeld = u.gradsFull
	live.Temporaries = addBytes(live.Temporaries, *rsHeld)
	s.emit(iter, micro, "backward", layer, name, live, pending)
	live.Gradients -= inFlight
	if !gradsHeld {
		live.Gradients = addBytes(live.Gradients, u.grads)
	}
	return live
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

// onStream allocates n bytes on stream st.
func (tr *replayer) onStream(st int, n Bytes) int {
	tr.a.SetStream(st)
	defer tr.a.SetStream(computeStream)
	return tr.a.Malloc(n)
}

// fsdp2Unshard is block l's pre-forward in the allocator replay: its
// all-gather output is allocated, the previous block's freed (kept until
// now for the copy-out overlap, FSDPParamGroup.wait_for_unshard), and the
// unsharded parameters allocated by the copy-out. *ag holds the output.
func (tr *replayer) fsdp2Unshard(l int, ag *int) int {
	g := tr.blocks[l].gathered
	out := tr.onStream(allGatherStream, g)
	tr.a.Free(tr.onStream(allGatherStream, tr.blocks[l].h2d)) // an offloaded shard's device copy, copied in
	tr.a.Free(*ag)
	*ag = out
	return tr.a.Malloc(g)
}

// fsdp2Prefetch is block l's pre-backward in the replay: the all-gather
// output prefetched for it (*ag) is copied out and freed, and the next
// block's all-gather issued.
func (tr *replayer) fsdp2Prefetch(l int, ag *int) int {
	h := tr.a.Malloc(tr.blocks[l].gathered)
	tr.a.Free(*ag)
	*ag = -1
	if l > tr.st.first {
		*ag = tr.onStream(allGatherStream, tr.blocks[l-1].gathered)
		tr.a.Free(tr.onStream(allGatherStream, tr.blocks[l-1].h2d))
	}
	return h
}

// noUnit is no unit index (units are blocks ≥ 0, -1 embedding, -2 head).
const noUnit = -3

// fsdp2Grads marks unit k's unsharded gradients to be created by the
// next backward, op by op (once per backward).
func (tr *replayer) fsdp2Grads(k int) {
	if _, ok := tr.live[k]; !ok {
		tr.grow = k
		tr.live[k] = nil
	}
}

// fsdp2Growth returns what allocates, after each op's backward in p, the
// op's weights' share of the marked unit's unsharded gradients (autograd
// writes a weight's gradient when its op's backward runs).
func (tr *replayer) fsdp2Growth(p *actBuilder) func(actOp) {
	k := tr.grow
	tr.grow = noUnit
	if k == noUnit {
		return func(actOp) {}
	}
	var total int64
	for _, op := range p.ops {
		if !op.noGrad {
			total += op.weights
		}
	}
	size := tr.unit(k).gradsLive
	if total == 0 {
		tr.live[k] = append(tr.live[k], tr.a.Malloc(size))
		return func(actOp) {}
	}
	return func(op actOp) {
		if op.weights > 0 && !op.noGrad {
			tr.live[k] = append(tr.live[k], tr.a.Malloc(Bytes(float64(size)*float64(op.weights)/float64(total))))
		}
	}
}

// fsdp2Reduce is the post-backward of the group of units ks in the replay
// (simulation.fsdp2Reduce): the retained reduce-scatter input *rs is
// freed, the group's allocated and retained, its unsharded gradients
// freed and its sharded ones allocated (accumulated into when they exist).
func (tr *replayer) fsdp2Reduce(rs *int, ks ...int) {
	if tr.r.ppAccumulates() {
		tr.fsdp2Accumulate(ks...)
		return
	}
	tr.a.Free(*rs)
	var in Bytes
	for _, k := range ks {
		in = addBytes(in, tr.unit(k).gradsFull)
	}
	*rs = tr.a.Malloc(in)
	for _, k := range ks {
		tr.freeAll(tr.live[k])
		delete(tr.live, k)
		if _, ok := tr.grads[k]; !ok {
			tr.a.SetStream(reduceScatterStream)
			tr.grads[k] = tr.allocAll(tr.unit(k).gradSizes)
			tr.a.SetStream(computeStream)
		}
	}
}
