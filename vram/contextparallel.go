package vram

// Context parallelism's ring attention as PyTorch runs it
// (torch/distributed/tensor/experimental/_attention.py, torch 2.6.0, with
// its defaults: _ContextParallelOptions convert_to_f32 True, rotate_method
// ALL_GATHER). Each attention call works on the rank's share of the
// sequence against every rank's keys and values, with buffers that live
// only while the call runs, in forward and again in backward.

// ringAttention adds those buffers to the fused attention op just built,
// whose inputs are q, k and v (the rank's share).
//
// Forward (_templated_ring_attention): cat([key.flatten(),
// value.flatten()]) once, all-gathered from every rank by
// _AllGatherRotater.exchange_buffers (all_gather_tensor, kept for the
// loop); _SDPAMerger keeps the output and logsumexp in fp32 and merges
// each step's block output (out − sigmoid(block_lse − lse) · (out −
// block_out): an fp32 temporary beside it).
//
// Backward (_templated_ring_attention_backward): the keys and values
// gathered again (kv_rotater), fp32 accumulators zeros_like(query, key,
// value, dtype=accum_dtype), and the key/value gradients rotated by an
// all-to-all (dkv_rotater: the sent cat of both and the received one).
func (b *actBuilder) ringAttention(q, k, v *actT) {
	cp := Bytes(b.r.cp)
	kv := addBytes(k.bytes, v.bytes)
	kvElems := elems(k) + elems(v)
	fwd := addBytes(addBytes(cp*kv, kv), addBytes(2*FP32.Size(elems(q)), q.bytes))
	bwd := addBytes(addBytes(cp*kv, kv), addBytes(FP32.Size(elems(q)), 3*FP32.Size(kvElems)))
	b.workspace(fwd)
	b.gradWorkspace(bwd)
}

// elems is t's element count.
func elems(t *actT) int64 {
	if one := t.dtype.Size(1); one > 0 {
		return int64(t.bytes / one)
	}
	return 0
}
