package vram

// Activations outside the blocks: token ids, embeddings, the final norm, the
// output projection and the loss. Sizes per micro-batch per rank.

// edgeActivations is the same summary as BlockActivations for the embedding
// side (before block 0) and the head side (after the last block).
type edgeActivations struct {
	Inputs Bytes // token ids and labels (int64 each) or pixels
	Embed  BlockActivations
	Head   BlockActivations
	// Masks are the 4D attention masks transformers builds once before the
	// blocks and passes to each (see masks).
	Masks []maskPart
	// Bridge runs before block BridgeAt, outside the blocks: an
	// encoder-decoder's hand-over from encoder to decoder (buildBridge);
	// BridgeAt is -1 for other models.
	Bridge   BlockActivations
	BridgeAt int
}

func buildEdges(r *resolved) edgeActivations {
	m := r.m
	p := r.blockPlan(0)
	// The embedding and the head are outside the blocks' FSDP1 units: a
	// block's shared adapters (Parallel.FSDPAdapterUnits) do not make
	// their frozen weights train.
	p.frozen = r.frozen
	tokens := int64(r.MicroBatch) * int64(r.SeqLen) / int64(r.cp)
	if m.Image != nil {
		tokens = int64(r.MicroBatch) * int64(m.Image.Tokens())
	}
	var ea edgeActivations
	h := int64(m.Hidden)
	v := int64(m.Vocab) / r.vocabShard() // logits per rank
	ea.Inputs = batchInputs(r, tokens)

	// Embedding side: lookup (+ positions, token types), BERT's LayerNorm,
	// embedding dropout; the output is block 0's input.
	b := newActBuilder(r, tokens)
	e := m.WordEmbedProjDim
	if e == 0 {
		e = m.Hidden
	}
	x := embedLookup(b, p, e)
	if p.rec.embedScale {
		// embeddings × a constant (Gemma's sqrt(hidden), Granite's
		// embedding_multiplier): a new tensor, nothing saved.
		x = b.op("embed_scale", b.size(int64(e), x.dtype), x.dtype, list(x))
	}
	var perLayer, heldEmbeds *actT
	if p.rec.perLayerInputs5 && m.PerLayerInput > 0 {
		perLayer, heldEmbeds = b.perLayerLookup(p, x)
	}
	if m.Vision != nil && r.tower != nil {
		// The images' features take their placeholder tokens' places. The
		// batch holds the pixel values the tower's embedding reads, as its
		// processor lays them out for the micro-batch's images (Qwen's:
		// patches × channels × temporal_patch × patch², a still image
		// repeated over the frames; Llama 4's and Pixtral's in the weights'
		// dtype).
		from := len(b.ts)
		x = b.imageSide(r, p, x)
		for _, t := range b.ts[from:] {
			if t.batch {
				ea.Inputs = addBytes(ea.Inputs, t.bytes)
			}
		}
	}
	if perLayer != nil {
		b.perLayerInputs5(p, x, perLayer) // inside the language model, on the merged embeddings
	}
	if heldEmbeds != nil {
		b.hold(heldEmbeds)
	}
	if p.rec.altUp {
		x = b.altUpStack(p, x, h) // Gemma 3n's (gemma3n_text5.go)
	}
	if m.WordEmbedProjDim > 0 && m.WordEmbedProjDim != m.Hidden {
		x = b.linear(p, "project_in", "other", x, int64(e), h)
	}
	if m.Position == "learned" && m.seq2seq() == nil {
		pos := b.op("embed_positions", b.size(h, p.resid), p.resid, nil)
		x = b.op("add_positions", b.size(h, p.resid), p.resid, list(x, pos))
	}
	if p.rec.embedNorm {
		x = b.norm(p, "embeddings.LayerNorm", "layernorm", x, h)
	}
	x = b.dropout(p, "embed_dropout", x, h, p.dropHid)
	x.keepAlive = true
	if c := m.ShortConv; c != nil && p.useCache && !p.rec.shortConv5 {
		// Lfm2Model.forward builds Lfm2HybridConvCache before the layers: a
		// conv state (batch × hidden × conv_L_cache, in the model's dtype)
		// for every layer, returned with the output.
		p.holdOutput(b.op("conv_cache", p.baseDType.Size(mulI64(int64(r.MicroBatch)*int64(m.Layers), h*int64(c.Kernel))), p.baseDType, nil))
	}
	in := b.newT(actT{name: "ids", bytes: ea.Inputs, dtype: INT64, external: true, batch: true})
	ea.Embed = b.summarize(in)
	ea.Masks = masks(r, p)
	ea.BridgeAt = -1
	if m.EncoderDecoder() {
		ea.BridgeAt = m.Layers - m.DecoderLayers
		if s2s := m.seq2seq(); s2s != nil {
			ea.Bridge = s2s.bridge(r, p)
		} else {
			ea.Bridge = buildBridge(r, p)
		}
	}

	ea.Head = buildHead(r, p, tokens, h, v)
	return ea
}

// embedLookup is the embedding side's first op, the lookup of e-wide
// embeddings: an encoder-decoder's own, a ViT's patch embedding, or the
// token embeddings.
func embedLookup(b *actBuilder, p blockPlan, e int) *actT {
	r, m := b.r, b.r.m
	if s2s := m.seq2seq(); s2s != nil {
		b.tokens = int64(r.MicroBatch) * int64(m.encoderLen(r.SeqLen))
		return s2s.embed(b, p)
	}
	if im := m.Image; im != nil && p.autocast {
		// ViTPatchEmbeddings' Conv2d under autocast casts the pixels and the
		// fp32 kernel; it saves both copies for its backward.
		px := b.op("patch_embed.pixels_cast", p.e.Size(int64(r.MicroBatch)*int64(im.Channels*im.Size*im.Size)), p.e, nil)
		x := b.op("embed_tokens", b.size(int64(e), p.resid), p.resid, list(px), px)
		b.side("patch_embed.weight_cast", p.e.Size(int64(m.Hidden)*int64(im.Channels*im.Patch*im.Patch)), p.e)
		return x
	}
	x := b.op("embed_tokens", b.size(int64(e), p.resid), p.resid, nil)
	// The lookup's output needs a gradient unless nothing before the
	// blocks trains (withoutGrad reads it on a wrapper's image side).
	b.ops[len(b.ops)-1].trains = !r.inputNoGrad()
	return x
}

// buildHead is the head side of the step: the final norm, the output
// projection and the loss (or a classifier, a pooler), as the model's
// family and the plan's loss run them, with a chunked loss computed chunk
// by chunk.
func buildHead(r *resolved, p blockPlan, tokens, h, v int64) BlockActivations {
	m := r.m
	b := newActBuilder(r, tokens)
	b.head = true
	if m.EncoderDecoder() {
		b.tokens = int64(r.MicroBatch) * int64(r.DecoderSeqLen)
	}
	// Under sequence parallelism the last block hands on its sequence
	// shard and the final norm runs on it (SequenceParallel; Megatron's
	// final layernorm likewise).
	hSeq := h
	if p.sp && m.NormPosition != "post" && !m.EncoderDecoder() && !p.rec.pooledNorm {
		hSeq, b.seqShard = h/p.tp, p.tp
	}
	in := hSeq
	if p.rec.altUp {
		in *= int64(m.AltUpInputs) // the last layer's AltUp stack
	}
	x := b.newT(actT{name: "hidden", op: "hidden", bytes: b.size(in, p.resid), dtype: p.resid, born: -1, lastUse: -1, external: true})
	x.id = len(b.ts)
	b.ts = append(b.ts, x)
	var holdBuf [2]*actT
	hold := holdBuf[:0] // what the model's forward references until it returns
	switch {
	case m.seq2seq() != nil:
		x = m.seq2seq().finalNorm(b, p, x, h)
		hold = append(hold, x) // decoder_outputs
	case m.EncoderDecoder():
		// T5Stack: final_layer_norm, dropout; with tied embeddings the
		// model scales the output by d_model^-0.5 before the LM head.
		x = b.dropout(p, "final_dropout", b.t5Norm(p, "final_norm", x, h), h, p.dropHid)
		hold = append(hold, x) // decoder_outputs
		if m.TiedEmbeddings {
			x = b.op("scale", b.size(h, x.dtype), x.dtype, list(x))
			hold = append(hold, x) // sequence_output
		}
	case p.rec.pooledNorm:
		// last_hidden_state is returned as it is; the norm reads the class
		// token (pooled_output = last_hidden_state[:, 0, :]).
		p.holdOutput(x)
		b.tokens = int64(r.MicroBatch)
		p.holdOutput(b.norm(p, "final_norm", m.Norm, x, h))
		b.tokens = tokens
	case m.NormPosition != "post":
		if p.rec.altUp {
			x = b.altUpMerge(p, x, h) // Gemma 3n's (gemma3n_text5.go)
		}
		x = b.norm(p, "final_norm", m.Norm, x, hSeq)
		hold = append(hold, x) // outputs.last_hidden_state
	}
	if hSeq != h && r.Framework != FrameworkMegatron {
		// DTensor's ColwiseParallel output layer gathers the sequence and
		// saves the gathered input (Megatron's saves the shard).
		x = b.op("final_norm.all_gather", b.size(h, x.dtype), x.dtype, list(x))
	}
	classes, _ := m.headClasses()
	chunks := int64(1)
	switch {
	case classes > 0:
		// Pooler (first token) and classifier: negligible next to the blocks.
		b.tokens = int64(r.MicroBatch)
		b.linear(p, "classifier", "other", x, h, int64(classes))
	case m.Head == "none":
		// The base model returns its last hidden state.
		p.holdOutput(x)
		if m.Pooler {
			// BertPooler / ViTPooler: dense + tanh on the first token. The
			// dense saves hidden_states[:, 0], a view that keeps the whole
			// last hidden state alive until its backward.
			b.tokens = int64(r.MicroBatch)
			b.keep(b.op("pooler.tanh", b.size(h, p.e), p.e, list(b.linear(p, "pooler.dense", "other", x, h, h))))
		}
	default:
		x, chunks = lmLoss(b, r, p, x, h, v)
	}
	b.hold(hold...)
	b.chunks = chunks
	hd := b.summarize(x)
	if chunks > 1 {
		// The forward computes one chunk at a time (summarize scales its
		// transients by perChunk). In backward, autograd runs nodes
		// latest-created first: every chunk's cross-entropy backward runs
		// before any chunk's output projection, so the gradients of all logit
		// chunks coexist (in the compute dtype), while the rest of each
		// chunk's transients come and go; what a call rebuilds from the
		// weights (a dequantized lm_head) is whole in every chunk.
		base := addBytes(x.bytes, b.size(v, p.e))
		hd.BackwardPeak = base
		for i := range hd.bwd {
			st := &hd.bwd[i]
			st.inflight = addBytes(addBytes(base, (st.inflight-st.perCall)/Bytes(chunks)), st.perCall)
			hd.BackwardPeak = max(hd.BackwardPeak, st.inflight)
		}
	}
	return hd
}

// lmLoss is a language model's output projection and loss, as the plan's
// loss runs it; it returns the hidden states the projection reads (after
// a projection or a masked-LM transform) and how many token chunks a
// chunked loss computes the head in (1 for one pass).
func lmLoss(b *actBuilder, r *resolved, p blockPlan, x *actT, h, v int64) (_ *actT, chunks int64) {
	m := r.m
	chunks = 1
	if m.WordEmbedProjDim > 0 && m.WordEmbedProjDim != m.Hidden {
		x = b.linear(p, "project_out", "other", x, h, int64(m.WordEmbedProjDim))
	}
	pHead := p
	pHead.q4 = p.q4 && r.QuantizedModules == "all_linear"
	if r.Trainable == "lora" && !pHead.q4 {
		pHead.frozen = true
	}
	if p.rec.headTransform {
		// A masked-LM head's transform: dense + GELU + LayerNorm before the decoder.
		t := b.linear(pHead, "transform.dense", "other", x, h, h)
		g := b.op("transform.gelu", b.size(h, p.e), p.e, list(t), t)
		x = b.norm(pHead, "transform.LayerNorm", "layernorm", g, h)
	}
	if r.LogProbs != nil {
		logProbLoss(b, r, pHead, x, h, v)
		return x, chunks
	}
	switch r.Loss {
	case "chunked_head":
		chunkedHead(b, r, pHead, x, h, v)
	case "fused":
		// The loss kernel walks the vocabulary in chunks and never
		// materialises the logits; it keeps the hidden states.
		b.op("fused_linear_cross_entropy", b.size(1, FP32), FP32, list(x), x)
		b.workspace(b.size(v, FP32) / 8)
	case "chunked_cross_entropy":
		// litgpt: lm_head in 128-token chunks, cross-entropy per chunk in
		// the compute dtype (litgpt/utils.py chunked_cross_entropy);
		// torchtune: 8 chunks, each upcast to fp32 in the loss
		// (CEWithChunkedOutputLoss). The chunk list lives until backward.
		logitsD := p.e
		chunks = int64(r.SeqLen) / 128
		if r.Framework == FrameworkTorchtune {
			logitsD, chunks = FP32, 8
		}
		logits := headLogits(b, pHead, x, h, v)
		p.holdOutput(logits)
		lf := logits
		if logitsD != p.e {
			lf = b.op("logits_float", b.size(v, FP32), FP32, list(logits))
		}
		if r.lossCompiled() {
			b.keep(b.op("logsumexp", b.size(1, FP32), FP32, list(lf)))
		} else {
			b.keep(b.op("log_softmax", b.size(v, logitsD), logitsD, list(lf)))
		}
	case "logits_sum":
		logits := headLogits(b, pHead, x, h, v)
		p.holdOutput(logits) // returned in the model output
		b.op("sum", FP32.Size(1), FP32, list(logits))
		// The backward of sum expands a scalar; the matmul needs it contiguous.
		b.workspace(b.size(v, p.e))
	default: // cross_entropy
		if p.rec.maskedShiftLoss {
			maskedShiftLoss(b, r, pHead, x, h, v)
			break
		}
		logits := headLogits(b, pHead, x, h, v)
		l32 := logits
		if p.e != FP32 && (p.autocast || !p.rec.lossInDType) {
			// transformers' loss upcasts: logits.float() (ForCausalLMLoss);
			// under autocast cross_entropy runs in fp32 anyway.
			l32 = b.op("logits_float", b.size(v, FP32), FP32, list(logits))
		}
		if p.rec.logitsFloat {
			p.holdOutput(l32) // the model's own upcast, returned in its output
		} else {
			p.holdOutput(logits) // returned in the model output
		}
		if r.lossCompiled() {
			b.keep(b.op("logsumexp", b.size(1, FP32), FP32, list(l32)))
		} else {
			b.keep(b.op("log_softmax", b.size(v, l32.dtype), l32.dtype, list(l32)))
			if v < int64(m.Vocab) && r.Framework != FrameworkMegatron {
				// DTensor's loss_parallel decomposes the loss
				// (torch/distributed/tensor/parallel/loss.py): _log_softmax
				// holds shifted = x − max and exp(shifted) at once, and
				// _nll_loss_and_log_softmax_backward holds
				// grad_input = zeros_like(x), exp(x) and their sum at once:
				// one local-vocabulary buffer more than the fused kernels,
				// in forward and in backward alike.
				b.workspace(b.size(v, l32.dtype))
			}
		}
	}
	return x, chunks
}

// maskedShiftLoss is Gemma3ForConditionalGeneration's loss (and Llama
// 4's, without the upcast: shiftLossInDType): the logits upcast (logits =
// logits.float(), which the output returns), the shifted
// logits gathered where the attention
// mask is set (shift_logits[shift_attention_mask != 0], a copy of every
// sequence's tokens but its last; the mask's nonzero indices saved for the
// index's backward, which scatters into zeros of the shifted shape and the
// slice's into zeros of the whole), then nn.CrossEntropyLoss
// (log_softmax's output saved).
func maskedShiftLoss(b *actBuilder, r *resolved, p blockPlan, x *actT, h, v int64) {
	logits := headLogits(b, p, x, h, v)
	l32 := logits
	if logits.dtype != FP32 && !p.rec.shiftLossInDType {
		l32 = b.op("logits_float", b.size(v, FP32), FP32, list(logits))
	}
	p.holdOutput(l32) // the output's logits (Gemma 3's upcast: logits = logits.float())
	all := b.tokens
	b.tokens = all - all/int64(r.SeqLen) // every sequence but its last token
	idx := b.op("shift_attention_mask.nonzero", b.size(2, INT64), INT64, nil)
	d := l32.dtype
	sel := b.op("shift_logits[mask]", b.size(v, d), d, list(l32, idx), idx)
	if d != FP32 && p.autocast {
		sel = b.op("cross_entropy.autocast", b.size(v, FP32), FP32, list(sel)) // cross_entropy is on autocast's fp32 list
		d = FP32
	}
	b.keep(b.op("log_softmax", b.size(v, d), d, list(sel)))
	b.tokens = all
}

// batchInputs is the batch a step reads besides a vision-language model's
// pixels: an image encoder's pixels (fp32), or the token ids and labels
// (int64 each), an encoder-decoder's decoder tokens with them.
func batchInputs(r *resolved, tokens int64) Bytes {
	m := r.m
	switch {
	case m.Image != nil:
		im := m.Image
		return FP32.Size(int64(r.MicroBatch) * int64(im.Channels*im.Size*im.Size))
	case m.seq2seq() != nil:
		return m.seq2seq().inputs(r)
	case m.EncoderDecoder():
		// input_ids and attention_mask; labels and the decoder_input_ids
		// shifted from them.
		return INT64.Size(2*tokens + 2*int64(r.MicroBatch)*int64(r.DecoderSeqLen))
	}
	return INT64.Size(2 * tokens) // input_ids + labels
}

// masks is what transformers' masking_utils builds before the blocks and
// keeps while they run: for eager attention a float mask (batch × 1 ×
// queries × keys in the hidden states' dtype, masking_utils.eager_mask) per
// kind of layer, global and local; for SDPA none for global layers (the
// kernel's is_causal) but a bool mask for local ones once the sequence is
// longer than their span (masking_utils._ignore_causal_mask_sdpa).
func masks(r *resolved, p blockPlan) []maskPart {
	m := r.m
	if s2s := m.seq2seq(); s2s != nil {
		return s2s.masks(r, p)
	}
	if m.EncoderDecoder() {
		return positionBiases(r, p)
	}
	if !p.hfModeling || m.Encoder() || m.recurrent() && m.attentionLayers(0, m.Layers) == 0 {
		return nil // a model of state-space mixers only builds no mask and no positions
	}
	local := m.localSpan() > 0
	global := !local || m.GlobalEvery > 0 || m.GlobalFirst || m.ShortConv != nil && m.ShortConv.Local != nil
	maps := mulI64(mulI64(p.batch, p.seq), int64(r.SeqLen))
	var out []maskPart
	if m.Position == "rope" && !p.rec.mropeSections && !p.rec.mropeInterleaved {
		// The rotary embedding's cos and sin (rotary_emb: position ids of
		// batch 1 unless given × sequence × rotated width, in the hidden
		// states' dtype, cos.to(dtype=x.dtype)), built once by the model
		// and passed to every layer, whose q·cos and rotate_half(q)·sin
		// save them until that layer's backward.
		w := int64(float64(m.HeadDim) * m.RotaryPct)
		if m.QKRopeDim > 0 {
			w = int64(m.QKRopeDim) // multi-head latent attention rotates its rope part only
		}
		d := p.resid
		if p.rec.rotaryFP32 {
			d = FP32 // GPT-NeoX's fp32 caches
		}
		rope := d.Size(mulI64(2*p.seq, w))
		if p.rec.complexRope {
			rope = FP32.Size(mulI64(p.seq, w)) // freqs_cis: complex64, w/2 per position
		}
		if local && p.rec.localRotary {
			// The local layers' own cos and sin beside the global ones',
			// each saved by the layers of its kind.
			out = append(out, maskPart{bytes: rope, local: true, saved: true}, maskPart{bytes: rope, saved: true})
		} else {
			out = append(out, maskPart{bytes: rope, from: 0, to: m.Layers, saved: !p.rec.ropeInterleaved})
		}
	}
	out = append(out, kvDictPart(r, mulI64(p.batch, p.seq))...) // the KV-shared layers' dict (kvshare5.go)
	if p.rec.topKReturned && m.IndexHeads > 0 {
		// GLM-5's model loop holds the top-k one layer returned
		// (topk_indices, int32 [B, S, min(index_topk, T)]) until the next
		// layer returns it anew (glm_moe_dsa/modeling_glm_moe_dsa.py:
		// 710-719): one such tensor lives beside the blocks, handed on
		// between them, kept by no checkpoint (dsa_indexer5.go).
		k := min(int64(dsaIndexTopK), int64(r.SeqLen))
		out = append(out, maskPart{bytes: INT32.Size(mulI64(mulI64(p.batch, p.seq), k)), from: 0, to: m.Layers, beside: true})
	}
	if p.rec.mropeInterleaved {
		// One interleaved cos and sin (batch × sequence × the rotated
		// width in the hidden states' dtype), saved by every layer; the
		// 3-D position ids (int64), which every layer is passed. The
		// rotated width is head_dim × partial_rotary_factor: Qwen3.5's
		// inv_freq has dim / 2 entries and the tables cat two copies of
		// them (transformers 5.23.0 models/qwen3_5/modeling_qwen3_5.py:
		// 166-170, 184-190, 200); Qwen3-VL rotates the whole head.
		rows := mulI64(p.batch, p.seq)
		w := int64(float64(m.HeadDim) * m.RotaryPct)
		out = append(out, maskPart{bytes: p.resid.Size(mulI64(2*rows, w)), from: 0, to: m.Layers, saved: true},
			maskPart{bytes: INT64.Size(mulI64(3, rows)), from: 0, to: m.Layers})
	}
	if w := m.visionWrapperOf(); w != nil && w.textMasks != nil {
		out = append(out, w.textMasks(r, p)...)
	}
	if p.rec.mropeSections {
		// The three-section rotary tables (cos and sin, 3 × batch ×
		// sequence × head_dim in the hidden states' dtype) and the 3-D
		// position ids (int64), which every layer reads.
		rows := mulI64(3, mulI64(p.batch, p.seq))
		out = append(out, maskPart{bytes: addBytes(p.resid.Size(mulI64(2*rows, int64(m.HeadDim))), INT64.Size(rows)), from: 0, to: m.Layers})
	}
	switch {
	case p.attnImpl == "eager":
		if local {
			out = append(out, maskPart{bytes: p.resid.Size(maps), local: true})
		}
		if global {
			out = append(out, maskPart{bytes: p.resid.Size(maps)})
		}
	case p.rec.imageMasks || p.rec.alwaysMasked:
		// An or_mask_function turns SDPA's causal skip off
		// (masking_utils.create_causal_mask: allow_is_causal_skip = False):
		// a bool mask for every kind of layer.
		if local {
			out = append(out, maskPart{bytes: Bool.Size(maps), local: true})
		}
		if global {
			out = append(out, maskPart{bytes: Bool.Size(maps)})
		}
	case local && r.SeqLen > m.localSpan():
		out = append(out, maskPart{bytes: Bool.Size(maps), local: true})
	}
	return out
}

// maskPart is the mask of one kind of layer, or a tensor built once and
// passed to a range of blocks like one (T5's position biases).
type maskPart struct {
	bytes Bytes
	local bool // for local (sliding-window, chunked) layers
	// from, to: the blocks [from, to) that read it, when to > 0 (then
	// local does not apply).
	from, to int
	// saved: the blocks' ops save it for backward (the rotary tables), so
	// it lives until the first block's backward, checkpointed or not.
	saved bool
	// beside: the model's loop hands it to code between the blocks, not to
	// them, so no checkpoint keeps it (Qwen3-VL's deepstack features); it
	// goes when the model's forward returns.
	beside bool
	// grad is the gradient that reaches it when block gradAt's backward
	// begins, which waits until the embedding side's backward consumes it
	// (a deepstack feature's, for its merger); 0 for none.
	grad   Bytes
	gradAt int
}

// uses reports whether block l reads the mask.
func (mp maskPart) uses(r *resolved, l int) bool {
	if !r.m.AttentionLayer(l) && r.m.SSMLayer(l) {
		return false // a state-space mixer reads no mask and no positions
	}
	if (r.m.DeltaNetLayer(l) || r.m.LightningLayer(l)) && mp.to == 0 {
		// A DeltaNet layer is passed the positions, not the causal mask; a
		// lightning layer the recurrent mask, None without padding
		// (create_recurrent_attention_mask, transformers 5.23.0
		// masking_utils.py:1499-1529; modeling_minimax.py:682-685).
		return false
	}
	if r.rec.shortConv5 && r.m.ConvLayer(l) {
		// LFM3's conv layers get their kind's entries: the recurrent mask,
		// None without padding (masking_utils.create_recurrent_attention_mask),
		// and no positions (position_embeddings.get("conv"),
		// modeling_lfm3.py:555, 571-572 at 5.23).
		return false
	}
	if mp.to > 0 {
		return l >= mp.from && l < mp.to
	}
	return r.m.LocalLayer(l) == mp.local
}

// keptUntil is the block after whose backward a mask is freed: the
// checkpoints of its layers keep it as an input, so it lives until the
// lowest checkpointed block of its kind has run its backward; -1 when no
// checkpoint keeps it (it goes when the model's forward returns).
func (mp maskPart) keptUntil(r *resolved, first, last int) int {
	if mp.beside {
		return -1
	}
	for l := first; l < last; l++ {
		// A recurrent layer is passed the tables but saves none of them.
		if (mp.saved && r.m.AttentionLayer(l) || r.checkpointed(l)) && mp.uses(r, l) {
			return l
		}
	}
	return -1
}

// forwardEnd is the block after whose forward an unkept mask is freed:
// the last block that reads it (its stack returns), within [first, last).
func (mp maskPart) forwardEnd(first, last int) int {
	if mp.to > 0 {
		return max(first, min(mp.to, last)-1)
	}
	return last - 1
}

// headLogits is the output projection and what the model does to its
// logits before returning them: soft-capping (Gemma 2: / cap, tanh, which
// saves its output, × cap) or a division by logits_scaling (Granite).
func headLogits(b *actBuilder, p blockPlan, x *actT, h, v int64) *actT {
	logits := b.linear(p, "lm_head", "lm_head", x, h, v)
	if b.r.m.FinalSoftcap > 0 {
		d := logits.dtype
		c := b.op("logits/softcap", b.size(v, d), d, list(logits))
		c = b.keep(b.op("logits.tanh", b.size(v, d), d, list(c)))
		logits = b.op("logits*softcap", b.size(v, d), d, list(c))
	}
	if p.rec.logitsScale {
		logits = b.op("logits/scale", b.size(v, logits.dtype), logits.dtype, list(logits))
	}
	return logits
}
