package vram

import "sync"

// The speed machinery, in one place. A sweep, a solver or an advisor
// makes thousands of estimates, each building the op inventory of every
// kind of block, compiling a step program and evaluating it; allocating
// that storage anew each time was most of their time. So the storage
// comes from these pools and goes back when the estimate returns,
// emptied of pointers into it: nothing here changes a number, and code
// that takes from a pool reads as if it made the value fresh. Other
// callers (the replay's inventories, what a user reads) keep theirs.
var (
	// builderPool and arenaPool: the activation builders one estimate
	// made (their tensors, ops and lists), released together.
	builderPool = sync.Pool{New: func() any { return &actBuilder{} }}
	arenaPool   = sync.Pool{New: func() any { return &builderArena{} }}
	// estimateScratches: the per-layer storage of an estimate (timeline.go).
	estimateScratches = sync.Pool{New: func() any { return &estimateScratch{} }}
	// stepBuffers: the compiled programs and their tallies (step.go).
	stepBuffers = sync.Pool{New: func() any { return &stepBuffer{} }}
	// localCounts: the counts a block call's effect is measured on (tally.go).
	localCounts = sync.Pool{New: func() any { return &localCount{} }}
	// replayers: the allocator replays and their allocators (replay.go),
	// whose records and lists a reset keeps.
	replayers = sync.Pool{New: func() any { return &replayer{a: NewAllocator(AllocatorConfig{})} }}
	// keyScratches: what the plan cache's keys are written from
	// (plancache.go), not on the heap of each call.
	keyScratches = sync.Pool{New: func() any { return new(keyScratch) }}
)

// builderArena holds the builders one estimate made.
type builderArena struct{ used []*actBuilder }

// newActBuilder is an empty builder for r's plan over tokens tokens, from
// the pool when r has an arena.
func newActBuilder(r *resolved, tokens int64) *actBuilder {
	if r.arena == nil {
		return &actBuilder{r: r, tokens: tokens, ts: make([]*actT, 0, 64), ops: make([]actOp, 0, 64), saves: make([]saveRec, 0, 64)}
	}
	b := builderPool.Get().(*actBuilder)
	*b = actBuilder{r: r, tokens: tokens, ts: b.ts[:0], ops: b.ops[:0], saves: b.saves[:0], slabs: b.slabs, refSlabs: b.refSlabs, scratch: b.scratch}
	r.arena.used = append(r.arena.used, b)
	return b
}

// release gives the arena's builders back, emptied of pointers into the
// estimate, and the arena itself.
func (a *builderArena) release() {
	for i, b := range a.used {
		clear(b.ts[:cap(b.ts)])
		clear(b.ops[:cap(b.ops)])
		clear(b.saves[:cap(b.saves)])
		b.rewind()
		*b = actBuilder{ts: b.ts[:0], ops: b.ops[:0], saves: b.saves[:0], slabs: b.slabs, refSlabs: b.refSlabs, scratch: b.scratch}
		builderPool.Put(b)
		a.used[i] = nil
	}
	a.used = a.used[:0]
	arenaPool.Put(a)
}

// builderScratch is a builder's storage for the per-op and per-tensor
// lists its summary works out (live totals, releases, pending gradients,
// the backward walk, the compiled-set walk): each is taken from the end of
// its slab and stays valid while the builder lives; a pooled builder
// (pools.go) empties the slabs when it is released, so an
// estimate allocates none of them again.
type builderScratch struct {
	bytes []Bytes
	ints  []int32
	bools []bool
	lists [][]*actT
	steps []bwdStep
}

// take returns n zeroed elements from the end of *slab. A slab without
// room is replaced by a larger one (the first exactly n: a builder that is
// not pooled takes little); what was taken from the old one stays valid.
func take[T any](slab *[]T, n int) []T {
	s := *slab
	if cap(s)-len(s) < n {
		s = make([]T, 0, max(2*cap(s), n))
	}
	k := len(s)
	s = s[:k+n]
	clear(s[k:])
	*slab = s
	return s[k : k+n : k+n]
}

// reset empties the slabs, clearing the tensor pointers they hold.
func (s *builderScratch) reset() {
	clear(s.lists[:cap(s.lists)])
	s.bytes, s.ints, s.bools, s.lists, s.steps = s.bytes[:0], s.ints[:0], s.bools[:0], s.lists[:0], s.steps[:0]
}
