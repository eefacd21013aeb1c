package vram

import (
	"fmt"
	"slices"
)

// Event is one moment of a training step with what is live on the GPU.
type Event struct {
	Iteration int       `json:"iteration"` // 1: first step (optimizer states appear in it); 2: steady state
	Micro     int       `json:"micro"`     // micro-batch within gradient accumulation (1, or the last)
	Phase     string    `json:"phase"`     // forward, loss, backward, optimizer
	Layer     int       `json:"layer"`     // block index, -1 outside the blocks
	Name      string    `json:"name"`
	Live      Breakdown `json:"live"`
}

// Timeline is the memory of training iterations over time, event by event,
// on the most loaded GPU (pipeline stage).
type Timeline struct {
	Events []Event `json:"events"`
	Peak   int     `json:"peak"` // index of the event with the most live bytes
	Stage  int     `json:"stage"`

	block  BlockActivations // block 0's inventory, for TrainingEstimate
	peak   Event            // the peak event (also without recorded events)
	static Breakdown        // category-wise maxima
	host   Breakdown        // host memory the stage's offload takes (offload.go)
	// afterForward: live once the steady iteration's forward and loss
	// have returned (on the stage with the head).
	afterForward Breakdown
	end          vec // live once the step's program has run
}

// PeakEvent returns the event where allocated memory peaks.
func (t Timeline) PeakEvent() Event { return t.peak }

// Where describes the peak in words: "iteration 2, backward, block 3".
func (e Event) Where() string {
	s := fmt.Sprintf("iteration %d, %s", e.Iteration, e.Phase)
	if e.Layer >= 0 {
		s += fmt.Sprintf(", block %d", e.Layer)
		if e.Name != "" {
			s += " " + e.Name // recompute
		}
	} else if e.Name != "" {
		s += ", " + e.Name
	}
	return s
}

// inflight is how many micro-batches' activations a pipeline stage holds:
// 1F1B keeps pp−k on stage k (Narayanan et al. 2021 §2.2); interleaving adds
// (pp−1)/(pp·v) of a stage (Korthikanti et al. 2022 §4.2.3, Megatron
// theoretical_memory_usage.py).
func (r *resolved) inflight(k int) float64 {
	if r.pp == 1 {
		return 1
	}
	m := r.Parallel.PPMicrobatches
	if m < r.pp {
		m = r.pp
	}
	if r.Parallel.PPSchedule == ScheduleGPipe {
		return float64(m)
	}
	switch r.Parallel.PPSchedule {
	case ScheduleZBV:
		return zbvInflight(k, r.pp, m, r.zbvKeep(r.stages()[k]))
	case ScheduleDualPipeV:
		return splitInflight(dualPipeVOrder(k, r.pp, m), 2, r.zbvKeep(r.stages()[k]))
	case ScheduleInterleavedZB:
		v := r.virtualStages()
		return splitInflight(interleavedZBOrder(k, r.pp, v, m), v, r.zbvKeep(r.stages()[k]))
	}
	f := float64(r.pp - k)
	if r.Parallel.PPSchedule == ScheduleInterleaved1F1B && r.Parallel.VirtualStages > 1 {
		f *= 1 + float64(r.pp-1)/float64(r.pp*r.Parallel.VirtualStages)
	}
	return f
}

// pipelineMicro is r for one pipeline microbatch (micro_batch /
// pp_microbatches sequences) under pipeline parallelism, r itself
// otherwise: what each stage's forward and backward see at a time.
func (r *resolved) pipelineMicro() *resolved {
	if r.pp <= 1 {
		return r
	}
	rr := *r
	rr.MicroBatch = max(1, r.MicroBatch/max(1, r.Parallel.PPMicrobatches))
	return &rr
}

// blockActivations builds the inventory of every block, once per kind of
// block, for one pipeline microbatch (pipelineMicro).
func blockActivations(r *resolved) []BlockActivations { return blockActivationsIn(nil, r) }

// blockActivationsIn is blockActivations in dst's storage where it has room.
func blockActivationsIn(dst []BlockActivations, r *resolved) []BlockActivations {
	rr := r.pipelineMicro() // r itself without pipeline parallelism
	acts := resize(dst[:0], r.m.Layers)
	var byKind [blockKinds]BlockActivations
	var have [blockKinds]bool
	for i := range acts {
		if i == 0 && r.inputNoGrad() {
			acts[0] = buildBlock(rr, 0) // its input needs no gradient
			continue
		}
		k := r.kind(i)
		if !have[k] {
			byKind[k], have[k] = buildBlock(rr, i), true
		}
		acts[i] = byKind[k]
	}
	return acts
}

// stepShard is how many ways the optimizer step's work is split: the step
// runs on this rank's shard of the states under ZeRO ≥ 1 (and FSDP).
func (r *resolved) stepShard() int64 {
	if r.Parallel.ZeRO >= 1 {
		return int64(max(1, r.shard))
	}
	return 1
}

// keepsOutputs reports whether the framework's training loop holds the
// model's output (logits, past_key_values, hidden states) until backward
// ends. A plain loop does (`out = model(**batch); out.loss.backward()`), and
// so does litgpt's fit (`logits = model(x); fabric.backward(loss)`). The HF
// Trainer returns only the loss from compute_loss (trainer.py), torchtune's
// recipes `del logits` before backward ("free logits otherwise it peaks
// backward memory"), torchtitan's train step `del pred`, and Megatron's and
// DeepSpeed's engines return the loss.
func (r *resolved) keepsOutputs() bool {
	return r.Framework == FrameworkPlainPyTorch || r.Framework == FrameworkAccelerate || r.Framework == FrameworkLitGPT
}

// checkpointed reports whether block l keeps only its input.
func (r *resolved) checkpointed(l int) bool {
	if r.RecomputeMethod == "block" {
		return r.chunkIndex(l) < r.RecomputeNumLayers
	}
	return (r.Checkpointing == CheckpointFull || r.Checkpointing == CheckpointOp) && (l+r.ckptOffset)%r.CheckpointEvery == 0
}

// savedFor is what block l holds from its forward to its backward.
func (r *resolved) savedFor(a BlockActivations, l int) Bytes {
	switch {
	case r.checkpointed(l) && r.Checkpointing == CheckpointOp:
		return a.SavedOp
	case r.checkpointed(l):
		if start, _ := r.recomputeGroup(l); start != l {
			return 0 // inside a uniform recompute group: only its first block's input is kept
		}
		return a.Input
	case r.Checkpointing == CheckpointSelective:
		return a.SavedSelective
	case r.Compile:
		return a.SavedCompiled
	}
	return a.Saved
}

// simulateTraining compiles the step of each pipeline stage and evaluates
// it for the timeline (program.go); it returns the most loaded stage's
// timeline and, when keep, its program (for the replay). With record false
// only the peak event and the category maxima are kept (Timeline.Events
// stays empty), which is what Estimate needs.
func simulateTraining(r *resolved, blocks []unitMem, embed, head unitMem, record, keep bool) (Timeline, *program) {
	return simulateIn(nil, r, blocks, embed, head, record, keep)
}

// estimateScratch is the per-layer storage of an estimate, given back when
// it returns: a sweep or a solver makes thousands of estimates.
type estimateScratch struct {
	blocks  []unitMem
	acts    []BlockActivations
	effects []callEffect // the tally's, by block call (tally.go)
	spans   []spanMax
}

// done empties sc (so the pool holds no block inventories) and gives it back.
func (sc *estimateScratch) done() {
	clear(sc.blocks)
	clear(sc.acts)
	clear(sc.effects[:cap(sc.effects)])
	sc.effects, sc.spans = sc.effects[:0], sc.spans[:0]
	estimateScratches.Put(sc)
}

// simulateIn is simulateTraining with the block inventories in sc's
// storage (nil: fresh storage).
func simulateIn(sc *estimateScratch, r *resolved, blocks []unitMem, embed, head unitMem, record, keep bool) (Timeline, *program) {
	var acts []BlockActivations
	if sc != nil {
		sc.acts = blockActivationsIn(sc.acts, r)
		acts = sc.acts
	} else {
		acts = blockActivations(r)
	}
	edges := buildEdges(r.pipelineMicro())
	var best Timeline
	var bestBuf *stepBuffer
	var effects []callEffect
	var spans []spanMax
	if sc != nil {
		effects, spans = sc.effects[:0], sc.spans[:0]
	}
	var done []int // the stages evaluated
	for k, st := range r.stages() {
		if slices.ContainsFunc(done, func(j int) bool { return r.coveredBy(k, j, &edges) }) {
			continue
		}
		done = append(done, k)
		buf := stepBuffers.Get().(*stepBuffer)
		compileStep(buf, r, k, blocks, embed, head, acts, edges)
		t := &tally{record: record, effects: effects, spanStore: spans}
		t.run(&buf.prog, buf)
		effects, spans = t.effects, t.spanStore
		tl := Timeline{Events: t.events, Stage: k, peak: t.peak, static: t.static.breakdown(), afterForward: t.afterForward, end: t.cur}
		var peak Bytes
		for i := range tl.Events {
			if v := tl.Events[i].Live.Total(); v > peak {
				tl.Peak, peak = i, v
			}
		}
		if k > 0 && tl.peak.Live.Total() <= best.peak.Live.Total() {
			buf.put()
			continue
		}
		if bestBuf != nil {
			bestBuf.put()
		}
		best, bestBuf = tl, buf
		best.host = r.hostMemory(st, stageUnits(st, blocks, embed, head), acts)
	}
	if sc != nil {
		sc.effects, sc.spans = effects, spans
	}
	best.block = acts[0]
	if r.inputNoGrad() && len(acts) > 1 {
		best.block = acts[1] // a block whose input needs a gradient, as all but the first
	}
	if !keep {
		bestBuf.put()
		return best, nil
	}
	return best, &bestBuf.prog
}

// stageUnits is the persistent memory of stage st's units together.
func stageUnits(st stage, blocks []unitMem, embed, head unitMem) unitMem {
	var su unitMem
	for l := st.first; l < st.last; l++ {
		su.add(blocks[l])
	}
	if st.embed {
		su.add(embed)
	}
	if st.head {
		su.add(head)
	}
	return su
}

func stateDTypeOf(r *resolved) DType {
	if r.OptimizerStateDType != DTypeUnset && r.OptimizerStateDType.IsFloat() {
		return r.OptimizerStateDType
	}
	if r.MasterWeights != DTypeUnset {
		return r.MasterWeights
	}
	return r.trainableDType()
}
