package vram

// builderScratch is a builder's storage for the per-op and per-tensor
// lists its summary works out (live totals, releases, pending gradients,
// the backward walk, the compiled-set walk): each is taken from the end of
// its slab and stays valid while the builder lives; a pooled builder
// (builder_arena.go) empties the slabs when it is released, so an
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
