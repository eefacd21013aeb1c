package vram

// Compiling a training step: the optimizer step after the last micro-batch
// (iteration 1 creates the states, lazily, zeros_like), then zero_grad.

// optimizerStep is the step after the last micro-batch.
func (c *stepCompiler) optimizerStep() {
	r := c.r
	if _, persistent := r.dsBucket(); !persistent {
		c.free(c.bucket) // released as the step begins
		c.bucket = noSlot
	}
	c.inPhase(phaseOptimizer)
	if r.Optimizer != "none" && !r.OptimizerInBackward {
		c.mark(-1, "optimizer step")
		for _, k := range c.units() {
			c.allocStates(k)
		}
		var retained slot = noSlot
		if r.RetainGradCopies {
			// A second copy of every gradient (e.g. out-of-place clipping
			// keeping clipped copies) lives through the step.
			retained = c.alloc(catGradients, c.su.grads)
		}
		temp := r.stepTemporary(c.su.trainable/r.stepShard(), c.su.largest, stateDTypeOf(r))
		if r.offloadOf().optimizer {
			temp = r.offloadStepCopy(c.su.trainable / r.stepShard()) // the step runs on the CPU
		}
		c.free(c.allocOn(catTemporaries, temp, c.stepPieces(temp), 0))
		c.free(retained)
	}
	if !r.KeepGrads {
		c.freeAllGrads()
	}
}

// stepPieces splits the step's scratch over the gradients' tensors, as
// foreach's per-tensor temporaries are.
func (c *stepCompiler) stepPieces(total Bytes) []Bytes {
	var sizes []Bytes
	for _, k := range c.units() {
		sizes = append(sizes, c.unit(k).gradSizes...)
	}
	if total <= 0 || len(sizes) < 2 || c.su.grads <= 0 {
		return nil
	}
	out := make([]Bytes, 0, len(sizes))
	var sum Bytes
	for _, g := range sizes[:len(sizes)-1] {
		b := Bytes(float64(total) * float64(g) / float64(c.su.grads))
		out = append(out, b)
		sum += b
	}
	if rest := total - sum; rest > 0 {
		out = append(out, rest)
	}
	return out
}
