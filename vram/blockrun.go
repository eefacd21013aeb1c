package vram

import "slices"

// A block's forward and backward as allocations and frees on a mem: the one
// expansion of a block's call that both evaluators of the step program run
// (program.go). The forward allocates each op's outputs as it runs and frees
// each transient after its last use; what the block keeps for backward
// depends on how the plan checkpoints it (keepMode). The backward walks the
// block's backward op by op as backwardSteps summarised it (activations.go):
// the saved tensors shrink as autograd releases them, the weight gradients
// grow op by op, and each op's gradients in flight come and go.

// keepMode is what a block keeps from its forward to its backward.
type keepMode uint8

const (
	keepAll       keepMode = iota // every saved tensor
	keepSelective                 // all but the attention core, rebuilt when backward starts
	keepCompiled                  // Inductor's saved set (compile.go), one allocation
	keepInput                     // full checkpointing: the block's input
	keepOp                        // torchtitan's op-level SAC: the input and its saved outputs
	keepNone                      // inside a Megatron recompute group, after its first block
)

// keptSet is what a block's forward leaves on a mem for its backward.
type keptSet struct {
	h                    []int // by tensor id, -1 for none
	input                int   // the block's input, when kept
	ext                  int   // external tensors besides the input that ops save, one allocation
	extHeld              int   // external tensors the model's output holds, one allocation
	lump                 int   // the compiled set, or op-level SAC's outputs
	extSize, extHeldSize Bytes
	// what park freed, for fetch (activation offloading)
	parked           []Bytes
	inputSize        Bytes
	hadInput, hadExt bool
}

// blockRun expands one block's calls on a mem.
type blockRun struct {
	sc *runScratch // nil: fresh storage
	m  mem
	a  *BlockActivations
	p  *actBuilder
}

// newKept is an empty keptSet for a's program.
func newKept(a *BlockActivations) *keptSet { return emptyKept(&keptSet{}, a) }

// emptyKept empties k for a's program, in k's storage.
func emptyKept(k *keptSet, a *BlockActivations) *keptSet {
	*k = keptSet{h: resize(k.h[:0], len(a.prog.ts)), input: -1, ext: -1, extHeld: -1, lump: -1, parked: k.parked[:0]}
	for i := range k.h {
		k.h[i] = -1
	}
	return k
}

// runScratch is storage a blockRun reuses: its gradients in flight, its
// results' lists (read before the next call) and, where the kept set dies
// with the call (the timeline's effectOf), that set; where it lasts until
// the block's backward (the replay), kept sets come from spare, which the
// replay refills.
type runScratch struct {
	kept        keptSet
	gf          gradsInFlight
	grads, held []int
	lasting     bool
	spare       []*keptSet
}

// lists are empty grads and held lists for a backward, in the scratch's
// storage when the run has one.
func (br blockRun) lists() (grads, held []int) {
	if br.sc != nil {
		return br.sc.grads[:0], br.sc.held[:0]
	}
	return nil, nil
}

// newKept is an empty keptSet for the block, in the scratch's storage
// when the run has one.
func (br blockRun) newKept() *keptSet {
	switch {
	case br.sc == nil:
		return newKept(br.a)
	case !br.sc.lasting:
		return emptyKept(&br.sc.kept, br.a)
	}
	n := len(br.sc.spare)
	if n == 0 {
		return newKept(br.a)
	}
	k := br.sc.spare[n-1]
	br.sc.spare = br.sc.spare[:n-1]
	return emptyKept(k, br.a)
}

// forward runs the block's forward on input in (its handle, -1 when the
// block's input is counted elsewhere) and keeps what mode says. drop, when
// not -1, is freed once the ops have run (the head's input, which its
// external tensors then replace). It returns what the block keeps, its
// output (-1 for none) and what the model's forward holds until it
// returns. The input, unless kept, is the caller's.
func (br blockRun) forward(in, drop int, mode keepMode) (k *keptSet, out int, until []int) {
	k = br.newKept()
	out = br.runOps(k, -1)
	br.m.free(drop)
	for _, t := range br.p.ts {
		h := k.h[t.id]
		if h < 0 {
			continue
		}
		switch {
		case t.keepAlive:
			k.h[t.id] = -1
		case t.saved || t.held:
			br.m.retag(h, catActivations)
		case t.forwardHeld:
			br.m.retag(h, catActivations)
			until = append(until, h)
			k.h[t.id] = -1
		default:
			br.m.free(h)
			k.h[t.id] = -1
		}
	}
	if out >= 0 {
		br.m.retag(out, catActivations)
	}
	br.allocExt(k, in >= 0)
	if in >= 0 && (br.p.in.saved || br.p.in.held) {
		k.input = in
	}
	br.keepOnly(k, in, mode)
	return k, out, until
}

// runOps allocates the block's ops up to stop (all when stop < 0), each
// op's outputs as transients, freeing what dies after each; it returns the
// output's handle. A chunked head computes one token chunk at a time: its
// ops' totals are allocated as such (activations.go perChunk).
func (br blockRun) runOps(k *keptSet, stop int) (out int) {
	m, p := br.m, br.p
	if p.chunks > 1 {
		return br.runChunked(k)
	}
	frees := p.freesAfter()
	out = -1
	for i, op := range p.ops {
		if stop >= 0 && i > stop {
			break
		}
		for _, t := range op.outs {
			if k.h[t.id] < 0 { // else op-level SAC's cached output (recompute)
				k.h[t.id] = m.alloc(catTemporaries, t.bytes)
			}
			if t.keepAlive {
				out = k.h[t.id]
			}
		}
		ws := m.alloc(catTemporaries, op.workspace)
		ww := m.alloc(catTemporaries, op.weightWork)
		m.free(ws)
		m.free(ww)
		for _, t := range frees[i] {
			m.free(k.h[t.id])
			k.h[t.id] = -1
		}
	}
	return out
}

// runChunked is runOps for a head computed in token chunks: at each op
// the saved tensors of every chunk and one chunk's transients (perChunk),
// then the saved tensors themselves.
func (br blockRun) runChunked(k *keptSet) int {
	m, p := br.m, br.p
	for i, v := range p.forwardTotals() {
		op := p.ops[i]
		m.free(m.alloc(catTemporaries, addBytes(p.perChunk(br.a.Saved, addBytes(v, op.workspace)), op.weightWork)))
	}
	out := -1
	for _, t := range p.ts {
		if !t.external && t.born >= 0 && t.born < len(p.ops) && (t.saved || t.held || t.forwardHeld || t.keepAlive) {
			k.h[t.id] = m.alloc(catTemporaries, t.bytes)
			if t.keepAlive {
				out = k.h[t.id]
			}
		}
	}
	return out
}

// allocExt allocates the external tensors that the block's ops save or its
// output holds (an encoder-decoder's encoder output in each decoder block,
// the hidden states a head's norm saves), the input among them unless its
// handle is the call's (withInput).
func (br blockRun) allocExt(k *keptSet, withInput bool) {
	var saved, held Bytes
	for _, t := range br.p.ts {
		if !t.external || t.batch || t == br.p.in && withInput {
			continue
		}
		switch {
		case t.held:
			held = addBytes(held, t.bytes)
		case t.saved:
			saved = addBytes(saved, t.bytes)
		}
	}
	k.ext, k.extSize = br.m.alloc(catActivations, saved), saved
	k.extHeld, k.extHeldSize = br.m.alloc(catActivations, held), held
}

// keepOnly frees what mode does not keep of k. The checkpointing modes
// keep the input in (and nothing else but op-level SAC's outputs); the
// compiled set replaces it. An input k does not keep is the caller's.
func (br blockRun) keepOnly(k *keptSet, in int, mode keepMode) {
	a := br.a
	switch mode {
	case keepAll:
	case keepSelective:
		for _, t := range br.p.ts {
			if t.attn && k.h[t.id] >= 0 {
				br.m.free(k.h[t.id])
				k.h[t.id] = -1
			}
		}
	case keepCompiled:
		br.freeKept(k)
		k.input = -1 // the caller's to free
		k.lump = br.m.alloc(catActivations, a.SavedCompiled)
	case keepInput, keepOp:
		br.freeKept(k)
		k.input = in
		if mode == keepOp {
			k.lump = br.m.alloc(catActivations, a.SavedOp-a.Input)
		}
	case keepNone:
		br.freeKept(k)
		k.input = -1 // the caller's to free
	}
}

// freeKept frees every tensor of k but its input.
func (br blockRun) freeKept(k *keptSet) {
	for i, h := range k.h {
		if h >= 0 {
			br.m.free(h)
			k.h[i] = -1
		}
	}
	br.m.free(k.ext)
	br.m.free(k.extHeld)
	br.m.free(k.lump)
	k.ext, k.extHeld, k.lump = -1, -1, -1
}

// park frees what k holds on the device (activation offloading moves it to
// pinned host memory), remembering the sizes.
func (k *keptSet) park(m mem, p *actBuilder) {
	k.parked = make([]Bytes, len(k.h))
	for i, h := range k.h {
		if h >= 0 {
			k.parked[i] = p.ts[i].bytes
			m.free(h)
			k.h[i] = -1
		}
	}
	k.inputSize, k.hadInput = p.in.bytes, k.input >= 0
	m.free(k.input)
	k.input = -1
	k.hadExt = k.ext >= 0 || k.extHeld >= 0
	m.free(k.ext)
	m.free(k.extHeld)
	m.free(k.lump)
	k.ext, k.extHeld, k.lump = -1, -1, -1
}

// fetch allocates again what park freed (copied back for the backward).
func (k *keptSet) fetch(m mem, br blockRun, mode keepMode) {
	for i, b := range k.parked {
		if b > 0 {
			k.h[i] = m.alloc(catActivations, b)
		}
	}
	k.parked = nil
	if k.hadInput {
		k.input = m.alloc(catActivations, k.inputSize)
	}
	if k.hadExt {
		k.ext, k.extHeld = m.alloc(catActivations, k.extSize), m.alloc(catActivations, k.extHeldSize)
	}
	switch mode {
	case keepCompiled:
		k.lump = m.alloc(catActivations, br.a.SavedCompiled)
	case keepOp:
		k.lump = m.alloc(catActivations, br.a.SavedOp-br.a.Input)
	}
}

// bwdCall says how a block's backward runs.
type bwdCall struct {
	mode keepMode
	// recompute rebuilds the saved tensors first: a checkpointed block, or
	// the last block of a Megatron recompute group.
	recompute bool
	// lump: the saved set was rebuilt by the recompute group's last block,
	// as one allocation of the step's (k.lump) for every micro-batch in
	// flight; rest is what of it stays for the others.
	lump bool
	rest Bytes
	// grads are the weight gradients the backward creates, op by op.
	grads Bytes
	// outlives: what the model's output holds stays past the backward (the
	// block kept or rebuilt its whole saved set).
	outlives bool
}

// walkOwn is the part of a block's saved set its backward walk tracks: the
// tensors it holds one by one (counted), and one allocation (adj) for the
// rest, which the walk's summary gives as a total only (a routed experts'
// section, a compiled set, a recompute group's member).
type walkOwn struct {
	counted Bytes
	adj     int
	adjSize Bytes
}

// adjust sizes adj so that counted and adj together hold target.
func (o *walkOwn) adjust(m mem, target Bytes) {
	want := max(0, target-o.counted)
	if want == o.adjSize {
		return
	}
	m.free(o.adj)
	o.adj, o.adjSize = m.alloc(catActivations, want), want
}

// backward runs the block's backward on what its forward kept. It returns
// the weight gradients it created and what the model's output holds past
// it (held).
func (br blockRun) backward(k *keptSet, c bwdCall) (grads, held []int) {
	m, a := br.m, br.a
	if c.recompute {
		br.recompute(k, c.mode)
		m.span("") // the walk's moment
	}
	own := br.walkStart(k, c)
	gf := br.newInFlight()
	grads, held = br.lists()
	var got Bytes
	for i := range a.bwd {
		st := &a.bwd[i]
		if st.section && (i == 0 || !a.bwd[i-1].section) {
			br.sectionAsOne(k, st.op, &own)
		}
		target := st.saved
		if c.mode == keepCompiled {
			target = Bytes(float64(st.saved) * float64(a.SavedCompiled) / float64(a.Saved))
		}
		own.adjust(m, target)
		if want := Bytes(float64(c.grads) * st.gradFrac); want > got {
			grads = append(grads, m.alloc(catGradients, want-got))
			got = want
		}
		br.inFlight(st, gf)
		if !st.section {
			br.release(k, st.op, &own)
		}
	}
	gf.reset(m)
	m.free(gf.resid)
	if c.grads > got {
		grads = append(grads, m.alloc(catGradients, c.grads-got))
	}
	m.free(own.adj)
	held = br.walkEnd(k, c, held)
	if br.sc != nil {
		br.sc.grads, br.sc.held = grads, held
	}
	return grads, held
}

// gradsInFlight are the gradients a block's backward holds across its
// ops: each waiting tensor's (actBuilder.gradWaits) from the backward of
// the last op that reads it to that of the op that made it, and the
// residual stream's through the walk. The rest of an op's gradients in
// flight (its other inputs' and outputs', its scratch) come and go with it.
type gradsInFlight struct {
	carried []int // by tensor id, -1 for none
	ids     []int // the ids carry has set since the last reset
	live    Bytes // what carried holds
	resid   int
	synced  bool // carried holds every waiting gradient (not after a routed experts' section)
	// scratch for one op: its transient allocations, the tensors counted
	temp    []int
	counted []bool
}

func (br blockRun) newInFlight() *gradsInFlight {
	n := len(br.p.ts)
	var gf *gradsInFlight
	if br.sc != nil {
		gf = &br.sc.gf
	} else {
		gf = &gradsInFlight{}
	}
	*gf = gradsInFlight{carried: resize(gf.carried[:0], n), counted: resize(gf.counted[:0], n), temp: gf.temp[:0], ids: gf.ids[:0], resid: br.m.alloc(catTemporaries, br.a.bwdResid), synced: true}
	clear(gf.counted)
	for i := range gf.carried {
		gf.carried[i] = -1
	}
	return gf
}

// reset frees every waiting gradient.
func (gf *gradsInFlight) reset(m mem) {
	slices.Sort(gf.ids) // in tensor order, as a walk over carried frees them
	for _, i := range gf.ids {
		if h := gf.carried[i]; h >= 0 {
			m.free(h)
			gf.carried[i] = -1
		}
	}
	gf.ids = gf.ids[:0]
	gf.live, gf.synced = 0, false
}

// carry makes t's gradient wait (a handle of its size).
func (gf *gradsInFlight) carry(m mem, t *actT) {
	gf.carried[t.id] = m.alloc(catTemporaries, gradSize(t))
	gf.ids = append(gf.ids, t.id)
}

// inFlight is the gradients in flight at one step of the walk: as many
// bytes as the step's summary says (bwdStep.inflight), tensor by tensor
// where the op's tensors say which, the rest in one allocation. A routed
// experts' section, a chunked head, an op without a backward: one
// allocation (their summary is not tensor by tensor).
func (br blockRun) inFlight(st *bwdStep, gf *gradsInFlight) {
	m, p := br.m, br.p
	op := &p.ops[st.op]
	lump := st.section || p.chunks > 1 || op.noGrad
	if lump {
		gf.reset(m)
		m.free(m.alloc(catTemporaries, st.inflight-br.a.bwdResid))
		return
	}
	if !gf.synced {
		br.syncWaiting(st.op, gf)
	}
	gf.temp = gf.temp[:0]
	sum := addBytes(br.a.bwdResid, gf.live)
	for j, t := range op.outs {
		sum = br.gradOf(t, op.castWeights && j > 0, gf, sum)
	}
	for _, t := range op.ins {
		sum = br.gradOf(t, false, gf, sum)
	}
	for _, t := range op.outs {
		gf.counted[t.id] = false
	}
	for _, t := range op.ins {
		if t != nil {
			gf.counted[t.id] = false
		}
	}
	w := addBytes(addBytes(op.workspace, op.gradWorkspace), addBytes(op.weightWork, op.heldGrad))
	gf.temp = append(gf.temp, m.alloc(catTemporaries, w))
	sum = addBytes(sum, w)
	temp := gf.temp
	switch rest := st.inflight - sum; {
	case rest > 0:
		temp = append(temp, m.alloc(catTemporaries, rest))
	case rest < 0:
		// The summary counts fewer gradients here than wait: hold the
		// step's total instead.
		for _, h := range temp {
			m.free(h)
		}
		temp = temp[:0]
		gf.reset(m)
		temp = append(temp, m.alloc(catTemporaries, st.inflight-br.a.bwdResid))
	}
	gf.temp = temp
	for _, h := range temp {
		m.free(h)
	}
	for _, t := range op.outs {
		if h := gf.carried[t.id]; h >= 0 {
			m.free(h) // consumed by the backward of the op that made it
			gf.carried[t.id] = -1
			gf.live -= gradSize(t)
		}
	}
}

// gradOf counts t's gradient in an op's backward (sum so far): a waiting
// gradient once, allocated the first time (cast: the gradient of an
// autocast copy of a weight, which never waits), any other for the op.
func (br blockRun) gradOf(t *actT, cast bool, gf *gradsInFlight, sum Bytes) Bytes {
	if t == nil || gradSize(t) == 0 {
		return sum
	}
	if !cast && br.p.gradWaits(t) && !gf.counted[t.id] {
		gf.counted[t.id] = true
		if gf.carried[t.id] < 0 {
			gf.carry(br.m, t)
			gf.live = addBytes(gf.live, gradSize(t))
			sum = addBytes(sum, gradSize(t))
		}
		return sum
	}
	gf.temp = append(gf.temp, br.m.alloc(catTemporaries, gradSize(t)))
	return addBytes(sum, gradSize(t))
}

// syncWaiting allocates the waiting gradients live at op i that a reset
// dropped: of the tensors op i or a later op reads and an op before it made.
func (br blockRun) syncWaiting(i int, gf *gradsInFlight) {
	for _, t := range br.p.ts {
		if br.p.gradWaits(t) && t.born < i && t.lastUse > i && gf.carried[t.id] < 0 {
			gf.carry(br.m, t)
			gf.live = addBytes(gf.live, gradSize(t))
		}
	}
	gf.synced = true
}

// recompute is a checkpointed block's recomputation (a moment of its own,
// which the caller has started): its forward again, up to recomputeEnd,
// with the gradients of its output (and of its last saving op's) already
// in flight. Under op-level SAC (mode keepOp) the outputs the forward
// cached are taken back, not recomputed (torch/utils/checkpoint.py
// _CachedTorchDispatchMode pops them from its storage); those of ops past
// the end stay in the storage until the block's backward is done
// (k.lump, freed by walkEnd).
func (br blockRun) recompute(k *keptSet, mode keepMode) {
	m, p := br.m, br.p
	g := m.alloc(catTemporaries, br.a.recomputeGrad)
	end := p.recomputeEnd()
	if mode == keepOp {
		br.unlumpSAC(k)
	}
	br.runOps(k, end)
	var cached Bytes
	for _, t := range p.ts {
		h := k.h[t.id]
		switch {
		case h < 0:
		case t.saved || t.held:
			m.retag(h, catActivations)
		default:
			if t.born > end {
				cached = addBytes(cached, t.bytes)
			}
			m.free(h)
			k.h[t.id] = -1
		}
	}
	if mode == keepOp {
		k.lump = m.alloc(catActivations, cached)
	}
	m.free(g)
}

// unlumpSAC turns op-level SAC's outputs, kept as one allocation (k.lump)
// from the forward, into one allocation each, for the recomputation to
// take back.
func (br blockRun) unlumpSAC(k *keptSet) {
	m, p := br.m, br.p
	m.free(k.lump)
	k.lump = -1
	mms := 0
	for i := range p.ops {
		op := &p.ops[i]
		if op.mm {
			mms++
		}
		if !sacCaches(op, mms) {
			continue
		}
		for _, t := range op.outs {
			if k.h[t.id] < 0 {
				k.h[t.id] = m.alloc(catActivations, t.bytes)
			}
		}
	}
}

// walkStart sets up the saved set the walk shrinks: what the mode rebuilds
// when backward starts, and what it tracks as one allocation.
func (br blockRun) walkStart(k *keptSet, c bwdCall) walkOwn {
	m, a, p := br.m, br.a, br.p
	own := walkOwn{adj: -1}
	switch {
	case c.lump:
		m.free(k.lump)
		k.lump = m.alloc(catActivations, c.rest)
		return own
	case c.mode == keepCompiled:
		m.free(k.lump)
		k.lump = -1
		return own
	}
	if c.recompute {
		if k.ext < 0 && k.extHeld < 0 {
			br.allocExt(k, true)
		}
		if c.mode == keepOp {
			// k.lump is now what the recomputation left in SAC's storage.
			if !p.in.saved && !p.in.held {
				m.free(k.input) // the walk counts what the ops saved
				k.input = -1
			}
		}
		if k.input < 0 && (p.in.saved || p.in.held) {
			k.input = m.alloc(catActivations, a.Input) // rebuilt by the group's recomputation
		}
	}
	if c.mode == keepSelective {
		for _, t := range p.ts {
			if t.attn && (t.saved || t.held) && !t.external && k.h[t.id] < 0 {
				k.h[t.id] = m.alloc(catActivations, t.bytes) // recomputed
			}
		}
	}
	for i, h := range k.h {
		if h >= 0 {
			own.counted = addBytes(own.counted, p.ts[i].bytes)
		}
	}
	if k.ext >= 0 {
		own.counted = addBytes(own.counted, k.extSize)
	}
	if k.extHeld >= 0 {
		own.counted = addBytes(own.counted, k.extHeldSize)
	}
	if k.input >= 0 && (p.in.saved || p.in.held) {
		own.counted = addBytes(own.counted, a.Input)
	}
	return own
}

// release frees the saved tensors autograd lets go after op i's backward.
func (br blockRun) release(k *keptSet, i int, own *walkOwn) {
	for _, t := range br.p.releases()[i] {
		if h := k.h[t.id]; h >= 0 {
			br.m.free(h)
			k.h[t.id] = -1
			own.counted -= t.bytes
		}
	}
}

// sectionAsOne hands the saved tensors of the routed experts' section
// ending at op hi to adj: the walk (bwdWalk.expertSection) releases each
// expert's share of them as it goes, not tensor by tensor.
func (br blockRun) sectionAsOne(k *keptSet, hi int, own *walkOwn) {
	p := br.p
	for i := hi; i >= 0 && p.ops[i].expert; i-- {
		br.release(k, i, own)
	}
}

// keepHandle appends h to held when it is one.
func keepHandle(held []int, h int) []int {
	if h >= 0 {
		held = append(held, h)
	}
	return held
}

// walkEnd frees what is left of the block after its backward, but what
// the model's output holds when it outlives the backward, appended to
// held.
func (br blockRun) walkEnd(k *keptSet, c bwdCall, held []int) []int {
	m, p := br.m, br.p
	for _, t := range p.ts {
		h := k.h[t.id]
		switch {
		case h < 0:
			continue
		case t.held && c.outlives:
			held = keepHandle(held, h)
		default:
			m.free(h)
		}
		k.h[t.id] = -1
	}
	m.free(k.ext)
	if c.outlives {
		held = keepHandle(held, k.extHeld)
	} else {
		m.free(k.extHeld)
	}
	if k.input >= 0 && p.in.held && c.outlives {
		held = keepHandle(held, k.input)
	} else {
		m.free(k.input)
	}
	m.free(k.lump)
	k.ext, k.extHeld, k.input, k.lump = -1, -1, -1, -1
	if (c.lump || c.mode == keepCompiled) && c.outlives && br.a.outlives > 0 {
		held = keepHandle(held, m.alloc(catActivations, br.a.outlives))
	}
	return held
}
