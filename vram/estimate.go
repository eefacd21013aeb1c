package vram

import "fmt"

// TrainingEstimate is the memory of one GPU (the most loaded) for a training
// plan.
type TrainingEstimate struct {
	// Peak is what is live at the allocated peak, by category: the prediction
	// of torch.cuda.max_memory_allocated(). Peak.Total() is that number.
	Peak Breakdown `json:"peak"`
	// PeakAt says where the peak happens.
	PeakAt Event `json:"peak_at"`
	// Static is each category at its own largest size during the step (what
	// a sum-of-buckets calculator would add up); Static.Total() ≥ Peak.Total().
	Static Breakdown `json:"static"`
	// PagedStates are optimizer states in unified (paged) memory: not counted
	// by the PyTorch allocator, but resident on the device when it has room.
	PagedStates Bytes `json:"paged_states,omitempty"`
	// Host is the host memory each rank's offload takes, by category
	// (parameters, gradients, optimizer states and master weights,
	// activations), most of it pinned; zero without offload (offload.go).
	Host Breakdown `json:"host"`
	// AfterForward is what is live when the steady-state step's forward
	// and loss have returned, before its backward: where a trainer that
	// runs a second model between the two (DPO's reference forward) adds
	// that model's pass.
	AfterForward Breakdown `json:"after_forward"`

	Params          int64 `json:"params"`           // all model parameters
	TrainableParams int64 `json:"trainable_params"` // what the optimizer updates (adapters for LoRA)

	// Notes say where the plan runs differently from what it asks, the way
	// the library it names does (attention it lacks, checkpointing it
	// ignores), and which the estimate follows.
	Notes []string `json:"notes,omitempty"`

	// Block is the activation inventory of block 0 for one micro-batch.
	Block    BlockActivations `json:"block"`
	Timeline Timeline         `json:"-"`
}

// Estimate predicts the memory of the plan on its most loaded GPU. It returns
// the validation error for an invalid plan. A plan asked about before is
// answered from a cache (plancache.go).
func (t Training) Estimate() (TrainingEstimate, error) {
	ks := keyScratches.Get().(*keyScratch)
	defer ks.done()
	ks.replay.t = t
	key, keyed := ks.key(&ks.replay.t)
	if keyed {
		if est, ok := estimates.get(key); ok {
			return est.clone(), nil
		}
	}
	est, err := t.estimate()
	if keyed && err == nil && estimates.worthKeeping(key) {
		estimates.put(key, est.clone(), est.size())
	}
	return est, err
}

// estimate is Estimate computed.
func (t Training) estimate() (_ TrainingEstimate, err error) {
	defer recoverOverflow(&err)
	r, err := t.resolve()
	if err != nil {
		return TrainingEstimate{}, err
	}
	if sanityChecks {
		if err := t.checkStep(); err != nil {
			return TrainingEstimate{}, err
		}
	}
	sc := estimateScratches.Get().(*estimateScratch)
	defer sc.done()
	r.arena = arenaPool.Get().(*builderArena)
	defer r.arena.release()
	blocks, embed, head := r.unitsIn(sc.blocks, false)
	sc.blocks = blocks
	tl, _ := simulateIn(sc, &r, blocks, embed, head, false, false)
	var est TrainingEstimate
	est.PeakAt = tl.PeakEvent()
	est.Peak = est.PeakAt.Live
	est.Static = tl.static
	var all unitMem
	for _, b := range blocks {
		all.add(b)
	}
	all.add(embed)
	all.add(head)
	est.PagedStates = all.paged
	est.Host = tl.host
	est.AfterForward = tl.afterForward
	est.Params = r.m.ParamCount()
	est.TrainableParams = all.trainable * int64(r.tp) // per-GPU shards back to the model count
	if r.frozen {
		est.TrainableParams = all.loraElems * int64(r.tp)
	}
	// The block inventories' programs go back with the arena: what the
	// estimate returns keeps only their numbers and the tensor list of the
	// block it returns, made here.
	if tl.block.prog != nil && tl.block.Tensors == nil {
		tl.block.Tensors = tl.block.prog.tensorList()
	}
	tl.block.prog, tl.block.bwd = nil, nil
	est.Timeline = tl
	est.Block = tl.block
	est.Notes = r.notes
	return est, nil
}

// Timeline returns the step timeline of the plan (see Estimate).
func (t Training) Timeline() (_ Timeline, err error) {
	defer recoverOverflow(&err)
	r, err := t.resolve()
	if err != nil {
		return Timeline{}, err
	}
	blocks, embed, head := r.units()
	tl, _ := simulateTraining(&r, blocks, embed, head, true, false)
	return tl, nil
}

// ModelStates returns the persistent per-GPU memory of parameters, gradients
// and optimizer states (with master weights) after the first step: what the
// ZeRO paper calls model states, without activations or buffers.
func (t Training) ModelStates() (_ Breakdown, err error) {
	defer recoverOverflow(&err)
	r, err := t.resolve()
	if err != nil {
		return Breakdown{}, err
	}
	blocks, embed, head := r.units()
	var all unitMem
	for _, b := range blocks {
		all.add(b)
	}
	all.add(embed)
	all.add(head)
	return Breakdown{Parameters: all.params - all.buffers, Gradients: all.grads, OptimizerStates: addBytes(all.states, all.master)}, nil
}

// LayerMemory is the memory one part of the model holds on a GPU.
type LayerMemory struct {
	Name  string    `json:"name"` // "embedding", "block 0", …, "head"
	Layer int       `json:"layer"`
	Live  Breakdown `json:"live"` // parameters, gradients, optimizer states, saved activations (one micro-batch)
}

// Layers breaks the persistent memory and the saved activations down by
// part of the model (most loaded pipeline stage: all of it when PP = 1).
func (t Training) Layers() (_ []LayerMemory, err error) {
	defer recoverOverflow(&err)
	r, err := t.resolve()
	if err != nil {
		return nil, err
	}
	blocks, embed, head := r.units()
	edges := buildEdges(r.pipelineMicro())
	var out []LayerMemory
	part := func(name string, layer int, u unitMem, saved Bytes) {
		out = append(out, LayerMemory{Name: name, Layer: layer, Live: Breakdown{Parameters: u.params, Gradients: u.grads,
			OptimizerStates: addBytes(u.states, u.master), Activations: saved}})
	}
	st := r.stages()[0]
	if st.embed {
		part("embedding", -1, embed, edges.Embed.Saved)
	}
	var blk [blockKinds]BlockActivations
	var have [blockKinds]bool
	for l := st.first; l < st.last; l++ {
		if l == 0 && r.inputNoGrad() {
			part("block 0", 0, blocks[0], r.savedFor(buildBlock(&r, 0), 0)) // its input needs no gradient
			continue
		}
		k := r.kind(l)
		if !have[k] {
			blk[k], have[k] = buildBlock(&r, l), true
		}
		part(fmt.Sprintf("block %d", l), l, blocks[l], r.savedFor(blk[k], l))
	}
	if st.head || r.pp == 1 {
		part("head", -2, head, edges.Head.Saved)
	}
	return out, nil
}
