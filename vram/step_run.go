package vram

import "sort"

// Runs of identical blocks: a model's blocks are mostly alike, and so are
// their steps. A run's body is compiled once, for its first block in the
// pass's order, and the evaluators run it once per block (the timeline
// only its first two and its last iterations: the others change the memory
// by the same amount each). Each slot the body allocates is a vector, one
// slot per iteration; the residual stream and the other chains a block
// hands to the next (FSDP2's last all-gather output, its retained
// reduce-scatter input) enter as the vector's element −1.

// runBody is the run whose body the compiler is compiling.
type runBody struct {
	n     int  // iterations
	dir   int  // +1: blocks in increasing order (forward), -1: decreasing (backward)
	first slot // the body's first slot: its vectors are from here on
	op    int  // the run's opRun in prog.ops
	// The allocations for the next moment (allocLater) join the memory
	// after the next mark: pre are those pending when the run began, the
	// first iteration's; laterAt is where the body's first mark's follow
	// it in prog.ops (-1 before that mark), where each iteration after the
	// first makes the previous one's.
	pre     []stepOp
	laterAt int
}

// only says in which iterations of its run an operation acts.
type only uint8

const (
	everyIteration  only = iota
	firstIteration       // the allocations pending when the run began
	laterIterations      // the previous iteration's allocations for the next moment
)

// skips reports whether an operation that acts only in o's iterations
// skips iteration it.
func (o only) skips(it int) bool {
	return o == firstIteration && it > 0 || o == laterIterations && it == 0
}

// vector is a run's slot, s+i for iteration i (s−1 is the element a chain
// enters with).
type vector struct {
	s   slot
	n   int
	dir int
}

// newVector is a vector of the run being compiled.
func (c *compiler) newVector() slot {
	v := slot(c.prog.slots) + 1
	c.prog.slots += c.in.n + 1
	c.vectors = append(c.vectors, vector{s: v, n: c.in.n, dir: c.in.dir})
	return v
}

// refOf is slot s as the iterations of the body being compiled see it: its
// own vectors one step an iteration; another run's vector (the blocks'
// kept sets, made by the forward's run, seen from the backward's) a step
// in the direction the two runs' blocks go; any other slot unchanged.
func (c *compiler) refOf(s slot) ref {
	if c.in == nil || s == noSlot {
		return ref{s: s}
	}
	if s >= c.in.first {
		return ref{s: s, step: 1}
	}
	i := sort.Search(len(c.vectors), func(i int) bool { return c.vectors[i].s+slot(c.vectors[i].n) > s })
	if i < len(c.vectors) && s >= c.vectors[i].s-1 {
		return ref{s: s, step: int8(c.vectors[i].dir * c.in.dir)}
	}
	return ref{s: s}
}

// compileRuns is false only in the test that checks that runs change no
// figure (TestRunsChangeNothing).
var compileRuns = true

// singles is the stage's blocks one by one.
func (c *stepCompiler) singles() [][2]int {
	out := c.runStore[:0]
	for l := c.st.first; l < c.st.last; l++ {
		out = append(out, [2]int{l, l + 1})
	}
	c.runList, c.runStore = out, out
	return out
}

// runs splits the stage's blocks into runs of at least four identical
// blocks (and single blocks between): [start, end) pairs in block order,
// the same in every pass.
func (c *stepCompiler) runs() [][2]int {
	if c.runList != nil {
		return c.runList
	}
	if !compileRuns {
		return c.singles()
	}
	// next[l-first]: block l runs as block l+1 does.
	next := c.sameStore[:0]
	for l := c.st.first; l+1 < c.st.last; l++ {
		next = append(next, c.sameBlock(l, l+1))
	}
	c.sameStore = next
	out := c.runStore[:0]
	for l := c.st.first; l < c.st.last; {
		n := 1
		for in := c.interior(l, next); in && l+n < c.st.last && c.interior(l+n, next); {
			n++
		}
		if n < 4 {
			out = append(out, [2]int{l, l + 1})
			l++
			continue
		}
		out = append(out, [2]int{l, l + n})
		l += n
	}
	c.runList, c.runStore = out, out
	return out
}

// interior reports whether block l's forward and backward compile as its
// neighbours' do: the same block, the same memory (next, of runs),
// nothing of the step's happening at it (a mask freed, the bridge, the
// stage's ends), outside recompute groups.
func (c *stepCompiler) interior(l int, next []bool) bool {
	r := c.r
	if l <= c.st.first || l >= c.st.last-1 || l == 0 || l == c.edges.BridgeAt {
		return false
	}
	if g0, g1 := r.recomputeGroup(l); g0 != g1 {
		return false
	}
	for _, mp := range c.pass.maskParts {
		if mp.keptUntil(r, c.st.first, c.st.last) == l || mp.forwardEnd(c.st.first, c.st.last) == l || mp.grad > 0 && mp.gradAt == l {
			return false
		}
	}
	return next[l-1-c.st.first] && next[l-c.st.first]
}

// sameBlock reports whether blocks a and b run alike: the same activation
// program, checkpointing, offload and persistent memory.
func (c *stepCompiler) sameBlock(a, b int) bool {
	r, x, y := c.r, &c.blocks[a], &c.blocks[b]
	return c.acts[a].prog == c.acts[b].prog && r.keepModeOf(a) == r.keepModeOf(b) && r.offloaded(a, c.st) == r.offloaded(b, c.st) &&
		x.params == y.params && x.grads == y.grads && x.gradsFull == y.gradsFull && x.gradsLive == y.gradsLive &&
		x.states == y.states && x.gathered == y.gathered && x.h2d == y.h2d && x.trainable == y.trainable && x.largest == y.largest &&
		sameSizes(x.gradSizes, y.gradSizes) && sameSizes(x.stateSizes, y.stateSizes)
}

// sameSizes reports whether two tensors' size lists are one list (blocks
// of a kind share their unit's).
func sameSizes(a, b []Bytes) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// beginRun starts a run of n blocks in direction dir.
func (c *compiler) beginRun(n, dir int) {
	c.prog.runs = append(c.prog.runs, run{n: n})
	c.prog.ops = append(c.prog.ops, stepOp{kind: opRun, ref: int32(len(c.prog.runs) - 1)})
	pre := append(c.body.pre[:0], c.later...)
	c.later = c.later[:0]
	c.body = runBody{n: n, dir: dir, first: slot(c.prog.slots), op: len(c.prog.ops) - 1, pre: pre, laterAt: -1}
	c.in = &c.body
}

// firstMarkOfBody follows the body's first mark with what was pending when
// the run began (the first iteration's), and marks the place where each
// later iteration makes the previous one's (endRun).
func (c *compiler) firstMarkOfBody() {
	for _, op := range c.in.pre {
		op.only = firstIteration
		c.prog.ops = append(c.prog.ops, op)
	}
	c.in.pre = c.in.pre[:0]
	c.in.laterAt = len(c.prog.ops)
}

// carryLater places the body's allocations for the next moment as the
// program without runs has them: an iteration's after the next one's first
// mark (at laterAt, on the previous iteration's slots), the last one's
// after the mark that follows the run (left pending, on its slots). A body
// without a mark leaves every iteration's pending, after what was pending
// when the run began.
func (c *compiler) carryLater() {
	body := c.in
	if len(c.later) == 0 && len(body.pre) == 0 {
		return
	}
	if body.laterAt < 0 {
		own := append([]stepOp(nil), c.later...)
		c.later = append(c.later[:0], body.pre...)
		for i := range body.n {
			for _, op := range own {
				op.slot += slot(i)
				c.later = append(c.later, op)
			}
		}
		body.pre = body.pre[:0]
		return
	}
	k, at := len(c.later), body.laterAt
	ops := append(c.prog.ops, c.later...)
	copy(ops[at+k:], ops[at:len(ops)-k])
	for i, op := range c.later {
		op.slot--
		op.only = laterIterations
		ops[at+i] = op
	}
	c.prog.ops = ops
	for i := range c.later {
		c.later[i].slot += slot(body.n - 1)
	}
}

// endRun ends the body: each chain (a slot the body frees, from before the
// run, and one it leaves, a vector of its own) enters as its vector's
// element −1, moved there before the run; chains[i] becomes the vector's
// last element.
func (c *compiler) endRun(chains []*slot, pre []slot) {
	c.carryLater()
	body := c.in
	var buf [4]stepOp
	moves := buf[:0]
	for i, ch := range chains {
		post := *ch
		if pre[i] == noSlot || post == pre[i] || post < body.first {
			continue
		}
		c.rename(body.op+1, pre[i], post-1)
		moves = append(moves, stepOp{kind: opMove, slot: pre[i], ref: int32(post - 1)})
		*ch = post + slot(body.n-1)
	}
	// The moves go before the run's opRun, the body after them.
	ops := c.prog.ops
	n := len(ops)
	ops = append(ops, moves...)
	copy(ops[body.op+len(moves):], ops[body.op:n])
	copy(ops[body.op:], moves)
	c.prog.ops = ops
	at := body.op + len(moves)
	c.prog.runs[ops[at].ref].start, c.prog.runs[ops[at].ref].end = int32(at+1), int32(len(ops))
	c.in = nil
}

// rename makes the ops from index from on that use slot s use vector
// element −1 at e, one step an iteration.
func (c *compiler) rename(from int, s, e slot) {
	for i := from; i < len(c.prog.ops); i++ {
		op := &c.prog.ops[i]
		switch op.kind {
		case opFree:
			if op.slot == s {
				op.slot, op.step = e, 1
			}
		case opForward, opBackward, opPark, opFetch:
			call := &c.prog.calls[op.ref]
			for _, r := range []*ref{&call.in, &call.kept, &call.drop} {
				if r.s == s {
					*r = ref{s: e, step: 1}
				}
			}
		}
	}
}

// each is slot s of the body's iteration i (s itself outside a run).
func (c *compiler) each(s slot, i int) slot { return c.refOf(s).at(i) }

// forwardRun compiles the forward of blocks [lo, hi), alike, as one run.
func (c *stepCompiler) forwardRun(lo, hi int) {
	p := c.pass
	n := hi - lo
	c.beginRun(n, 1)
	chains := []*slot{&p.res, &p.ag}
	pre := []slot{p.res, p.ag}
	until := len(p.until)
	c.blockForward(lo)
	for l := lo + 1; l < hi; l++ {
		i := l - lo
		p.kept[l], p.othersBy[l], p.unsharded[l] = c.each(p.kept[lo], i), c.each(p.othersBy[lo], i), c.each(p.unsharded[lo], i)
		p.modes[l], p.withIn[l] = p.modes[lo], p.withIn[lo]
	}
	p.until = c.repeat(p.until, until)
	c.endRun(chains, pre)
}

// backwardRun compiles the backward of blocks [lo, hi), alike, as one run
// (last block first).
func (c *stepCompiler) backwardRun(lo, hi int) {
	p := c.pass
	n, top := hi-lo, hi-1
	c.beginRun(n, -1)
	chains := []*slot{&p.ag, &p.rs}
	pre := []slot{p.ag, p.rs}
	held := len(p.held)
	c.blockBackward(top)
	for l := top - 1; l >= lo; l-- {
		i := top - l
		*c.gradsOf(l) = c.eachOf(*c.gradsOf(l), *c.gradsOf(top), i)
		p.liveGrads[l+2] = c.eachOf(p.liveGrads[l+2], p.liveGrads[top+2], i)
		c.states[l+2], c.acc[l+2], p.unsharded[l] = c.each(c.states[top+2], i), c.each(c.acc[top+2], i), c.each(p.unsharded[top], i)
	}
	p.held = c.repeat(p.held, held)
	c.endRun(chains, pre)
}

// eachOf is list (of the body's block) for iteration i, in dst's storage.
func (c *compiler) eachOf(dst, list []slot, i int) []slot {
	dst = dst[:0]
	for _, s := range list {
		dst = append(dst, c.each(s, i))
	}
	return dst
}

// repeat appends, for each iteration after the first, what the body
// appended to list from index from.
func (c *compiler) repeat(list []slot, from int) []slot {
	end := len(list)
	for i := 1; i < c.in.n; i++ {
		for j := from; j < end; j++ {
			list = append(list, c.each(list[j], i))
		}
	}
	return list
}
