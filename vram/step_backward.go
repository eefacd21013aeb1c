package vram

// Compiling a training step: the loss and the backward, last block first,
// then the embedding side and what the end of backward frees and reduces.

// gradsOf is where unit k's gradients go.
func (c *stepCompiler) gradsOf(k int) *[]slot { return &c.grads[k+2] }

// lossPass is the output projection and the loss, forward and backward.
func (c *stepCompiler) lossPass() {
	r, p := c.r, c.pass
	// With tied embeddings the word embedding's gradient comes from the
	// output projection; the rest of the embedding unit's (positions, token
	// types, norms) from the embedding's own backward.
	p.embedGrads, p.headGrads = c.embed.grads, c.head.grads
	if p.noSync {
		p.embedGrads, p.headGrads = c.embed.gradsFull, c.head.gradsFull
	}
	if p.f2 {
		// FSDP2's gradients are all-gathered parameters' until the
		// group's post-backward reduce-scatters them (fsdp2.go).
		p.embedGrads, p.headGrads = c.embed.gradsLive, c.head.gradsLive
	}
	if r.m.TiedEmbeddings && c.st.embed && c.st.head && r.m.Head == "lm" && c.embed.trainable > 0 {
		e := r.m.WordEmbedProjDim
		if e == 0 {
			e = r.m.Hidden
		}
		word := min(int64(r.m.Vocab)*int64(e)/int64(r.tp), c.embed.trainable)
		p.tiedGrads = Bytes(float64(p.embedGrads) * float64(word) / float64(c.embed.trainable))
	}
	p.headHeld = c.allocLater(catTemporaries, r.headHeld(c.head, c.st), nil)
	c.inPhase(phaseLoss)
	if c.st.head {
		c.headForward()
	}
	c.freeAll(&p.until) // the forward returned
	c.inPhase(phaseBackward)
	if !c.st.head {
		c.dsBucket(true)
	} else {
		c.headBackward()
	}
	c.free(p.ag) // the head's post-backward reshards it
	c.free(p.headHeld)
	p.ag, p.headHeld = noSlot, noSlot
}

// headForward is the loss's forward: the final norm, the output
// projection, the loss.
func (c *stepCompiler) headForward() {
	p, h := c.pass, &c.edges.Head
	c.mark(-1, "output and loss")
	c.setRes(h.Input)
	kept, out, until := c.forwardDropping(h, keepAll, noSlot, p.res)
	c.free(out)
	p.res = noSlot
	p.headKept = kept
	p.until = keep(p.until, until)
	if p.keep {
		c.free(p.ag) // freed by the root's post-forward
		p.ag = noSlot
	}
}

// headBackward is the loss's and the output projection's backward.
func (c *stepCompiler) headBackward() {
	p, h := c.pass, &c.edges.Head
	c.mark(-1, "loss and output")
	// The tied output projection creates the word embedding's gradient in
	// its backward, before any block's.
	grads := addBytes(p.headGrads, p.tiedGrads)
	if p.gradsHeld && !p.f2 {
		grads = 0
	}
	c.dsBucket(false)
	if p.iter == 2 {
		c.prog.ops = append(c.prog.ops, stepOp{kind: opAfterForward})
	}
	g, held := c.backward(h, p.headKept, bwdCall{mode: keepAll, grads: grads, outlives: true}, false, 0, -1, "loss and output")
	p.held = keep(p.held, held)
	c.keepGrads(-2, g)
	if p.f2 && c.r.headHeld(c.head, c.st) > 0 {
		// torchtitan's [norm, output] group reduces at its own
		// post-backward; a tied weight's gradient is the embedding's.
		c.splitTied()
		c.fsdp2Reduce(-1, "output reduce-scatter", -2)
	}
}

// keepGrads records g as unit k's gradients: FSDP2's unsharded ones until
// their group reduces them, the unit's own otherwise.
func (c *stepCompiler) keepGrads(k int, g slot) {
	if g == noSlot {
		return
	}
	if c.pass.f2 {
		c.pass.liveGrads[k+2] = append(c.pass.liveGrads[k+2], g)
		return
	}
	*c.gradsOf(k) = append(*c.gradsOf(k), g)
}

// blocksBackward runs the blocks' backward, last block first.
func (c *stepCompiler) blocksBackward() {
	runs := c.runs()
	for i := len(runs) - 1; i >= 0; i-- {
		c.maskGradsAt(runs[i][0])
		if rn := runs[i]; rn[1]-rn[0] > 1 {
			c.backwardRun(rn[0], rn[1])
		} else {
			c.blockBackward(rn[0])
		}
	}
}

// maskGradsAt allocates the gradients of the mask parts that get one when
// block l's backward begins (a block that does is never inside a run).
func (c *stepCompiler) maskGradsAt(l int) {
	p := c.pass
	for i, mp := range p.maskParts {
		if mp.grad > 0 && mp.gradAt == l && i < len(p.maskGrads) && p.maskGrads[i] == noSlot {
			p.maskGrads[i] = c.alloc(catTemporaries, mp.grad)
		}
	}
}

// blockBackward is block l's backward: its parameters gathered again, its
// recomputation, the walk of its ops, the gradients it leaves.
func (c *stepCompiler) blockBackward(l int) {
	r, p, a := c.r, c.pass, &c.acts[l]
	mode := p.modes[l]
	gStart, gEnd := r.recomputeGroup(l)
	group := gStart < gEnd
	recompute := r.checkpointed(l) && l == gEnd
	unshard := c.zero3 && !p.keep && c.blocks[l].h2d > 0
	if p.f2 && !p.keep {
		c.free(p.ag) // copied out below
		p.ag = noSlot
	}
	if unshard {
		c.mark(l, "unshard")
	} else {
		c.walkMark(l, recompute)
	}
	if r.offloaded(l, c.st) {
		c.fetch(p.kept[l], a, mode) // copied back for its backward
	}
	if group && l == gEnd {
		// Megatron's uniform recompute group runs its blocks' forward
		// again when the backward reaches its last block (megatron.go).
		for k := gStart; k < gEnd; k++ {
			p.groupLump[k] = c.alloc(catActivations, scale(c.acts[k].Saved, c.inflight))
		}
	}
	var ebuf [5]slot
	extra := c.unshardBackward(l, unshard, recompute, ebuf[:0])
	extra = append(extra, c.gradsBeforeReduce(l), c.stepInBackward(l))
	call := bwdCall{mode: mode, recompute: recompute, grads: c.layerGrads(l), outlives: r.savedFor(*a, l) == a.Saved}
	kept, lump := p.kept[l], Bytes(0)
	if group && l < gEnd {
		call.lump, call.rest, call.outlives = true, scale(a.Saved, max(c.inflight-1, 0)), true
		kept, lump = p.groupLump[l], scale(a.Saved, c.inflight)
	}
	g, held := c.backward(a, kept, call, p.withIn[l], lump, l, "")
	p.held = keep(p.held, held)
	c.keepGrads(l, g)
	c.afterBlockBackward(l, group && l == gStart, extra)
}

// afterBlockBackward is what follows block l's walk: masks and the group's
// input freed, the bridge's backward, the parameters resharded, the
// gradients reduced.
func (c *stepCompiler) afterBlockBackward(l int, groupStart bool, extra []slot) {
	r, p := c.r, c.pass
	for i, mp := range p.maskParts {
		if p.masks[i] != noSlot && mp.keptUntil(r, c.st.first, c.st.last) == l {
			c.free(p.masks[i])
			p.masks[i] = noSlot
		}
	}
	if groupStart {
		c.free(p.kept[l]) // the group's input
		c.free(p.othersBy[l])
		p.othersBy[l] = noSlot
	}
	for _, s := range extra {
		c.free(s)
	}
	if p.keep && !r.ppAccumulates() {
		c.free(p.unsharded[l]) // resharded in its post-backward
		p.unsharded[l] = noSlot
	}
	if l == c.edges.BridgeAt {
		c.bridgeBackward()
	}
	if p.f2 {
		c.fsdp2Reduce(l, "reduce-scatter", l)
	}
	if p.noSync && p.last {
		// The last micro-batch syncs: the accumulated unsharded gradient
		// is reduce-scattered to its shard.
		c.freeAll(c.gradsOf(l))
		*c.gradsOf(l) = append(*c.gradsOf(l), c.allocOn(catGradients, c.blocks[l].grads, c.blocks[l].gradSizes, 0))
	}
	if r.OptimizerInBackward && p.last {
		// The step runs in the grad hook and frees the gradient at once;
		// the layer's states now exist.
		c.freeAll(c.gradsOf(l))
		c.allocStates(l)
	}
}

// layerGrads is the gradients block l's backward creates.
func (c *stepCompiler) layerGrads(l int) Bytes {
	p := c.pass
	switch {
	case p.f2:
		return c.blocks[l].gradsLive
	case p.gradsHeld:
		return 0 // already live
	case p.noSync:
		return c.blocks[l].gradsFull // kept unsharded
	}
	return c.blocks[l].grads
}

// gradsBeforeReduce is ZeRO-2's (and FSDP1's) unsharded gradients of block
// l, live until its reduce-scatter.
func (c *stepCompiler) gradsBeforeReduce(l int) slot {
	r, p := c.r, c.pass
	if r.Parallel.ZeRO >= 2 && !p.f2 && !(p.noSync && !p.gradsHeld) {
		return c.alloc(catTemporaries, c.blocks[l].gradsFull)
	}
	return noSlot
}

// stepInBackward is the optimizer step's scratch when it runs in block l's
// grad hook (optimizer in backward).
func (c *stepCompiler) stepInBackward(l int) slot {
	r := c.r
	if !r.OptimizerInBackward {
		return noSlot
	}
	return c.alloc(catTemporaries, r.stepTemporary(c.blocks[l].trainable/r.stepShard(), c.blocks[l].largest, r.WeightsDType))
}

// walkMark marks block l's backward: its recomputation's moment first.
func (c *stepCompiler) walkMark(l int, recompute bool) {
	if recompute {
		c.mark(l, "recompute")
	} else {
		c.mark(l, "")
	}
}

// unshardBackward allocates what block l's backward needs gathered, after
// an offloaded shard's own moment (then it marks the block's next):
// FSDP/ZeRO-3 all-gather it again and prefetch the block before it (FSDP1's
// BACKWARD_PRE prefetch, _runtime_utils.py _prefetch_handle; DeepSpeed up
// to its prefetch bucket); FSDP2 copies out the all-gather its
// pre-backward prefetched and issues the next (fsdp2.go). The slots go
// into out.
func (c *stepCompiler) unshardBackward(l int, unshard, recompute bool, out []slot) []slot {
	r, p := c.r, c.pass
	if !c.zero3 || p.keep {
		return out
	}
	g := c.blocks[l].gathered
	if unshard {
		h2d := c.alloc(catTemporaries, c.blocks[l].h2d)
		out = append(out, c.alloc(catTemporaries, g))
		c.free(h2d)
		c.walkMark(l, recompute)
	} else {
		out = append(out, c.alloc(catTemporaries, g))
	}
	prev := l - 1
	if prev < c.st.first {
		return out
	}
	if p.f2 {
		p.ag = c.allocOn(catTemporaries, c.blocks[prev].gathered, nil, allGatherStream)
		return out
	}
	pre := c.blocks[prev].gathered
	if r.ds.on {
		pre = r.dsPrefetched(g, pre)
	}
	return append(out, c.alloc(catTemporaries, pre))
}

// bridgeBackward is the encoder-decoder bridge's backward, after the first
// decoder block's; what the model's output holds (the encoder output) stays.
func (c *stepCompiler) bridgeBackward() {
	p, br := c.pass, &c.edges.Bridge
	c.mark(-1, "encoder-decoder bridge")
	g, held := c.backward(br, p.bridgeKept, bwdCall{mode: keepAll, outlives: true}, false, 0, -1, "encoder-decoder bridge")
	c.free(g)
	c.free(p.bridgeOthers)
	p.bridgeKept, p.bridgeOthers = noSlot, noSlot
	p.held = keep(p.held, held)
	if o := scale(br.outlives, c.inflight) - br.outlives; o > 0 {
		p.held = append(p.held, c.allocLater(catActivations, o, pieces(o, br.outlives)))
	}
}

// embedBackward is the embedding side's backward (a vision tower's too).
func (c *stepCompiler) embedBackward() {
	r, p := c.r, c.pass
	if !c.st.embed {
		return
	}
	var vg Bytes
	// The gradients waiting for the embedding side: its ops say which
	// exist while each runs (heldGrad).
	for i, g := range p.maskGrads {
		c.free(g)
		p.maskGrads[i] = noSlot
	}
	if r.m.Vision != nil {
		// The projector's and the tower's backward (autograd runs them
		// before the token embedding's, created first), with their weight
		// gradients appearing op by op.
		if !p.gradsHeld {
			vg = Bytes(float64(c.embed.grads) * r.visionGradShare())
		}
		e := &c.edges.Embed
		c.mark(-1, "projector and vision tower")
		g, held := c.backward(e, p.embedKept, bwdCall{mode: keepAll, grads: vg}, false, 0, -1, "projector and vision tower")
		c.free(held)
		c.keepGrads(-1, g)
	} else {
		c.free(p.embedKept)
	}
	p.embedKept = noSlot
	c.mark(-1, "embedding")
	if !p.gradsHeld || p.f2 {
		if g := p.embedGrads - p.tiedGrads - vg; g > 0 {
			c.keepGrads(-1, c.alloc(catGradients, g))
		}
	}
}

// endBackward is what the end of backward frees and reduces.
func (c *stepCompiler) endBackward() {
	r, p := c.r, c.pass
	c.freeAll(&p.others) // the other micro-batches' saved tensors
	for l, s := range p.othersBy {
		c.free(s)
		p.othersBy[l] = noSlot
	}
	c.free(p.root) // resharded by the root's post-backward
	p.root = noSlot
	if p.f2 {
		c.fsdp2EndBackward()
	}
	c.freeAll(&p.held) // backward returned; the loop drops the output
	if p.noSync && p.last {
		// The root's post-backward reduce-scatters its accumulated gradients.
		for _, k := range []int{-1, -2} {
			if k == -1 && !c.st.embed || k == -2 && !c.st.head {
				continue
			}
			c.freeAll(c.gradsOf(k))
			u := c.unit(k)
			*c.gradsOf(k) = append(*c.gradsOf(k), c.allocOn(catGradients, u.grads, u.gradSizes, 0))
		}
	}
	if r.OptimizerInBackward && p.last {
		c.freeAllGrads()
		for _, k := range c.units() {
			c.allocStates(k)
		}
	}
	if p.last && r.fsdp1Offload() {
		c.freeAllGrads() // the final callback moves them to the host
	}
}

// freeAllGrads frees every unit's gradients.
func (c *stepCompiler) freeAllGrads() {
	for i := range c.grads {
		c.freeAll(&c.grads[i])
	}
}

// allocStates allocates unit k's optimizer states, the first time.
func (c *stepCompiler) allocStates(k int) {
	if c.states[k+2] == noSlot {
		u := c.unit(k)
		c.states[k+2] = c.allocOn(catOptimizerStates, u.states, u.stateSizes, 0)
	}
}
