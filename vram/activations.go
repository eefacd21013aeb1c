package vram

// The activation inventory: for one transformer block and one micro-batch,
// every tensor the forward pass creates, in order, with its size, dtype and
// lifetime (saved for backward, or transient). It is built op by op from how
// PyTorch autograd and the Hugging Face / litgpt / torchtune modules behave:
//
//   - a matmul saves its input only when its weight needs a gradient (autograd
//     saves mat1 for grad_mat2); frozen (LoRA) base layers save nothing, except
//     bitsandbytes 4-bit layers, whose MatMul4Bit saves its input whenever the
//     input needs a gradient (bitsandbytes autograd/_functions.py).
//   - LayerNorm saves its input plus fp32 mean and rstd per token
//     (aten native_layer_norm); the RMSNorms of transformers/litgpt/torchtune
//     upcast to fp32 and save the fp32 copy and the rsqrt.
//   - GELU/SiLU save their input, ReLU its output (threshold_backward), an
//     elementwise product both factors, dropout a bool mask and its output.
//   - softmax saves its output; most decoder families compute it in fp32 and
//     cast back (modeling_llama.py eager_attention_forward: dtype=torch.float32).
//   - fused attention (SDPA flash / memory-efficient, FlashAttention-2) saves
//     q, k, v, the output and an fp32 logsumexp per head and token (Dao 2023).
//
// The static breakdown sums this inventory; the step timeline replays it, so
// the two cannot disagree.

// ActTensor is one activation tensor of a block.
type ActTensor struct {
	Name  string `json:"name"`
	Op    string `json:"op"`
	Bytes Bytes  `json:"bytes"`
	DType DType  `json:"dtype"`
	// Saved means autograd keeps it until the block's backward; otherwise it
	// is freed after its last use in the forward pass.
	Saved bool `json:"saved"`
	// Attention marks the attention-core tensors (scores, probabilities,
	// dropout) that selective recomputation drops (Korthikanti et al. 2022 §4.2).
	Attention bool `json:"attention,omitempty"`
}

// BlockActivations is the inventory of one block for one micro-batch.
type BlockActivations struct {
	Tensors []ActTensor `json:"tensors"`
	// Saved is the sum of saved tensors: what the block holds from its
	// forward until its backward without checkpointing.
	Saved Bytes `json:"saved"`
	// SavedSelective is Saved without the attention-core tensors.
	SavedSelective Bytes `json:"saved_selective"`
	// SavedCompiled is what the block saves when torch.compile compiles
	// it: Inductor's partitioner recomputes the fusible work (compile.go).
	SavedCompiled Bytes `json:"saved_compiled"`
	// SavedOp is what torchtitan's op-level selective checkpointing keeps
	// (torchtitan/distributed/activation_checkpoint.py _apply_op_sac: the
	// outputs of every other aten.mm — the 1st, 3rd, … of the block — and of
	// the fused attention kernels are saved, everything else recomputed):
	// the block's input and those outputs.
	SavedOp Bytes `json:"saved_op"`
	// Input is the block's input (the residual stream), which full
	// checkpointing keeps instead of Saved.
	Input Bytes `json:"input"`
	// ForwardPeak is the most the block has live at once during its forward,
	// above what was live before it (saved so far plus transients).
	ForwardPeak Bytes `json:"forward_peak"`
	// BackwardPeak is the most the block's backward needs above its saved
	// tensors: gradients of the op outputs and inputs in flight.
	BackwardPeak Bytes `json:"backward_peak"`
	// Held is the part of Saved that the model's output keeps alive rather
	// than autograd, when the training loop keeps that output in scope through
	// loss.backward(): transformers' past_key_values during training, returned
	// logits or hidden states.
	Held Bytes `json:"held"`
	// NoGradPeak is the forward peak under torch.no_grad (inference): every
	// tensor dies after its last use.
	NoGradPeak Bytes `json:"no_grad_peak"`

	// outlives is what the model's output holds (saved by autograd or not):
	// it stays live until the whole backward returns.
	outlives Bytes
	// untilLoss is what the model's forward holds beyond the saved tensors
	// when the loop keeps only the loss (the cache's k and v of transformers'
	// use_cache): live from the block's forward until the forward returns,
	// after the loss (the end of the forward).
	untilLoss Bytes
	// inputSaved: an op of the block saves its input (so a checkpoint's kept
	// input is among the recomputed saved tensors).
	inputSaved bool
	// recomputePeak is ForwardPeak over the ops a checkpoint's
	// recomputation runs (recomputeEnd): torch.utils.checkpoint stops it
	// once the last saved tensor exists (non-reentrant early stop), so
	// later ops, and their outputs, are not rebuilt, unless the run turns
	// early stop off.
	recomputePeak Bytes
	// recomputeGrad is what is in flight when a checkpointed block's
	// recomputation runs: the first backward op that unpacks a saved tensor
	// triggers it, holding the gradient flowing in and its own output's.
	recomputeGrad Bytes
	prog          *actBuilder // the op program, replayed tensor by tensor by Replay
	// bwd walks the backward pass op by op: what is still saved, the share of
	// the block's weight gradients created so far, and the gradients in flight.
	bwd []bwdStep
	// bwdResid is the gradient in the residual stream through the walk.
	bwdResid Bytes
}

// bwdStep is one op of a block's backward pass.
type bwdStep struct {
	saved    Bytes   // block tensors still held when the op runs
	gradFrac float64 // share of the block's weight gradients that exist
	inflight Bytes   // gradients of the op's outputs and inputs, residual grad, workspace
	perCall  Bytes   // the part of inflight rebuilt from weights on each call (weightWork)
	op       int     // the op whose backward this is
	// section: a step of a routed experts' section's walk (expertSection),
	// which releases each expert's share of the section's saved tensors.
	section bool
}

type actT struct {
	name    string
	op      string
	bytes   Bytes
	dtype   DType
	saved   bool
	attn    bool
	born    int
	lastUse int
	// holdUntil is the op until which the modeling code keeps t referenced
	// (a Python local) past its last use; 0 for none. It lengthens t's
	// life, not its gradient's.
	holdUntil int
	held      bool // kept alive by the model's output (cache, logits), not by autograd
	// forwardHeld: kept by the model's forward until it returns, after
	// the loss, when the loop keeps only the loss (holdOutput).
	forwardHeld bool
	external    bool // created before the block (its input)
	// batch: an input of the step (pixels), counted with the batch
	// (edgeActivations.Inputs) even when an op saves it.
	batch     bool
	keepAlive bool // the block's output
	// residual: a residual-stream sum, whose gradient is the one flowing
	// in the residual stream (add passes it through), not a tensor of its own.
	residual bool
	// weightCopy: autocast's compute-dtype copy of a weight (one per weight).
	weightCopy bool
	// aliasGrad: a branch output added to the residual stream in the same
	// dtype; add's backward hands it the residual gradient itself (no copy),
	// so its gradient is not a tensor of its own.
	aliasGrad bool
	id        int // index in the builder's ts
	// release is the op after whose backward autograd lets go of a saved
	// tensor: the earliest op that saved it (backward runs last op first).
	// An op's own output saved by itself (softmax, tanh) is released after
	// that op's backward; -1 until some op saves the tensor.
	release int
}

type actOp struct {
	name      string
	outs      []*actT
	ins       []*actT
	workspace Bytes
	// gradWorkspace is scratch its backward alone needs.
	gradWorkspace Bytes
	// weightWork is what the op rebuilds from its weights on each call, in
	// forward and in backward (a 4-bit weight dequantized): sized by the
	// weights, not the tokens, so a chunked loss pays it per chunk.
	weightWork Bytes
	weights    int64 // trainable weight elements whose gradient this op's backward creates
	// castWeights: the op multiplies by autocast's copy of its fp32 weights;
	// its backward yields the weight gradient in the compute dtype (an
	// in-flight gradient of that copy) and the cast's own backward node,
	// which runs next, turns it into the fp32 .grad.
	castWeights bool
	// expert: one of the routed experts' ops, which transformers runs in a
	// Python loop over the experts, one expert's tokens at a time.
	expert bool
	// saves: the op saves a tensor for its backward (actBuilder.saves
	// lists which).
	saves bool
	// mm: the op is aten.mm (a linear layer without bias; with a bias it
	// is addmm); fusedAttn: a fused attention kernel. Op-level selective
	// checkpointing saves the outputs of these (see SavedOp).
	mm, fusedAttn bool
	// sacSave: torchtitan's op-level SAC must save the op's outputs
	// whatever the mm count (topk, all_to_all_single;
	// activation_checkpoint.py _get_default_save_ops).
	sacSave bool
	// gemm: a matrix multiply (mm, addmm, bmm) or an attention kernel,
	// which Inductor's partitioner never recomputes (compiledSaved).
	gemm bool
	// noGrad: autograd records nothing for the op (a frozen tower's):
	// its backward never runs.
	noGrad bool
	// trains: the op multiplies by a trainable weight its weights field
	// leaves out (a norm's scale), so autograd records it whatever its
	// input.
	trains bool
	// heldGrad is gradients of tensors shared across blocks that exist
	// while the op's backward runs (see actBuilder.persistGrad).
	heldGrad Bytes
	// stacked: the op multiplies by one expert's slice of a stacked
	// parameter (gpt-oss gate_up_proj[e]).
	stacked bool
	// scatter: the op indexes rows of its input (hidden_states[top_x]); its
	// backward scatters into a fresh zero tensor of the input's full size
	// (new_zeros, then index_put), both live at once.
	scatter bool
}

// actBuilder records a block's ops.
type actBuilder struct {
	r      *resolved
	tokens int64 // tokens per rank in this block (b·s/cp)
	// seqShard divides per-token statistics in the residual region: tp under
	// sequence parallelism, else 1.
	seqShard int64
	ts       []*actT
	ops      []actOp
	// slabs are the backing store of ts (newT), refSlabs that of the ops'
	// outs and ins lists (ptrList), each filled one after the other (slab
	// and refSlab say which): building an op allocates nothing of its own,
	// and a pooled builder (pools.go) reuses them.
	slabs         [][]actT
	refSlabs      [][]*actT
	slab, refSlab int
	// spliceTo maps a spliced block's tensors to their copies (vision.go).
	spliceTo []*actT
	in       *actT // the block's input (external)
	// topK is DSA's top-k indices where the decoder layer returns them
	// (recipe.topKReturned), nil otherwise.
	topK *actT
	// towerEmbeds is a vision tower's embeddings, its first block's input,
	// which a wrapper's project may hold until the tower returns (vision.go;
	// Gemma 4's), nil outside a wrapper's image side.
	towerEmbeds *actT
	// kv is what the block's attention read (kvshare5.go): the first op
	// of its core, its keys and values.
	kv   kvRead
	head bool // the output projection and loss, after the blocks
	// chunks is how many token chunks a chunked loss computes the head in,
	// one after the other (headActivations); 0 or 1 for one pass.
	chunks int64
	// persistGrad is the gradients in flight through the whole backward of
	// the block, accumulated from tensors shared by several blocks (an
	// encoder-decoder's encoder output and position biases); the ops'
	// heldGrad says which exist while each runs.
	persistGrad Bytes
	frees       [][]*actT // per op: transients whose last use it is (blockrun.go)
	rel         [][]*actT // per op: saved tensors released after its backward (blockrun.go)
	saves       []saveRec // which op saves which tensor, in op order
	scratch     builderScratch
}

// saveRec says that op saves tensor t for its backward.
type saveRec struct {
	op int
	t  *actT
}

// sacCaches reports whether op-level SAC keeps op's outputs from the
// forward for the recomputation, mms being the matmuls counted from the
// block's first to op (torchtitan's policy, measure.py op_sac_context:
// every other matmul, the fused attention kernels and the ops it must
// save); the recomputation takes them back instead of running the op.
func sacCaches(op *actOp, mms int) bool {
	return op.fusedAttn || op.sacSave || op.mm && mms%2 == 1
}

// recomputeEnd is the last op a checkpoint's recomputation runs: the one
// that creates the block's last saved tensor (-1 for none), or the
// block's last op where the run turns early stop off
// (checkpoint_early_stop.go).
func (b *actBuilder) recomputeEnd() int {
	if b.r != nil && !b.r.earlyStop {
		return len(b.ops) - 1
	}
	end := -1
	for _, t := range b.ts {
		if t.saved && !t.external {
			end = max(end, t.born)
		}
	}
	return end
}

// freesAfter lists, per op, the unsaved tensors that die after it.
func (b *actBuilder) freesAfter() [][]*actT {
	if b.frees != nil {
		return b.frees
	}
	b.frees = b.perOp(func(t *actT) int {
		if t.external || t.saved || t.held || t.forwardHeld || t.keepAlive {
			return -1
		}
		return t.end()
	})
	return b.frees
}

// perOp groups the block's tensors by the op at(t) names (none where it
// is out of range), in tensor order, all lists in one backing array.
func (b *actBuilder) perOp(at func(*actT) int) [][]*actT {
	ends := take(&b.scratch.ints, len(b.ops)+1) // first the count of each op's list, then where it ends
	for _, t := range b.ts {
		if j := at(t); j >= 0 && j < len(b.ops) {
			ends[j+1]++
		}
	}
	for j := 1; j < len(ends); j++ {
		ends[j] += ends[j-1]
	}
	store := b.ptrStore(int(ends[len(b.ops)]))
	lists := take(&b.scratch.lists, len(b.ops))
	for j := range lists {
		lists[j] = store[ends[j]:ends[j]:ends[j+1]]
	}
	for _, t := range b.ts {
		if j := at(t); j >= 0 && j < len(b.ops) {
			lists[j] = append(lists[j], t)
		}
	}
	return lists
}

// ptrList copies ts into the builder's store of tensor lists; the result's
// capacity is its length, so an append to it copies rather than overwrite
// a neighbour.
func (b *actBuilder) ptrList(ts ...*actT) []*actT {
	if len(ts) == 0 {
		return nil
	}
	if len(b.refSlabs) == 0 || cap(b.refSlabs[b.refSlab])-len(b.refSlabs[b.refSlab]) < len(ts) {
		b.nextRefSlab(len(ts))
	}
	cur := b.refSlabs[b.refSlab]
	n := len(cur)
	cur = append(cur, ts...)
	b.refSlabs[b.refSlab] = cur
	return cur[n : n+len(ts) : n+len(ts)]
}

// ptrStore is n empty places in the builder's store of tensor lists.
func (b *actBuilder) ptrStore(n int) []*actT {
	if n == 0 {
		return nil
	}
	if len(b.refSlabs) == 0 || cap(b.refSlabs[b.refSlab])-len(b.refSlabs[b.refSlab]) < n {
		b.nextRefSlab(n)
	}
	cur := b.refSlabs[b.refSlab]
	k := len(cur)
	cur = cur[:k+n]
	clear(cur[k:])
	b.refSlabs[b.refSlab] = cur
	return cur[k : k+n : k+n]
}

// nextRefSlab moves ptrList to an empty slab with room for n.
func (b *actBuilder) nextRefSlab(n int) {
	if len(b.refSlabs) > 0 {
		b.refSlab++
	}
	for b.refSlab < len(b.refSlabs) && cap(b.refSlabs[b.refSlab]) < n {
		b.refSlab++
	}
	if b.refSlab >= len(b.refSlabs) {
		b.refSlabs = append(b.refSlabs, make([]*actT, 0, max(256, n)))
		b.refSlab = len(b.refSlabs) - 1
	}
}

// newT returns a fresh tensor record from the builder's slabs.
func (b *actBuilder) newT(t actT) *actT {
	if len(b.slabs) == 0 || len(b.slabs[b.slab]) == cap(b.slabs[b.slab]) {
		if len(b.slabs) > 0 {
			b.slab++
		}
		if b.slab >= len(b.slabs) {
			b.slabs = append(b.slabs, make([]actT, 0, 64))
		}
	}
	cur := append(b.slabs[b.slab], t)
	b.slabs[b.slab] = cur
	return &cur[len(cur)-1]
}

// rewind empties the slabs (their records cleared) for the builder's
// next use.
func (b *actBuilder) rewind() {
	for i := range b.slabs {
		clear(b.slabs[i])
		b.slabs[i] = b.slabs[i][:0]
	}
	for i := range b.refSlabs {
		clear(b.refSlabs[i])
		b.refSlabs[i] = b.refSlabs[i][:0]
	}
	b.slab, b.refSlab = 0, 0
	b.scratch.reset()
}

func (b *actBuilder) shard() int64 {
	if b.seqShard < 1 {
		return 1
	}
	return b.seqShard
}

func (b *actBuilder) size(elemsPerToken int64, d DType) Bytes {
	return d.Size(mulI64(b.tokens, elemsPerToken))
}

// op runs one forward op: it reads ins, creates an output of size bytes,
// and marks saves as saved for backward.
func (b *actBuilder) op(name string, bytes Bytes, d DType, ins []*actT, saves ...*actT) *actT {
	idx := len(b.ops)
	out := b.newT(actT{name: name, op: name, bytes: bytes, dtype: d, born: idx, lastUse: idx, release: -1})
	for _, in := range ins {
		if in != nil && in.lastUse < idx {
			in.lastUse = idx
		}
	}
	for _, s := range saves {
		if s != nil {
			s.saved = true
			if s.release < 0 || idx < s.release {
				s.release = idx
			}
		}
	}
	any := false
	for _, s := range saves {
		if s != nil {
			b.saves = append(b.saves, saveRec{idx, s})
			any = true
		}
	}
	out.id = len(b.ts)
	b.ts = append(b.ts, out)
	b.ops = append(b.ops, actOp{name: name, outs: b.ptrList(out), ins: b.ptrList(ins...), saves: any})
	return out
}

// end is the last op t is alive for: its last use, or later where the
// modeling code holds it.
func (t *actT) end() int { return max(t.lastUse, t.holdUntil) }

// holdOutput marks tensors the model's output returns (the cache, the
// last hidden state, the logits): alive until backward returns when the
// training loop keeps the output (a plain loop's `out = model(…)`), else,
// for transformers' modeling code, until its forward returns after the
// loss (the HF Trainer's compute_loss keeps only outputs["loss"]), so at
// the end of the forward they are live beside the loss's logits.
func (p blockPlan) holdOutput(ts ...*actT) {
	for _, t := range ts {
		switch {
		case p.keepOutputs:
			t.held = true
		case p.hfModeling:
			t.forwardHeld = true
		}
	}
}

// hold keeps ts alive through the last op (a Python local the function
// still references), without a gradient flowing back from it.
func (b *actBuilder) hold(ts ...*actT) {
	for _, t := range ts {
		t.holdUntil = max(t.holdUntil, len(b.ops)-1)
	}
}

// side adds an extra saved tensor created by the last op (masks, statistics).
// hasBias reports whether the block's linear layer of role has a bias
// (nn.Linear then runs aten.addmm, not aten.mm).
func (b *actBuilder) hasBias(role string) bool {
	bm := b.r.m.Bias
	switch role {
	case "q_proj", "k_proj", "v_proj", "qkv_proj":
		return bm.attn()
	case "o_proj":
		return bm.out()
	case "gate_proj", "up_proj", "down_proj", "gate_up_proj", "fc1", "fc2":
		return bm.mlp()
	}
	return bm == BiasAll
}

func (b *actBuilder) side(name string, bytes Bytes, d DType) *actT {
	idx := len(b.ops) - 1
	b.ops[idx].saves = true
	t := b.newT(actT{name: name, op: b.ops[idx].name, bytes: bytes, dtype: d, saved: true, born: idx, lastUse: idx, release: idx})
	t.id = len(b.ts)
	b.ts = append(b.ts, t)
	outs := b.ptrStore(len(b.ops[idx].outs) + 1) // the op's list, one longer
	outs[copy(outs, b.ops[idx].outs)] = t
	b.ops[idx].outs = outs
	b.saves = append(b.saves, saveRec{idx, t})
	return t
}

// savedByLast marks t as read and saved by the last op (an operand made
// by an op of its own before it, such as an indexed copy of a weight).
func (b *actBuilder) savedByLast(t *actT) {
	idx := len(b.ops) - 1
	t.lastUse = max(t.lastUse, idx)
	t.saved = true
	if t.release < 0 || idx < t.release {
		t.release = idx
	}
	b.ops[idx].saves = true
	b.saves = append(b.saves, saveRec{idx, t})
}

// keep marks t as saved by the op that created it (softmax, tanh and ReLU
// compute their gradient from their output).
func (b *actBuilder) keep(t *actT) *actT {
	t.saved, t.release = true, t.born
	if t.born >= 0 && t.born < len(b.ops) {
		b.ops[t.born].saves = true
		b.saves = append(b.saves, saveRec{t.born, t})
	}
	return t
}

// workspace adds scratch memory that lives only while the last op runs.
func (b *actBuilder) workspace(bytes Bytes) { b.ops[len(b.ops)-1].workspace += bytes }

// gradWorkspace adds scratch memory that the last op's backward needs.
func (b *actBuilder) gradWorkspace(bytes Bytes) { b.ops[len(b.ops)-1].gradWorkspace += bytes }

func list(ts ...*actT) []*actT { return ts }

// external adds a tensor that exists before the builder's ops.
func (b *actBuilder) external(name string, bytes Bytes, d DType) *actT {
	t := b.newT(actT{name: name, op: "input", bytes: bytes, dtype: d, born: -1, lastUse: -1, external: true, release: -1})
	t.id = len(b.ts)
	b.ts = append(b.ts, t)
	return t
}

// batchInput adds an input of the step (an image batch's pixels), which
// the batch's memory counts (edgeActivations.Inputs), saved or not.
func (b *actBuilder) batchInput(name string, bytes Bytes, d DType) *actT {
	t := b.external(name, bytes, d)
	t.batch = true
	return t
}

// blockPlan is what the block builder needs to know about the run.
type blockPlan struct {
	e        DType // compute dtype of activations
	resid    DType // residual-stream dtype (fp32 under autocast with fp32 weights)
	autocast bool
	frozen   bool // base linear weights need no gradient
	q4       bool // base linears are 4-bit (nf4/fp4)
	fourBit  fourBit
	lora     map[string]bool
	loraRank int64
	loraDrop float64
	// loraDType is the adapters' weights' dtype.
	loraDType DType
	attnImpl  string
	rec       recipe // the family's modeling code
	upcast    bool   // softmax in fp32 in eager attention
	useCache  bool   // transformers returns past_key_values during training
	// maskedSDPA: this layer's SDPA call gets an explicit mask.
	maskedSDPA bool
	// keepOutputs: the training loop holds the model's output (logits, cache,
	// hidden states) until backward ends.
	keepOutputs bool
	hfModeling  bool  // transformers' modeling code (rotary embedding, cache)
	baseDType   DType // stored dtype of the (frozen) base weights
	fusedQKV    bool  // one q|k|v matmul whose output v is a view of
	// pythonGELU: gelu_new as transformers' Python formula, not a fused kernel.
	pythonGELU bool
	// nativeGQA: fused attention reads grouped k/v without repeating them.
	nativeGQA bool
	dropHid   float64
	dropAttn  float64
	tp        int64
	sp        bool
	seq       int64 // local query length (s/cp)
	keys      int64 // key length attended to (s, or the sliding window)
	batch     int64
}

// saveInput reports whether a linear with this role saves its input.
func (p blockPlan) saveInput(role string) bool {
	if !p.frozen {
		return true
	}
	return p.q4 && p.fourBit.savesInput
}

// linear applies a (possibly LoRA-adapted) linear layer to x. in/out are the
// per-rank feature counts; they also size the weight (its gradient and its
// autocast copy).
func (b *actBuilder) linear(p blockPlan, name, role string, x *actT, in, out int64) *actT {
	var saves []*actT
	bnb := p.bnb4() && role != "router" // a float router (DeepSeek's) is no Linear4bit
	xc, mat := b.matmulIn(p, name, x, bnb)
	if p.saveInput(role) {
		saves = append(saves, xc)
	}
	y := b.op(name, b.size(out, mat), mat, list(xc), saves...)
	b.ops[len(b.ops)-1].mm = !b.hasBias(role)
	b.ops[len(b.ops)-1].gemm = true
	if bnb {
		// Linear4bit returns its input's dtype (.to(inp_dtype),
		// bitsandbytes 0.48.2 nn/modules.py:525-532).
		if x.dtype.IsFloat() && x.dtype != mat {
			y = b.op(name+".to_input_dtype", b.size(out, x.dtype), x.dtype, list(y))
		}
	}
	if b.r.float8Linear(role) {
		b.float8Scratch(in, out)
	}
	if xc != x {
		b.hold(x) // the caller's argument lives until the call returns
	}
	if !p.frozen {
		b.ops[len(b.ops)-1].weights = in * out
	}
	if p.autocast && !p.frozen {
		// autocast caches a compute-dtype copy of the fp32 weight, which the
		// matmul saves for backward (torch/csrc/autograd autocast cache).
		b.side(name+".weight_cast", p.e.Size(in*out), p.e).weightCopy = true
		b.ops[len(b.ops)-1].castWeights = true
	} else if p.autocast && p.frozen && !p.q4 && p.baseDType == FP32 {
		// A frozen fp32 weight is cast on every call (autocast caches only
		// leaves that require grad), and the matmul saves that copy to pass
		// the gradient to its input.
		b.side(name+".weight_cast", p.e.Size(in*out), p.e).weightCopy = true
	}
	if p.q4 {
		// The 4-bit matmul dequantizes the whole weight on each call, in
		// forward and again in backward (fourbit.go).
		b.ops[len(b.ops)-1].weightWork = p.fourBit.dequantized(p.e, in*out)
		if bnb {
			b.ops[len(b.ops)-1].weightWork = p.fourBit.dequantizedFor(b.bnbComputeDType(p, x), p.e, p.autocast, in*out)
		}
	}
	if p.lora[role] && p.bnb4() && p.hfModeling {
		// PEFT's Linear4bit clones the base layer's output before adding
		// the adapters ("defensively clone", peft 0.21.2
		// tuners/lora/bnb.py:527-533).
		y = b.op(name+".clone", y.bytes, y.dtype, list(y))
	}
	if p.lora[role] {
		// PEFT's lora.Linear.forward: the input cast to the adapters'
		// dtype (LoraLayer._cast_input_dtype), dropout, lora_A, lora_B,
		// times the scaling, added to the base output. Under autocast each
		// adapter matmul saves autocast's cached copy of its fp32 weight.
		a := x
		if p.hfModeling && p.loraDType.IsFloat() && a.dtype != p.loraDType {
			a = b.op(name+".lora.input_dtype", b.size(in, p.loraDType), p.loraDType, list(a))
		}
		if p.loraDrop > 0 {
			a = b.op(name+".lora_dropout", b.size(in, a.dtype), a.dtype, list(a))
			b.side(name+".lora_dropout.mask", b.size(in, Bool), Bool)
		}
		a = b.castIn(p, name+".lora_A", a)
		la := b.op(name+".lora_A", b.size(p.loraRank, p.e), p.e, list(a), a)
		b.ops[len(b.ops)-1].weights = p.loraRank * in
		b.ops[len(b.ops)-1].gemm = true
		adapterCast := p.autocast && p.loraDType != p.e
		if adapterCast {
			b.side(name+".lora_A.weight_cast", p.e.Size(p.loraRank*in), p.e).weightCopy = true
			b.ops[len(b.ops)-1].castWeights = true
		}
		lb := b.op(name+".lora_B", b.size(out, p.e), p.e, list(la), la)
		b.ops[len(b.ops)-1].weights = p.loraRank * out
		b.ops[len(b.ops)-1].gemm = true
		if adapterCast {
			b.side(name+".lora_B.weight_cast", p.e.Size(p.loraRank*out), p.e).weightCopy = true
			b.ops[len(b.ops)-1].castWeights = true
		}
		if p.hfModeling {
			lb = b.op(name+".lora_scaling", b.size(out, p.e), p.e, list(lb))
		}
		y = b.op(name+".lora_add", b.size(out, y.dtype), y.dtype, list(y, lb))
	}
	return y
}

// bnb4 reports whether the block's 4-bit base linears are bitsandbytes'
// Linear4bit (torchtune's torchao NF4Tensor aside).
func (p blockPlan) bnb4() bool { return p.q4 && !p.fourBit.torchao }

// bnbComputeDType is the dtype a Linear4bit computes in given its input
// x: the input's own when it is fp32 or bf16 (set_compute_type on the
// first call, bitsandbytes 0.48.2 nn/modules.py:483-487), else
// bnb_4bit_compute_dtype (the plan's compute dtype).
func (b *actBuilder) bnbComputeDType(p blockPlan, x *actT) DType {
	if x.dtype == FP32 || x.dtype == BF16 {
		return x.dtype
	}
	return p.e
}

// matmulIn is a linear layer's input as its matmul takes it, and the
// dtype the matmul computes in: under autocast the compute dtype (a cast
// copy of a float input of another dtype); a Linear4bit outside autocast
// computes in bnbComputeDType (x.to(compute_dtype), modules.py:524-525);
// other layers (bnb false) in the compute dtype, their input taken as it
// is.
func (b *actBuilder) matmulIn(p blockPlan, name string, x *actT, bnb bool) (*actT, DType) {
	if !bnb || p.autocast || !x.dtype.IsFloat() {
		return b.castIn(p, name, x), p.e
	}
	c := b.bnbComputeDType(p, x)
	if c == x.dtype {
		return x, c
	}
	n := Bytes(mulI64(int64(x.bytes), int64(c.Bits())) / int64(x.dtype.Bits()))
	return b.op(name+".to_compute_dtype", n, c, list(x)), c
}

// norm applies the model's norm to the residual stream x (width h per
// rank-token; under sequence parallelism the tokens are split, and so are
// the per-token statistics).
func (b *actBuilder) norm(p blockPlan, name string, kind string, x *actT, h int64) *actT {
	return b.normOf(p, name, kind, x, h, b.size(1, FP32)/Bytes(b.shard()))
}

// headNorm is a norm over each of groups vectors of a token's width
// elements (q/k norms over each head, in the attention region, where
// sequence parallelism does not split the tokens).
func (b *actBuilder) headNorm(p blockPlan, name string, kind string, x *actT, width, groups int64) *actT {
	return b.normOf(p, name, kind, x, width, b.size(groups, FP32))
}

// normOf applies LayerNorm, RMSNorm or a weightless L2 norm to x (width
// elements per token); stats is the size of one fp32 statistic per
// normalized vector.
//   - LayerNorm (aten native_layer_norm) saves its input and fp32 mean and
//     rstd; it is on autocast's fp32 list.
//   - RMSNorm as transformers' LlamaRMSNorm (and litgpt, torchtune):
//     x.float(); x · rsqrt(mean(x²)+eps); .to(input dtype); weight · x. pow
//     saves the fp32 x, rsqrt its output, the product both, the weight's
//     product its input; the result is in the promoted dtype of the weight
//     and the input.
//   - With the family's normWeightFP32 (Gemma's (1 + weight), OLMo 2): the
//     weight multiplies the fp32 result, which is then cast back to the
//     input dtype.
//   - "l2" (Llama 4's L2Norm): the same without a weight.
func (b *actBuilder) normOf(p blockPlan, name string, kind string, x *actT, width int64, stats Bytes) *actT {
	trainNorm := !p.frozen
	if kind == "layernorm" {
		in := x
		d := x.dtype
		if p.autocast {
			d = FP32 // layer_norm is on autocast's fp32 list
			if x.dtype != FP32 {
				in = b.op(opName(name, ".cast"), b.size(width, FP32), FP32, list(x))
			}
		}
		y := b.op(name, b.size(width, d), d, list(in), in)
		b.ops[len(b.ops)-1].trains = trainNorm
		b.side(opName(name, ".mean_rstd"), 2*stats, FP32)
		return y
	}
	x32 := x
	if x.dtype != FP32 {
		x32 = b.op(opName(name, ".float"), b.size(width, FP32), FP32, list(x))
	}
	rs := b.keep(b.op(opName(name, ".rsqrt"), stats, FP32, list(x32), x32))
	if p.rec.powNorm {
		powNormInput(b, name, stats)
	}
	// x.pow(2).mean() backward: the mean's gradient expanded to x's shape,
	// then pow's grad · 2 · x.pow(1) (autograd's MeanBackward1,
	// PowBackward0), while x's gradient through the product below waits to
	// be summed with it: four more fp32 tensors of x's size at once.
	b.gradWorkspace(4 * b.size(width, FP32))
	n := b.op(opName(name, ".normed"), b.size(width, FP32), FP32, list(x32, rs), x32, rs)
	cast := func(y *actT, d DType) *actT {
		if y.dtype == d {
			return y
		}
		return b.op(opName(name, ".to"), b.size(width, d), d, list(y))
	}
	var sv [1]*actT
	saves := sv[:0]
	switch {
	case kind == "l2":
		return cast(n, x.dtype)
	case p.rec.normWeightFP32:
		if trainNorm {
			saves = append(saves, n) // the weight's gradient needs the normalized x
		}
		w := b.op(opName(name, ".mul_weight"), b.size(width, FP32), FP32, list(n), saves...)
		b.ops[len(b.ops)-1].trains = trainNorm
		return cast(w, x.dtype)
	}
	c := cast(n, x.dtype)
	if trainNorm {
		saves = append(saves, c) // weight * x saves x for the weight's grad
	}
	out := promote(p.baseDType, c.dtype)
	y := b.op(opName(name, ".mul_weight"), b.size(width, out), out, list(c), saves...)
	b.ops[len(b.ops)-1].trains = trainNorm
	return y
}

func (b *actBuilder) dropout(p blockPlan, name string, x *actT, elems int64, prob float64) *actT {
	if prob <= 0 {
		return x
	}
	y := b.op(name, b.size(elems, x.dtype), x.dtype, list(x))
	b.side(name+".mask", b.size(elems, Bool), Bool)
	return y
}

// newGELU is transformers' NewGELUActivation on u (f wide), written out in
// Python ops: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). Autograd keeps x
// (pow), tanh's output, 1 + tanh and 0.5·x (the final product).
func (b *actBuilder) newGELU(p blockPlan, name string, u *actT, f int64) *actT {
	d := u.dtype
	inner := b.op(name+".inner", b.size(f, d), d, list(u), u)
	th := b.keep(b.op(name+".tanh", b.size(f, d), d, list(inner)))
	one := b.op(name+".1+tanh", b.size(f, d), d, list(th))
	half := b.op(name+".0.5x", b.size(f, d), d, list(u))
	return b.op(name, b.size(f, d), d, list(half, one), half, one)
}

// residualAdd sums a residual stream (xs[0]) and branch outputs, width
// elements a token, in the residual dtype. A branch output in that dtype
// shares the sum's gradient (add's backward passes it on).
func (b *actBuilder) residualAdd(p blockPlan, name string, width int64, xs ...*actT) *actT {
	for _, x := range xs[1:] {
		x.aliasGrad = x.dtype == p.resid
	}
	y := b.op(name, b.size(width, p.resid), p.resid, xs)
	y.residual = true
	return y
}

// castIn is autocast's copy of an fp32 input to the compute dtype. Autocast
// caches casts of leaf tensors that require grad (the weights) only; every op
// that takes an fp32 activation casts it again (aten/src/ATen/autocast_mode.cpp
// cached_cast), and each matmul saves its own copy.
func (b *actBuilder) castIn(p blockPlan, name string, x *actT) *actT {
	if !p.autocast || x.dtype == p.e || !x.dtype.IsFloat() {
		return x
	}
	n := Bytes(mulI64(int64(x.bytes), int64(p.e.Bits())) / int64(x.dtype.Bits()))
	return b.op(name+".cast", n, p.e, list(x))
}

// buildBlock lists the activations of block i of the resolved plan.
func buildBlock(r *resolved, layer int) BlockActivations {
	if f := lookupFamily(r.m.Family); f != nil && f.block != nil {
		return f.block(r, layer)
	}
	if r.m.EncoderDecoder() {
		return buildEncDecBlock(r, layer)
	}
	if r.m.SSMLayer(layer) {
		return ssmDecoderBlock(r, layer)
	}
	return decoderBlock(r, layer)
}

// inputsEmbedsHeld reports whether the first block's input, which no op
// saves (inputNoGrad), still lives until the model's forward returns:
// transformers' decoder forward keeps it as inputs_embeds while its loop
// rebinds hidden_states (modeling_llama.py LlamaModel.forward:
// "hidden_states = inputs_embeds").
func (r *resolved) inputsEmbedsHeld() bool {
	return r.inputNoGrad() && r.runsTransformers()
}

// inputNoGrad reports whether the first block's input needs no gradient:
// the base (embeddings included) is frozen and nothing before the blocks
// trains, so autograd records only the ops that lead from a trainable
// weight (the adapters) to the loss. Under checkpointing the input is
// taken to require grad, as PEFT (PeftModel's
// prepare_model_for_gradient_checkpointing) and transformers (with its PEFT
// integration) make the embeddings' output do.
func (r *resolved) inputNoGrad() bool {
	return r.frozen && r.Checkpointing == CheckpointNone && r.Framework != FrameworkMegatron && r.Framework != FrameworkTorchtitan
}

// withoutGrad drops what the block's ops save when nothing they read needs
// a gradient and they have no trainable weight: autograd records no node
// for them (torch/csrc/autograd: an op whose inputs do not require grad
// gets no grad_fn), given that in, the block's input, needs none; grads
// are other external tensors that do (an encoder-decoder's encoder
// output).
func (b *actBuilder) withoutGrad(in *actT, grads ...*actT) {
	req := take(&b.scratch.bools, len(b.ts)) // the input first of all (nil: nothing before the ops)
	for _, t := range grads {
		req[t.id] = true
	}
	need := take(&b.scratch.bools, len(b.ops))
	for i := range b.ops {
		op := &b.ops[i]
		need[i] = op.weights > 0 || op.trains
		for _, t := range op.ins {
			need[i] = need[i] || (t != nil && req[t.id])
		}
		for _, t := range op.outs {
			req[t.id] = need[i]
		}
		if !need[i] {
			op.saves = false
		}
	}
	keep := take(&b.scratch.bools, len(b.ts))
	rel := take(&b.scratch.ints, len(b.ts))
	for i := range rel {
		rel[i] = -1
	}
	for _, sr := range b.saves {
		if sr.op < 0 || sr.op >= len(b.ops) || !need[sr.op] {
			continue
		}
		keep[sr.t.id] = true
		if rel[sr.t.id] < 0 || sr.op < int(rel[sr.t.id]) {
			rel[sr.t.id] = int32(sr.op)
		}
	}
	for _, t := range b.ts {
		if t.saved && t.id < len(keep) && b.ts[t.id] == t {
			t.saved, t.release = keep[t.id], int(rel[t.id])
		}
	}
}

// summarize turns the op list into the block's inventory and peaks.
func (b *actBuilder) summarize(input *actT) BlockActivations {
	b.in = input
	ba := BlockActivations{prog: b, inputSaved: input.saved}
	if b.r.arena == nil {
		ba.Tensors = b.tensorList() // an estimate lists only the block it returns (Estimate)
	}
	ba.Input = input.bytes
	for _, t := range b.ts {
		if t.external && !t.saved && !t.held || t.batch {
			continue
		}
		if t.saved || t.held {
			ba.Saved = addBytes(ba.Saved, t.bytes)
			if !t.attn {
				ba.SavedSelective = addBytes(ba.SavedSelective, t.bytes)
			}
			if t.held {
				ba.outlives = addBytes(ba.outlives, t.bytes)
				if !t.saved {
					ba.Held = addBytes(ba.Held, t.bytes)
				}
			}
		} else if t.forwardHeld && !t.external {
			ba.untilLoss = addBytes(ba.untilLoss, t.bytes)
		}
	}
	ba.SavedCompiled = b.compiledSaved()
	ba.SavedOp = input.bytes
	mms := 0
	for i := range b.ops {
		op := &b.ops[i]
		if op.mm {
			mms++
		}
		if sacCaches(op, mms) {
			for _, t := range op.outs {
				ba.SavedOp = addBytes(ba.SavedOp, t.bytes)
			}
		}
	}
	var fwd, nograd, rec Bytes
	end := b.recomputeEnd()
	for i, live := range b.forwardTotals() {
		op := b.ops[i]
		fwd = max(fwd, addBytes(b.perChunk(ba.Saved, addBytes(live, op.workspace)), op.weightWork))
		if i <= end {
			rec = fwd
		}
	}
	for i, live := range b.noGradTotals() {
		op := b.ops[i]
		nograd = max(nograd, addBytes(addBytes(live, op.workspace), op.weightWork))
	}
	ba.ForwardPeak, ba.NoGradPeak, ba.recomputePeak = fwd, addBytes(nograd, input.bytes), rec
	b.backwardSteps(&ba, input)
	return ba
}

// tensorList is the block's tensors as BlockActivations lists them: its
// own and the external ones it saves, without the batch's inputs.
func (b *actBuilder) tensorList() []ActTensor {
	out := make([]ActTensor, 0, len(b.ts))
	for _, t := range b.ts {
		if t.external && !t.saved && !t.held || t.batch {
			continue
		}
		out = append(out, ActTensor{Name: t.name, Op: t.op, Bytes: t.bytes, DType: t.dtype, Saved: t.saved || t.held, Attention: t.attn})
	}
	return out
}

// forwardTotals is, per op, what the block's forward has live while the op
// runs (its workspace aside): the saved tensors born so far and the
// transients born at or before it and used at or after it. Each tensor is
// live over a range of ops: a difference array and a running sum give
// every op's total in one pass.
func (b *actBuilder) forwardTotals() []Bytes {
	return b.liveTotals(func(t *actT) bool { return t.saved || t.held || t.forwardHeld || t.keepAlive })
}

// noGradTotals is forwardTotals under torch.no_grad: every tensor dies
// after its last use.
func (b *actBuilder) noGradTotals() []Bytes {
	return b.liveTotals(func(*actT) bool { return false })
}

// liveTotals is forwardTotals with kept saying which tensors live to the
// end of the block.
func (b *actBuilder) liveTotals(kept func(*actT) bool) []Bytes {
	n := len(b.ops)
	d := take(&b.scratch.bytes, n+1)
	for _, t := range b.ts {
		if t.external || t.born < 0 || t.born >= n {
			continue
		}
		end := min(t.end(), n-1)
		if kept(t) {
			d[t.born] = addBytes(d[t.born], t.bytes)
		} else if end >= t.born {
			d[t.born] = addBytes(d[t.born], t.bytes)
			d[end+1] = addBytes(d[end+1], -t.bytes)
		}
	}
	var live Bytes
	for i := range n {
		live = addBytes(live, d[i])
		d[i] = live
	}
	return d[:n]
}

// releases lists, per op, the saved tensors autograd lets go after its
// backward (what releasedAfter sums).
func (b *actBuilder) releases() [][]*actT {
	if b.rel != nil {
		return b.rel
	}
	b.rel = b.perOp(func(t *actT) int {
		if !t.saved || t.held || t.external {
			return -1
		}
		return t.releaseAt()
	})
	return b.rel
}

// perChunk is a forward total of the head when it runs in b.chunks token
// chunks: what is saved stays whole (every chunk's saved tensors live until
// backward), the transients above it are one chunk's.
func (b *actBuilder) perChunk(saved, total Bytes) Bytes {
	if b.chunks <= 1 {
		return total
	}
	return addBytes(saved, (total-saved)/Bytes(b.chunks))
}

// backwardSteps fills ba's backward walk, op by op in reverse: the gradients
// of the op's outputs and inputs are live together, plus the gradient flowing
// in the residual stream, plus any workspace (dequantized weights are
// rebuilt). A saved tensor is released once the earliest op that saved it has
// run its backward (autograd frees a node's saved variables after its
// backward, torch/csrc/autograd/function.h release_variables), and each
// matmul creates its weight gradient.
func (b *actBuilder) backwardSteps(ba *BlockActivations, input *actT) {
	wk := &bwdWalk{b: b, ba: ba, pending: b.pendingGrads(), released: b.releasedAfter(), savedRem: ba.Saved}
	ba.bwd = take(&b.scratch.steps, len(b.ops)+1)[:0]
	for _, op := range b.ops {
		wk.weights += op.weights
	}
	// A block's backward starts with the gradient of its output in the
	// residual stream; the head's starts from the loss, and the gradient of
	// its input appears only when the op reading it runs (counted there).
	wk.resid = input.bytes
	switch {
	case b.head:
		wk.resid = 0
	case input.batch:
		// The embedding side's input is the batch, which gets no gradient
		// (and is counted with the batch): its backward starts with the
		// gradient of its output, block 0's input gradient, which the
		// autograd engine holds in the next node's InputBuffer until that
		// node runs (torch/csrc/autograd/engine.cpp evaluate_function,
		// input_buffer.cpp InputBuffer::add).
		wk.resid = b.outputGrad()
	}
	ba.bwdResid = wk.resid
	wk.experts, wk.busy = b.r.expertsPerRank(), b.r.busiestExpertShare()
	for i := len(b.ops) - 1; i >= 0; i-- {
		if !b.ops[i].expert || wk.experts == 1 {
			wk.step(i, 1, 1, -1, 0, true)
			wk.savedRem -= wk.released[i]
			continue
		}
		i = wk.expertSection(i)
	}
	ba.BackwardPeak = wk.bwd
	resid, pending := wk.resid, wk.pending
	ba.recomputeGrad = addBytes(resid, b.persistGrad)
	// The backward op that triggers a checkpoint's recomputation is the
	// latest op of the block that saves a tensor for its backward.
	last := -1
	for i, op := range b.ops {
		if op.saves {
			last = i
		}
	}
	if last >= 0 {
		// The gradient of its output (not of the weight copies or
		// statistics it also makes, whose gradients its own backward makes).
		if t := b.ops[last].outs[0]; !t.keepAlive {
			ba.recomputeGrad = addBytes(ba.recomputeGrad, gradSize(t))
		}
		// The ops after it need no saved tensors: their backward has run,
		// and the gradients they made for earlier tensors wait.
		ba.recomputeGrad = addBytes(ba.recomputeGrad, pending[last])
	}
}

// outputGrad is the gradient of the block's output (its keepAlive
// tensors).
func (b *actBuilder) outputGrad() Bytes {
	var g Bytes
	for _, t := range b.ts {
		if t.keepAlive {
			g = addBytes(g, gradSize(t))
		}
	}
	return g
}

// bwdWalk is backwardSteps' walk of a block's backward, op by op.
type bwdWalk struct {
	b        *actBuilder
	ba       *BlockActivations
	bwd      Bytes // the most in flight at one op
	weights  int64 // the block's trainable weight elements
	done     int64 // those whose gradients exist so far
	pending  []Bytes
	released []Bytes
	resid    Bytes // the gradient in the residual stream
	savedRem Bytes // what is still saved
	experts  int64
	busy     float64
	section  bool // walking a routed experts' section
}

// pendingGrads is, per op, the gradients waiting while its backward runs.
func (b *actBuilder) pendingGrads() []Bytes {
	// pending[i] is the gradients waiting while op i's backward runs: of
	// tensors another op read after op i (whose backward has run, creating
	// the gradient) and an op before i made (whose backward, which consumes
	// it, has not): the gradient of v while the softmax's backward runs.
	// Op i's own inputs and outputs are counted by its step. Routed experts'
	// sections are walked expert by expert below and left out here.
	pending := take(&b.scratch.bytes, len(b.ops)+1)
	waits := b.gradWaits
	for _, t := range b.ts {
		if waits(t) && t.lastUse > t.born+1 && t.lastUse <= len(b.ops) {
			pending[t.born+1] = addBytes(pending[t.born+1], gradSize(t))
			pending[t.lastUse] = addBytes(pending[t.lastUse], -gradSize(t))
		}
	}
	for i := 1; i < len(pending); i++ {
		pending[i] = addBytes(pending[i], pending[i-1])
	}
	for i, op := range b.ops {
		for _, t := range op.ins {
			if waits(t) && t.born < i && t.lastUse > i {
				pending[i] -= gradSize(t)
			}
		}
	}
	return pending
}

// gradWaits reports whether t's gradient waits between ops: made by the
// backward of the last op that reads it, consumed by that of the op that
// made it (not the residual stream's, which the walk counts as one, nor a
// routed expert's).
func (b *actBuilder) gradWaits(t *actT) bool {
	return t != nil && !t.external && !t.keepAlive && !t.residual && t.born >= 0 && t.born < len(b.ops) && !b.ops[t.born].expert && gradSize(t) > 0
}

// releasedAfter is, per op, the saved bytes autograd lets go after its
// backward.
func (b *actBuilder) releasedAfter() []Bytes {
	released := take(&b.scratch.bytes, len(b.ops))
	for i, ts := range b.releases() {
		for _, t := range ts {
			released[i] = addBytes(released[i], t.bytes)
		}
	}
	return released
}

// step walks op i's backward. For an expert's op, the gradients of the
// section's tensors are that expert's share of the tokens (tokens) and
// its weight gradients one expert's (1/share); those of tensors from
// before the section (the MoE input: each expert's gather scatters a
// full-size gradient) are whole, and extra is the input gradient the
// experts already done have summed.
func (wk *bwdWalk) step(i int, tokens float64, share int64, before int, extra Bytes, first bool) {
	op := wk.b.ops[i]
	if op.noGrad {
		frac := 1.0
		if wk.weights > 0 {
			frac = float64(wk.done) / float64(wk.weights)
		}
		wk.ba.bwd = append(wk.ba.bwd, bwdStep{saved: wk.savedRem, gradFrac: frac, inflight: wk.resid, op: i, section: wk.section})
		return
	}
	var g, whole, wgrad Bytes
	for j, t := range op.outs {
		if op.castWeights && j > 0 {
			wgrad = addBytes(wgrad, gradSize(t)/Bytes(share)) // the expert's own weight copy
			continue
		}
		g = addBytes(g, gradSize(t))
	}
	for _, t := range op.ins {
		switch {
		case t == nil:
		case t.born < before:
			whole = addBytes(whole, gradSize(t))
		default:
			g = addBytes(g, gradSize(t))
		}
	}
	if op.scatter {
		whole = addBytes(whole, whole)
	}
	if tokens < 1 {
		g = Bytes(float64(g) * tokens)
	}
	if op.stacked && op.weights > 0 && !first {
		// The expert's weight is a select of a stacked parameter:
		// select_backward returns zeros of the whole parameter with
		// this expert's slice filled in (the first expert's becomes the
		// gradient), and adding a later one makes a new sum while the
		// old one lives.
		wgrad = addBytes(wgrad, 2*wk.b.r.GradsDType.Size(op.weights))
	}
	g = addBytes(addBytes(g, wgrad), addBytes(addBytes(whole, extra), addBytes(wk.resid, addBytes(op.workspace, op.gradWorkspace))))
	g = addBytes(g, op.weightWork)
	if !op.expert {
		g = addBytes(g, wk.pending[i])
	}
	g = addBytes(g, op.heldGrad)
	wk.bwd = max(wk.bwd, g)
	w := op.weights / share
	if op.stacked {
		// The whole stacked gradient exists from the first expert's
		// backward on.
		w = 0
		if first {
			w = op.weights
		}
	}
	if !op.castWeights {
		wk.done += w
	}
	frac := 1.0
	if wk.weights > 0 {
		frac = float64(wk.done) / float64(wk.weights)
	}
	wk.ba.bwd = append(wk.ba.bwd, bwdStep{saved: wk.savedRem, gradFrac: frac, inflight: g, perCall: op.weightWork, op: i, section: wk.section})
	if op.castWeights {
		wk.done += w
	}

}

// expertSection walks the routed experts' section ending at op hi and
// returns its first op.
//
// The routed experts' backward runs one expert at a time, the expert the
// forward loop reached last first. While expert j of E runs, the saved
// tensors of the experts still to come are live and the weight
// gradients of those done exist, each 1/E of the section's; its own
// in-flight gradients are one expert's share. Both totals change
// linearly with j, so the most memory is at the first or the last
// expert: the walk takes those two passes over the section's ops, each
// expert's saved tensors going as its ops finish.
func (wk *bwdWalk) expertSection(hi int) int {
	i := hi
	hi, lo := i, i
	for lo > 0 && wk.b.ops[lo-1].expert {
		lo--
	}
	var rel, inGrad Bytes
	var w, ws int64 // weights, and those of stacked parameters
	for k := lo; k <= hi; k++ {
		rel, w = addBytes(rel, wk.released[k]), w+wk.b.ops[k].weights
		if wk.b.ops[k].stacked {
			ws += wk.b.ops[k].weights
		}
		for _, t := range wk.b.ops[k].ins {
			if t != nil && t.born < lo {
				inGrad = addBytes(inGrad, gradSize(t))
			}
		}
	}
	wk.section = true
	defer func() { wk.section = false }()
	r0, d0 := wk.savedRem, wk.done
	for k := hi; k >= lo; k-- { // the first expert
		wk.step(k, wk.busy, wk.experts, lo, 0, true)
		wk.savedRem -= Bytes(float64(wk.released[k]) * wk.busy)
	}
	if ws > 0 && wk.experts > 2 {
		// With stacked weights the second expert is the first to add
		// its whole-parameter gradient to the first's: a step up the
		// linear argument above does not see.
		wk.savedRem = r0 - Bytes(float64(rel)*wk.busy)
		wk.done = d0 + ws + (w-ws)/wk.experts
		for k := hi; k >= lo; k-- {
			wk.step(k, wk.busy, wk.experts, lo, inGrad, false)
			wk.savedRem -= Bytes(float64(wk.released[k]) * wk.busy)
		}
	}
	wk.savedRem = r0 - Bytes(float64(rel)*(1-wk.busy))
	wk.done = d0 + ws + (w-ws)*(wk.experts-1)/wk.experts
	for k := hi; k >= lo; k-- { // the last expert
		wk.step(k, wk.busy, wk.experts, lo, inGrad, false)
		wk.savedRem -= Bytes(float64(wk.released[k]) * wk.busy)
	}
	wk.savedRem, wk.done = r0-rel, d0+w
	return lo
}

// expertsPerRank is the number of routed experts each expert-parallel rank
// holds (1 for dense models).
func (r *resolved) expertsPerRank() int64 {
	if r.m.Experts == 0 {
		return 1
	}
	return max(1, int64(r.m.Experts)/int64(max(1, r.ep)))
}

// busiestExpertShare is the share of a rank's routed tokens its busiest
// expert handles: 1/E when balanced, ExpertImbalance/E otherwise.
func (r *resolved) busiestExpertShare() float64 {
	return max(1, r.ExpertImbalance) / float64(r.expertsPerRank())
}

// releaseAt is the op after whose backward t is no longer saved.
func (t *actT) releaseAt() int {
	if t.release < 0 {
		return t.born
	}
	return t.release
}

// gradSize is the size of a tensor's gradient (masks and indices have none;
// a branch output shares the residual stream's gradient).
func gradSize(t *actT) Bytes {
	if !t.dtype.IsFloat() || t.aliasGrad {
		return 0
	}
	return t.bytes
}

// blockPlan derives the per-block settings from the run.
func (r *resolved) blockPlan(layer int) blockPlan {
	m := r.m
	p := blockPlan{
		rec:      r.rec,
		e:        r.ComputeDType,
		resid:    r.ComputeDType,
		autocast: r.Autocast,
		frozen:   r.frozen && !r.sharedAdapterUnits(),
		q4:       r.QuantizedBase.Quantized() && (r.QuantizedBase.DType == NF4 || r.QuantizedBase.DType == FP4),
		fourBit:  r.q4,
		attnImpl: r.Attention,
		dropHid:  r.dropHid,
		dropAttn: r.dropAttn,
		tp:       int64(r.tp),
		sp:       r.Parallel.SP,
		seq:      int64(r.SeqLen) / int64(r.cp),
		keys:     int64(r.SeqLen),
		batch:    int64(r.MicroBatch),
	}
	if p.e == FP8E4M3 || p.e == FP8E5M2 {
		// fp8 training (Transformer Engine) keeps activations between ops in
		// bf16 and saves fp8 copies of linear inputs; model as bf16.
		p.e, p.resid = BF16, BF16
	}
	if r.Autocast && r.WeightsDType == FP32 || r.KbitPrep {
		p.resid = FP32 // fp32 embeddings + bf16 branch outputs add up in fp32
	}
	if m.Image != nil {
		p.seq, p.keys = int64(m.Image.Tokens()), int64(m.Image.Tokens())
		if r.rec.towerOneSequence {
			// Every image's patches are one sequence (Pixtral).
			p.batch, p.seq, p.keys = 1, p.batch*p.seq, p.batch*p.keys
		}
	}
	if m.SlidingWindow > 0 && int64(m.SlidingWindow) < p.keys && r.Attention != "eager" {
		p.keys = int64(m.SlidingWindow)
	}
	// The family's modeling code may fuse q|k|v (its recipe); litgpt fuses
	// them for every family it implements (litgpt/model.py
	// CausalSelfAttention.qkv), which excludes encoders and latent attention.
	p.fusedQKV = r.rec.fusedQKV || (r.Framework == FrameworkLitGPT && m.KVLoRARank == 0 && !m.Encoder())
	// litgpt and Megatron call F.gelu(approximate="tanh"); transformers'
	// gelu_new (GPT-2, GPT-J, Phi) is the Python formula (activations.py).
	p.pythonGELU = r.Framework != FrameworkLitGPT && r.Framework != FrameworkMegatron && r.Framework != FrameworkTorchtitan
	// The HF Trainer and plain loops run transformers' modeling code.
	p.hfModeling = r.runsTransformers()
	p.nativeGQA = p.hfModeling && !r.rec.repeatKV
	// transformers decoders default to use_cache=True and turn it off only
	// under gradient checkpointing (modeling_utils / config.use_cache).
	p.useCache = p.hfModeling && r.Checkpointing == CheckpointNone && !m.Encoder() && r.Trainable != "frozen" && !r.rec.noTrainingCache
	// transformers' SDPA path gets a mask for a local layer once the
	// sequence is longer than its span (masking_utils
	// _ignore_causal_mask_sdpa); it then repeats grouped k and v
	// (sdpa_attention.py use_gqa_in_sdpa needs attention_mask None); with
	// image tokens that attend both ways (recipe imageMasks) every layer's,
	// and a padded tower's (towerPadMask).
	p.maskedSDPA = p.hfModeling && r.Attention != "eager" && (m.LocalLayer(layer) && r.SeqLen > m.localSpan() || (r.rec.imageMasks || r.rec.alwaysMasked || r.rec.towerPadMask) && m.AttentionLayer(layer))
	p.keepOutputs = r.keepsOutputs()
	p.baseDType = r.WeightsDType
	if r.fsdp2() && !r.QuantizedBase.Quantized() && p.e.IsFloat() {
		// FSDP2 all-gathers the parameters in MixedPrecisionPolicy's
		// param_dtype (the compute dtype, as resolved.units sizes them):
		// the modules compute with weights of that dtype (torch/distributed/
		// fsdp/_fully_shard/_fsdp_param.py FSDPParam.init_all_gather_outputs).
		p.baseDType = p.e
	}
	p.upcast = p.e != FP32 && !r.rec.softmaxInDType // eager softmax in fp32 unless the family keeps the scores' dtype
	if r.LoRA != nil && r.Trainable == "lora" {
		p.lora = map[string]bool{}
		p.loraRank = int64(r.LoRA.Rank)
		p.loraDType = r.trainableDType()
		p.loraDrop = r.LoRA.Dropout
		for _, t := range r.LoRA.Targets {
			if t == "all_linear" {
				for _, role := range []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "qkv_proj"} {
					p.lora[role] = true
				}
				continue
			}
			p.lora[t] = true
			if t == "q_proj" || t == "k_proj" || t == "v_proj" {
				p.lora["qkv_proj"] = true
			}
		}
	}
	return p
}
