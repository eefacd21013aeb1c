package vram

// Replaying a training step through the caching-allocator model: the same
// inventories as the timeline (parameters, gradients and optimizer states per
// tensor; each block's op program), now tensor by tensor, so that
// memory_reserved — and what nvidia-smi shows — can be predicted.

// ReplayOptions configure Training.Replay. The zero value is PyTorch's
// default allocator on an unnamed GPU without context overhead.
type ReplayOptions struct {
	Allocator AllocatorConfig `json:"allocator"`
	// GPU supplies the default CUDA context and the cuBLAS workspace size.
	GPU *GPU `json:"gpu,omitempty"`
	// Context overrides the GPU's context overhead (a measurement of yours).
	Context Bytes `json:"context,omitempty"`
	// Points records allocated/reserved after every step of the replay.
	Points bool `json:"-"`
}

// Replay is the predicted memory as PyTorch and the driver report it.
type Replay struct {
	PeakAllocated Bytes `json:"peak_allocated"` // torch.cuda.max_memory_allocated
	PeakReserved  Bytes `json:"peak_reserved"`  // torch.cuda.max_memory_reserved
	// DeviceUsed is what nvidia-smi shows at the end of the run: the
	// reserved high-water mark (the cache is not returned), the CUDA context
	// and NCCL's buffers.
	DeviceUsed Bytes `json:"device_used"`
	Context    Bytes `json:"context"`
	NCCL       Bytes `json:"nccl"`
	// SymmetricMemory is async tensor parallelism's workspace
	// (Parallel.AsyncTP), allocated outside the caching allocator.
	SymmetricMemory Bytes `json:"symmetric_memory,omitempty"`
	// Workspace is the cuBLAS workspace, allocated through the caching
	// allocator on the first matmul (part of allocated).
	Workspace Bytes         `json:"workspace"`
	Segments  int           `json:"segments"` // cudaMalloc calls
	Points    []ReplayPoint `json:"points,omitempty"`
}

// ReplayPoint is allocated and reserved memory after one step of the replay.
type ReplayPoint struct {
	Iteration int    `json:"iteration"`
	Phase     string `json:"phase"`
	Layer     int    `json:"layer"`
	// Name tells apart the points of one phase outside the blocks: the
	// backward's "output" (the loss and output layer done), "bridge" (an
	// encoder-decoder's hand-over) and "end" (the embedding done).
	Name      string `json:"name,omitempty"`
	Allocated Bytes  `json:"allocated"`
	Reserved  Bytes  `json:"reserved"`
}

// cuBLAS workspace through the caching allocator
// (aten/src/ATen/cuda/CublasHandlePool.cpp): ":4096:2:16:8" = 2×4 MiB +
// 8×16 KiB = 8.125 MiB by default, 32 MiB on Hopper (compute capability 9.x)
// and later.
func cublasWorkspace(g *GPU) Bytes {
	if g != nil && g.ComputeCapability >= 90 {
		return 32 * MiB
	}
	return 4096*KiB*2 + 16*KiB*8
}

// ncclPerGroup is the device memory NCCL takes per process group: measured
// 544–688 MB on 4×A100 NVLink (NVIDIA/nccl#964); a default, to be replaced by
// a measurement of your cluster.
const ncclPerGroup = 600 * MiB

// Replay runs the plan's first and a steady-state iteration through the
// caching-allocator model.
func (t Training) Replay(opt ReplayOptions) (_ Replay, err error) {
	defer recoverOverflow(&err)
	r, err := t.resolve()
	if err != nil {
		return Replay{}, err
	}
	blocks, embed, head := r.unitsSized(true)
	tl := simulateTraining(&r, blocks, embed, head, false)
	st := r.stages()[tl.Stage]
	cfg := opt.Allocator
	if cfg == (AllocatorConfig{}) {
		cfg = r.alloc // the plan's (its launcher's) allocator settings
	}
	tr := &replayer{r: &r, a: NewAllocator(cfg), record: opt.Points, st: st, blocks: blocks, embed: embed, head: head}
	tr.acts = blockActivations(&r)
	tr.edges = buildEdges(r.pipelineMicro())
	tr.inflight = r.inflight(tl.Stage)
	out := Replay{Workspace: cublasWorkspace(opt.GPU)}
	tr.workspace = out.Workspace
	tr.run()
	out.PeakAllocated, out.PeakReserved, out.Segments = tr.a.PeakAlloc, tr.a.PeakReserved, tr.a.Segments
	out.Points = tr.points
	switch {
	case opt.Context > 0:
		out.Context = opt.Context
	case opt.GPU != nil:
		out.Context = opt.GPU.Context
	}
	for _, d := range []int{r.dp, r.tp, r.pp, r.cp} {
		if d > 1 {
			out.NCCL += ncclPerGroup
		}
	}
	out.SymmetricMemory = r.asyncTPWorkspace()
	out.DeviceUsed = out.PeakReserved + out.Context + out.NCCL + out.SymmetricMemory
	return out, nil
}

type replayer struct {
	r         *resolved
	a         *Allocator
	st        stage
	blocks    []unitMem
	embed     unitMem
	head      unitMem
	acts      []BlockActivations
	edges     edgeActivations
	workspace Bytes
	record    bool
	points    []ReplayPoint

	iter  int
	grads map[int][]int // unit index → gradient handles (-1: embed, -2: head)
	state map[int][]int
	live  map[int][]int // FSDP2: unit index → its unsharded gradients until its group reduces
	acc   map[int]int   // FSDP2 in pipeline stages: unit index → its accumulated gradients (fsdp2_pipeline.go)
	grow  int           // FSDP2: the unit whose unsharded gradients the next backward creates (fsdp2Grads), or none
	// bucket is DeepSpeed ZeRO-1/2's gradient bucket(s): each backward
	// replaces the last one's, the step releases it.
	bucket int
	// inflight is how many microbatches' activations the pipeline stage
	// holds (resolved.inflight); the others' than the one replayed are
	// held as one allocation per block and microbatch (others).
	inflight float64
	// untilLoss are the handles the model's forward holds until it returns
	// (blockActivations untilLoss), freed after the loss.
	untilLoss []int
}

// others allocates what the pipeline's other microbatches in flight hold of
// a part whose one microbatch saves b: a block of b for each, the last a
// fraction (the timeline scales the saved bytes by inflight alike).
func (tr *replayer) others(b Bytes) []int {
	var hs []int
	for n := tr.inflight - 1; n > 0 && b > 0; n-- {
		hs = append(hs, tr.a.Malloc(scale(b, min(n, 1))))
	}
	return hs
}

func (tr *replayer) note(phase string, layer int) { tr.noteNamed(phase, layer, "") }

func (tr *replayer) noteNamed(phase string, layer int, name string) {
	if tr.record {
		tr.points = append(tr.points, ReplayPoint{Iteration: tr.iter, Phase: phase, Layer: layer, Name: name, Allocated: tr.a.Allocated(), Reserved: tr.a.Reserved()})
	}
}

func (tr *replayer) allocAll(sizes []Bytes) []int {
	hs := make([]int, 0, len(sizes))
	for _, s := range sizes {
		hs = append(hs, tr.a.Malloc(s))
	}
	return hs
}

func (tr *replayer) freeAll(hs []int) {
	for _, h := range hs {
		tr.a.Free(h)
	}
}

// unit returns the persistent memory of unit k (block index, -1 embed, -2 head).
func (tr *replayer) unit(k int) unitMem {
	switch k {
	case -1:
		return tr.embed
	case -2:
		return tr.head
	}
	return tr.blocks[k]
}

func (tr *replayer) units() []int {
	var ks []int
	if tr.st.embed {
		ks = append(ks, -1)
	}
	for l := tr.st.first; l < tr.st.last; l++ {
		ks = append(ks, l)
	}
	if tr.st.head {
		ks = append(ks, -2)
	}
	return ks
}

func (tr *replayer) run() {
	r := tr.r
	// Model load: parameters, then master copies (DeepSpeed/Megatron build them at init).
	for _, k := range tr.units() {
		tr.allocAll(tr.unit(k).paramSizes)
	}
	for _, k := range tr.units() {
		tr.allocAll(tr.unit(k).masterSizes)
	}
	if r.dp > 1 && r.Parallel.ZeRO == 0 {
		// DDP reducer buckets: 25 MiB each (bucket_cap_mb), as large as the gradients.
		var g Bytes
		for _, k := range tr.units() {
			g += tr.unit(k).gradsFull
		}
		for ; g > 0; g -= 25 * MiB {
			tr.a.Malloc(minBytes(g, 25*MiB))
		}
	}
	if b, persistent := r.dsBucket(); persistent {
		tr.a.Malloc(b) // DeepSpeed ZeRO-3's flat gradient bucket
	}
	tr.note("load", -1)
	tr.a.Malloc(tr.workspace) // first matmul creates the cuBLAS workspace
	tr.grads, tr.state, tr.live, tr.grow, tr.bucket = map[int][]int{}, map[int][]int{}, map[int][]int{}, noUnit, -1
	tr.acc = map[int]int{}
	micros := []int{1}
	if r.GradAccum > 1 {
		micros = append(micros, r.GradAccum)
	}
	for tr.iter = 1; tr.iter <= 2; tr.iter++ {
		for _, micro := range micros {
			tr.step(micro == r.GradAccum)
		}
	}
}

func minBytes(a, b Bytes) Bytes {
	if a < b {
		return a
	}
	return b
}

// gather returns all-gathered parameters of block l for ZeRO-3 / FSDP.
func (tr *replayer) gather(l int) int {
	if tr.r.Parallel.ZeRO != 3 && tr.r.Parallel.CPUOffload != "optimizer+params" {
		return -1
	}
	h := tr.a.Malloc(tr.blocks[l].h2d) // an offloaded shard's device copy, gathered from
	g := tr.a.Malloc(tr.blocks[l].gathered)
	tr.a.Free(h)
	return g
}

// replayPass is one micro-batch's forward and backward (and, on the
// last, the optimizer step) in the allocator replay: the handles its phases
// share, each phase a method below, as simulation.iteration's are.
type replayPass struct {
	tr         *replayer
	last       bool
	keep, f2   bool
	inputs     int
	root       int                 // FSDP2: the root's unsharded parameters
	ag, rs     int                 // FSDP2: the last all-gather output, the retained reduce-scatter input
	res        int                 // the residual stream handle between blocks
	headHeld   int                 // torchtitan: the head's unsharded parameters
	unsharded  map[int]int         // block → its unsharded parameters, kept
	keptParams []int               // FSDP2 in pipeline stages: unsharded parameters kept past backward
	parked     map[int]parkedSizes // block → what activation offloading moved to the host
	sacKept    map[int]int         // block → what op-level checkpointing (or a compiled block) saved
	saved      map[int]*kept
	held       []int // what the model's output holds until backward returns
	masks      []maskPart
	maskH      []int
	bridge     *kept
	// The pipeline's other microbatches in flight: their inputs and
	// embedding outputs, and each block's saved set from its forward to its
	// backward, as the timeline counts them.
	embedOthers []int
	blockOthers map[int][]int
}

func (tr *replayer) step(last bool) {
	q := &replayPass{tr: tr, last: last, ag: -1, rs: -1, root: -1, headHeld: -1, unsharded: map[int]int{},
		parked: map[int]parkedSizes{}, sacKept: map[int]int{}, saved: map[int]*kept{}, blockOthers: map[int][]int{}}
	q.forward()
	q.head()
	for l := tr.st.last - 1; l >= tr.st.first; l-- {
		q.blockBackward(l)
	}
	q.endBackward()
	if last && tr.r.Optimizer != "none" {
		q.optimizerStep()
	}
}

// forward allocates the batch, the root's parameters and the masks, and
// runs the embedding and the blocks.
func (q *replayPass) forward() {
	tr, r := q.tr, q.tr.r
	q.inputs = tr.a.Malloc(tr.edges.Inputs)
	if tr.st.embed {
		q.embedOthers = tr.others(tr.edges.Inputs + tr.edges.Embed.Saved)
	}
	// FSDP2: the root's parameters stay unsharded from the root's
	// pre-forward to its post-backward; without resharding, so do the
	// blocks' (see simulation.iteration).
	if b := r.rootHeld(tr.embed, tr.head, tr.st); b > 0 {
		q.root = tr.a.Malloc(b)
	}
	q.keep, q.f2 = r.keepsUnsharded(), r.fsdp2()
	if tr.st.embed {
		k, out := tr.forward(tr.edges.Embed.prog, -1)
		q.saved[-1], q.res = k, out
	}
	// The attention masks, kept by checkpoints until their backward.
	if tr.st.embed {
		q.masks = tr.edges.Masks
		for _, mp := range q.masks {
			q.maskH = append(q.maskH, tr.a.Malloc(mp.bytes))
		}
	}
	for l := tr.st.first; l < tr.st.last; l++ {
		q.blockForward(l)
	}
}

// freeMasks frees the masks the checkpoints keep until block after.
func (q *replayPass) freeMasks(after int) {
	tr, r := q.tr, q.tr.r
	for i, mp := range q.masks {
		if k := mp.keptUntil(r, tr.st.first, tr.st.last); k >= 0 && k == after {
			tr.a.Free(q.maskH[i])
		}
	}
}

// blockForward is block l's forward: all-gathered, run, what it keeps.
func (q *replayPass) blockForward(l int) {
	tr, r := q.tr, q.tr.r
	if l == tr.edges.BridgeAt {
		p := tr.edges.Bridge.prog
		k, out := tr.forward(p, -1)
		if p.in.saved {
			k.input = q.res
		} else {
			tr.a.Free(q.res)
		}
		q.bridge, q.res = k, out
		tr.noteNamed("forward", -1, "bridge")
	}
	var g int
	if q.f2 {
		g = tr.fsdp2Unshard(l, &q.ag)
	} else {
		g = tr.gather(l)
	}
	p := tr.acts[l].prog
	k, out := tr.forward(p, -1)
	if r.checkpointed(l) {
		k.freeAll(tr.a) // only the block input stays
		k = &kept{input: q.res}
		if r.Checkpointing == "op" {
			// and the outputs op-level checkpointing saves, as one block
			q.sacKept[l] = tr.a.Malloc(tr.acts[l].SavedOp - tr.acts[l].Input)
		}
	} else if r.Compile && r.Checkpointing != "selective" {
		// A compiled block keeps its compiled set (compile.go), here one
		// block, until its backward ends.
		k.freeAll(tr.a)
		tr.a.Free(q.res)
		q.sacKept[l] = tr.a.Malloc(tr.acts[l].SavedCompiled)
	} else if p.in.saved {
		k.input = q.res
	} else if l == 0 && r.inputsEmbedsHeld() {
		tr.untilLoss = append(tr.untilLoss, q.res) // the forward's inputs_embeds
	} else {
		tr.a.Free(q.res)
	}
	q.saved[l], q.res = k, out
	if r.offloaded(l, tr.st) {
		q.parked[l] = k.park(tr.a, p) // to pinned host memory
	}
	q.blockOthers[l] = tr.others(r.savedFor(tr.acts[l], l))
	if q.keep {
		q.unsharded[l] = g
	} else {
		tr.a.Free(g)
	}
	for i, mp := range q.masks {
		if mp.keptUntil(r, tr.st.first, tr.st.last) < 0 && mp.forwardEnd(tr.st.first, tr.st.last) == l {
			tr.a.Free(q.maskH[i]) // its stack returned
		}
	}
	tr.note("forward", l)
}

// head is the loss and the output projection, forward and backward.
func (q *replayPass) head() {
	tr, r := q.tr, q.tr.r
	if !tr.st.head {
		tr.freeUntilLoss() // this stage's forward returned
		tr.dsBucket()
	}
	q.headHeld = -1
	if b := r.headHeld(tr.head, tr.st); b > 0 {
		q.headHeld = tr.a.Malloc(b)
	}
	if tr.st.head {
		p := tr.edges.Head.prog
		k, out := tr.forward(p, -1)
		if p.in.saved || p.in.held {
			k.input = q.res
		} else {
			tr.a.Free(q.res)
		}
		tr.a.Free(out)
		tr.note("loss", -1)
		tr.freeUntilLoss()
		if q.f2 {
			// The root's post-forward frees the last all-gather output; its
			// pre-backward prefetches the last block's.
			tr.a.Free(q.ag)
			q.ag = -1
			if !q.keep && tr.st.last > tr.st.first {
				q.ag = tr.onStream(allGatherStream, tr.blocks[tr.st.last-1].gathered)
			}
		}
		tr.dsBucket()
		tr.paramGrads(-2)
		grad := tr.backward(p, -1, k, &q.held)
		q.res = grad
		if q.headHeld >= 0 {
			tr.fsdp2Reduce(&q.rs, -2)
		}
		tr.noteNamed("backward", -1, "output")
	}
	if !tr.st.head {
		tr.a.Free(q.ag)
		q.ag = -1
	}
	tr.a.Free(q.headHeld)
}

// blockBackward is block l's backward.
func (q *replayPass) blockBackward(l int) {
	tr, r := q.tr, q.tr.r
	g := -1
	switch {
	case q.keep:
		g = q.unsharded[l] // since its forward
	case q.f2:
		g = tr.fsdp2Prefetch(l, &q.ag)
	default:
		g = tr.gather(l)
	}
	k := q.saved[l]
	if ps, ok := q.parked[l]; ok {
		k.fetch(tr.a, ps) // copied back for its backward
	}
	if r.checkpointed(l) {
		// Recomputation rebuilds the block's saved tensors from its
		// input, stopping once the last exists.
		rk, out := tr.forward(tr.acts[l].prog, tr.acts[l].prog.recomputeEnd())
		tr.a.Free(out)
		rk.input = k.input
		k = rk
	}
	tr.paramGrads(l)
	grad := tr.backward(tr.acts[l].prog, q.res, k, &q.held)
	q.res = grad
	if h, ok := q.sacKept[l]; ok {
		tr.a.Free(h) // the recomputation (or the compiled backward) consumed it
	}
	if q.keep && r.ppAccumulates() {
		q.keptParams = append(q.keptParams, g) // no reshard until the schedule ends
	} else {
		tr.a.Free(g)
	}
	q.freeMasks(l)
	if q.f2 {
		tr.fsdp2Reduce(&q.rs, l)
	} else if r.Parallel.ZeRO >= 2 && (q.last || !r.fsdp1NoSync()) {
		tr.reduceScatter(l) // under no_sync the unsharded gradient accumulates
	}
	tr.note("backward", l)
	if l == tr.edges.BridgeAt && q.bridge != nil {
		q.res = tr.backward(tr.edges.Bridge.prog, q.res, q.bridge, &q.held)
		tr.noteNamed("backward", -1, "bridge")
	}
}

// endBackward is the embedding side's backward and what the end of
// backward frees and reduces.
func (q *replayPass) endBackward() {
	tr, r := q.tr, q.tr.r
	if tr.st.embed {
		tr.paramGrads(-1)
		if r.m.Vision != nil {
			// The projector's and the tower's backward, op by op.
			q.res = tr.backward(tr.edges.Embed.prog, q.res, q.saved[-1], &q.held)
		}
		q.saved[-1].freeAll(tr.a)
	}
	// The other micro-batches in flight keep what they saved until their own
	// backward, after this one's.
	for l := tr.st.last - 1; l >= tr.st.first; l-- {
		tr.freeAll(q.blockOthers[l])
	}
	tr.freeAll(q.embedOthers)
	tr.a.Free(q.root)
	if q.f2 {
		// The root's post-backward, then the end of backward frees the
		// retained reduce-scatter input.
		var ks []int
		if tr.st.embed {
			ks = append(ks, -1)
		}
		if tr.st.head && q.headHeld < 0 {
			ks = append(ks, -2)
		}
		tr.fsdp2Reduce(&q.rs, ks...)
		tr.a.Free(q.rs)
		if r.ppAccumulates() {
			tr.fsdp2PipelineReduce(q.keptParams)
		}
	}
	tr.freeAll(q.held)
	tr.a.Free(q.res)
	tr.a.Free(q.inputs)
	tr.noteNamed("backward", -1, "end")
	if q.last && r.fsdp1Offload() {
		for k, hs := range tr.grads {
			tr.freeAll(hs) // the final callback moves them to the host
			delete(tr.grads, k)
		}
	}
}

// optimizerStep is the step after the last micro-batch.
func (q *replayPass) optimizerStep() {
	tr, r := q.tr, q.tr.r
	tr.a.Free(tr.bucket) // released as the step begins
	tr.bucket = -1
	// Optimizer step: states appear on the first step; foreach keeps one
	// state-sized temporary per tensor until the step ends.
	for _, k := range tr.units() {
		if _, ok := tr.state[k]; !ok {
			tr.state[k] = tr.allocAll(tr.unit(k).stateSizes)
		}
	}
	if r.offloadOf().optimizer {
		var trainable int64
		for _, k := range tr.units() {
			trainable += tr.unit(k).trainable
		}
		tr.a.Free(tr.a.Malloc(r.offloadStepCopy(trainable / r.stepShard())))
	} else {
		var tmp []int
		for _, k := range tr.units() {
			u := tr.unit(k)
			total := r.stepTemporary(u.trainable/r.stepShard(), u.largest, stateDTypeOf(r))
			if total > 0 && u.trainable > 0 {
				for _, g := range u.gradSizes {
					tmp = append(tmp, tr.a.Malloc(Bytes(float64(total)*float64(g)/float64(max(1, u.grads)))))
				}
			}
		}
		tr.freeAll(tmp)
	}
	tr.note("optimizer", -1)
	if !r.KeepGrads {
		for k, hs := range tr.grads {
			tr.freeAll(hs)
			delete(tr.grads, k)
		}
	}
}

// paramGrads allocates unit k's gradients when they do not exist yet.
func (tr *replayer) paramGrads(k int) {
	if _, ok := tr.grads[k]; ok {
		return
	}
	u := tr.unit(k)
	if tr.r.fsdp2() {
		tr.fsdp2Grads(k)
		return
	}
	sizes := u.gradSizes
	if tr.r.Parallel.ZeRO >= 2 && k >= 0 {
		// Full gradients first; reduceScatter keeps the shard.
		sizes = []Bytes{u.gradsFull}
	}
	tr.grads[k] = tr.allocAll(sizes)
}

func (tr *replayer) reduceScatter(l int) {
	if hs, ok := tr.grads[l]; ok && len(hs) == 1 && tr.blocks[l].gradsFull != tr.blocks[l].grads {
		tr.a.Free(hs[0])
		tr.grads[l] = tr.allocAll(tr.blocks[l].gradSizes)
	}
}

// kept is what a block's forward leaves for its backward: the handles of its
// saved and held tensors (by tensor id, -1 where none) and of its input
// when the block or its checkpoint keeps it.
type kept struct {
	h     []int
	input int
}

// freeAll frees every handle k still holds.
func (k *kept) freeAll(a *Allocator) {
	for i, hd := range k.h {
		if hd >= 0 {
			a.Free(hd)
			k.h[i] = -1
		}
	}
	if k.input >= 0 {
		a.Free(k.input)
		k.input = -1
	}
}

// forward replays a block's ops: outputs are allocated, transients freed
// after their last use. It returns what the block keeps for its backward and
// the handle of its output (an empty one when it stops early). stop ≥ 0
// ends it after that op (a checkpoint's recomputation).
func (tr *replayer) forward(p *actBuilder, stop int) (k *kept, out int) {
	h := make([]int, len(p.ts))
	for i := range h {
		h[i] = -1
	}
	frees := p.freesAfter()
	out = -1
	for i, op := range p.ops {
		if stop >= 0 && i > stop {
			break
		}
		for _, t := range op.outs {
			h[t.id] = tr.a.Malloc(t.bytes)
			if t.keepAlive {
				out = h[t.id]
			}
		}
		if op.workspace > 0 {
			tr.a.Free(tr.a.Malloc(op.workspace))
		}
		if op.weightWork > 0 {
			tr.a.Free(tr.a.Malloc(op.weightWork))
		}
		for _, t := range frees[i] {
			if h[t.id] >= 0 {
				tr.a.Free(h[t.id])
				h[t.id] = -1
			}
		}
	}
	for _, t := range p.ts {
		hd := h[t.id]
		if hd < 0 {
			continue
		}
		if t.keepAlive || !(t.saved || t.held) {
			switch {
			case t.forwardHeld && !t.keepAlive:
				tr.untilLoss = append(tr.untilLoss, hd) // freed when the forward returns
			case !t.keepAlive:
				tr.a.Free(hd)
			}
			h[t.id] = -1
		}
	}
	if out < 0 {
		out = tr.a.Malloc(0)
	}
	return &kept{h: h, input: -1}, out
}

// backward replays a block's ops in reverse: each op allocates the
// gradients of its inputs and frees those of its outputs, and a saved
// tensor is freed once the earliest op that saved it is done (tensors the
// model's output holds move to held). Routed experts run one at a time:
// their gradients are one (the busiest) expert's share and their saved tensors go when
// the last expert is done (as the timeline's walk). gradOut is the handle
// of the gradient flowing in; the gradient of the block input is returned.
func (tr *replayer) backward(p *actBuilder, gradOut int, k *kept, held *[]int) int {
	g := make([]int, len(p.ts))
	for i := range g {
		g[i] = -1
	}
	for _, t := range p.ts {
		if t.keepAlive {
			g[t.id] = gradOut
		}
	}
	release := make([][]*actT, len(p.ops))
	for _, t := range p.ts {
		if !t.external && k.h[t.id] >= 0 {
			if j := t.releaseAt(); j >= 0 && j < len(p.ops) {
				release[j] = append(release[j], t)
			}
		}
	}
	busy := tr.r.busiestExpertShare()
	grow := tr.fsdp2Growth(p)
	var deferred []*actT
	free := func(ts []*actT) {
		for _, t := range ts {
			if hd := k.h[t.id]; hd >= 0 {
				if t.held {
					*held = append(*held, hd)
				} else {
					tr.a.Free(hd)
				}
				k.h[t.id] = -1
			}
		}
	}
	grad := func(op actOp, t *actT) {
		if t == nil || gradSize(t) == 0 || g[t.id] >= 0 {
			return
		}
		size := t.bytes
		if op.expert {
			size = Bytes(float64(size) * busy)
		}
		g[t.id] = tr.a.Malloc(size)
	}
	for i := len(p.ops) - 1; i >= 0; i-- {
		op := p.ops[i]
		// Outputs no later op read get their gradient from outside the
		// block's ops: the loss, or (for autocast weight copies) the matmul
		// itself, which yields the weight gradient in the compute dtype.
		for _, t := range op.outs {
			grad(op, t)
		}
		for _, t := range op.ins {
			grad(op, t)
		}
		if w := op.workspace + op.gradWorkspace + op.weightWork; w > 0 && !op.noGrad {
			tr.a.Free(tr.a.Malloc(w))
		}
		grow(op)
		for _, t := range op.outs {
			if g[t.id] >= 0 {
				tr.a.Free(g[t.id])
				g[t.id] = -1
			}
		}
		if !op.expert {
			free(release[i])
			continue
		}
		deferred = append(deferred, release[i]...)
		if i == 0 || !p.ops[i-1].expert {
			free(deferred)
			deferred = deferred[:0]
		}
	}
	res := -1
	for _, t := range p.ts {
		if g[t.id] < 0 {
			continue
		}
		if t == p.in {
			res = g[t.id]
			continue
		}
		tr.a.Free(g[t.id])
	}
	free(p.ts) // what no op released: tensors the model's output holds
	if k.input >= 0 {
		if p.in.held {
			*held = append(*held, k.input)
		} else {
			tr.a.Free(k.input)
		}
		k.input = -1
	}
	if res < 0 {
		res = tr.a.Malloc(0)
	}
	return res
}

// Replay runs an inference plan's allocations through the allocator model:
// the weights tensor by tensor, the KV cache, and the peak's transients.
func (in Inference) Replay(opt ReplayOptions) (_ Replay, err error) {
	defer recoverOverflow(&err)
	est, err := in.Estimate()
	if err != nil {
		return Replay{}, err
	}
	in, m, _ := in.resolve()
	a := NewAllocator(opt.Allocator)
	for _, t := range m.tensors() {
		a.Malloc(in.tensorBytes(t))
	}
	if est.PeakAt != "load" {
		a.Malloc(cublasWorkspace(opt.GPU))
		a.Malloc(est.Peak.KVCache)
		a.Free(a.Malloc(est.Peak.Temporaries))
	}
	out := Replay{PeakAllocated: a.PeakAlloc, PeakReserved: a.PeakReserved, Segments: a.Segments}
	switch {
	case opt.Context > 0:
		out.Context = opt.Context
	case opt.GPU != nil:
		out.Context = opt.GPU.Context
	}
	out.DeviceUsed = out.PeakReserved + out.Context
	return out, nil
}

// freeUntilLoss frees what the model's forward held until it returned
// (the timeline's untilLoss).
func (tr *replayer) freeUntilLoss() {
	for _, hd := range tr.untilLoss {
		tr.a.Free(hd)
	}
	tr.untilLoss = tr.untilLoss[:0]
}
