package vram

// The step program's operations and the compiler's core: how a rule says
// "allocate", "free", "here is a moment", "run this block". The phases of
// the step are compiled in step_forward.go, step_backward.go and
// step_optimizer.go.

// opKind is what an operation of the step program does.
type opKind uint8

const (
	opAlloc        opKind = iota // fill slot with bytes of a category (in pieces, on a stream)
	opFree                       // free what a slot holds
	opMark                       // a new moment
	opForward                    // a block's forward (calls[call])
	opBackward                   // a block's backward
	opPark                       // activation offloading: a block's kept set to the host
	opFetch                      // and back
	opAfterForward               // the forward and the loss have returned (TrainingEstimate.AfterForward)
	opRun                        // runs[ref]: the ops that follow, once per block of a run of identical blocks
	opMove                       // slot's contents move to slot ref (a run's input, as its element −1)
)

var opKindNames = [...]string{"alloc", "free", "mark", "forward", "backward", "park", "fetch", "after-forward", "run", "move"}

func (k opKind) String() string { return opKindNames[k] }

// slot names what an operation allocates, for the operations that free it.
type slot int32

const noSlot slot = -1

// stepOp is one operation of the step program.
type stepOp struct {
	kind   opKind
	cat    category
	stream uint8
	// step: inside a run, iteration i acts on slot+step·i (an allocation
	// always on slot+i, its own block's).
	step int8
	// only: inside a run, the iterations it acts in (step_run.go).
	only only
	slot slot
	// ref indexes the program's marks (opMark), calls (opForward,
	// opBackward, opPark, opFetch), pieces (opAlloc, -1 for one piece) or
	// runs (opRun).
	ref   int32
	bytes Bytes
}

// ref is a slot as a run's iteration i sees it: s + step·i.
type ref struct {
	s    slot
	step int8
}

func (r ref) at(i int) slot {
	if r.s == noSlot {
		return noSlot
	}
	return r.s + slot(int(r.step)*i)
}

// run is a stretch of identical blocks compiled once: the ops[start:end]
// that follow its opRun, once per block, iteration i on the slots and the
// layer the steps say (the timeline evaluates its first two and its last;
// the middle ones change the memory by the same amount each).
type run struct {
	start, end int32
	n          int
}

// blockCall is a block's forward or backward in the step program.
type blockCall struct {
	a    *BlockActivations
	mode keepMode
	// in: the forward's input (noSlot: counted elsewhere); kept, out and
	// until receive what it keeps, its output and what the model's forward
	// holds until it returns (a backward's kept is what it runs on).
	in         ref
	kept       ref
	out, until slot
	// drop is freed once the forward's ops have run (the head's input).
	drop ref
	// walk is the moment of a backward's walk (after its recomputation's).
	walk moment
	// The backward: how it runs, and the slots of the weight gradients it
	// creates and of what the model's output holds past it.
	bwd         bwdCall
	grads, held slot
	withInput   bool  // the forward that made kept had an input (the memo's key)
	lumpSize    Bytes // bwd.lump: the size of the kept slot's one allocation
}

// program is a compiled training step of one pipeline stage.
type program struct {
	ops   []stepOp
	calls []blockCall
	marks []moment
	runs  []run
	// pieces are the allocator's allocations of an opAlloc (their sum is
	// its bytes), when more than one: a unit's tensors, DDP's buckets, the
	// micro-batches in flight.
	pieces [][]Bytes
	slots  int
	stage  int
}

// reset empties p for stage k, keeping its buffers.
func (p *program) reset(k int) {
	*p = program{ops: p.ops[:0], calls: p.calls[:0], marks: p.marks[:0], runs: p.runs[:0], pieces: p.pieces[:0], stage: k}
}

type stepBuffer struct {
	prog          program
	comp          stepCompiler
	slots, parked []amount
	pass          *stepPass
	units         []int
	grads         [][]slot
	states, acc   []slot
}

// put gives b back to the pool, its compiler emptied of the estimate's
// plan and inventories (its lists' storage kept).
func (b *stepBuffer) put() {
	c := &b.comp
	*c = stepCompiler{compiler: compiler{later: c.later[:0], vectors: c.vectors[:0]}, runStore: c.runStore[:0], sameStore: c.sameStore[:0]}
	stepBuffers.Put(b)
}

// compiler appends operations to a program.
type compiler struct {
	prog *program
	at   moment // the current moment's iteration, micro-batch and phase
	// later holds allocations made for the next moment (allocLater),
	// appended after its mark.
	later []stepOp
	// in compiles a run's body (step_run.go); vectors are the runs' slots.
	in      *runBody
	body    runBody // in's storage
	vectors []vector
}

// newSlot is a new slot; in a run's body a vector of them, one per
// iteration (step_run.go).
func (c *compiler) newSlot() slot {
	if c.in != nil {
		return c.newVector()
	}
	c.prog.slots++
	return slot(c.prog.slots - 1)
}

// alloc allocates b bytes of category cat (nothing for b ≤ 0).
func (c *compiler) alloc(cat category, b Bytes) slot {
	return c.allocOn(cat, b, nil, 0)
}

// allocOn allocates b bytes of category cat as pieces on stream st.
func (c *compiler) allocOn(cat category, b Bytes, pieces []Bytes, st uint8) slot {
	if b <= 0 {
		return noSlot
	}
	s := c.newSlot()
	c.prog.ops = append(c.prog.ops, stepOp{kind: opAlloc, cat: cat, slot: s, step: 1, bytes: b, ref: c.piecesRef(pieces), stream: st})
	return s
}

// piecesRef files pieces with the program.
func (c *compiler) piecesRef(pieces []Bytes) int32 {
	if len(pieces) < 2 {
		return -1
	}
	c.prog.pieces = append(c.prog.pieces, pieces)
	return int32(len(c.prog.pieces) - 1)
}

// allocLater allocates for the next moment: after its mark, so that the
// moment before does not count it (what the pipeline's other micro-batches
// hold of a block joins the memory once the block has run).
func (c *compiler) allocLater(cat category, b Bytes, pieces []Bytes) slot {
	if b <= 0 {
		return noSlot
	}
	s := c.newSlot()
	c.later = append(c.later, stepOp{kind: opAlloc, cat: cat, slot: s, step: 1, bytes: b, ref: c.piecesRef(pieces)})
	return s
}

// free frees what slot s holds.
func (c *compiler) free(s slot) {
	if s != noSlot {
		r := c.refOf(s)
		c.prog.ops = append(c.prog.ops, stepOp{kind: opFree, slot: r.s, step: r.step})
	}
}

// keep appends s to ss, unless it is no slot.
func keep(ss []slot, s slot) []slot {
	if s == noSlot {
		return ss
	}
	return append(ss, s)
}

// freeAll frees every slot of ss and empties it.
func (c *compiler) freeAll(ss *[]slot) {
	for _, s := range *ss {
		c.free(s)
	}
	*ss = (*ss)[:0]
}

// mark starts a moment in the current phase: layer and name say where.
func (c *compiler) mark(layer int, name string) {
	at := c.at
	at.layer, at.name = layer, name
	if c.in != nil {
		at.step = c.in.dir // the iteration's block
	}
	c.prog.marks = append(c.prog.marks, at)
	c.prog.ops = append(c.prog.ops, stepOp{kind: opMark, ref: int32(len(c.prog.marks) - 1)})
	if c.in != nil && c.in.laterAt < 0 {
		c.firstMarkOfBody()
	}
	c.prog.ops = append(c.prog.ops, c.later...)
	c.later = c.later[:0]
}

// inPhase sets the phase of the moments that follow.
func (c *compiler) inPhase(p phase) { c.at.phase = p }

// forward runs block a's forward keeping what mode says, on input in
// (noSlot: counted elsewhere), in the current moment. The input, unless
// the block keeps it (inputKept), is still the caller's.
func (c *compiler) forward(a *BlockActivations, mode keepMode, in slot) (kept, out, until slot) {
	return c.forwardDropping(a, mode, in, noSlot)
}

// forwardDropping is forward, freeing drop once the ops have run.
func (c *compiler) forwardDropping(a *BlockActivations, mode keepMode, in, drop slot) (kept, out, until slot) {
	kept = c.newSlot()
	call := blockCall{a: a, mode: mode, in: c.refOf(in), drop: c.refOf(drop), kept: c.refOf(kept), out: c.newSlot(), until: noSlot, withInput: in != noSlot}
	if a.untilLoss > 0 {
		call.until = c.newSlot() // what the model's forward holds (blockRun.forward's until)
	}
	c.prog.calls = append(c.prog.calls, call)
	c.prog.ops = append(c.prog.ops, stepOp{kind: opForward, ref: int32(len(c.prog.calls) - 1)})
	return kept, call.out, call.until
}

// inputKept reports whether a block's forward in mode keeps its input (the
// checkpoints keep it, as do the ops that save it).
func inputKept(a *BlockActivations, mode keepMode) bool {
	switch mode {
	case keepInput, keepOp:
		return true
	case keepAll, keepSelective:
		return a.prog.in.saved || a.prog.in.held
	}
	return false
}

// backward runs block a's backward on what kept holds (made by a forward
// in b.mode, with an input when withInput). Its moments, the
// recomputation's ("recompute") and the walk's (name), are of the current
// phase at layer.
func (c *compiler) backward(a *BlockActivations, kept slot, b bwdCall, withInput bool, lumpSize Bytes, layer int, name string) (grads, held slot) {
	at := c.at
	at.layer, at.name = layer, name
	if c.in != nil {
		at.step = c.in.dir
	}
	call := blockCall{a: a, mode: b.mode, kept: c.refOf(kept), bwd: b, grads: noSlot, held: noSlot, withInput: withInput, lumpSize: lumpSize, walk: at}
	if b.grads > 0 {
		call.grads = c.newSlot()
	}
	if b.outlives && a.outlives > 0 {
		call.held = c.newSlot() // what the model's output holds (blockRun.walkEnd)
	}
	c.prog.calls = append(c.prog.calls, call)
	c.prog.ops = append(c.prog.ops, stepOp{kind: opBackward, ref: int32(len(c.prog.calls) - 1)})
	return call.grads, call.held
}

// park and fetch move a block's kept set to the host and back.
func (c *compiler) park(kept slot, a *BlockActivations, mode keepMode) {
	c.prog.calls = append(c.prog.calls, blockCall{a: a, mode: mode, kept: c.refOf(kept)})
	c.prog.ops = append(c.prog.ops, stepOp{kind: opPark, ref: int32(len(c.prog.calls) - 1)})
}

func (c *compiler) fetch(kept slot, a *BlockActivations, mode keepMode) {
	c.prog.calls = append(c.prog.calls, blockCall{a: a, mode: mode, kept: c.refOf(kept)})
	c.prog.ops = append(c.prog.ops, stepOp{kind: opFetch, ref: int32(len(c.prog.calls) - 1)})
}

// pieces splits total into allocations of at most one each (the last the
// remainder): the micro-batches a pipeline stage holds in flight.
func pieces(total, one Bytes) []Bytes {
	if one <= 0 || total <= one {
		return nil
	}
	var out []Bytes
	for ; total > 0; total -= one {
		out = append(out, min(total, one))
	}
	return out
}
