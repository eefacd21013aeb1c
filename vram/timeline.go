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
	// afterForward: live once the steady iteration's forward and loss
	// have returned (on the stage with the head).
	afterForward Breakdown
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
	// afterForward is what is live once the steady iteration's (last)
	// forward and loss have returned, before its backward.
	afterForward Breakdown
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
	tl := Timeline{Events: s.events, Stage: s.stageIx, peak: s.peak, static: s.static, host: s.hostMemory(st, stageUnits), afterForward: s.afterForward}
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

// pass is one micro-batch's forward and backward (and, on the last, the
// optimizer step) on one stage: the state simulation.iteration's phases
// share, each phase a method below.
type pass struct {
	s           *simulation
	r           *resolved
	st          stage
	iter, micro int
	live        Breakdown
	gradsHeld   bool
	inflight    float64
	zero3, f2   bool
	keep, last  bool
	noSync      bool
	su          unitMem
	masks       []maskPart
	// root: the root's unsharded parameters (FSDP); untilLoss: what the
	// model's forward holds until it returns; lingering: FSDP2's last
	// all-gather output; held: the model output's tensors, freed when
	// backward returns; rsHeld: FSDP2's retained reduce-scatter input;
	// othersHeld: what the pipeline's other micro-batches in flight still
	// hold of the parts this one's backward has passed.
	root, untilLoss, lingering, held, rsHeld, othersHeld Bytes
	// The embedding's and the head's gradients as they appear (the tied
	// word embedding's from the output projection), the head's unsharded
	// parameters torchtitan holds, DeepSpeed ZeRO-1/2's bucket.
	embedGrads, headGrads, tiedGrads, headHeld, bucket Bytes
}

func (s *simulation) iteration(st stage, iter, micro int, live Breakdown, gradsHeld bool, inflight float64, zero3 bool, su unitMem) {
	r := s.r
	p := &pass{s: s, r: r, st: st, iter: iter, micro: micro, live: live, gradsHeld: gradsHeld, inflight: inflight,
		zero3: zero3, f2: zero3 && r.fsdp2(), last: micro == r.GradAccum, su: su}
	p.forward()
	p.prepareBackward()
	p.loss()
	p.blocksBackward()
	p.embedBackward()
	p.endBackward()
	if p.last {
		p.optimizerStep()
	}
}

// gather is what block l's unit holds all-gathered while it runs: its
// own parameters and the next unit's, prefetched in the order of the
// pass (next is l+1 in forward, l−1 in backward: FSDP1's BACKWARD_PRE
// prefetch, _runtime_utils.py _prefetch_handle).
func (p *pass) gather(l, next int) Bytes {
	r, s := p.r, p.s
	if !p.zero3 {
		return 0
	}
	g := s.blocks[l].gathered
	if p.f2 {
		// FSDP2: the block's unsharded parameters and its all-gather
		// output, whose free waits for the next block's copy-out
		// (fsdp2Forward).
		return addBytes(g, g)
	}
	// FSDP/ZeRO-3 all-gather the current unit and prefetch the next
	// (DeepSpeed: up to its prefetch bucket).
	if next < p.st.first || next >= p.st.last {
		return g
	}
	if r.ds.on {
		return addBytes(g, r.dsPrefetched(g, s.blocks[next].gathered))
	}
	return addBytes(g, s.blocks[next].gathered)
}

// inside reports whether block l is inside a run of identical blocks,
// whose moments are accounted, not emitted.
func (p *pass) inside(l int) bool {
	s := p.s
	// Under FSDP2 the second block in backward is the first to meet a
	// retained reduce-scatter input, and the second to last the last
	// with a prefetched all-gather: the ends of the runs between.
	return !s.record && l > p.st.first && l < p.st.last-1 && s.same[l-1] && s.same[l] && !(p.f2 && (l == p.st.last-2 || l == p.st.first+1))
}

// forward runs the embedding and the blocks.
func (p *pass) forward() {
	r, s := p.r, p.s
	// FSDP2 (per-parameter fully_shard, resolved.fsdp2): the root's own parameters
	// (embedding, final norm, output layer) are all-gathered by the root's
	// pre-forward and stay unsharded until the root's post-backward, since
	// the root is not resharded after forward (torch/distributed/fsdp/
	// _fully_shard/_fsdp_state.py FSDPState._lazy_init: "For the root, do
	// not reshard after forward", post_forward_mesh_info = None). With
	// reshard_after_forward=False the blocks' unsharded parameters stay
	// too, each from its forward to its backward.
	p.keep = r.keepsUnsharded()
	p.root = r.rootHeld(s.embed, s.head, p.st)
	p.live.Temporaries = addBytes(p.live.Temporaries, p.root)
	// Forward. untilLoss is what the model's forward holds until it
	// returns, after the loss (activations.go holdOutput).
	if p.st.embed {
		s.emit(p.iter, p.micro, "forward", -1, "embedding", p.live, s.edges.Embed.ForwardPeak)
		p.live.Activations = addBytes(p.live.Activations, scale(s.edges.Embed.Saved, p.inflight))
		// What the forward holds of the embedding side until it returns
		// (a vision-language model's image features).
		p.untilLoss = addBytes(p.untilLoss, scale(s.edges.Embed.untilLoss, p.inflight))
		p.live.Activations = addBytes(p.live.Activations, scale(s.edges.Embed.untilLoss, p.inflight))
	}
	// The attention masks live while the blocks run; checkpoints keep each
	// as an input of the blocks of its kind until their backward.
	if p.st.embed {
		p.masks = s.edges.Masks
	}
	p.live.Activations = addBytes(p.live.Activations, maskBytes(p.masks))
	// Across a run of identical blocks every category changes by the same
	// amount per block, so its maxima are at the run's ends: without a
	// recorded timeline the blocks inside a run are accounted, not emitted.
	if s.same == nil {
		s.same = make([]bool, len(s.blocks))
		for l := 0; l+1 < len(s.blocks); l++ {
			s.same[l] = s.sameBlock(l, l+1)
		}
	}
	for l := p.st.first; l < p.st.last; l++ {
		if l == s.edges.BridgeAt {
			br := s.edges.Bridge
			s.emit(p.iter, p.micro, "forward", -1, "encoder-decoder bridge", p.live, br.ForwardPeak)
			p.live.Activations = addBytes(p.live.Activations, scale(br.Saved, p.inflight))
		}
		a := s.acts[l]
		s.unshardOffloaded(p.iter, p.micro, "forward", l, p.live)
		if !p.inside(l) {
			// The block's input (the last block's output) is live while
			// it runs; its saved tensors join live only after.
			s.emit(p.iter, p.micro, "forward", l, "", withInput(p.live, a), addBytes(a.ForwardPeak, p.gather(l, l+1)))
		}
		p.live.Activations = addBytes(p.live.Activations, scale(r.deviceSaved(a, l, p.st), p.inflight))
		holds := a.untilLoss
		if l == 0 && r.inputsEmbedsHeld() {
			holds = addBytes(holds, a.Input) // the forward's inputs_embeds
		}
		p.untilLoss = addBytes(p.untilLoss, scale(holds, p.inflight))
		p.live.Activations = addBytes(p.live.Activations, scale(holds, p.inflight))
		if p.keep {
			p.live.Temporaries = addBytes(p.live.Temporaries, s.blocks[l].gathered)
		}
		for _, mp := range p.masks {
			if mp.keptUntil(r, p.st.first, p.st.last) < 0 && mp.forwardEnd(p.st.first, p.st.last) == l {
				p.live.Activations -= mp.bytes // its stack (the model's forward) returned
			}
		}
	}
}

// prepareBackward sets what the backward starts with.
func (p *pass) prepareBackward() {
	r, s := p.r, p.s
	// FSDP2: the last block's all-gather output outlives the blocks'
	// forward (fsdp2Forward), and resharded blocks have the same amount
	// all-gathered again from the start of backward (fsdp2Backward).
	if p.f2 && p.st.last > p.st.first {
		p.lingering = s.blocks[p.st.last-1].gathered
	}
	p.live.Temporaries = addBytes(p.live.Temporaries, p.lingering)
	// With tied embeddings the word embedding's gradient comes from the
	// output projection; the rest of the embedding unit's (positions, token
	// types, norms) from the embedding's own backward.
	p.embedGrads, p.headGrads = s.embed.grads, s.head.grads
	p.noSync = r.fsdp1NoSync()
	if p.noSync {
		p.embedGrads, p.headGrads = s.embed.gradsFull, s.head.gradsFull
	}
	if p.f2 {
		// FSDP2's gradients are all-gathered parameters' until the
		// group's post-backward reduce-scatters them (fsdp2Backward).
		p.embedGrads, p.headGrads = s.embed.gradsLive, s.head.gradsLive
	}
	if r.m.TiedEmbeddings && p.st.embed && p.st.head && r.m.Head == "lm" && s.embed.trainable > 0 {
		e := r.m.WordEmbedProjDim
		if e == 0 {
			e = r.m.Hidden
		}
		word := min(int64(r.m.Vocab)*int64(e)/int64(r.tp), s.embed.trainable)
		p.tiedGrads = Bytes(float64(p.embedGrads) * float64(word) / float64(s.embed.trainable))
	}
	p.headHeld = r.headHeld(s.head, p.st)
	p.live.Temporaries = addBytes(p.live.Temporaries, p.headHeld)
	// DeepSpeed ZeRO-1/2: the flat gradient bucket(s) exist from the start
	// of backward (DeepSpeed.ReduceBucketSize) to the step.
	var persistent bool
	p.bucket, persistent = r.dsBucket()
	if persistent {
		p.bucket = 0
	}
}

// loss is the loss and the output projection, forward and backward.
func (p *pass) loss() {
	s := p.s
	if p.st.head {
		s.emit(p.iter, p.micro, "loss", -1, "output and loss", withInput(p.live, s.edges.Head), s.edges.Head.ForwardPeak)
	}
	p.live.Activations -= p.untilLoss // the forward returned
	if p.st.head {
		p.live.Activations = addBytes(p.live.Activations, s.edges.Head.Saved)
		if p.keep {
			p.live.Temporaries -= p.lingering // freed by the root's post-forward
			p.lingering = 0
		}
		// Backward through the loss and the output projection, op by op.
		if p.tiedGrads > 0 {
			// The tied output projection creates the word embedding's
			// gradient in its backward, before any block's.
			p.headGrads = addBytes(p.headGrads, p.tiedGrads)
		}
		if p.gradsHeld && !p.f2 {
			p.headGrads = 0
		}
		p.live.Other = addBytes(p.live.Other, p.bucket)
		p.bucket = 0
		if p.iter == 2 {
			s.afterForward = p.live // the forward and the loss have returned
		}
		s.emit(p.iter, p.micro, "backward", -1, "loss and output", s.walkBackward(p.live, s.edges.Head, s.edges.Head.Saved, p.headGrads, 1, 0), 0)
		p.live.Gradients = addBytes(p.live.Gradients, p.headGrads)
		p.live.Activations -= s.edges.Head.Saved - s.edges.Head.outlives
		p.held = s.edges.Head.outlives
		if p.f2 && p.headHeld > 0 {
			// torchtitan's [norm, output] group reduces at its own
			// post-backward (a tied weight's gradient is the embedding's).
			p.live = s.fsdp2Reduce(p.iter, p.micro, -1, "output reduce-scatter", p.live, p.headGrads-p.tiedGrads, s.head, p.gradsHeld, &p.rsHeld, 0)
		}
	}
	p.live.Temporaries -= p.lingering + p.headHeld // the head's post-backward reshards it
	p.live.Other = addBytes(p.live.Other, p.bucket)
}

// blocksBackward runs the blocks' backward, last block first.
func (p *pass) blocksBackward() {
	for l := p.st.last - 1; l >= p.st.first; l-- {
		p.blockBackward(l)
	}
}

// recomputeGroupSaved is block l's saved and released bytes inside a
// Megatron uniform recompute group [gStart, gEnd], which runs its blocks'
// forward again when the backward reaches its last block: the others'
// saved tensors exist from then until their own backward.
func (p *pass) recomputeGroupSaved(l, gStart, gEnd int, saved Bytes) (Bytes, Bytes) {
	a := p.s.acts[l]
	if l == gEnd {
		var re Bytes
		for k := gStart; k < gEnd; k++ {
			re = addBytes(re, scale(p.s.acts[k].Saved, p.inflight))
		}
		p.live.Activations = addBytes(p.live.Activations, re)
		return saved, 0
	}
	release := scale(a.Saved, p.inflight)
	if l == gStart {
		release = addBytes(release, scale(a.Input, p.inflight))
	}
	return a.Saved, release
}

// blockBackward is block l's backward: its recomputation, the walk of its
// ops, what it releases and the gradients it leaves.
func (p *pass) blockBackward(l int) {
	r, s := p.r, p.s
	a := s.acts[l]
	saved := r.savedFor(a, l)
	if r.offloaded(l, p.st) {
		p.live.Activations = addBytes(p.live.Activations, saved) // copied back for its backward
	}
	gStart, gEnd := r.recomputeGroup(l)
	var release Bytes
	if gStart < gEnd {
		saved, release = p.recomputeGroupSaved(l, gStart, gEnd, saved)
	}
	if !p.keep {
		s.unshardOffloaded(p.iter, p.micro, "backward", l, p.live)
	}
	extra := p.gather(l, l-1)
	if p.f2 {
		extra = s.fsdp2Backward(p.st, l, p.keep)
	} else if p.keep {
		extra = 0 // unsharded since its forward: nothing to all-gather
	}
	if r.Parallel.ZeRO >= 2 && !p.f2 && !(p.noSync && !p.gradsHeld) {
		extra = addBytes(extra, s.blocks[l].gradsFull) // unsharded until reduce-scatter
	}
	if r.OptimizerInBackward {
		extra = addBytes(extra, r.stepTemporary(s.blocks[l].trainable/r.stepShard(), s.blocks[l].largest, r.WeightsDType))
	}
	layerGrads := s.blocks[l].grads
	switch {
	case p.f2:
		layerGrads = s.blocks[l].gradsLive
	case p.gradsHeld:
		layerGrads = 0 // already live
	case p.noSync:
		layerGrads = s.blocks[l].gradsFull // kept unsharded
	}
	if !p.inside(l) || gStart < gEnd {
		if r.checkpointed(l) && l == gEnd {
			// Recomputation runs the block's forward again, up to its
			// last saved tensor, with the gradients of its output (and
			// of its last saving op's) already in flight.
			s.emit(p.iter, p.micro, "backward", l, "recompute", p.live, addBytes(addBytes(a.recomputePeak, a.recomputeGrad), extra))
		}
		s.emit(p.iter, p.micro, "backward", l, "", s.walkBackward(p.live, a, saved, layerGrads, p.inflight, extra), 0)
	}
	for _, mp := range p.masks {
		if mp.keptUntil(r, p.st.first, p.st.last) == l {
			p.live.Activations -= mp.bytes
		}
	}
	if l == s.edges.BridgeAt {
		// The bridge's backward, after the first decoder block's; what
		// the model's output holds (the encoder output) stays.
		br := s.edges.Bridge
		s.emit(p.iter, p.micro, "backward", -1, "encoder-decoder bridge", s.walkBackward(p.live, br, br.Saved, 0, p.inflight, 0), 0)
		p.live.Activations = addBytes(p.live.Activations-scale(br.Saved, p.inflight), scale(br.outlives, p.inflight))
		p.held = addBytes(p.held, scale(br.outlives, p.inflight))
	}
	p.live.Gradients = addBytes(p.live.Gradients, layerGrads)
	if gStart < gEnd {
		p.live.Activations -= release
	} else {
		// This micro-batch's saved tensors go; the other micro-batches
		// in flight keep theirs until their own backward, after this one.
		p.live.Activations -= saved
		p.othersHeld = addBytes(p.othersHeld, scale(saved, p.inflight)-saved)
	}
	if p.keep && !r.ppAccumulates() {
		p.live.Temporaries -= s.blocks[l].gathered // resharded in its post-backward
	}
	if p.f2 {
		p.live = s.fsdp2Reduce(p.iter, p.micro, l, "reduce-scatter", p.live, layerGrads, s.blocks[l], p.gradsHeld, &p.rsHeld, s.fsdp2Prefetched(p.st, l, p.keep))
	}
	if p.noSync && p.last {
		// The last micro-batch syncs: the accumulated unsharded
		// gradient is reduce-scattered to its shard.
		p.live.Gradients = addBytes(p.live.Gradients-s.blocks[l].gradsFull, s.blocks[l].grads)
	}
	if saved == a.Saved {
		// What the model's output holds outlives the block's backward.
		p.live.Activations = addBytes(p.live.Activations, scale(a.outlives, p.inflight))
		p.held = addBytes(p.held, scale(a.outlives, p.inflight))
	}
	if r.OptimizerInBackward && p.last {
		// The step runs in the grad hook and frees the gradient at once;
		// the layer's states now exist.
		p.live.Gradients -= s.blocks[l].grads
		if p.iter == 1 {
			p.live.OptimizerStates = addBytes(p.live.OptimizerStates, s.blocks[l].states)
		}
	}
}

// embedBackward is the embedding side's backward (a vision tower's too).
func (p *pass) embedBackward() {
	r, s := p.r, p.s
	if p.st.embed {
		if r.m.Vision != nil {
			// The projector's and the tower's backward (autograd runs them
			// before the token embedding's, created first), with their
			// weight gradients appearing op by op.
			var vg Bytes
			if !p.gradsHeld {
				vg = Bytes(float64(s.embed.grads) * r.visionGradShare())
			}
			e := s.edges.Embed
			s.emit(p.iter, p.micro, "backward", -1, "projector and vision tower", s.walkBackward(p.live, e, e.Saved, vg, p.inflight, 0), 0)
		}
		if !p.gradsHeld || p.f2 {
			p.live.Gradients = addBytes(p.live.Gradients, p.embedGrads-p.tiedGrads)
		}
		p.live.Activations -= s.edges.Embed.Saved
		p.othersHeld = addBytes(p.othersHeld, scale(s.edges.Embed.Saved, p.inflight)-s.edges.Embed.Saved)
		s.emit(p.iter, p.micro, "backward", -1, "embedding", p.live, 0)
	}
}

// endBackward is what the end of backward frees and reduces.
func (p *pass) endBackward() {
	r, s := p.r, p.s
	p.live.Activations -= p.othersHeld
	if p.f2 {
		// The root's post-backward: its (or torchtitan's embedding group's)
		// gradients reduce last; the retained input is freed when backward
		// ends (_fsdp_state.py _end_backward_iteration).
		var u unitMem
		var inFlight Bytes
		if p.st.embed {
			u.add(s.embed)
			inFlight = p.embedGrads
		}
		if p.st.head && p.headHeld == 0 {
			u.add(s.head)
			inFlight = addBytes(inFlight, p.headGrads-p.tiedGrads) // the tied share is in embedGrads
		}
		p.live.Temporaries -= p.root // resharded before its reduce-scatter
		p.root = 0
		p.live = s.fsdp2Reduce(p.iter, p.micro, -1, "root reduce-scatter", p.live, inFlight, u, p.gradsHeld, &p.rsHeld, 0)
		p.live.Temporaries -= p.rsHeld
		if r.ppAccumulates() && p.last {
			p.live = s.fsdp2PipelineReduce(p.iter, p.micro, p.st, p.live, p.su, p.keep)
		}
	}
	p.live.Activations -= p.held // backward returned; the loop drops the output
	p.live.Temporaries -= p.root // the root's post-backward reshards it
	if p.noSync && p.last {
		// The root's post-backward reduce-scatters its accumulated gradients.
		var u unitMem
		if p.st.embed {
			u.add(s.embed)
		}
		if p.st.head {
			u.add(s.head)
		}
		p.live.Gradients = addBytes(p.live.Gradients-u.gradsFull, u.grads)
	}
	if r.OptimizerInBackward && p.last {
		p.live.Gradients = 0
	}
	if p.last && r.fsdp1Offload() {
		p.live.Gradients -= p.su.grads // the final callback moves them to the host
	}
}

// optimizerStep is the step after the last micro-batch.
func (p *pass) optimizerStep() {
	r, s := p.r, p.s
	if b, persistent := r.dsBucket(); !persistent {
		p.live.Other -= b // released as the step begins
	}
	// Optimizer step: iteration 1 creates the states (lazily, zeros_like).
	if r.Optimizer != "none" && !r.OptimizerInBackward {
		if p.iter == 1 {
			p.live.OptimizerStates = addBytes(p.live.OptimizerStates, p.su.states)
		}
		temp := r.stepTemporary(p.su.trainable/r.stepShard(), p.su.largest, stateDTypeOf(r))
		if r.RetainGradCopies {
			// A second copy of every gradient (e.g. out-of-place clipping
			// keeping clipped copies) lives through the step.
			p.live.Gradients = addBytes(p.live.Gradients, p.su.grads)
		}
		if r.offloadOf().optimizer {
			temp = r.offloadStepCopy(p.su.trainable / r.stepShard()) // the step runs on the CPU
		}
		s.emit(p.iter, p.micro, "optimizer", -1, "optimizer step", p.live, temp)
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
