package vram

import "sync"

// An estimate builds the op inventory of every kind of block, the
// embedding and the head, evaluates them and returns only numbers: its
// builders (their tensors, ops and lists) go back to a pool when it
// returns, so a sweep or a solver does not allocate them again. Other
// callers (the replay, the inventories a user reads) keep theirs.

// builderArena holds the builders one estimate made.
type builderArena struct{ used []*actBuilder }

var (
	builderPool = sync.Pool{New: func() any { return &actBuilder{} }}
	arenaPool   = sync.Pool{New: func() any { return &builderArena{} }}
)

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
