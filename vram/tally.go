package vram

// The timeline's evaluator of the step program: bytes added up by category,
// moment by moment. A block's call runs once per kind of call on a local
// count (blockrun.go's expansion, as the replay runs it) and is reused: its
// effect on the memory does not depend on what else is live.

// localCount is a mem that counts bytes by category, for one block call:
// the moments it passes through, relative to where it started.
type localCount struct {
	run   runScratch
	size  []Bytes
	cat   []category
	cur   vec
	tot   Bytes // cur's total
	spans []spanMax
}

// spanMax is a moment of a call: the live memory when it started and at
// its largest, relative to the call's start (and their totals).
type spanMax struct {
	start, max       vec
	startTot, maxTot Bytes
}

func (m *localCount) alloc(c category, b Bytes) int {
	if b <= 0 {
		return -1
	}
	m.size = append(m.size, b)
	m.cat = append(m.cat, c)
	m.cur[c] = addBytes(m.cur[c], b)
	m.tot = addBytes(m.tot, b)
	if s := &m.spans[len(m.spans)-1]; m.tot > s.maxTot {
		s.max, s.maxTot = m.cur, m.tot
	}
	return len(m.size) - 1
}

func (m *localCount) free(h int) {
	if h < 0 {
		return
	}
	m.cur[m.cat[h]] -= m.size[h]
	m.tot -= m.size[h]
	m.size[h] = 0
}

func (m *localCount) retag(h int, c category) {
	if h < 0 {
		return
	}
	m.cur[m.cat[h]] -= m.size[h]
	m.cur[c] = addBytes(m.cur[c], m.size[h])
	m.cat[h] = c
}

func (m *localCount) span(string) {
	m.spans = append(m.spans, spanMax{start: m.cur, max: m.cur, startTot: m.tot, maxTot: m.tot})
}

// vecOf is what the handles hs hold.
func (m *localCount) vecOf(hs ...int) vec {
	var v vec
	for _, h := range hs {
		if h >= 0 {
			v[m.cat[h]] = addBytes(v[m.cat[h]], m.size[h])
		}
	}
	return v
}

// keptVec is what a kept set holds.
func (m *localCount) keptVec(k *keptSet) vec {
	v := m.vecOf(k.h...)
	return v.add(m.vecOf(k.input, k.ext, k.extHeld, k.lump))
}

// callEffect is what a block call does to the memory: its moments relative
// to its start, what it changes in all, and what it leaves in the slots it
// fills (activations all, but a backward's gradients).
type callEffect struct {
	key              callKey
	spans            []spanMax
	delta            vec
	deltaTot         Bytes
	kept, out, until Bytes // a forward's
	grads, held      Bytes // a backward's
	inputKept        bool
}

// callKey is what a call's effect depends on.
type callKey struct {
	prog      *actBuilder
	forward   bool
	mode      keepMode
	withInput bool
	drop      bool
	bwd       bwdCall
	lumpSize  Bytes
}

// effectOf runs call on a local count; the effect's spans are taken from
// *spans.
func effectOf(call *blockCall, forward bool, spans *[]spanMax) callEffect {
	a := call.a
	m := localCounts.Get().(*localCount)
	defer localCounts.Put(m)
	*m = localCount{run: m.run, size: m.size[:0], cat: m.cat[:0], spans: m.spans[:0]}
	m.span("")
	br := blockRun{m: m, a: a, p: a.prog, sc: &m.run}
	in, drop := -1, -1
	if call.withInput {
		in = m.alloc(catActivations, a.Input)
	}
	if call.drop.s != noSlot {
		drop = m.alloc(catActivations, a.Input)
	}
	e := callEffect{inputKept: inputKept(a, call.mode)}
	if forward {
		base := m.cur
		m.spans = m.spans[:0]
		m.span("")
		k, out, until := br.forward(in, drop, call.mode)
		e.kept, e.out, e.until = m.keptVec(k).total(), m.vecOf(out).total(), m.vecOf(until...).total()
		if e.inputKept && in >= 0 {
			e.kept -= a.Input // the input's slot joins kept
		}
		e.delta = m.cur.sub(base)
		e.deltaTot, e.spans = e.delta.total(), relative(m.spans, base, spans)
		return e
	}
	var k *keptSet
	if call.bwd.lump {
		k = br.newKept()
		k.lump = m.alloc(catActivations, call.lumpSize)
	} else {
		k, _, _ = br.forward(in, drop, call.mode)
	}
	base := m.cur
	m.spans = m.spans[:0]
	m.span("")
	grads, held := br.backward(k, call.bwd)
	e.grads, e.held = m.vecOf(grads...).total(), m.vecOf(held...).total()
	e.delta = m.cur.sub(base)
	e.deltaTot, e.spans = e.delta.total(), relative(m.spans, base, spans)
	return e
}

// relative makes spans relative to base, in storage taken from *store.
func relative(spans []spanMax, base vec, store *[]spanMax) []spanMax {
	out := take(store, len(spans))
	for i, s := range spans {
		out[i] = spanMax{start: s.start.sub(base), max: s.max.sub(base)}
		out[i].startTot, out[i].maxTot = out[i].start.total(), out[i].max.total()
	}
	return out
}

// amount is what a slot holds for the timeline: bytes of one category.
type amount struct {
	b   Bytes
	cat category
}

// tally evaluates a step program for the timeline.
type tally struct {
	slots  []amount
	parked []amount
	cur    vec
	tot    Bytes // cur's total
	// the current moment: where, the memory at its largest
	at      moment
	spanTop vec
	topTot  Bytes
	open    bool
	record  bool
	events  []Event
	peak    Event
	peakTot Bytes
	static  vec // each category's largest
	// afterForward: live once the steady iteration's forward and loss
	// have returned.
	afterForward Breakdown
	effects      []callEffect
	spanStore    []spanMax // the effects' spans
	last         int       // the effect the last call used
}

// run evaluates p, its slots in buf's.
func (t *tally) run(p *program, buf *stepBuffer) {
	buf.slots, buf.parked = grow(buf.slots, p.slots), grow(buf.parked, p.slots)
	t.slots, t.parked = buf.slots, buf.parked
	for i := 0; i < len(p.ops); i++ {
		op := &p.ops[i]
		if op.kind != opRun {
			t.exec(p, op, 0)
			continue
		}
		rn := &p.runs[op.ref]
		t.runLoop(p, rn)
		i = int(rn.end) - 1
	}
	t.close()
}

// runLoop evaluates a run: when recording, every iteration; else its first
// two and its last. The middle ones change the memory by what the second
// changes, each its own slots (so the moments of the run grow or shrink
// evenly, and the largest is at an end): they are added up at once, and
// the second's slots copied to theirs.
func (t *tally) runLoop(p *program, rn *run) {
	body := p.ops[rn.start:rn.end]
	if t.record || rn.n < 4 {
		for it := range rn.n {
			t.body(p, body, it)
		}
		return
	}
	t.body(p, body, 0)
	before, tot := t.cur, t.tot
	t.body(p, body, 1)
	m := int64(rn.n - 3) // iterations 2 … n−2
	for c := range t.cur {
		t.cur[c] = addBytes(t.cur[c], times(m, t.cur[c]-before[c]))
	}
	t.tot = addBytes(t.tot, times(m, t.tot-tot))
	var buf [3]slot
	for i := range body {
		for _, s := range t.own(p, &body[i], &buf) {
			for it := 2; it < rn.n-1; it++ {
				t.slots[s+slot(it)], t.parked[s+slot(it)] = t.slots[s+1], t.parked[s+1]
			}
		}
	}
	t.body(p, body, rn.n-1)
}

// times is m·d for a change d of either sign, checked.
func times(m int64, d Bytes) Bytes {
	if d < 0 {
		return -mulBytes(m, -d)
	}
	return mulBytes(m, d)
}

// own lists the slots op fills for its iteration (iteration 0's), in
// buf's storage.
func (t *tally) own(p *program, op *stepOp, buf *[3]slot) []slot {
	if op.only == firstIteration {
		return nil
	}
	switch op.kind {
	case opAlloc:
		buf[0] = op.slot
		return buf[:1]
	case opForward:
		c := &p.calls[op.ref]
		*buf = [3]slot{c.kept.s, c.out, c.until}
		return present(buf[:])
	case opBackward:
		c := &p.calls[op.ref]
		buf[0], buf[1] = c.grads, c.held
		return present(buf[:2])
	}
	return nil
}

// present keeps the slots of ss that are some, in ss's storage.
func present(ss []slot) []slot {
	out := ss[:0]
	for _, s := range ss {
		if s != noSlot {
			out = append(out, s)
		}
	}
	return out
}

// body evaluates a run's ops as iteration it.
func (t *tally) body(p *program, body []stepOp, it int) {
	for i := range body {
		t.exec(p, &body[i], it)
	}
}

// exec evaluates op as iteration it of its run (0 outside runs).
func (t *tally) exec(p *program, op *stepOp, it int) {
	if op.only.skips(it) {
		return
	}
	switch op.kind {
	case opAlloc:
		t.put(op.slot+slot(it), amount{op.bytes, op.cat})
		t.checkCur()
	case opFree:
		t.take(ref{op.slot, op.step}.at(it))
	case opMove:
		to := slot(op.ref)
		t.slots[to], t.parked[to] = t.slots[op.slot], t.parked[op.slot]
		t.slots[op.slot], t.parked[op.slot] = amount{}, amount{}
	case opMark:
		t.mark(p.marks[op.ref].in(it))
	case opForward, opBackward:
		t.call(&p.calls[op.ref], op.kind == opForward, it)
	case opPark:
		s := p.calls[op.ref].kept.at(it)
		t.parked[s] = t.slots[s]
		t.take(s)
	case opFetch:
		s := p.calls[op.ref].kept.at(it)
		t.put(s, t.parked[s])
		t.checkCur()
	case opAfterForward:
		t.afterForward = t.cur.breakdown()
	}
}

// grow returns s with n zero amounts.
func grow(s []amount, n int) []amount {
	if cap(s) < n {
		return make([]amount, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// resize returns s with length n, keeping what its elements hold (the
// storage of a list of lists).
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		s = append(s[:cap(s)], make([]T, n-cap(s))...)
	}
	return s[:n]
}

// take empties slot s.
func (t *tally) take(s slot) {
	h := t.slots[s]
	t.cur[h.cat] -= h.b
	t.tot -= h.b
	t.slots[s] = amount{}
}

// put fills slot s with h (and counts it).
func (t *tally) put(s slot, h amount) {
	t.slots[s] = h
	t.cur[h.cat] = addBytes(t.cur[h.cat], h.b)
	t.tot = addBytes(t.tot, h.b)
}

// check counts v toward the current moment.
func (t *tally) check(v vec) {
	if tot := v.total(); t.open && tot > t.topTot {
		t.spanTop, t.topTot = v, tot
	}
}

// checkCur is check(t.cur).
func (t *tally) checkCur() {
	if t.open && t.tot > t.topTot {
		t.spanTop, t.topTot = t.cur, t.tot
	}
}

// mark ends the current moment and starts one at at.
func (t *tally) mark(at moment) {
	t.close()
	t.at, t.spanTop, t.topTot, t.open = at, t.cur, t.tot, true
}

// close ends the current moment: an event (the load is none).
func (t *tally) close() {
	if !t.open {
		return
	}
	t.open = false
	if t.at.phase == phaseLoad {
		return
	}
	for i, v := range t.spanTop {
		t.static[i] = max(t.static[i], v)
	}
	peak := t.topTot > t.peakTot || t.peakTot == 0
	if !peak && !t.record {
		return
	}
	e := Event{Iteration: t.at.iter, Micro: t.at.micro, Phase: t.at.phase.String(), Layer: t.at.layer, Name: t.at.name, Live: t.spanTop.breakdown()}
	if peak {
		t.peak, t.peakTot = e, t.topTot
	}
	if t.record {
		t.events = append(t.events, e)
	}
}

// call applies a block call's effect, evaluated once per kind of call, as
// iteration it of its run.
func (t *tally) call(c *blockCall, forward bool, it int) {
	key := callKey{prog: c.a.prog, forward: forward, mode: c.mode, withInput: c.withInput, drop: c.drop.s != noSlot, lumpSize: c.lumpSize}
	if !forward {
		key.bwd = c.bwd
	}
	var e *callEffect
	if t.last < len(t.effects) && t.effects[t.last].key == key {
		e = &t.effects[t.last] // runs of identical blocks
	}
	for i := 0; e == nil && i < len(t.effects); i++ {
		if t.effects[i].key == key {
			e, t.last = &t.effects[i], i
		}
	}
	if e == nil {
		t.effects = append(t.effects, effectOf(c, forward, &t.spanStore))
		t.last = len(t.effects) - 1
		e = &t.effects[t.last]
		e.key = key
	}
	for i := range e.spans {
		s := &e.spans[i]
		if i > 0 {
			t.mark(c.walk.in(it))
			t.spanTop, t.topTot = t.cur.add(s.start), addBytes(t.tot, s.startTot)
		}
		if tot := addBytes(t.tot, s.maxTot); t.open && tot > t.topTot {
			t.spanTop, t.topTot = t.cur.add(s.max), tot
		}
	}
	t.cur = t.cur.add(e.delta)
	t.tot = addBytes(t.tot, e.deltaTot)
	if forward {
		// The counts are in delta: the slots only say what each holds.
		kept, in := c.kept.at(it), c.in.at(it)
		t.slots[kept], t.slots[c.out+slot(it)] = amount{e.kept, catActivations}, amount{e.out, catActivations}
		t.fill(c.until, it, amount{e.until, catActivations})
		if e.inputKept && in != noSlot {
			t.slots[kept].b += t.slots[in].b
			t.slots[in] = amount{}
		}
		if drop := c.drop.at(it); drop != noSlot {
			t.slots[drop] = amount{}
		}
		return
	}
	t.slots[c.kept.at(it)] = amount{}
	t.fill(c.grads, it, amount{e.grads, catGradients})
	t.fill(c.held, it, amount{e.held, catActivations})
}

// fill gives slot s of iteration it the amount a (counted in the call's
// delta already).
func (t *tally) fill(s slot, it int, a amount) {
	if s != noSlot {
		t.slots[s+slot(it)] = a
	}
}
