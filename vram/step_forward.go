package vram

// Compiling a training step: the stage's units loaded, then iteration 1
// (the optimizer states appear in its step) and a steady-state iteration,
// each its first micro-batch and (with gradient accumulation) its last;
// this file compiles the load and the forward.

// stepCompiler compiles the step of one pipeline stage.
type stepCompiler struct {
	compiler
	r        *resolved
	st       stage
	blocks   []unitMem
	embed    unitMem
	head     unitMem
	su       unitMem // the stage's units together
	acts     []BlockActivations
	edges    edgeActivations
	inflight float64 // micro-batches whose activations the stage holds (resolved.inflight)
	zero3    bool
	// Across passes: each unit's gradients and optimizer states (unit k at
	// k+2: -1 the embedding, -2 the head), DeepSpeed ZeRO-1/2's bucket.
	grads    [][]slot
	states   []slot
	acc      []slot // FSDP2 in pipeline stages: accumulated unsharded gradients (fsdp2_pipeline.go)
	bucket   slot
	pass     *stepPass
	unitKs   []int    // the stage's units (units)
	runList  [][2]int // the stage's runs of identical blocks (runs)
	runStore [][2]int // runList's storage
	// sameStore is runs' storage: whether each block runs as the next.
	sameStore []bool
}

// stepPass is what one micro-batch's forward and backward share.
type stepPass struct {
	iter, micro      int
	last, gradsHeld  bool
	keep, f2, noSync bool
	res              slot  // the residual stream between blocks
	resSize          Bytes // its size
	kept             []slot
	modes            []keepMode
	withIn           []bool
	others           []slot // what the other micro-batches in flight hold of the embedding side, freed when backward ends
	othersBy         []slot // of each block
	bridgeOthers     slot   // of the encoder-decoder bridge, freed by its backward
	headKept         slot
	liveGrads        [][]slot // FSDP2: each unit's unsharded gradients until its group reduces them
	unsharded        []slot   // FSDP2 without resharding: a block's parameters from its forward to its backward
	until            []slot   // what the model's forward holds until it returns
	held             []slot   // what the model's output holds until backward returns
	masks            []slot
	maskGrads        []slot // the gradients of maskParts that have one, from block gradAt's backward to the embedding side's
	maskParts        []maskPart
	embedKept        slot
	bridgeKept       slot
	root             slot // FSDP: the root's unsharded parameters
	ag               slot // FSDP2: the last all-gather output
	rs               slot // FSDP2: the retained reduce-scatter input
	headHeld         slot // torchtitan: the head's unsharded parameters
	groupLump        []slot
	// The embedding's and the head's gradients as they appear (the tied
	// word embedding's from the output projection).
	embedGrads, headGrads, tiedGrads Bytes
}

// compileStep compiles the step of stage k into buf's program (emptied
// first).
func compileStep(buf *stepBuffer, r *resolved, k int, blocks []unitMem, embed, head unitMem, acts []BlockActivations, edges edgeActivations) {
	prog := &buf.prog
	st := r.stages()[k]
	c := &buf.comp // its lists' storage kept from the last estimate
	*c = stepCompiler{r: r, st: st, blocks: blocks, embed: embed, head: head, acts: acts, edges: edges,
		inflight: r.inflight(k), zero3: r.Parallel.ZeRO == 3 || r.Parallel.CPUOffload == "optimizer+params", bucket: noSlot,
		compiler: compiler{later: c.later[:0], vectors: c.vectors[:0]}, runStore: c.runStore[:0], sameStore: c.sameStore[:0]}
	prog.reset(k)
	c.prog = prog
	for l := st.first; l < st.last; l++ {
		c.su.add(blocks[l])
	}
	if st.embed {
		c.su.add(embed)
	}
	if st.head {
		c.su.add(head)
	}
	// Each unit's gradient slots, optimizer states and accumulators, in the
	// buffer's storage from the last estimate.
	n := len(blocks) + 2
	buf.grads, buf.states, buf.acc = resize(buf.grads, n), resize(buf.states, n), resize(buf.acc, n)
	c.grads, c.states, c.acc = buf.grads[:n], buf.states[:n], buf.acc[:n]
	for i := range c.states {
		c.grads[i], c.states[i], c.acc[i] = c.grads[i][:0], noSlot, noSlot
	}
	c.unitKs = c.listUnits(buf.units[:0])
	buf.units = c.unitKs
	if buf.pass == nil || len(buf.pass.kept) != len(blocks) {
		buf.pass = newStepPass(len(blocks))
	}
	c.pass = buf.pass
	c.load()
	micros := []int{1}
	if r.GradAccum > 1 {
		micros = append(micros, r.GradAccum)
	}
	for iter := 1; iter <= 2; iter++ {
		for _, micro := range micros {
			c.compilePass(iter, micro)
		}
	}
}

// newStepPass makes the per-block records of a pass over n blocks.
func newStepPass(n int) *stepPass {
	p := &stepPass{}
	p.kept, p.modes, p.withIn = make([]slot, n), make([]keepMode, n), make([]bool, n)
	p.unsharded, p.groupLump, p.othersBy = make([]slot, n), make([]slot, n), make([]slot, n)
	p.liveGrads = make([][]slot, n+2)
	return p
}

// unit is the memory of unit k (a block, -1 the embedding, -2 the head).
func (c *stepCompiler) unit(k int) *unitMem {
	switch k {
	case -1:
		return &c.embed
	case -2:
		return &c.head
	}
	return &c.blocks[k]
}

// units lists the stage's units: the embedding, the blocks, the head.
func (c *stepCompiler) units() []int { return c.unitKs }

func (c *stepCompiler) listUnits(ks []int) []int {
	if c.st.embed {
		ks = append(ks, -1)
	}
	for l := c.st.first; l < c.st.last; l++ {
		ks = append(ks, l)
	}
	if c.st.head {
		ks = append(ks, -2)
	}
	return ks
}

// load allocates what lives through the steps: the parameters, the master
// copies (DeepSpeed and Megatron build them at initialisation), the batch
// (for every micro-batch in flight), DDP's and DeepSpeed ZeRO-3's buckets.
func (c *stepCompiler) load() {
	r := c.r
	c.inPhase(phaseLoad)
	for _, k := range c.units() {
		u := c.unit(k)
		c.allocOn(catParameters, u.params, u.paramSizes, 0)
	}
	for _, k := range c.units() {
		u := c.unit(k)
		c.allocOn(catOptimizerStates, u.master, u.masterSizes, 0)
	}
	in := c.edges.Inputs
	c.alloc(catOther, in)
	c.allocOn(catOther, scale(in, c.inflight)-in, pieces(scale(in, c.inflight)-in, in), 0) // the micro-batches in flight
	training := r.Optimizer != "none" || r.Trainable != "frozen"
	if r.dp > 1 && r.Parallel.ZeRO == 0 && training {
		// DDP's reducer keeps flat bucket buffers as large as the gradients,
		// 25 MiB each (torch/nn/parallel/distributed.py bucket_cap_mb,
		// gradient_as_bucket_view=False).
		c.allocOn(catOther, c.su.gradsFull, pieces(c.su.gradsFull, 25*MiB), 0)
	}
	if b, persistent := r.dsBucket(); persistent {
		c.alloc(catOther, b) // ZeRO-3's flat gradient bucket, from initialisation on
	}
	c.mark(-1, "")
}

// compilePass compiles one micro-batch's forward and backward and, after
// the last, the optimizer step.
func (c *stepCompiler) compilePass(iter, micro int) {
	r := c.r
	p := c.pass
	*p = stepPass{iter: iter, micro: micro, last: micro == r.GradAccum, gradsHeld: micro > 1 || iter > 1 && r.KeepGrads,
		res: noSlot, embedKept: noSlot, bridgeKept: noSlot, bridgeOthers: noSlot, headKept: noSlot, root: noSlot, ag: noSlot, rs: noSlot, headHeld: noSlot,
		kept: p.kept, modes: p.modes, withIn: p.withIn, unsharded: p.unsharded, groupLump: p.groupLump, othersBy: p.othersBy, liveGrads: p.liveGrads,
		others: p.others[:0], until: p.until[:0], held: p.held[:0], masks: p.masks[:0], maskGrads: p.maskGrads[:0]}
	for i := range p.kept {
		p.kept[i], p.unsharded[i], p.groupLump[i], p.othersBy[i] = noSlot, noSlot, noSlot, noSlot
	}
	for i := range p.liveGrads {
		p.liveGrads[i] = p.liveGrads[i][:0]
	}
	p.keep, p.f2, p.noSync = r.keepsUnsharded(), c.zero3 && r.fsdp2(), r.fsdp1NoSync()
	c.at = moment{iter: iter, micro: micro}
	c.forwardPass()
	c.lossPass()
	c.blocksBackward()
	c.embedBackward()
	c.endBackward()
	if p.last {
		c.optimizerStep()
	}
}

// forwardPass runs the embedding and the blocks.
func (c *stepCompiler) forwardPass() {
	r, p := c.r, c.pass
	c.inPhase(phaseForward)
	// FSDP: the root's own parameters stay unsharded from its pre-forward
	// to its post-backward (fsdp2.go rootHeld).
	p.root = c.allocLater(catTemporaries, r.rootHeld(c.embed, c.head, c.st), nil)
	if c.st.embed {
		c.embedForward()
	}
	for _, rn := range c.runs() {
		if rn[1]-rn[0] > 1 {
			c.forwardRun(rn[0], rn[1])
			continue
		}
		if rn[0] == c.edges.BridgeAt {
			c.bridgeForward()
		}
		c.blockForward(rn[0])
	}
	if !c.st.head {
		c.free(p.res) // sent to the next stage
		p.res = noSlot
	}
}

// setRes makes the residual stream b bytes: the input of what runs next
// (a stage after the first receives it from the previous one).
func (c *stepCompiler) setRes(b Bytes) {
	p := c.pass
	if p.res != noSlot && p.resSize == b {
		return
	}
	c.free(p.res)
	p.res, p.resSize = c.alloc(catActivations, b), b
}

// embedForward is the embedding side's forward (a vision tower's too); the
// attention masks and rotary tables it builds join at the first block.
func (c *stepCompiler) embedForward() {
	p, e := c.pass, &c.edges.Embed
	c.mark(-1, "embedding")
	kept, out, until := c.forward(e, keepAll, noSlot)
	p.embedKept, p.res, p.resSize = kept, out, c.outSize(e)
	p.until = keep(p.until, until)
	p.others = append(p.others, c.othersOf(e.Saved))
	// What the forward holds of the embedding side until it returns (a
	// vision-language model's image features).
	if o := scale(e.untilLoss, c.inflight) - e.untilLoss; o > 0 {
		p.until = append(p.until, c.allocLater(catActivations, o, pieces(o, e.untilLoss)))
	}
	// The attention masks live while the blocks run; checkpoints keep each
	// as an input of the blocks of its kind until their backward.
	p.maskParts = c.edges.Masks
	for _, mp := range p.maskParts {
		p.masks = append(p.masks, c.allocLater(catActivations, mp.bytes, nil))
		p.maskGrads = append(p.maskGrads, noSlot)
	}
}

// outSize is the size of a program's output (its keepAlive tensor).
func (c *stepCompiler) outSize(a *BlockActivations) Bytes {
	for _, t := range a.prog.ts {
		if t.keepAlive {
			return t.bytes
		}
	}
	return 0
}

// othersOf allocates, for the next moment on, what the pipeline's other
// micro-batches in flight hold of a part whose one micro-batch keeps b.
func (c *stepCompiler) othersOf(b Bytes) slot {
	o := scale(b, c.inflight) - b
	return c.allocLater(catActivations, o, pieces(o, b))
}

// bridgeForward is an encoder-decoder's hand-over from encoder to decoder,
// outside the blocks: the encoder's output goes in, the decoder's input
// comes out.
func (c *stepCompiler) bridgeForward() {
	p, br := c.pass, &c.edges.Bridge
	c.free(p.res)
	c.mark(-1, "encoder-decoder bridge")
	kept, out, until := c.forward(br, keepAll, noSlot)
	p.bridgeKept, p.res, p.resSize = kept, out, c.outSize(br)
	p.until = keep(p.until, until)
	p.bridgeOthers = c.othersOf(br.Saved)
}

// keepModeOf is what block l keeps from its forward to its backward.
func (r *resolved) keepModeOf(l int) keepMode {
	switch {
	case r.checkpointed(l) && r.Checkpointing == CheckpointOp:
		return keepOp
	case r.checkpointed(l):
		if start, _ := r.recomputeGroup(l); start != l {
			return keepNone
		}
		return keepInput
	case r.Checkpointing == CheckpointSelective:
		return keepSelective
	case r.Compile:
		return keepCompiled
	}
	return keepAll
}

// blockForward is block l's forward: its parameters gathered, its ops, what
// it keeps.
func (c *stepCompiler) blockForward(l int) {
	r, p, a := c.r, c.pass, &c.acts[l]
	var gbuf [3]slot
	gathered := c.unshardForward(l, gbuf[:0])
	c.setRes(a.Input)
	mode := r.keepModeOf(l)
	in := p.res
	kept, out, until := c.forward(a, mode, in)
	p.kept[l], p.modes[l], p.withIn[l] = kept, mode, true
	p.res, p.resSize = out, c.outSize(a)
	c.reshardForward(l, gathered)
	p.until = keep(p.until, until)
	if !inputKept(a, mode) {
		if l == 0 && r.inputsEmbedsHeld() {
			p.until = append(p.until, in) // the forward's inputs_embeds
		} else {
			c.free(in)
		}
	}
	if r.offloaded(l, c.st) {
		c.park(kept, a, mode) // to pinned host memory
	} else {
		p.othersBy[l] = c.othersOf(r.savedFor(*a, l))
	}
	holds := a.untilLoss
	if l == 0 && r.inputsEmbedsHeld() {
		holds = addBytes(holds, a.Input)
	}
	if o := scale(holds, c.inflight) - holds; o > 0 {
		p.until = append(p.until, c.allocLater(catActivations, o, pieces(o, holds)))
	}
	for i, mp := range p.maskParts {
		if p.masks[i] != noSlot && mp.keptUntil(r, c.st.first, c.st.last) < 0 && mp.forwardEnd(c.st.first, c.st.last) == l {
			c.free(p.masks[i]) // its stack (the model's forward) returned
			p.masks[i] = noSlot
		}
	}
}

// unshardForward marks block l's moment and allocates what its forward
// needs gathered: FSDP/ZeRO-3 all-gather it and prefetch the next unit
// (DeepSpeed: up to its prefetch bucket); FSDP2 copies its all-gather
// output into unsharded parameters, the output freed once the next block's
// is copied out (fsdp2.go). An offloaded shard is first copied to the
// device, a moment of its own (offload.go). The slots go into out.
func (c *stepCompiler) unshardForward(l int, out []slot) []slot {
	r, p := c.r, c.pass
	if !c.zero3 {
		c.mark(l, "")
		return out
	}
	g := c.blocks[l].gathered
	if p.f2 {
		c.free(p.ag)
		p.ag = noSlot
	}
	if h := c.blocks[l].h2d; h > 0 {
		c.mark(l, "unshard")
		h2d := c.alloc(catTemporaries, h)
		out = append(out, c.alloc(catTemporaries, g))
		c.free(h2d)
	}
	c.mark(l, "")
	if len(out) == 0 {
		out = append(out, c.alloc(catTemporaries, g))
	}
	if p.f2 {
		p.ag = c.allocOn(catTemporaries, g, nil, allGatherStream)
		return out
	}
	if next := l + 1; next < c.st.last {
		pre := c.blocks[next].gathered
		if r.ds.on {
			pre = r.dsPrefetched(g, pre)
		}
		out = append(out, c.alloc(catTemporaries, pre))
	}
	return out
}

// reshardForward frees what unshardForward gathered for block l, but the
// unsharded parameters FSDP2 keeps without resharding after forward.
func (c *stepCompiler) reshardForward(l int, gathered []slot) {
	p := c.pass
	for i, s := range gathered {
		if i == 0 && p.keep {
			p.unsharded[l] = s
			continue
		}
		c.free(s)
	}
}
