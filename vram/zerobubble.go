package vram

// Zero-bubble pipeline schedules (Qi et al. 2024) as torch.distributed.
// pipelining runs them: ZB-V below, the interleaved ZB-1P
// (interleavedZBOrder) and DualPipeV (dualPipeVOrder).
//
// The ZB-V zero-bubble pipeline schedule (Qi et al. 2024 §6), as
// torch.distributed.pipelining runs it (schedules.py ScheduleZBVZeroBubble):
// two stages per rank in a V (rank r holds stages r and 2·pp−1−r, so rank 0
// holds the embedding and the output layer), and each backward split into
// the input gradient (I) and the weight gradient (W). I frees what only the
// input gradient needed; what the weight gradients need, the linears'
// inputs and the gradients of their outputs, waits for W, which the
// schedule defers to fill the bubbles.

// zbvAction is one action of a rank's split-backward order: its chunk (0
// or 1 in a V), and F, I, W, or B (a full backward, DualPipeV's).
type zbvAction struct {
	chunk int
	kind  byte
}

// zbvOrder is rank's action order for pp ranks and m microbatches, as
// ScheduleZBVZeroBubble._calculate_single_rank_operations builds it
// (microbatches past m dropped).
func zbvOrder(rank, pp, m int) []zbvAction {
	n := max(2*pp-1, m)
	var ops []zbvAction
	var idx []int
	add := func(chunk int, kind byte, i int) {
		ops = append(ops, zbvAction{chunk, kind})
		idx = append(idx, i)
	}
	f0, f1, b0, b1 := 0, 0, 0, 0
	for range 2*(pp-rank) - 1 {
		add(0, 'F', f0)
		f0++
	}
	for range rank {
		add(1, 'F', f1)
		f1++
		add(0, 'F', f0)
		f0++
	}
	for range pp - rank {
		add(1, 'F', f1)
		f1++
		add(1, 'I', b1)
		add(1, 'W', b1)
		b1++
	}
	for f1 < f0 || f0 < n {
		if f0 < n {
			add(0, 'F', f0)
			f0++
		}
		add(0, 'I', b0)
		add(0, 'W', b0)
		b0++
		add(1, 'F', f1)
		f1++
		add(1, 'I', b1)
		add(1, 'W', b1)
		b1++
	}
	w0, w1 := b0, b1
	for range rank {
		add(0, 'I', b0)
		b0++
		add(1, 'I', b1)
		b1++
	}
	for range pp - rank {
		add(0, 'I', b0)
		b0++
		add(0, 'W', w0)
		w0++
	}
	for w1 < b1 {
		add(1, 'W', w1)
		w1++
	}
	for w0 < b0 {
		add(0, 'W', w0)
		w0++
	}
	out := ops[:0]
	for i, a := range ops {
		if idx[i] < m {
			out = append(out, a)
		}
	}
	return out
}

// zbvInflight is how many microbatches' activations of its whole share
// (both chunks) rank holds at most under ZB-V: each F adds one chunk's, each
// I frees all but the part kept for W (keep, a share of a chunk's saved
// activations, plus the gradients of the linears' outputs), each W the rest.
func zbvInflight(rank, pp, m int, keep float64) float64 {
	return splitInflight(zbvOrder(rank, pp, m), 2, keep)
}

// weightGradKeep is the share of block a's saved activations (plus the
// gradients of its linears' outputs) that a split backward keeps from the
// input gradient to the weight gradient: the inputs the linears' weight
// gradients read and the gradients of their outputs.
func weightGradKeep(a BlockActivations) float64 {
	p := a.prog
	if p == nil || a.Saved == 0 {
		return 0
	}
	seen := map[*actT]bool{}
	var kept Bytes
	for _, sr := range p.saves {
		op := &p.ops[sr.op]
		if op.weights == 0 || !op.gemm || seen[sr.t] {
			continue
		}
		seen[sr.t] = true
		kept = addBytes(kept, sr.t.bytes)
	}
	for i := range p.ops {
		if op := &p.ops[i]; op.weights > 0 && op.gemm && len(op.outs) > 0 {
			kept = addBytes(kept, op.outs[0].bytes)
		}
	}
	return min(1, float64(kept)/float64(a.Saved))
}

// zbvKeep is weightGradKeep for a stage's first block, under its
// checkpointing (a recomputed block's backward rebuilds its saved set, so
// the share is of that set; the engine scales what the forward keeps).
func (r *resolved) zbvKeep(st stage) float64 {
	if st.last <= st.first {
		return 0
	}
	acts := blockActivations(r)
	return weightGradKeep(acts[st.first])
}

// interleavedZBOrder is rank's action order under the interleaved zero
// bubble schedule (ZB-1P, schedules.py ScheduleInterleavedZeroBubble:
// _get_1f1b_rank_ops with enable_zero_bubble, warm-up from _get_warmup_ops
// with multiply_factor 1): v looped stages per rank, each backward split
// into I and W, the W of the first rank backward steps deferred. The
// bubbles the runtime inserts do not reorder a rank's actions.
func interleavedZBOrder(rank, pp, v, m int) []zbvAction {
	rounds := max(1, m/pp)
	perRound := m / rounds
	warmup := min((v-1)*perRound+(pp-1-rank), m*v)
	micro := v * m
	fwdBwd := micro - warmup
	total := warmup + fwdBwd + (micro - fwdBwd)
	fwdChunk := func(step int) int { return (step / perRound) % v }
	bwdChunk := func(step int) int { return v - 1 - ((step-warmup)/perRound)%v }
	var ops []zbvAction
	var back []int
	w := 0
	weight := func(op int) {
		if op-warmup >= rank {
			ops = append(ops, zbvAction{bwdChunk(back[w]), 'W'})
			w++
		}
	}
	for op := range total {
		switch {
		case op < warmup:
			ops = append(ops, zbvAction{fwdChunk(op), 'F'})
		case op < warmup+fwdBwd:
			ops = append(ops, zbvAction{fwdChunk(op), 'F'}, zbvAction{bwdChunk(op), 'I'})
			back = append(back, op)
			weight(op)
		default:
			ops = append(ops, zbvAction{bwdChunk(op), 'I'})
			back = append(back, op)
			weight(op)
		}
	}
	for ; w < len(back); w++ {
		ops = append(ops, zbvAction{bwdChunk(back[w]), 'W'})
	}
	return ops
}

// dualPipeVOrder is rank's action order under DualPipeV (DeepSeek-V3's
// DualPipe cut in half, schedules.py ScheduleDualPipeV.
// _calculate_single_rank_operations): the V's two stages per rank, as ZB-V;
// full backwards (B) in the steady state, where each forward is paired with
// another chunk's backward (OVERLAP_F_B, whose sub-actions the runtime
// performs in order, forward first), and split ones (I, W from a queue) in
// the warm-up and in the second half of the cool-down. m ≥ 2·pp.
func dualPipeVOrder(rank, pp, m int) []zbvAction {
	var ops []zbvAction
	var queue []int // chunks whose I waits for its W (weight_queue)
	add := func(chunk int, kind byte) {
		ops = append(ops, zbvAction{chunk, kind})
		if kind == 'I' {
			queue = append(queue, chunk)
		}
	}
	weight := func() {
		if len(queue) > 0 {
			ops = append(ops, zbvAction{queue[0], 'W'})
			queue = queue[1:]
		}
	}
	back := func(zb bool) byte {
		if zb {
			return 'I'
		}
		return 'B'
	}
	for range 2 * (pp - rank - 1) { // step 1: F0
		add(0, 'F')
	}
	for range rank + 1 { // step 2: F0 F1
		add(0, 'F')
		add(1, 'F')
	}
	for range pp - rank - 1 { // step 3: I1 W1 F1
		add(1, 'I')
		weight()
		add(1, 'F')
	}
	for range m - 2*pp + rank + 1 { // step 4: F0+B1, F1+B0
		add(0, 'F')
		add(1, 'B')
		add(1, 'F')
		add(0, 'B')
	}
	for range pp - rank - 1 { // step 5: B1, F1+B0
		add(1, 'B')
		add(1, 'F')
		add(0, 'B')
	}
	zb := false // step 6: B1 B0, split from the middle on
	for i := range rank + 1 {
		if i == (rank+1)/2 && rank%2 == 1 {
			zb = true
		}
		add(1, back(zb))
		if i == (rank+1)/2 && rank%2 == 0 {
			zb = true
		}
		add(0, back(zb))
	}
	for range pp - rank - 1 { // step 7: W, B0
		weight()
		add(0, back(zb))
	}
	for range rank + 1 { // step 8: W
		weight()
	}
	return ops
}

// splitInflight is how many microbatches' activations of its whole share
// (v chunks) a rank holds at most along a split-backward order (see
// zbvInflight).
func splitInflight(ops []zbvAction, v int, keep float64) float64 {
	var live, most float64
	for _, a := range ops {
		switch a.kind {
		case 'F':
			live++
		case 'I':
			live -= 1 - keep
		case 'W':
			live -= keep
		case 'B':
			live--
		}
		most = max(most, live)
	}
	return most / float64(v)
}
