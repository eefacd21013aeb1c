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
	// Torch is the PyTorch release the run uses ("2.15.0"; empty: the
	// current one), which sizes the GEMM workspaces (torch_releases.go).
	Torch string `json:"torch,omitempty"`
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
	// NCCLNote says how NCCL's buffers were counted (nccl.go).
	NCCLNote string `json:"nccl_note,omitempty"`
	// SymmetricMemory is async tensor parallelism's workspace
	// (Parallel.AsyncTP), allocated outside the caching allocator.
	SymmetricMemory Bytes `json:"symmetric_memory,omitempty"`
	// Workspace is the cuBLAS workspace, allocated through the caching
	// allocator on the first matmul (part of allocated).
	Workspace Bytes         `json:"workspace"`
	Segments  int           `json:"segments"` // cudaMalloc calls
	Points    []ReplayPoint `json:"points,omitempty"`
	// comms are the rank's NCCL communicators, whose buffers Replay counts
	// on its GPU (nccl.go).
	comms []ncclComm
	// requested is the most allocated at once before the allocator's
	// rounding (PyTorch's requested_bytes): the timeline's peak plus the
	// workspace, byte for byte.
	requested Bytes
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

// Replay runs the plan's first and a steady-state iteration through the
// caching-allocator model: the step program of the most loaded stage, the
// one the timeline evaluates (program.go), plus the cuBLAS workspace the
// first matmul creates.
//
// A plan replayed before with the same allocator settings, cuBLAS
// workspace and recording is answered from a cache (plancache.go), the
// GPU's context added anew.
func (t Training) Replay(opt ReplayOptions) (Replay, error) {
	ks := keyScratches.Get().(*keyScratch)
	defer ks.done()
	ks.replay = replayRequest{t: t, alloc: opt.Allocator, workspace: gemmWorkspace(opt.GPU, opt.Torch), points: opt.Points}
	key, keyed := ks.key(&ks.replay)
	var out Replay
	hit := false
	if keyed {
		out, hit = replays.get(key)
	}
	if !hit {
		var err error
		if out, err = t.replay(opt); err != nil {
			return Replay{}, err
		}
		if keyed && replays.worthKeeping(key) {
			replays.put(key, out.clone(), out.size())
		}
	} else {
		out = out.clone()
	}
	switch {
	case opt.Context > 0:
		out.Context = opt.Context
	case opt.GPU != nil:
		out.Context = opt.GPU.Context
	}
	out.Context = mulBytes(int64(1+t.OtherProcesses), out.Context) // a context a process (Training.OtherProcesses)
	switch {
	case t.NCCLMemory > 0:
		out.NCCL, out.NCCLNote = t.NCCLMemory, "NCCL: the plan's measured nccl_memory"
	case len(out.comms) > 0:
		var err error
		if out.NCCL, err = ncclBytes(out.comms, opt.GPU, t.NCCL); err != nil {
			return Replay{}, err
		}
		out.NCCLNote = ncclNote(out.comms, opt.GPU, t.NCCL)
	}
	out.DeviceUsed = out.PeakReserved + out.Context + out.NCCL + out.SymmetricMemory
	return out, nil
}

// replay is Replay computed, without the context.
func (t Training) replay(opt ReplayOptions) (_ Replay, err error) {
	defer recoverOverflow(&err)
	r, err := t.resolve()
	if err != nil {
		return Replay{}, err
	}
	blocks, embed, head := r.unitsSized(true)
	_, prog := simulateTraining(&r, blocks, embed, head, false, true)
	cfg := opt.Allocator
	if cfg == (AllocatorConfig{}) {
		cfg = r.alloc // the plan's (its launcher's) allocator settings
	}
	out := Replay{Workspace: gemmWorkspace(opt.GPU, opt.Torch)}
	rp := replayers.Get().(*replayer)
	defer replayers.Put(rp)
	rp.reset(cfg, opt.Points, out.Workspace)
	rp.run(prog)
	out.PeakAllocated, out.PeakReserved, out.Segments = rp.a.PeakAlloc, rp.a.PeakReserved, rp.a.Segments
	out.requested = rp.a.PeakAsked
	out.Points, rp.points = rp.points, nil
	out.comms = r.ncclComms() // NCCL's buffers, on the GPU Replay is given (nccl.go)
	out.SymmetricMemory = r.asyncTPWorkspace()
	return out, nil
}

// replayer evaluates a step program through the allocator model: each
// slot's allocations by handle, each block's tensors one by one.
type replayer struct {
	a         *Allocator
	slots     [][]int
	handles   []int // the slots' handles, one after another
	kept      []*keptSet
	workspace Bytes
	record    bool
	points    []ReplayPoint
	at        moment
	open      bool
	walk      moment // the moment a backward call's walk starts
	// calls is the blocks' calls' storage: their kept sets, which last from
	// a forward to its backward, come from and go back to its spares.
	calls runScratch
}

// reset empties rp for a replay with allocator settings cfg, keeping its
// storage.
func (rp *replayer) reset(cfg AllocatorConfig, record bool, workspace Bytes) {
	rp.a.reset(cfg)
	*rp = replayer{a: rp.a, slots: rp.slots[:0], handles: rp.handles[:0], kept: rp.kept[:0], workspace: workspace, record: record,
		calls: runScratch{lasting: true, spare: rp.calls.spare, gf: rp.calls.gf, grads: rp.calls.grads, held: rp.calls.held}}
}

// hold gives slot s the handles hs, copied into the replayer's storage.
func (rp *replayer) hold(s slot, hs ...int) {
	start := len(rp.handles)
	rp.handles = append(rp.handles, hs...)
	rp.slots[s] = rp.handles[start:len(rp.handles):len(rp.handles)]
}

// blockRun is a call of block a on the replayer.
func (rp *replayer) blockRun(a *BlockActivations) blockRun {
	br := blockRun{m: rp, a: a, sc: &rp.calls}
	if a != nil {
		br.p = a.prog
	}
	return br
}

// drop gives k back to the spares once nothing holds it.
func (rp *replayer) drop(k *keptSet) {
	if k != nil {
		rp.calls.spare = append(rp.calls.spare, k)
	}
}

// The replayer is the mem of the blocks' calls.
func (rp *replayer) alloc(_ category, b Bytes) int { return rp.a.Malloc(b) }
func (rp *replayer) free(h int)                    { rp.a.Free(h) }
func (rp *replayer) retag(int, category)           {}
func (rp *replayer) span(string)                   { rp.mark(rp.walk) }

// run evaluates p.
func (rp *replayer) run(p *program) {
	rp.slots, rp.kept = resize(rp.slots, p.slots), resize(rp.kept, p.slots)
	clear(rp.slots)
	clear(rp.kept)
	for i := 0; i < len(p.ops); i++ {
		op := &p.ops[i]
		if op.kind != opRun {
			rp.exec(p, op, 0)
			continue
		}
		rn := &p.runs[op.ref]
		for it := range rn.n {
			for j := rn.start; j < rn.end; j++ {
				rp.exec(p, &p.ops[j], it)
			}
		}
		i = int(rn.end) - 1
	}
	rp.close()
}

// exec runs op as iteration it of its run (0 outside runs).
func (rp *replayer) exec(p *program, op *stepOp, it int) {
	if op.only.skips(it) {
		return
	}
	switch op.kind {
	case opAlloc:
		s := op.slot + slot(it)
		rp.a.SetStream(int(op.stream))
		if op.ref < 0 {
			rp.hold(s, rp.a.Malloc(op.bytes))
		} else {
			start := len(rp.handles)
			for _, b := range p.pieces[op.ref] {
				rp.handles = append(rp.handles, rp.a.Malloc(b))
			}
			rp.slots[s] = rp.handles[start:len(rp.handles):len(rp.handles)]
		}
		rp.a.SetStream(computeStream)
	case opFree:
		rp.freeSlot(ref{op.slot, op.step}.at(it))
	case opMove:
		to := slot(op.ref)
		rp.slots[to], rp.kept[to] = rp.slots[op.slot], rp.kept[op.slot]
		rp.slots[op.slot], rp.kept[op.slot] = nil, nil
	case opMark:
		rp.mark(p.marks[op.ref].in(it))
	case opForward:
		rp.forward(&p.calls[op.ref], it)
	case opBackward:
		c := &p.calls[op.ref]
		rp.walk = c.walk.in(it)
		rp.backward(c, it)
	case opPark:
		c := &p.calls[op.ref]
		rp.kept[c.kept.at(it)].park(rp, c.a.prog)
	case opFetch:
		c := &p.calls[op.ref]
		rp.kept[c.kept.at(it)].fetch(rp, rp.blockRun(c.a), c.mode)
	}
}

// freeSlot frees what slot s holds.
func (rp *replayer) freeSlot(s slot) {
	for _, h := range rp.slots[s] {
		rp.a.Free(h)
	}
	rp.slots[s] = nil
	if k := rp.kept[s]; k != nil {
		rp.blockRun(nil).freeKept(k)
		rp.a.Free(k.input)
		rp.kept[s] = nil
		rp.drop(k)
	}
}

// mark ends the current moment (a point, when recorded) and starts at.
func (rp *replayer) mark(at moment) {
	load := rp.open && rp.at.phase == phaseLoad
	rp.close()
	if load {
		rp.a.Malloc(rp.workspace) // the first matmul creates the cuBLAS workspace
	}
	rp.at, rp.open = at, true
}

// close ends the current moment: a point with what it left.
func (rp *replayer) close() {
	if !rp.open {
		return
	}
	rp.open = false
	if rp.record {
		rp.points = append(rp.points, ReplayPoint{Iteration: rp.at.iter, Phase: rp.at.phase.String(), Layer: rp.at.layer, Name: rp.at.name,
			Allocated: rp.a.Allocated(), Reserved: rp.a.Reserved()})
	}
}

// handle is the one handle of slot s, -1 for none.
func (rp *replayer) handle(s slot) int {
	if s == noSlot || len(rp.slots[s]) == 0 {
		return -1
	}
	return rp.slots[s][0]
}

// forward runs a block's forward, as iteration it of its run.
func (rp *replayer) forward(c *blockCall, it int) {
	ins, drop := c.in.at(it), c.drop.at(it)
	in := rp.handle(ins)
	k, out, until := rp.blockRun(c.a).forward(in, rp.handle(drop), c.mode)
	if drop != noSlot {
		rp.slots[drop] = nil
	}
	rp.kept[c.kept.at(it)] = k
	rp.hold(c.out+slot(it), out)
	rp.fill(c.until, it, until)
	if in >= 0 && k.input == in {
		rp.slots[ins] = nil // the block keeps it
	}
}

// backward runs a block's backward on what its forward kept (or, in a
// recompute group, on the group's rebuilt saved set: the slot's one
// allocation), as iteration it of its run.
func (rp *replayer) backward(c *blockCall, it int) {
	ks := c.kept.at(it)
	k := rp.kept[ks]
	br := rp.blockRun(c.a)
	if c.bwd.lump {
		rp.drop(k)
		k = br.newKept()
		k.lump = rp.handle(ks)
		rp.slots[ks] = nil
	}
	grads, held := br.backward(k, c.bwd)
	rp.kept[ks] = nil
	rp.drop(k)
	rp.fill(c.grads, it, grads)
	rp.fill(c.held, it, held)
}

// fill gives slot s of iteration it the handles hs (which, where the
// compiler made no slot, are none: blockRun keeps to what the call's
// inventory says).
func (rp *replayer) fill(s slot, it int, hs []int) {
	if s != noSlot {
		rp.hold(s+slot(it), hs...)
	}
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
		a.Malloc(gemmWorkspace(opt.GPU, opt.Torch))
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
