package vram

import "fmt"

// The step program's invariant pass, opt-in as go/ssa's sanity.go is: off
// in a user's estimate, on under `go test ./vram -sanity` (every training
// estimate of the suite) and in the fuzzers and TestStepInvariants
// (checkStep). It compiles the plan's step once and evaluates it three
// ways — the timeline op by op, the timeline with its runs of identical
// blocks added up at once, the allocator replay — and holds them to:
//   - live bytes are never negative, in any category at any moment;
//   - phases come in order: within an iteration and micro-batch forward,
//     loss, backward; the optimizer after every micro-batch's backward;
//     iterations one after another;
//   - by the step's end every activation, temporary and cache is freed;
//   - the two timelines end with the same memory and peak alike (adding up
//     a run is exact);
//   - the replay frees no handle that is not live, requests at its peak
//     exactly the timeline's peak and the cuBLAS workspace, and ends with
//     what the timeline ends with.
// A failure names the plan, the moment (unit and phase) and, for the
// replay, the op.

// sanityChecks runs checkStep inside every Training.Estimate (set by the
// tests' -sanity flag).
var sanityChecks bool

// checkStep runs the invariant pass on t's step program.
func (t Training) checkStep() (err error) {
	defer recoverOverflow(&err)
	r, err := t.resolve()
	if err != nil {
		return err
	}
	blocks, embed, head := r.unitsSized(true)
	full, prog := simulateTraining(&r, blocks, embed, head, true, true)
	fast, _ := simulateTraining(&r, blocks, embed, head, false, false)
	plan := fmt.Sprintf("%s, seq_len %d, micro_batch %d, %s", r.m.Name, t.SeqLen, t.MicroBatch, r.Precision)
	if r.m.Name == "" {
		plan = fmt.Sprintf("%s (%d layers), seq_len %d, micro_batch %d, %s", r.m.Family, r.m.Layers, t.SeqLen, t.MicroBatch, r.Precision)
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("sanity: %s: %s", plan, fmt.Sprintf(format, a...))
	}
	if err := checkEvents(full.Events); err != nil {
		return fail("%v", err)
	}
	for c, b := range full.end {
		if b < 0 || b != 0 && (category(c) == catActivations || category(c) == catTemporaries || category(c) == catKVCache) {
			return fail("the step ends with %v of %s live", b, categoryNames[c])
		}
	}
	if fast.end != full.end || fast.peak.Live != full.peak.Live {
		return fail("runs added up at once end with %v live and peak at %v, op by op with %v and %v", fast.end.total(), fast.peak.Live.Total(), full.end.total(), full.peak.Live.Total())
	}
	return checkReplay(&r, prog, full, fail)
}

// checkEvents holds a recorded timeline's moments to non-negative bytes and
// the phases' order.
func checkEvents(events []Event) error {
	type key struct{ iter, micro int }
	last := map[key]phase{}
	optimized := map[int]bool{}
	iter := 0
	for _, e := range events {
		for c, b := range (vec{e.Live.Parameters, e.Live.Gradients, e.Live.OptimizerStates, e.Live.Activations, e.Live.KVCache, e.Live.Temporaries, e.Live.Other}) {
			if b < 0 {
				return fmt.Errorf("%s: %v of %s live", e.Where(), b, categoryNames[c])
			}
		}
		p := stepPhase(e.Phase)
		switch {
		case e.Iteration < iter:
			return fmt.Errorf("%s after iteration %d", e.Where(), iter)
		case p < last[key{e.Iteration, e.Micro}]:
			return fmt.Errorf("%s (micro-batch %d) after its %s", e.Where(), e.Micro, last[key{e.Iteration, e.Micro}])
		case p != phaseOptimizer && optimized[e.Iteration]:
			return fmt.Errorf("%s (micro-batch %d) after the iteration's optimizer step", e.Where(), e.Micro)
		}
		iter, last[key{e.Iteration, e.Micro}] = e.Iteration, p
		optimized[e.Iteration] = optimized[e.Iteration] || p == phaseOptimizer
	}
	return nil
}

// stepPhase is an event's phase by name.
func stepPhase(name string) phase {
	for p, n := range phaseNames {
		if n == name {
			return phase(p)
		}
	}
	return phaseLoad
}

// categoryNames are the categories as Breakdown's fields say them.
var categoryNames = [numCategories]string{"parameters", "gradients", "optimizer states", "activations", "KV cache", "temporaries", "other"}

// checkReplay replays prog op by op (as replayer.run does), checking after
// each op that no handle was freed that is not live, then the peak and
// the end against the timeline's.
func checkReplay(r *resolved, prog *program, tl Timeline, fail func(string, ...any) error) error {
	ws := gemmWorkspace(nil, "")
	rp := &replayer{a: NewAllocator(AllocatorConfig{})}
	rp.reset(r.alloc, false, ws)
	rp.slots, rp.kept = resize(rp.slots, prog.slots), resize(rp.kept, prog.slots)
	stray := func(i, it int) error {
		if rp.a.strays == 0 {
			return nil
		}
		return fail("op %d (%v, iteration %d of its run) at %s frees a handle that is not live", i, prog.ops[i].kind, it, Event{Iteration: rp.at.iter, Phase: rp.at.phase.String(), Layer: rp.at.layer, Name: rp.at.name}.Where())
	}
	for i := 0; i < len(prog.ops); i++ {
		op := &prog.ops[i]
		if op.kind != opRun {
			rp.exec(prog, op, 0)
			if err := stray(i, 0); err != nil {
				return err
			}
			continue
		}
		rn := &prog.runs[op.ref]
		for it := range rn.n {
			for j := rn.start; j < rn.end; j++ {
				rp.exec(prog, &prog.ops[j], it)
				if err := stray(int(j), it); err != nil {
					return err
				}
			}
		}
		i = int(rn.end) - 1
	}
	rp.close()
	if want := tl.peak.Live.Total() + ws; rp.a.PeakAsked != want {
		return fail("the replay requests %v at its peak, the timeline's peak and the workspace are %v", rp.a.PeakAsked, want)
	}
	if want := tl.end.total() + ws; rp.a.requested != want {
		return fail("the replay ends with %v requested, the timeline with %v and the workspace %v", rp.a.requested, tl.end.total(), ws)
	}
	return nil
}
