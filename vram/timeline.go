package vram

import "fmt"

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

// simulation holds what the timeline replays.
type simulation struct {
	r       *resolved
	blocks  []unitMem
	embed   unitMem
	head    unitMem
	acts    []BlockActivations // per layer
	edges   edgeActivations
	events  []Event
	record  bool      // keep every event (Timeline); else only the peak and maxima
	peak    Event     // the event with the most live bytes
	peakTot Bytes     // its total
	static  Breakdown // category-wise maxima over all events
	stageIx int
	walk    walkMemo // the last backward walk's winning op
	same    []bool   // block l needs the same memory as block l+1
}

// walkMemo remembers which op of a backward walk needs the most memory. The
// winner does not depend on what else is live (that adds to every op
// alike), so identical blocks reuse it instead of walking every op again.
type walkMemo struct {
	bwd      *bwdStep
	saved    Bytes
	grads    Bytes
	inflight float64
	ix       int
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
	if r.Parallel.PPSchedule == "gpipe" {
		return float64(m)
	}
	switch r.Parallel.PPSchedule {
	case "zbv":
		return zbvInflight(k, r.pp, m, r.zbvKeep(r.stages()[k]))
	case "dualpipev":
		return splitInflight(dualPipeVOrder(k, r.pp, m), 2, r.zbvKeep(r.stages()[k]))
	case "interleaved_zb":
		v := r.virtualStages()
		return splitInflight(interleavedZBOrder(k, r.pp, v, m), v, r.zbvKeep(r.stages()[k]))
	}
	f := float64(r.pp - k)
	if r.Parallel.PPSchedule == "interleaved_1f1b" && r.Parallel.VirtualStages > 1 {
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
func blockActivations(r *resolved) []BlockActivations {
	rr := *r.pipelineMicro()
	acts := make([]BlockActivations, r.m.Layers)
	var byKind [blockKinds]BlockActivations
	var have [blockKinds]bool
	for i := range acts {
		if i == 0 && r.inputNoGrad() {
			acts[0] = buildBlock(&rr, 0) // its input needs no gradient
			continue
		}
		k := r.m.blockKind(i)
		if !have[k] {
			byKind[k], have[k] = buildBlock(&rr, i), true
		}
		acts[i] = byKind[k]
	}
	return acts
}

// simulateTraining builds the timeline of the most loaded pipeline stage.
// With record false only the peak event and the category maxima are kept
// (Timeline.Events stays empty), which is what Estimate needs.
func simulateTraining(r *resolved, blocks []unitMem, embed, head unitMem, record bool) Timeline {
	acts := blockActivations(r)
	edges := buildEdges(r.pipelineMicro())
	var best Timeline
	for k, st := range r.stages() {
		s := &simulation{r: r, blocks: blocks, embed: embed, head: head, acts: acts, edges: edges, stageIx: k, record: record}
		if record {
			s.events = make([]Event, 0, 8*(st.last-st.first)+32)
		}
		tl := s.run(st)
		if k == 0 || tl.PeakEvent().Live.Total() > best.PeakEvent().Live.Total() {
			best = tl
		}
	}
	best.block = acts[0]
	if r.inputNoGrad() && len(acts) > 1 {
		best.block = acts[1] // a block whose input needs a gradient, as all but the first
	}
	return best
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// run replays iteration 1 and a steady-state iteration on one stage.
func (s *simulation) run(st stage) Timeline {
	r := s.r
	var stageUnits unitMem
	for l := st.first; l < st.last; l++ {
		stageUnits.add(s.blocks[l])
	}
	if st.embed {
		stageUnits.add(s.embed)
	}
	if st.head {
		stageUnits.add(s.head)
	}
	inflight := r.inflight(s.stageIx)
	training := r.Optimizer != "none" || r.Trainable != "frozen"
	zero3 := r.Parallel.ZeRO == 3 || r.Parallel.CPUOffload == "optimizer+params"

	other := scale(s.edges.Inputs, inflight)
	if r.dp > 1 && r.Parallel.ZeRO == 0 && training {
		// DDP's reducer keeps flat bucket buffers as large as the gradients
		// (torch/nn/parallel/distributed.py, gradient_as_bucket_view=False).
		other = addBytes(other, stageUnits.gradsFull)
	}
	if b, persistent := r.dsBucket(); persistent {
		other = addBytes(other, b) // ZeRO-3's flat gradient bucket, from initialisation on
	}
	base := Breakdown{Parameters: stageUnits.params, Other: other}
	master := stageUnits.master
	states := stageUnits.states

	micros := []int{1}
	if r.GradAccum > 1 {
		micros = append(micros, r.GradAccum)
	}
	for iter := 1; iter <= 2; iter++ {
		for _, micro := range micros {
			live := base
			live.OptimizerStates = master // master copies exist from the start (DeepSpeed/Megatron build them at init)
			if iter > 1 && !r.OptimizerInBackward {
				live.OptimizerStates = addBytes(master, states)
			}
			gradsHeld := micro > 1 || (iter > 1 && r.KeepGrads)
			if gradsHeld && !r.OptimizerInBackward {
				live.Gradients = stageUnits.grads
				if micro > 1 && r.fsdp1NoSync() {
					live.Gradients = stageUnits.gradsFull // accumulated unsharded
				}
			}
			s.iteration(st, iter, micro, live, gradsHeld, inflight, zero3, stageUnits)
		}
	}
	tl := Timeline{Events: s.events, Stage: s.stageIx, peak: s.peak, static: s.static, host: s.hostMemory(st, stageUnits)}
	var peak Bytes
	for i := range tl.Events {
		if t := tl.Events[i].Live.Total(); t > peak {
			tl.Peak, peak = i, t
		}
	}
	return tl
}

func (s *simulation) emit(iter, micro int, phase string, layer int, name string, live Breakdown, temp Bytes) {
	live.Temporaries = addBytes(live.Temporaries, temp)
	t := live.Total()
	s.static = s.static.Max(live)
	if !s.record && t <= s.peakTot && s.peakTot != 0 {
		return // neither kept nor the peak
	}
	e := Event{Iteration: iter, Micro: micro, Phase: phase, Layer: layer, Name: name, Live: live}
	if t > s.peakTot || s.peakTot == 0 {
		s.peak, s.peakTot = e, t
	}
	if s.record {
		s.events = append(s.events, e)
	}
}

// sameBlock reports whether blocks a and b need the same memory: the same
// activation program, checkpointing and persistent memory.
func (s *simulation) sameBlock(a, b int) bool {
	r, x, y := s.r, &s.blocks[a], &s.blocks[b]
	return s.acts[a].prog == s.acts[b].prog && r.checkpointed(a) == r.checkpointed(b) &&
		x.params == y.params && x.grads == y.grads && x.gradsFull == y.gradsFull &&
		x.states == y.states && x.gathered == y.gathered && x.trainable == y.trainable
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
	return r.Framework == "plain_pytorch" || r.Framework == "accelerate" || r.Framework == "litgpt"
}

// checkpointed reports whether block l keeps only its input.
func (r *resolved) checkpointed(l int) bool {
	if r.RecomputeMethod == "block" {
		return r.chunkIndex(l) < r.RecomputeNumLayers
	}
	return (r.Checkpointing == "full" || r.Checkpointing == "op") && (l+r.ckptOffset)%r.CheckpointEvery == 0
}

// savedFor is what block l holds from its forward to its backward.
func (r *resolved) savedFor(a BlockActivations, l int) Bytes {
	switch {
	case r.checkpointed(l) && r.Checkpointing == "op":
		return a.SavedOp
	case r.checkpointed(l):
		if start, _ := r.recomputeGroup(l); start != l {
			return 0 // inside a uniform recompute group: only its first block's input is kept
		}
		return a.Input
	case r.Checkpointing == "selective":
		return a.SavedSelective
	case r.Compile:
		return a.SavedCompiled
	}
	return a.Saved
}

// withInput is live with a part's input (the hidden states it reads),
// which is live while the part runs but counted with its saved tensors
// only after it.
func withInput(live Breakdown, a BlockActivations) Breakdown {
	live.Activations = addBytes(live.Activations, a.Input)
	return live
}

func (s *simulation) iteration(st stage, iter, micro int, live Breakdown, gradsHeld bool, inflight float64, zero3 bool, su unitMem) {
	r := s.r
	last := micro == r.GradAccum
	f2 := zero3 && r.fsdp2()
	// gather is what block l's unit holds all-gathered while it runs: its
	// own parameters and the next unit's, prefetched in the order of the
	// pass (next is l+1 in forward, l−1 in backward: FSDP1's BACKWARD_PRE
	// prefetch, _runtime_utils.py _prefetch_handle).
	gather := func(l, next int) Bytes {
		if !zero3 {
			return 0
		}
		g := s.blocks[l].gathered
		if f2 {
			// FSDP2: the block's unsharded parameters and its all-gather
			// output, whose free waits for the next block's copy-out
			// (fsdp2Forward).
			return addBytes(g, g)
		}
		// FSDP/ZeRO-3 all-gather the current unit and prefetch the next
		// (DeepSpeed: up to its prefetch bucket).
		if next < st.first || next >= st.last {
			return g
		}
		if r.ds.on {
			return addBytes(g, r.dsPrefetched(g, s.blocks[next].gathered))
		}
		return addBytes(g, s.blocks[next].gathered)
	}
	// FSDP2 (per-parameter fully_shard, resolved.fsdp2): the root's own parameters
	// (embedding, final norm, output layer) are all-gathered by the root's
	// pre-forward and stay unsharded until the root's post-backward, since
	// the root is not resharded after forward (torch/distributed/fsdp/
	// _fully_shard/_fsdp_state.py FSDPState._lazy_init: "For the root, do
	// not reshard after forward", post_forward_mesh_info = None). With
	// reshard_after_forward=False the blocks' unsharded parameters stay
	// too, each from its forward to its backward.
	keep := r.keepsUnsharded()
	root := r.rootHeld(s.embed, s.head, st)
	live.Temporaries = addBytes(live.Temporaries, root)
	// Forward. untilLoss is what the model's forward holds until it
	// returns, after the loss (activations.go holdOutput).
	var untilLoss Bytes
	if st.embed {
		s.emit(iter, micro, "forward", -1, "embedding", live, s.edges.Embed.ForwardPeak)
		live.Activations = addBytes(live.Activations, scale(s.edges.Embed.Saved, inflight))
		// What the forward holds of the embedding side until it returns
		// (a vision-language model's image features).
		untilLoss = addBytes(untilLoss, scale(s.edges.Embed.untilLoss, inflight))
		live.Activations = addBytes(live.Activations, scale(s.edges.Embed.untilLoss, inflight))
	}
	// The attention masks live while the blocks run; checkpoints keep each
	// as an input of the blocks of its kind until their backward.
	var masks []maskPart
	if st.embed {
		masks = s.edges.Masks
	}
	live.Activations = addBytes(live.Activations, maskBytes(masks))
	// Across a run of identical blocks every category changes by the same
	// amount per block, so its maxima are at the run's ends: without a
	// recorded timeline the blocks inside a run are accounted, not emitted.
	if s.same == nil {
		s.same = make([]bool, len(s.blocks))
		for l := 0; l+1 < len(s.blocks); l++ {
			s.same[l] = s.sameBlock(l, l+1)
		}
	}
	inside := func(l int) bool {
		// Under FSDP2 the second block in backward is the first to meet a
		// retained reduce-scatter input, and the second to last the last
		// with a prefetched all-gather: the ends of the runs between.
		return !s.record && l > st.first && l < st.last-1 && s.same[l-1] && s.same[l] && !(f2 && (l == st.last-2 || l == st.first+1))
	}
	for l := st.first; l < st.last; l++ {
		if l == s.edges.BridgeAt {
			br := s.edges.Bridge
			s.emit(iter, micro, "forward", -1, "encoder-decoder bridge", live, br.ForwardPeak)
			live.Activations = addBytes(live.Activations, scale(br.Saved, inflight))
		}
		a := s.acts[l]
		s.unshardOffloaded(iter, micro, "forward", l, live)
		if !inside(l) {
			// The block's input (the last block's output) is live while
			// it runs; its saved tensors join live only after.
			s.emit(iter, micro, "forward", l, "", withInput(live, a), addBytes(a.ForwardPeak, gather(l, l+1)))
		}
		live.Activations = addBytes(live.Activations, scale(r.deviceSaved(a, l, st), inflight))
		held := a.untilLoss
		if l == 0 && r.inputsEmbedsHeld() {
			held = addBytes(held, a.Input) // the forward's inputs_embeds
		}
		untilLoss = addBytes(untilLoss, scale(held, inflight))
		live.Activations = addBytes(live.Activations, scale(held, inflight))
		if keep {
			live.Temporaries = addBytes(live.Temporaries, s.blocks[l].gathered)
		}
		for _, mp := range masks {
			if mp.keptUntil(r, st.first, st.last) < 0 && mp.forwardEnd(st.first, st.last) == l {
				live.Activations -= mp.bytes // its stack (the model's forward) returned
			}
		}
	}
	// FSDP2: the last block's all-gather output outlives the blocks'
	// forward (fsdp2Forward), and resharded blocks have the same amount
	// all-gathered again from the start of backward (fsdp2Backward).
	var lingering Bytes
	if f2 && st.last > st.first {
		lingering = s.blocks[st.last-1].gathered
	}
	live.Temporaries = addBytes(live.Temporaries, lingering)
	var held Bytes   // the model output's tensors, freed when backward returns
	var rsHeld Bytes // FSDP2: the last reduce-scatter input, retained (fsdp2Reduce)
	// othersHeld is what the pipeline's other micro-batches in flight still
	// hold of the parts this one's backward has passed.
	var othersHeld Bytes
	// With tied embeddings the word embedding's gradient comes from the
	// output projection; the rest of the embedding unit's (positions, token
	// types, norms) from the embedding's own backward.
	embedGrads, headGrads := s.embed.grads, s.head.grads
	noSync := r.fsdp1NoSync()
	if noSync {
		embedGrads, headGrads = s.embed.gradsFull, s.head.gradsFull
	}
	if f2 {
		// FSDP2's gradients are all-gathered parameters' until the
		// group's post-backward reduce-scatters them (fsdp2Backward).
		embedGrads, headGrads = s.embed.gradsLive, s.head.gradsLive
	}
	var tiedGrads Bytes
	if r.m.TiedEmbeddings && st.embed && st.head && r.m.Head == "lm" && s.embed.trainable > 0 {
		e := r.m.WordEmbedProjDim
		if e == 0 {
			e = r.m.Hidden
		}
		word := min(int64(r.m.Vocab)*int64(e)/int64(r.tp), s.embed.trainable)
		tiedGrads = Bytes(float64(embedGrads) * float64(word) / float64(s.embed.trainable))
	}
	headHeld := r.headHeld(s.head, st)
	live.Temporaries = addBytes(live.Temporaries, headHeld)
	// DeepSpeed ZeRO-1/2: the flat gradient bucket(s) exist from the start
	// of backward (DeepSpeed.ReduceBucketSize) to the step.
	bucket, persistent := r.dsBucket()
	if persistent {
		bucket = 0
	}
	if st.head {
		s.emit(iter, micro, "loss", -1, "output and loss", withInput(live, s.edges.Head), s.edges.Head.ForwardPeak)
	}
	live.Activations -= untilLoss // the forward returned
	if st.head {
		live.Activations = addBytes(live.Activations, s.edges.Head.Saved)
		if keep {
			live.Temporaries -= lingering // freed by the root's post-forward
			lingering = 0
		}
		// Backward through the loss and the output projection, op by op.
		if tiedGrads > 0 {
			// The tied output projection creates the word embedding's
			// gradient in its backward, before any block's.
			headGrads = addBytes(headGrads, tiedGrads)
		}
		if gradsHeld && !f2 {
			headGrads = 0
		}
		live.Other = addBytes(live.Other, bucket)
		bucket = 0
		s.emit(iter, micro, "backward", -1, "loss and output", s.walkBackward(live, s.edges.Head, s.edges.Head.Saved, headGrads, 1, 0), 0)
		live.Gradients = addBytes(live.Gradients, headGrads)
		live.Activations -= s.edges.Head.Saved - s.edges.Head.outlives
		held = s.edges.Head.outlives
		if f2 && headHeld > 0 {
			// torchtitan's [norm, output] group reduces at its own
			// post-backward (a tied weight's gradient is the embedding's).
			live = s.fsdp2Reduce(iter, micro, -1, "output reduce-scatter", live, headGrads-tiedGrads, s.head, gradsHeld, &rsHeld, 0)
		}
	}
	live.Temporaries -= lingering + headHeld // the head's post-backward reshards it
	live.Other = addBytes(live.Other, bucket)
	// Backward, last block first.
	for l := st.last - 1; l >= st.first; l-- {
		a := s.acts[l]
		saved := r.savedFor(a, l)
		if r.offloaded(l, st) {
			live.Activations = addBytes(live.Activations, saved) // copied back for its backward
		}
		// A Megatron uniform recompute group runs its blocks' forward again
		// when the backward reaches its last block: the others' saved
		// tensors exist from then until their own backward.
		gStart, gEnd := r.recomputeGroup(l)
		var release Bytes
		if gStart < gEnd {
			if l < gEnd {
				saved = a.Saved
				release = scale(a.Saved, inflight)
				if l == gStart {
					release = addBytes(release, scale(a.Input, inflight))
				}
			} else {
				var re Bytes
				for k := gStart; k < gEnd; k++ {
					re = addBytes(re, scale(s.acts[k].Saved, inflight))
				}
				live.Activations = addBytes(live.Activations, re)
			}
		}
		if !keep {
			s.unshardOffloaded(iter, micro, "backward", l, live)
		}
		extra := gather(l, l-1)
		if f2 {
			extra = s.fsdp2Backward(st, l, keep)
		} else if keep {
			extra = 0 // unsharded since its forward: nothing to all-gather
		}
		if r.Parallel.ZeRO >= 2 && !f2 && !(noSync && !gradsHeld) {
			extra = addBytes(extra, s.blocks[l].gradsFull) // unsharded until reduce-scatter
		}
		if r.OptimizerInBackward {
			extra = addBytes(extra, r.stepTemporary(s.blocks[l].trainable/r.stepShard(), s.blocks[l].largest, r.WeightsDType))
		}
		layerGrads := s.blocks[l].grads
		switch {
		case f2:
			layerGrads = s.blocks[l].gradsLive
		case gradsHeld:
			layerGrads = 0 // already live
		case noSync:
			layerGrads = s.blocks[l].gradsFull // kept unsharded
		}
		if !inside(l) || gStart < gEnd {
			if r.checkpointed(l) && l == gEnd {
				// Recomputation runs the block's forward again, up to its
				// last saved tensor, with the gradients of its output (and
				// of its last saving op's) already in flight.
				s.emit(iter, micro, "backward", l, "recompute", live, addBytes(addBytes(a.recomputePeak, a.recomputeGrad), extra))
			}
			s.emit(iter, micro, "backward", l, "", s.walkBackward(live, a, saved, layerGrads, inflight, extra), 0)
		}
		for _, mp := range masks {
			if mp.keptUntil(r, st.first, st.last) == l {
				live.Activations -= mp.bytes
			}
		}
		if l == s.edges.BridgeAt {
			// The bridge's backward, after the first decoder block's; what
			// the model's output holds (the encoder output) stays.
			br := s.edges.Bridge
			s.emit(iter, micro, "backward", -1, "encoder-decoder bridge", s.walkBackward(live, br, br.Saved, 0, inflight, 0), 0)
			live.Activations = addBytes(live.Activations-scale(br.Saved, inflight), scale(br.outlives, inflight))
			held = addBytes(held, scale(br.outlives, inflight))
		}
		live.Gradients = addBytes(live.Gradients, layerGrads)
		if gStart < gEnd {
			live.Activations -= release
		} else {
			// This micro-batch's saved tensors go; the other micro-batches
			// in flight keep theirs until their own backward, after this one.
			live.Activations -= saved
			othersHeld = addBytes(othersHeld, scale(saved, inflight)-saved)
		}
		if keep && !r.ppAccumulates() {
			live.Temporaries -= s.blocks[l].gathered // resharded in its post-backward
		}
		if f2 {
			live = s.fsdp2Reduce(iter, micro, l, "reduce-scatter", live, layerGrads, s.blocks[l], gradsHeld, &rsHeld, s.fsdp2Prefetched(st, l, keep))
		}
		if noSync && last {
			// The last micro-batch syncs: the accumulated unsharded
			// gradient is reduce-scattered to its shard.
			live.Gradients = addBytes(live.Gradients-s.blocks[l].gradsFull, s.blocks[l].grads)
		}
		if saved == a.Saved {
			// What the model's output holds outlives the block's backward.
			live.Activations = addBytes(live.Activations, scale(a.outlives, inflight))
			held = addBytes(held, scale(a.outlives, inflight))
		}
		if r.OptimizerInBackward && last {
			// The step runs in the grad hook and frees the gradient at once;
			// the layer's states now exist.
			live.Gradients -= s.blocks[l].grads
			if iter == 1 {
				live.OptimizerStates = addBytes(live.OptimizerStates, s.blocks[l].states)
			}
		}
	}
	if st.embed {
		if r.m.Vision != nil {
			// The projector's and the tower's backward (autograd runs them
			// before the token embedding's, created first), with their
			// weight gradients appearing op by op.
			var vg Bytes
			if !gradsHeld {
				vg = Bytes(float64(s.embed.grads) * r.visionGradShare())
			}
			e := s.edges.Embed
			s.emit(iter, micro, "backward", -1, "projector and vision tower", s.walkBackward(live, e, e.Saved, vg, inflight, 0), 0)
		}
		if !gradsHeld || f2 {
			live.Gradients = addBytes(live.Gradients, embedGrads-tiedGrads)
		}
		live.Activations -= s.edges.Embed.Saved
		othersHeld = addBytes(othersHeld, scale(s.edges.Embed.Saved, inflight)-s.edges.Embed.Saved)
		s.emit(iter, micro, "backward", -1, "embedding", live, 0)
	}
	live.Activations -= othersHeld
	if f2 {
		// The root's post-backward: its (or torchtitan's embedding group's)
		// gradients reduce last; the retained input is freed when backward
		// ends (_fsdp_state.py _end_backward_iteration).
		var u unitMem
		var inFlight Bytes
		if st.embed {
			u.add(s.embed)
			inFlight = embedGrads
		}
		if st.head && headHeld == 0 {
			u.add(s.head)
			inFlight = addBytes(inFlight, headGrads-tiedGrads) // the tied share is in embedGrads
		}
		live.Temporaries -= root // resharded before its reduce-scatter
		root = 0
		live = s.fsdp2Reduce(iter, micro, -1, "root reduce-scatter", live, inFlight, u, gradsHeld, &rsHeld, 0)
		live.Temporaries -= rsHeld
		if r.ppAccumulates() && last {
			live = s.fsdp2PipelineReduce(iter, micro, st, live, su, keep)
		}
	}
	live.Activations -= held // backward returned; the loop drops the output
	live.Temporaries -= root // the root's post-backward reshards it
	if noSync && last {
		// The root's post-backward reduce-scatters its accumulated gradients.
		var u unitMem
		if st.embed {
			u.add(s.embed)
		}
		if st.head {
			u.add(s.head)
		}
		live.Gradients = addBytes(live.Gradients-u.gradsFull, u.grads)
	}
	if r.OptimizerInBackward && last {
		live.Gradients = 0
	}
	if last && r.fsdp1Offload() {
		live.Gradients -= su.grads // the final callback moves them to the host
	}
	if !last {
		return
	}
	if b, persistent := r.dsBucket(); !persistent {
		live.Other -= b // released as the step begins
	}
	// Optimizer step: iteration 1 creates the states (lazily, zeros_like).
	if r.Optimizer != "none" && !r.OptimizerInBackward {
		if iter == 1 {
			live.OptimizerStates = addBytes(live.OptimizerStates, su.states)
		}
		temp := r.stepTemporary(su.trainable/r.stepShard(), su.largest, stateDTypeOf(r))
		if r.RetainGradCopies {
			// A second copy of every gradient (e.g. out-of-place clipping
			// keeping clipped copies) lives through the step.
			live.Gradients = addBytes(live.Gradients, su.grads)
		}
		if r.offloadOf().optimizer {
			temp = r.offloadStepCopy(su.trainable / r.stepShard()) // the step runs on the CPU
		}
		s.emit(iter, micro, "optimizer", -1, "optimizer step", live, temp)
	}
}

// walkBackward is the most memory a block's (or the head's) backward needs:
// op by op, its saved tensors shrink while its weight gradients (grads in
// all) grow, with the op's gradients in flight and extra (all-gathers,
// unsharded gradients) on top. saved is what the block holds from its forward
// (its input only when checkpointed: recomputation rebuilds the rest).
func (s *simulation) walkBackward(live Breakdown, a BlockActivations, saved, grads Bytes, inflight float64, extra Bytes) Breakdown {
	if len(a.bwd) == 0 {
		return live
	}
	others := live.Activations - scale(saved, inflight)
	// Only activations, gradients and temporaries change from op to op, so
	// the candidates are compared on those three and the winner built once.
	at := func(i int) (act, grad, temp Bytes) {
		step := &a.bwd[i]
		// Recomputation rebuilds the saved tensors the walk lists; what the
		// forward kept (the selective set, or the checkpoint's input) is among
		// them, except a checkpoint input no op of the block saves.
		held := step.saved
		if saved == a.Input && saved != a.Saved && !a.inputSaved {
			held = addBytes(held, saved)
		}
		if saved == a.SavedCompiled && saved < a.Saved && s.r.Compile {
			// A compiled block's backward recomputes the fusible work in
			// its kernels: what it holds shrinks from the compiled set.
			held = Bytes(float64(held) * float64(saved) / float64(a.Saved))
		}
		// The other micro-batches in flight hold what the forward kept; only
		// the one back-propagated holds the walk's (recomputed) set.
		act = addBytes(addBytes(others, scale(saved, max(inflight-1, 0))), held)
		grad = addBytes(live.Gradients, Bytes(float64(grads)*step.gradFrac))
		temp = addBytes(live.Temporaries, addBytes(step.inflight, extra))
		return act, grad, temp
	}
	key := walkMemo{bwd: &a.bwd[0], saved: saved, grads: grads, inflight: inflight}
	ix := -1
	if m := s.walk; m.bwd == key.bwd && m.saved == saved && m.grads == grads && m.inflight == inflight {
		ix = m.ix
	}
	best := live
	if ix >= 0 {
		act, grad, temp := at(ix)
		if addBytes(addBytes(act, grad), temp) < MaxBytes {
			best.Activations, best.Gradients, best.Temporaries = act, grad, temp
			return best
		}
	}
	bestSum := Bytes(-1)
	for i := range a.bwd {
		act, grad, temp := at(i)
		if sum := addBytes(addBytes(act, grad), temp); sum > bestSum {
			best.Activations, best.Gradients, best.Temporaries = act, grad, temp
			bestSum, ix = sum, i
		}
	}
	key.ix = ix
	s.walk = key
	return best
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
