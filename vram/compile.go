package vram

// What a block compiled by torch.compile saves for its backward.
//
// AOTAutograd traces the block's forward and backward as one joint graph and
// splits it with min_cut_rematerialization_partition (torch/_functorch/
// partitioners.py, Inductor's default): the forward saves a minimal set of
// tensors and the backward recomputes the cheap, fusible work between them
// (pointwise ops, casts, views) inside its own fused kernels. Which tensors
// cannot be recomputed follows the partitioner's ban rules:
//   - outputs of compute-intensive ops (mm, addmm, bmm, attention kernels:
//     not in its recomputable set);
//   - tensors a compute-intensive op reads in the backward (a matmul's input
//     for its weight gradient): is_materialized_backwards bans them;
//   - reductions whose output is over 4× smaller than their inputs
//     (ban_if_reduction: a norm's mean or rstd), and random ops (dropout's
//     mask);
//   - the block's inputs (graph inputs are saved as they are).
//
// A tensor that eager autograd saves for a fusible op is recomputed from
// the nearest banned tensors behind it (its frontier), which are saved
// instead: SiLU's input becomes the gate projection's output, a norm's fp32
// input the residual stream value and its rstd. Measured with
// saved_tensors_hooks on the CPU (examples/measure saved, compile on) for
// Llama: the engine's set is PyTorch's byte for byte (TestCompiledSavedSet).

// compiledSaved is the bytes the compiled block saves: the eager saves
// mapped through the partitioner's rules above, plus what the model's
// output holds (as BlockActivations.Saved counts it).
func (b *actBuilder) compiledSaved() Bytes {
	var n Bytes
	keep := b.compiledKeep()
	for _, t := range b.ts {
		if !t.batch && (keep[t.id] || t.held) {
			n = addBytes(n, t.bytes)
		}
	}
	return n
}

// compiledKeep says by tensor id which tensors the partitioner must save
// (held tensors aside).
func (b *actBuilder) compiledKeep() []bool {
	// Per tensor of the block (by id): the op that made it, and whether it
	// is kept or was seen by the walk.
	producer := take(&b.scratch.ints, len(b.ts))
	for i := range producer {
		producer[i] = -1
	}
	for i := range b.ops {
		for _, t := range b.ops[i].outs {
			if b.owns(t) {
				producer[t.id] = int32(i)
			}
		}
	}
	keep := take(&b.scratch.bools, 2*len(b.ts))
	seen := keep[len(b.ts):]
	w := compiledWalk{b: b, producer: producer, keep: keep[:len(b.ts)], seen: seen}
	for _, sr := range b.saves {
		if b.ops[sr.op].gemm && b.owns(sr.t) {
			w.keep[sr.t.id] = true // read by the matmul's backward
		}
	}
	for _, sr := range b.saves {
		w.frontier(sr.t)
	}
	return w.keep
}

// owns reports whether t is one of the block's tensors (an op's input may
// come from elsewhere).
func (b *actBuilder) owns(t *actT) bool { return t != nil && t.id < len(b.ts) && b.ts[t.id] == t }

// compiledWalk is compiledKeep's walk from the saved tensors back to what
// the partitioner must keep.
type compiledWalk struct {
	b          *actBuilder
	producer   []int32
	keep, seen []bool
}

// frontier walks back from t through the ops that made it, keeping the
// tensors that cannot be recomputed (made outside the block or banned).
func (w *compiledWalk) frontier(t *actT) {
	if !w.b.owns(t) || w.seen[t.id] || w.keep[t.id] {
		return
	}
	w.seen[t.id] = true
	i := w.producer[t.id]
	if i < 0 || w.b.banned(int(i), t) {
		w.keep[t.id] = true
		return
	}
	for _, in := range w.b.ops[i].ins {
		w.frontier(in)
	}
}

// banned reports whether the partitioner must save t, an output of op i,
// rather than recompute it in the backward.
func (b *actBuilder) banned(i int, t *actT) bool {
	op := &b.ops[i]
	if op.gemm || t.weightCopy || len(op.outs) > 0 && op.outs[0] != t {
		return true // a matmul's or attention kernel's; statistics, masks and weight copies on the side
	}
	var in Bytes
	for _, x := range op.ins {
		if x != nil {
			in = addBytes(in, x.bytes)
		}
	}
	return len(op.ins) == 0 || 4*t.bytes < in // a source, or a reduction
}
