package vram

// The step program: a plan's training step compiled once into a list of
// unit-level operations — allocate so many bytes of a category on a stream,
// free them, mark a moment, run a block's forward or backward — and run by
// two evaluators: the timeline (timeline.go), which adds bytes up by
// category, and the allocator replay (replay.go), which sends each
// allocation through the caching-allocator model. Both expand a block's
// call with the same code (blockrun.go), tensor by tensor, so the replay's
// allocated memory follows the timeline's byte for byte; the timeline
// evaluates each kind of call once and reuses it.
//
// The compiler's core is step.go, split by phase into step_forward.go
// (load, forward, loss), step_backward.go and step_optimizer.go, with runs
// of identical blocks compiled once (step_run.go); sanity.go is the
// opt-in invariant pass over a compiled program. Each mechanism is a rule in its own file:
// FSDP2 in fsdp2.go, FSDP2 inside pipeline stages in fsdp2_pipeline.go,
// DeepSpeed's buckets and prefetch in deepspeed.go, Megatron's recompute
// groups in megatron.go, offload in offload.go, activation offloading in
// activation_offload.go.

// category is a Breakdown category as an index.
type category uint8

const (
	catParameters category = iota
	catGradients
	catOptimizerStates
	catActivations
	catKVCache
	catTemporaries
	catOther
	numCategories
)

// vec is bytes by category.
type vec [numCategories]Bytes

// add returns v plus o, category by category.
func (v vec) add(o vec) vec {
	for i := range v {
		v[i] = addBytes(v[i], o[i])
	}
	return v
}

// sub returns v minus o, category by category.
func (v vec) sub(o vec) vec {
	for i := range v {
		v[i] -= o[i]
	}
	return v
}

// total is the sum of every category.
func (v vec) total() Bytes {
	var t Bytes
	for _, b := range v {
		t = addBytes(t, b)
	}
	return t
}

// breakdown is v as a Breakdown.
func (v vec) breakdown() Breakdown {
	return Breakdown{Parameters: v[catParameters], Gradients: v[catGradients], OptimizerStates: v[catOptimizerStates],
		Activations: v[catActivations], KVCache: v[catKVCache], Temporaries: v[catTemporaries], Other: v[catOther]}
}

// phase is a part of the training step.
type phase uint8

const (
	phaseLoad phase = iota
	phaseForward
	phaseLoss
	phaseBackward
	phaseOptimizer
)

var phaseNames = [...]string{"load", "forward", "loss", "backward", "optimizer"}

func (p phase) String() string { return phaseNames[p] }

// moment says where in the step a span of the program runs: its events and
// replay points carry it.
type moment struct {
	iter, micro int
	phase       phase
	layer       int // block index, -1 outside the blocks
	name        string
	step        int // in a run, iteration i is at block layer+step·i
}

// in is the moment as a run's iteration i sees it.
func (m moment) in(i int) moment {
	m.layer += m.step * i
	m.step = 0
	return m
}

// mem is what a block's tensors are allocated on: the timeline's byte
// counter or the caching-allocator replay. A handle below zero is none.
type mem interface {
	alloc(c category, b Bytes) int
	free(h int)
	// retag moves h's bytes to category c (a forward's output that its
	// block keeps for backward: a transient while the block runs, an
	// activation after it); the allocator ignores it.
	retag(h int, c category)
	// span starts a new moment of the current call, named name.
	span(name string)
}
