package vram

// unitMem is the persistent memory of one unit (a block, or the embedding /
// head outside the blocks) on one GPU.
type unitMem struct {
	params    Bytes      // stored parameters (sharded, quantized where so) and module buffers
	buffers   Bytes      // the module buffers within params
	gathered  Bytes      // the unit's full parameters in compute dtype (ZeRO-3 all-gather)
	trainable int64      // trainable elements on this GPU
	largest   int64      // largest trainable tensor (elements)
	grads     Bytes      // persistent gradients
	gradsFull Bytes      // the unit's unsharded gradients (before reduce-scatter)
	gradsLive Bytes      // autograd's gradients of the all-gathered parameters (compute dtype; FSDP2 reduces them as they are)
	states    Bytes      // optimizer states counted by the allocator
	paged     Bytes      // paged optimizer states (unified memory, not counted)
	master    Bytes      // fp32 master copy of trainable params
	host      *Breakdown // what offload keeps in host memory instead (offload.go); nil without offload
	h2d       Bytes      // offloaded parameters: the device copy of the shard each unshard makes (offload.go)
	loraElems int64      // adapter elements (part of trainable)

	// Per-tensor sizes, for the allocator replay (only when sized).
	sized                                          bool
	paramSizes, gradSizes, stateSizes, masterSizes []Bytes
}

// book adds b to what the unit keeps in host memory. The unit gets its own
// record on the first booking (copies of a unit share a booked one, read
// only), so plans without offload carry none.
func (u *unitMem) book(b Breakdown) {
	h := b
	if u.host != nil {
		h = u.host.Add(b)
	}
	u.host = &h
}

func (u *unitMem) add(o unitMem) {
	u.params = addBytes(u.params, o.params)
	u.buffers = addBytes(u.buffers, o.buffers)
	u.gathered = addBytes(u.gathered, o.gathered)
	u.trainable += o.trainable
	if o.largest > u.largest {
		u.largest = o.largest
	}
	u.grads = addBytes(u.grads, o.grads)
	u.gradsFull = addBytes(u.gradsFull, o.gradsFull)
	u.gradsLive = addBytes(u.gradsLive, o.gradsLive)
	u.states = addBytes(u.states, o.states)
	u.paged = addBytes(u.paged, o.paged)
	u.master = addBytes(u.master, o.master)
	if o.host != nil {
		u.book(*o.host)
	}
	u.h2d = addBytes(u.h2d, o.h2d)
	u.loraElems += o.loraElems
	if len(o.paramSizes)+len(o.gradSizes)+len(o.stateSizes)+len(o.masterSizes) == 0 {
		return
	}
	u.paramSizes = append(u.paramSizes, o.paramSizes...)
	u.gradSizes = append(u.gradSizes, o.gradSizes...)
	u.stateSizes = append(u.stateSizes, o.stateSizes...)
	u.masterSizes = append(u.masterSizes, o.masterSizes...)
}

// stage is the layer range of the most loaded pipeline stage and whether it
// holds the embedding and the head.
type stage struct {
	first, last int // layers [first, last)
	embed, head bool
}

// stages lists the pipeline ranks (one when PP = 1), each as a contiguous
// range of as many blocks as the rank holds: with interleaving a rank's
// chunks are not contiguous, but blocks of a kind cost the same wherever
// they sit. Rank 0 holds the embedding and rank pp−1 the head (the first
// and the last virtual stage, in the looped order both schedules use).
func (r *resolved) stages() []stage {
	if r.stageList != nil {
		return r.stageList // resolve's, which no later step changes
	}
	return r.listStages()
}

// listStages is stages worked out.
func (r *resolved) listStages() []stage {
	var out []stage
	first := 0
	for k, n := range r.blocksPerRank() {
		out = append(out, stage{first: first, last: first + n, embed: k == 0, head: k == r.rankOfStage(r.pp*r.virtualStages()-1)})
		first += n
	}
	return out
}

// blocksPerRank is how many decoder blocks each pipeline rank holds, over
// S = pp × v virtual stages (v = virtual_stages with interleaved_1f1b,
// else 1), rank r holding the stages r, r+pp, r+2pp, … (torch.distributed.
// pipelining's looped schedules; torchtitan pipeline_module_split).
//
// torchtitan (framework "torchtitan") splits as generate_llm_fqn_per_model_
// part does (torchtitan/distributed/pipeline_parallel.py): the embedding
// and the norm + output count as one layer each, every stage gets
// ⌊(L+2)/S⌋ of these L+2 and the first (L+2) mod S stages one more, so
// the first and last stages carry one block less. Otherwise stage s gets
// blocks [s·L/S, (s+1)·L/S): an even split, uneven by at most one block
// when S does not divide L (Megatron-LM expresses such splits with
// --decoder-first/last-pipeline-num-layers).
func (r *resolved) blocksPerRank() []int {
	L, pp := r.m.Layers, r.pp
	v := r.virtualStages()
	S := pp * v
	size := make([]int, S)
	p := r.Parallel
	if megatron := p.PPFirstStageLayers > 0 || p.PPLastStageLayers > 0 || p.PPAccountEmbedding || p.PPAccountLoss; megatron && S > 1 {
		return r.megatronSplit(S)
	}
	if r.Framework == FrameworkTorchtitan && S > 1 {
		eff := L + 2
		for s := range size {
			size[s] = eff / S
			if s < eff%S {
				size[s]++
			}
		}
		size[0]--
		size[S-1]--
	} else {
		for s := range size {
			size[s] = (s+1)*L/S - s*L/S
		}
	}
	out := make([]int, pp)
	for s, n := range size {
		out[r.rankOfStage(s)] += n
	}
	return out
}

// virtualStages is how many pipeline stages each rank holds: the
// interleaved schedule's virtual_stages, ZB-V's two, else one.
func (r *resolved) virtualStages() int {
	switch {
	case r.Parallel.PPSchedule.interleaved() && r.Parallel.VirtualStages > 1:
		return r.Parallel.VirtualStages
	case r.Parallel.PPSchedule.vShape():
		return 2
	}
	return 1
}

// rankOfStage is the rank that holds stage s: looped (s mod pp), or for
// ZB-V and DualPipeV a V (generate_stage_to_rank_mapping style "v": stages r and
// 2·pp−1−r on rank r).
func (r *resolved) rankOfStage(s int) int {
	if r.Parallel.PPSchedule.vShape() && s >= r.pp {
		return 2*r.pp - 1 - s
	}
	return s % r.pp
}

// loraOut is how many output rows of tensor t get an adapter.
func (r *resolved) loraOut(t Tensor) int64 {
	out, _ := r.loraTargets(t)
	return out
}

// loraTargets is how many output rows of tensor t get an adapter, and how
// many A matrices of rank rows it has: one for a linear targeted whole;
// under litgpt one per part targeted in its fused q|k|v, whose
// LoRAQKVLinear stacks an A for each enabled q, k, v (litgpt/lora.py:
// lora_A of (r * sum(enable_lora), in_features), lora_B of
// (sum(qkv_shapes), r)), as separate adapters on the parts would; elsewhere
// the parts share one A.
func (r *resolved) loraTargets(t Tensor) (out int64, adapters int64) {
	if r.Trainable != "lora" || r.LoRA == nil || !t.IsLinear() || t.Role == "router" || t.part != textPart {
		return 0, 0
	}
	want := map[string]bool{}
	for _, tg := range r.LoRA.Targets {
		want[tg] = true
	}
	if want["all_linear"] {
		if t.Role == "lm_head" || t.Role == "other" {
			return 0, 0
		}
		return t.Shape[0], 1
	}
	if len(t.Parts) > 0 {
		for _, p := range t.Parts {
			if want[p.Role] {
				out, adapters = out+p.Out, adapters+1
			}
		}
		if adapters > 0 && r.Framework != FrameworkLitGPT {
			adapters = 1
		}
		if adapters > 0 {
			return out, adapters
		}
	}
	if want[t.Role] {
		return t.Shape[0], 1
	}
	return 0, 0
}

// units returns the persistent memory per block (index = layer) and of the
// non-block tensors split into embedding-side and head-side.
func (r *resolved) units() (blocks []unitMem, embed, head unitMem) { return r.unitsSized(false) }

// paramShard is one rank's share of a sharded parameter of local (after
// tensor parallelism) elements: FSDP2 chunks the local tensor's first
// dimension over the shard group and pads every chunk to the first's,
// ceil(rows / shard) rows (torch/distributed/fsdp/_fully_shard/
// _fsdp_param.py _init_sharded_param: padded_sharded_param_size), which rank
// 0 holds; FSDP1 and ZeRO-3 flatten and split evenly.
func (r *resolved) paramShard(t Tensor, stored Bytes, local, div int64, quant bool) Bytes {
	shard := int64(r.shard)
	rows := localRows(t, div, int64(r.tp))
	if !r.fsdp2() || quant || rows < 1 || local%rows != 0 {
		return stored / Bytes(shard)
	}
	return r.WeightsDType.Size((rows + shard - 1) / shard * (local / rows))
}

// localRows is a tensor's first dimension on one tensor-parallel rank: the
// column-parallel linears' and the embedding's are split (torchtitan's
// plan: ColwiseParallel shards a weight's output rows, RowwiseParallel an
// embedding's vocabulary rows and a linear's input columns).
func localRows(t Tensor, div, tp int64) int64 {
	if len(t.Shape) == 0 {
		return 0
	}
	rows := t.Shape[0]
	if tp > 1 && div%tp == 0 && t.Stacked == 0 {
		switch t.Role {
		case "q_proj", "k_proj", "v_proj", "qkv_proj", "gate_proj", "up_proj", "gate_up_proj", "lm_head", "embedding":
			rows /= tp
		}
	}
	return rows
}

// unitsSized is units, with the per-tensor size lists filled when sized
// (the allocator replay needs them; estimates do not).
func (r *resolved) unitsSized(sized bool) (blocks []unitMem, embed, head unitMem) {
	return r.unitsIn(nil, sized)
}

// unitsIn is unitsSized in dst's storage where it has room.
func (r *resolved) unitsIn(dst []unitMem, sized bool) (blocks []unitMem, embed, head unitMem) {
	blocks = resize(dst[:0], r.m.Layers)
	clear(blocks)
	// Blocks of one kind (dense or MoE, encoder or decoder, …) have the same
	// tensors: account the first of each kind and copy it to the others.
	set := r.m.tensorSet()
	var rep [blockKinds]int
	for k := range rep {
		rep[k] = -1
	}
	for l := 0; l < r.m.Layers; l++ {
		if k := r.kind(l); rep[k] < 0 {
			rep[k] = l
			r.addUnits(set, set.byLayer[l], blocks, &embed, &head, sized)
		}
	}
	r.addUnits(set, set.outside, blocks, &embed, &head, sized)
	defer func() {
		for l := range blocks {
			blocks[l] = blocks[rep[r.kind(l)]]
		}
	}()
	// Module buffers sit on every GPU that holds their module, unsharded
	// and never offloaded; the blocks' with the blocks, the rest with the
	// embedding.
	for _, bf := range set.bufs {
		u := &embed
		if bf.Layer >= 0 && bf.Layer < len(blocks) {
			u = &blocks[bf.Layer]
		}
		u.params = addBytes(u.params, bf.Bytes())
		u.buffers = addBytes(u.buffers, bf.Bytes())
		if sized {
			u.paramSizes = append(u.paramSizes, bf.Bytes())
		}
	}
	return blocks, embed, head
}

// addUnits adds the tensors set.ts[idx] to the units that hold them.
func (r *resolved) addUnits(set tensorSet, idx []int, blocks []unitMem, embed, head *unitMem, sized bool) {
	for _, i := range idx {
		t := set.ts[i]
		u := r.tensorUnit(t, sized)
		switch {
		case t.Layer >= 0:
			blocks[t.Layer].add(u)
		case t.head:
			head.add(u)
		default:
			embed.add(u)
		}
	}
}

// tensorUnit is what one tensor of the model takes on this GPU: its stored
// (sharded, quantized, offloaded) parameters, what the all-gather makes of
// them, and for a trained tensor or its adapters the gradients, optimizer
// states and master weights.
func (r *resolved) tensorUnit(t Tensor, sized bool) unitMem {
	var u unitMem
	tp, shard, ep := int64(r.tp), int64(r.shard), int64(r.ep)
	zero := r.Parallel.ZeRO
	off := r.offloadOf()
	compute := r.gatheredDType()
	tDType := r.trainableDType()
	n := t.Numel()
	div := int64(1)
	switch {
	case t.IsLinear() || t.Role == "embedding":
		div = tp
	}
	if t.Expert >= 0 {
		div *= ep
	}
	if t.Stacked > 0 {
		// Stacked experts: split over expert-parallel ranks by expert,
		// and their weights' inner width over tensor-parallel ranks.
		div = ep
		if len(t.Shape) == 3 {
			div *= tp
		}
	}
	quant := r.QuantizedBase.Quantized() && t.IsLinear() && t.Role != "router" &&
		(t.Role != "lm_head" || r.QuantizedModules == "all_linear")
	var stored Bytes
	if quant {
		stored = r.QuantizedBase.Size(t.Shape[0], t.Shape[1]) / Bytes(div)
	} else {
		stored = r.WeightsDType.Size(n / div)
	}
	// All-gathered for compute: FSDP's param_dtype, or the packed
	// quantized storage for a quantized base.
	u.gathered = compute.Size(n / div)
	if quant {
		u.gathered = stored
	}
	if r.Float8AllGather && t.IsLinear() && t.Layer >= 0 && r.float8Linear(t.Role) {
		u.gathered = FP8E4M3.Size(n / div) // cast before the all-gather (float8.go)
	}
	if d, s, st, ok := r.ttExpertStored(t, n, quant, zero); ok {
		div, shard, stored, u.gathered = d, s, st, compute.Size(n/d)
	} else if zero == 3 && !r.dsPersistent(n/div) {
		stored = r.paramShard(t, stored, n/div, div, quant)
	}
	if off.params {
		u.h2d = addBytes(u.h2d, r.unshardCopy(stored, u.gathered, !quant && r.WeightsDType != compute))
		u.book(Breakdown{Parameters: stored, Gradients: r.hostFlatGrad(stored)})
		stored = 0
	}
	u.params = stored
	u.sized = sized
	if sized {
		u.paramSizes = []Bytes{stored}
	}
	train := int64(0)
	var shape []int64
	if r.trains(t) {
		train = n / div
		shape = t.Shape
	} else if out, adapters := r.loraTargets(t); out > 0 {
		// LoRA A (rank × in, for each adapter) and B (out × rank) for
		// this linear.
		rk := int64(r.LoRA.Rank)
		a, bb := adapters*rk*t.Shape[1]/div, out*rk/div
		u.loraElems = a + bb
		u.params = addBytes(u.params, tDType.Size(a+bb))
		if sized {
			u.paramSizes = append(u.paramSizes, tDType.Size(a), tDType.Size(bb))
		}
		r.addTrainable(&u, a, []int64{adapters * rk, t.Shape[1]}, tDType, shard, zero, off)
		r.addTrainable(&u, bb, []int64{out, rk}, tDType, shard, zero, off)
		u.gradsLive = compute.Size(a + bb)
	}
	if train > 0 {
		r.addTrainable(&u, train, shape, r.WeightsDType, shard, zero, off)
		u.gradsLive = compute.Size(train)
	} else if t.Layer >= 0 && r.sharedAdapterUnits() {
		// A frozen weight in a block's shared FSDP1 unit gets a
		// gradient all the same (Parallel.FSDPAdapterUnits): unsharded
		// in the compute dtype until the block's reduce-scatter, then
		// its shard of the flat gradient, kept until zero_grad.
		full, g := compute.Size(n/div), r.WeightsDType.Size(n/div)/Bytes(shard)
		if off.grads {
			g = 0
		}
		u.gradsFull = addBytes(u.gradsFull, full)
		u.grads = addBytes(u.grads, g)
		if sized {
			u.gradSizes = append(u.gradSizes, g)
		}
	}
	return u
}

// addTrainable accounts gradients, optimizer states and master weights of n
// trainable elements of a tensor with the given shape.
func (r *resolved) addTrainable(u *unitMem, n int64, shape []int64, pd DType, shard int64, zero int, off offloaded) {
	u.trainable += n
	if n > u.largest {
		u.largest = n
	}
	g := r.GradsDType.Size(n)
	if r.frozen {
		g = pd.Size(n) // adapters' grads match the adapters
	}
	u.gradsFull = addBytes(u.gradsFull, g)
	if zero >= 2 {
		g /= Bytes(shard)
	}
	if off.grads {
		u.book(Breakdown{Gradients: r.hostGrads(g, n, shard)})
		g = 0
	}
	u.grads = addBytes(u.grads, g)
	if u.sized {
		u.gradSizes = append(u.gradSizes, g)
	}
	st, paged := r.stateBytes(n, shape, pd)
	var master Bytes
	if r.MasterWeights != DTypeUnset && r.MasterWeights != pd {
		master = r.MasterWeights.Size(n)
	}
	if zero >= 1 {
		st /= Bytes(shard)
		master /= Bytes(shard)
	}
	if off.optimizer {
		u.book(Breakdown{OptimizerStates: addBytes(st, master)})
		st, master = 0, 0
	}
	if paged {
		u.paged = addBytes(u.paged, st)
	} else {
		u.states = addBytes(u.states, st)
		if u.sized {
			u.stateSizes = append(u.stateSizes, st)
		}
	}
	u.master = addBytes(u.master, master)
	if u.sized {
		u.masterSizes = append(u.masterSizes, master)
	}
}

// gatheredDType is the dtype parameters are all-gathered in for compute
// (FSDP's param_dtype, ZeRO-3's model dtype): the compute dtype, bf16 for
// an fp8 or integer one.
func (r *resolved) gatheredDType() DType {
	c := r.ComputeDType
	if !c.IsFloat() || c == FP8E4M3 || c == FP8E5M2 {
		return BF16
	}
	return c
}
