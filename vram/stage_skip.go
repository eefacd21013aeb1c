package vram

// Pipeline stages that need no program of their own. The step's timeline
// keeps the most loaded stage; a stage whose blocks, per-block rules and
// ends are those of a stage already evaluated, with no more micro-batches
// in flight, cannot be more loaded:
//
//   - its step program is the same sequence of operations, block for
//     block: every rule the compiler asks of a block (its kind, its
//     checkpointing and keep mode, its recompute group, its activation
//     offloading) gives the same answer at the same offset in both stages;
//   - the in-flight count enters that program only as sizes, each
//     non-decreasing in it (scale(b, inflight) − b for what the other
//     micro-batches hold, the recompute group's lump and rest), so every
//     moment of the stage with fewer in flight holds no more.
//
// Its peak is then at most the evaluated stage's, which simulateIn would
// not choose over it (a later stage replaces the chosen one only when it
// peaks higher). The schedules where a stage's in-flight count is one
// number are the ones this applies to: 1F1B, its interleaving and GPipe
// (resolved.inflight); the zero-bubble and DualPipe schedules compile their
// own orders. TestSkippedStagesChangeNothing checks the estimates, the
// recorded moments and the replays with and without.

// skipCoveredStages is false only in the test that checks skipping
// changes no figure.
var skipCoveredStages = true

// coveredBy reports whether stage k needs no evaluation given stage j
// (already evaluated): the same program, no more micro-batches in flight.
func (r *resolved) coveredBy(k, j int, edges *edgeActivations) bool {
	switch r.Parallel.PPSchedule {
	case Schedule1F1B, ScheduleInterleaved1F1B, ScheduleGPipe:
	default:
		return false
	}
	if !skipCoveredStages || len(edges.Masks) > 0 || r.inflight(k) > r.inflight(j) {
		return false
	}
	a, b := r.stages()[k], r.stages()[j]
	if a.last-a.first != b.last-b.first || a.embed != b.embed || a.head != b.head || a.first == 0 || b.first == 0 {
		return false
	}
	for i := range a.last - a.first {
		if !r.sameRules(a.first+i, a, b.first+i, b) || a.first+i == edges.BridgeAt || b.first+i == edges.BridgeAt {
			return false
		}
	}
	return true
}

// sameRules reports whether block l of stage a and block m of stage b
// compile alike: the same kind (so the same tensors and activations,
// unitsIn and blockActivationsIn), the same checkpointing, keep mode,
// recompute group and activation offloading.
func (r *resolved) sameRules(l int, a stage, m int, b stage) bool {
	gl0, gl1 := r.recomputeGroup(l)
	gm0, gm1 := r.recomputeGroup(m)
	return r.kind(l) == r.kind(m) && r.checkpointed(l) == r.checkpointed(m) && r.keepModeOf(l) == r.keepModeOf(m) &&
		gl0-l == gm0-m && gl1-l == gm1-m && r.offloaded(l, a) == r.offloaded(m, b)
}
