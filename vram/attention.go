package vram

// The attention sublayer of a decoder block, op by op: the q, k and v
// projections (separate, fused, latent), their norms and the rotary
// embedding, the training cache's copies, grouped heads repeated, the
// attention itself (eager or a fused kernel) and the output projection —
// as transformers' modeling code runs them, or the plan's framework.

// blockDims are the widths one block works with on one rank.
type blockDims struct {
	layer   int
	h, hSeq int64 // hidden width; its share per rank in the residual region (sequence parallelism)
	hd      int64 // head width
	heads   int64 // query heads per rank
	kvHeads int64 // key/value heads per rank (at least one)
	qDim    int64 // q per token (latent attention: heads × (nope + rope))
	kvDim   int64 // k and v per token
	vDim    int64 // v per token where its heads have a width of their own (v_head_dim), else 0: kvDim
	oDim    int64 // the attention output per token
	mla     bool  // multi-head latent attention
}

// decoderDims are a decoder block's widths for layer on one rank.
func (r *resolved) decoderDims(p blockPlan, layer int) blockDims {
	m := r.m
	d := blockDims{layer: layer, h: int64(m.Hidden), hSeq: int64(m.Hidden), hd: int64(m.HeadDim),
		heads: int64(m.Heads) / p.tp, kvHeads: max(1, int64(m.KVHeads)/p.tp), mla: m.KVLoRARank > 0}
	if p.sp {
		d.hSeq = d.h / p.tp
	}
	if p.rec.localKVDouble && m.LocalLayer(layer) {
		d.kvHeads = max(1, 2*int64(m.KVHeads)/p.tp)
	}
	d.qDim, d.kvDim = d.heads*d.hd, d.kvHeads*d.hd
	d.oDim = d.qDim
	if m.VHeadDim > 0 && !d.mla {
		// Values of their own width (MiMo-V2-Flash's v_head_dim): v_proj
		// and the attention output are that wide per head.
		d.vDim, d.oDim = d.kvHeads*int64(m.VHeadDim), d.heads*int64(m.VHeadDim)
	}
	if d.mla {
		d.qDim = d.heads * int64(m.QKNopeDim+m.QKRopeDim)
		d.kvDim, d.oDim = d.qDim, d.heads*int64(m.VHeadDim)
	}
	return d
}

// attentionShaped is r with layer's own head width and key/value heads
// (Model.AttentionShape: Gemma 4's global layers') as the model's, which
// decoderDims reads; r itself where they are the model's. r is the
// model's resolved plan, or one shaped for a layer of layer's kind.
func (r *resolved) attentionShaped(layer int) *resolved {
	hd, kv := r.m.AttentionShape(layer)
	if hd == r.m.HeadDim && kv == r.m.KVHeads {
		return r
	}
	g := *r
	g.m.HeadDim, g.m.KVHeads = hd, kv
	return &g
}

// vWidth is v per token: vDim where the values have a width of their
// own, else kvDim.
func (d blockDims) vWidth() int64 {
	if d.vDim > 0 {
		return d.vDim
	}
	return d.kvDim
}

// qkv is attention's q, k and v as the ops so far have left them.
type qkv struct {
	q, k, v *actT
	gate    *actT // the output gate (gatedAttention), nil without one
	kd      int64 // k's and v's width per token as attention gets them
	// freshQ: q is a new tensor in (batch, heads, seq, dim) memory order
	// (a concatenation), rather than a transposed view of the
	// projection's (batch, seq, heads, dim) output.
	freshQ bool
	// cacheHeld: the builder has held what the cache keeps itself (MLA's
	// latents from transformers 5), not k and v.
	cacheHeld bool
	// vStrided: v is a view of a wider output with its heads strided
	// (transformers 5's MLA value_states, a transposed split of
	// kv_b_proj's output), which torch.matmul cannot fold into one batch
	// dimension without a copy.
	vStrided bool
}

// attention builds the attention sublayer on a (the norm's output) and
// returns the output projection's result.
func (b *actBuilder) attention(p blockPlan, d blockDims, a *actT) *actT {
	m := b.r.m
	var s qkv
	var indexed []*actT // DSA's top-k and masks, kept until the forward returns
	switch {
	case m.KVSharedLayer(d.layer):
		// Gemma 4's KV-shared layers: q_proj and q_norm, then an earlier
		// layer's keys and values (kvshare5.go).
		q := b.linear(p, "q_proj", "q_proj", a, d.h, d.qDim)
		return b.sharedKVAttention(p, d, a, b.headNorm(p, "q_norm", "rmsnorm", q, d.qDim, d.heads))
	case d.mla && p.rec.latentCache:
		// transformers 5: the cache keeps the latents (mla5.go).
		var qResid *actT
		var locals []*actT
		s.q, s.k, s.v, qResid, locals = b.latentQKV5(p, a, d.heads)
		// Without a rotary embedding q is q_proj's output transposed, a
		// view; else the concatenation of its parts.
		s.freshQ, s.cacheHeld, s.vStrided = m.latentRoped(), true, true
		if m.IndexHeads > 0 && qResid != nil {
			// DeepSeek Sparse Attention's indexer (dsa_indexer5.go),
			// which runs while the forward's locals are live.
			indexed = append(b.dsaIndexMask(p, b.dsaIndexer(p, a, qResid)), locals...)
		}
	case d.mla:
		s.q, s.k, s.v = b.latentQKV(p, a, d.heads)
		s.freshQ = true
	case p.fusedQKV && !p.rec.splitQKV && (!p.hfModeling || m.Position != "rope" || p.rec.rotaryFP32):
		s = b.fusedQKVRoped(p, d, a)
	default:
		s = b.projectQKV(p, d, a)
		if p.rec.keyScale {
			// k · key_multiplier (a Python float: nothing saved).
			s.k = b.op("k.scale", b.size(d.kvDim, s.k.dtype), s.k.dtype, list(s.k))
		}
		if p.rec.valueScale {
			// v · attention_value_scale (a Python float: nothing saved).
			s.v = b.op("v.scale", b.size(d.vWidth(), s.v.dtype), s.v.dtype, list(s.v))
		}
		b.qkNormsAndRope(p, d, &s)
		if p.rec.vNorm {
			s.v = b.headNorm(p, "v_norm", "l2", s.v, d.vWidth(), d.kvHeads)
		}
		if p.useCache && p.hfModeling && !p.rec.cacheKeepsKV {
			// DynamicLayer.update concatenates k and v onto empty tensors
			// created in k's dtype (cache_utils.py lazy_initialization):
			// attention reads these copies, in k's dtype.
			s.k = b.op("cache.k", b.size(s.kd, s.k.dtype), s.k.dtype, list(s.k))
			s.v = b.op("cache.v", b.size(s.kd*d.vWidth()/d.kvDim, s.k.dtype), s.k.dtype, list(s.v))
		}
	}
	if p.useCache && !s.cacheHeld {
		// The model returns past_key_values (HF use_cache=True), which keeps
		// the cached k and v alive while the loop holds the output, or
		// until the forward returns.
		p.holdOutput(s.k, s.v)
	}
	b.dictHolds(p, d.layer, s.k, s.v)
	b.kv = kvRead{at: len(b.ops), k: s.k, v: s.v}
	out := b.attendAndProject(p, d, a, s)
	for _, t := range indexed {
		t.lastUse = max(t.lastUse, len(b.ops)-1)
	}
	if len(indexed) > 0 && p.rec.topKReturned {
		b.topK = indexed[0] // the decoder layer returns it (dsa_indexer5.go)
	}
	return out
}

// attendAndProject is attention's core on q, k and v as s leaves them
// (repeated to every query head where the kernel needs it, eager or fused,
// an output gate) and the output projection; a is the sublayer's input,
// which a head gate reads.
func (b *actBuilder) attendAndProject(p blockPlan, d blockDims, a *actT, s qkv) *actT {
	// Grouped k and v are repeated to every query head: by repeat_kv
	// (eager; SDPA without native GQA or with a mask), or, for a family
	// that splits them off itself, by the eager matmul's broadcasting.
	if d.kvHeads < d.heads && !d.mla && !p.rec.broadcastKV && (p.attnImpl == "eager" ||
		!p.rec.splitQKV && (!p.nativeGQA || p.maskedSDPA)) {
		// repeat_kv: expand + reshape materialises full-head k and v. With
		// SDPA, transformers passes enable_gqa=True instead (torch ≥ 2.5,
		// sdpa_attention.py use_gqa_in_sdpa).
		s.k = b.op("repeat_k", b.size(d.qDim, s.k.dtype), s.k.dtype, list(s.k))
		s.v = b.op("repeat_v", b.size(d.qDim*d.vWidth()/d.kvDim, s.v.dtype), s.v.dtype, list(s.v))
	}
	var o *actT
	if p.attnImpl == "eager" {
		o = b.eagerAttention(p, d, s)
	} else {
		o = b.fusedAttention(p, d, s)
	}
	if s.gate != nil {
		// attn_output * torch.sigmoid(gate): sigmoid saves its output, the
		// product both factors.
		sg := b.keep(b.op("gate.sigmoid", b.size(d.qDim, s.gate.dtype), s.gate.dtype, list(s.gate)))
		od := promote(o.dtype, sg.dtype)
		o = b.op("attn_output*gate", b.size(d.oDim, od), od, list(o, sg), o, sg)
	}
	if p.rec.headGate {
		// attn_output * sigmoid(g_proj(hidden_states)).unsqueeze(-1): the
		// gate's linear on the attention's input, sigmoid (saves its
		// output), the product (saves both); its result is contiguous,
		// so the reshape for o_proj is a view.
		g := b.linear(p, "g_proj", "other", a, d.h, d.heads)
		sg := b.keep(b.op("g_proj.sigmoid", b.size(d.heads, g.dtype), g.dtype, list(g)))
		od := promote(o.dtype, sg.dtype)
		o = b.op("attn_output*g", b.size(d.oDim, od), od, list(o, sg), o, sg)
	}
	return b.linear(p, "o_proj", "o_proj", o, d.oDim, d.h)
}

// fusedQKVRoped is one q|k|v matmul whose rotary embedding (if any) the
// framework applies to views of it: litgpt's and Megatron's fused
// projection, GPT-NeoX's fp32 rotary path.
func (b *actBuilder) fusedQKVRoped(p blockPlan, d blockDims, a *actT) qkv {
	m := b.r.m
	fused := b.linear(p, "qkv_proj", "qkv_proj", a, d.h, d.qDim+2*d.kvDim)
	// q, k, v are strided views of the fused output. Fused attention
	// kernels read them in place (saving any keeps the whole buffer);
	// eager attention works on contiguous copies, which are what
	// autograd saves and the cache keeps.
	s := qkv{q: fused, k: fused, v: fused, kd: d.kvDim}
	if p.attnImpl == "eager" {
		s.q = b.op("q_contiguous", b.size(d.qDim, p.e), p.e, list(fused))
		s.k = b.op("k_contiguous", b.size(d.kvDim, p.e), p.e, list(fused))
		s.v = b.op("v_contiguous", b.size(d.kvDim, p.e), p.e, list(fused))
	} else if p.useCache && p.hfModeling && m.Position != "rope" {
		// The cache's torch.cat makes contiguous copies of k and v
		// (cache_utils.py DynamicLayer.update), which SDPA then reads.
		s.k = b.op("cache.k", b.size(d.kvDim, p.e), p.e, list(fused))
		s.v = b.op("cache.v", b.size(d.kvDim, p.e), p.e, list(fused))
	}
	switch {
	case m.Position == "rope" && p.rec.rotaryFP32:
		// modeling_gpt_neox.py applies the rotary embedding with its fp32
		// cos/sin caches ("casts query and key in fp32"), concatenates the
		// pass-through part (fp32) and casts back; the returned
		// present=(key, value) holds the fp32 key when use_cache is on.
		q32 := b.op("q_rope_fp32", b.size(d.qDim, FP32), FP32, list(s.q))
		k32 := b.op("k_rope_fp32", b.size(d.kvDim, FP32), FP32, list(s.k))
		if p.useCache {
			p.holdOutput(k32)
		}
		s.q = b.op("q_cast", b.size(d.qDim, p.e), p.e, list(q32))
		s.k = b.op("k_cast", b.size(d.kvDim, p.e), p.e, list(k32))
	case m.Position == "rope":
		s.q = b.op("q_rope", b.size(d.qDim, p.e), p.e, list(s.q))
		s.k = b.op("k_rope", b.size(d.kvDim, p.e), p.e, list(s.k))
	}
	return s
}

// projectQKV is q, k and v from their projections: three matmuls, or one
// whose views the family reads (and whose k and v it may split off).
func (b *actBuilder) projectQKV(p blockPlan, d blockDims, a *actT) qkv {
	s := qkv{kd: d.kvDim}
	switch {
	case p.fusedQKV && p.rec.splitQKV:
		// One q|k|v matmul whose k and v the family splits off into
		// tensors of their own (advanced indexing), broadcast to every
		// query head where it says so; q stays a view for the rotary
		// embedding to read.
		fused := b.linear(p, "qkv_proj", "qkv_proj", a, d.h, d.qDim+2*d.kvDim)
		if p.rec.broadcastKV {
			s.kd = d.qDim
		}
		s.q = fused
		s.k = b.op("k_split", b.size(s.kd, p.e), p.e, list(fused))
		s.v = b.op("v_split", b.size(s.kd, p.e), p.e, list(fused))
	case p.fusedQKV:
		// q, k and v are strided views of one matmul's output (GPT-NeoX
		// since 4.49, Phi-3): the rotary embedding makes q and k
		// tensors of their own; v stays a view, which fused attention
		// reads in place (saving it keeps the whole output) and the
		// eager matmul with the probabilities copies (it cannot fold
		// the strided heads into a batch).
		fused := b.linear(p, "qkv_proj", "qkv_proj", a, d.h, d.qDim+2*d.kvDim)
		s.q, s.k, s.v = fused, fused, fused
		if p.attnImpl == "eager" && !p.useCache {
			s.v = b.op("v_contiguous", b.size(d.kvDim, p.e), p.e, list(fused))
		}
	case p.rec.gatedAttention:
		// q_proj makes q and the output gate per head, (…, heads, 2 ·
		// head_dim) chunked in two: q a strided view of it, the gate
		// reshaped to the tokens (a copy).
		s.q = b.linear(p, "q_proj", "q_proj", a, d.h, 2*d.qDim)
		s.gate = b.op("gate.reshape", b.size(d.qDim, s.q.dtype), s.q.dtype, list(s.q))
		s.k = b.linear(p, "k_proj", "k_proj", a, d.h, d.kvDim)
		s.v = b.linear(p, "v_proj", "v_proj", a, d.h, d.kvDim)
	case p.rec.vNorm && b.r.m.GlobalKEqV && !b.r.m.LocalLayer(d.layer):
		s.q = b.linear(p, "q_proj", "q_proj", a, d.h, d.qDim)
		s.k = b.linear(p, "k_proj", "k_proj", a, d.h, d.kvDim)
		s.v = s.k // Gemma 4's attention_k_eq_v: no v_proj (gemma4_text5.go)
	default:
		s.q = b.linear(p, "q_proj", "q_proj", a, d.h, d.qDim)
		s.k = b.linear(p, "k_proj", "k_proj", a, d.h, d.kvDim)
		s.v = b.linear(p, "v_proj", "v_proj", a, d.h, d.vWidth())
	}
	return s
}

// qkNormsAndRope applies the family's q/k norms (before or after the
// rotary embedding), the rotary embedding of roped layers and Llama 4's
// temperature of the others.
func (b *actBuilder) qkNormsAndRope(p blockPlan, d blockDims, s *qkv) {
	m := b.r.m
	switch {
	case m.QKNorm == "head" && !p.rec.qkNormAfterRope: // an RMSNorm over each head (Qwen3, Gemma 3)
		s.q = b.headNorm(p, "q_norm", "rmsnorm", s.q, d.qDim, d.heads)
		s.k = b.headNorm(p, "k_norm", "rmsnorm", s.k, d.kvDim, d.kvHeads)
	case m.QKNorm == "full": // an RMSNorm over all heads together (OLMo 2)
		s.q = b.headNorm(p, "q_norm", "rmsnorm", s.q, d.qDim, 1)
		s.k = b.headNorm(p, "k_norm", "rmsnorm", s.k, d.kvDim, 1)
	}
	roped := m.Roped(d.layer)
	// A partial rotary embedding concatenates the rotated and
	// pass-through parts (apply_rotary_pos_emb's torch.cat).
	s.freshQ = roped && (m.RotaryPct < 1 || p.rec.ropeConcat) && p.hfModeling
	if roped {
		b.rope(p, d, s)
	}
	if m.QKNorm == "l2" && roped { // weightless, after the rotary embedding (Llama 4)
		s.q = b.headNorm(p, "q_norm", "l2", s.q, d.qDim, d.heads)
		s.k = b.headNorm(p, "k_norm", "l2", s.k, d.kvDim, d.kvHeads)
	}
	if m.QKNorm == "head" && p.rec.qkNormAfterRope { // per head, on the rotated q and k (Hunyuan)
		s.q = b.headNorm(p, "q_norm", "rmsnorm", s.q, d.qDim, d.heads)
		s.k = b.headNorm(p, "k_norm", "rmsnorm", s.k, d.kvDim, d.kvHeads)
	}
	if !roped && p.rec.noRopeTemperature {
		// Llama 4's attention temperature on its layers without the
		// rotary embedding: q times fp32 per-position scales, cast
		// back to q's dtype (the product saves only the scales).
		t := b.op("q_temperature", b.size(d.qDim, promote(s.q.dtype, FP32)), promote(s.q.dtype, FP32), list(s.q))
		if t.dtype != s.q.dtype {
			t = b.op("q_temperature.to", b.size(d.qDim, s.q.dtype), s.q.dtype, list(t))
		}
		s.q = t
	}
}

// rope applies the rotary embedding to q and k: with the model's shared
// cos and sin, a layer's own interleaved ones (ERNIE) or its cut of the
// three-section tables (Qwen2.5-VL).
func (b *actBuilder) rope(p blockPlan, d blockDims, s *qkv) {
	dq, dk := p.ropeDType(s.q.dtype), p.ropeDType(s.k.dtype)
	switch {
	case p.rec.ropeComplex:
		// vision_apply_rotary_emb: x.float() (a copy unless fp32), viewed
		// as complex and multiplied by the constant frequencies (the
		// product saves nothing that needs memory), viewed back and
		// .type_as(x) (a copy unless fp32).
		s.q, s.k = b.complexRope(p, "q", s.q, d.qDim), b.complexRope(p, "k", s.k, s.kd)
	case p.rec.ropeInterleaved && p.hfModeling:
		// This layer's own interleaved cos and sin (seq × head_dim
		// in the hidden states' dtype, position ids of batch 1),
		// saved by q·cos and rotate_half(q)·sin; the fp32 sums
		// cast back to q's and k's dtype.
		cs := b.op("rope.cos_interleaved", p.resid.Size(mulI64(p.seq, d.hd)), p.resid, nil)
		sn := b.op("rope.sin_interleaved", p.resid.Size(mulI64(p.seq, d.hd)), p.resid, nil)
		dq0, dk0 := s.q.dtype, s.k.dtype
		s.q = b.op("q_rope", b.size(d.qDim, FP32), FP32, list(s.q, cs, sn), cs, sn)
		s.k = b.op("k_rope", b.size(s.kd, FP32), FP32, list(s.k, cs, sn))
		if dq0 != FP32 {
			s.q = b.op("q_rope.to", b.size(d.qDim, dq0), dq0, list(s.q))
		}
		if dk0 != FP32 {
			s.k = b.op("k_rope.to", b.size(s.kd, dk0), dk0, list(s.k))
		}
	case p.rec.mropeSections && p.hfModeling:
		// This layer's cos and sin, cut from the three-section
		// tables (in the hidden states' dtype), saved by q·cos
		// and rotate_half(q)·sin.
		cs := b.op("mrope.cos", b.size(d.hd, p.resid), p.resid, nil)
		sn := b.op("mrope.sin", b.size(d.hd, p.resid), p.resid, nil)
		s.q = b.op("q_rope", b.size(d.qDim, dq), dq, list(s.q, cs, sn), cs, sn)
		s.k = b.op("k_rope", b.size(s.kd, dk), dk, list(s.k, cs, sn))
	default:
		s.q = b.op("q_rope", b.size(d.qDim, dq), dq, list(s.q))
		s.k = b.op("k_rope", b.size(s.kd, dk), dk, list(s.k))
	}
}

// ropeDType is the dtype of q or k (of dtype d) after the rotary
// embedding: transformers' rotary embeddings return cos and sin in the
// hidden states' dtype (cos.to(dtype=x.dtype)), fp32 under autocast with
// fp32 weights, so q·cos promotes q and k to fp32.
func (p blockPlan) ropeDType(d DType) DType {
	if p.hfModeling && p.autocast && !p.rec.ropeKeepsDType {
		return promote(d, p.resid)
	}
	return d
}

// complexRope is one of vision_apply_rotary_emb's two products on x
// (width elements a token).
func (b *actBuilder) complexRope(p blockPlan, name string, x *actT, width int64) *actT {
	f := x
	if x.dtype != FP32 {
		f = b.op(name+".float", b.size(width, FP32), FP32, list(x))
	}
	y := b.op(name+"_rope", b.size(width, FP32), FP32, list(f))
	if x.dtype != FP32 {
		y = b.op(name+"_rope.type_as", b.size(width, x.dtype), x.dtype, list(y))
	}
	return y
}

// fusedAttention is scaled_dot_product_attention: it saves q, k, v, its
// output and the fp32 logsumexp.
func (b *actBuilder) fusedAttention(p blockPlan, d blockDims, s qkv) *actT {
	r := b.r
	q, k, v := b.castIn(p, s.q.name, s.q), b.castIn(p, s.k.name, s.k), b.castIn(p, s.v.name, s.v)
	var mask *actT
	if p.maskedSDPA {
		// scaled_dot_product_attention turns a bool mask into an
		// additive one in the query's dtype (attention.cpp
		// convert_boolean_attn_mask), which the kernel saves.
		mask = b.op("sdpa.mask", q.dtype.Size(mulI64(mulI64(p.batch, p.seq), int64(r.SeqLen))), q.dtype, nil)
	}
	o := b.keep(b.op("sdpa", b.size(d.oDim, p.e), p.e, list(q, k, v, mask), q, k, v, mask))
	b.ops[len(b.ops)-1].fusedAttn = true
	b.ops[len(b.ops)-1].gemm = true
	if r.cp > 1 {
		b.ringAttention(q, k, v)
	}
	b.side("sdpa.logsumexp", b.size(d.heads, FP32), FP32)
	// The kernels write the output in the query's memory order: (b, s,
	// heads, d) for a query transposed from the projection's output,
	// so the transpose back for the output projection is a view; a
	// concatenated query (latent attention, a partial rotary
	// embedding) is (b, heads, s, d), so sdpa_attention_forward's
	// transpose(1, 2).contiguous() copies it.
	if s.freshQ {
		o = b.op("attn_output.contiguous", b.size(d.oDim, p.e), p.e, list(o))
	}
	return o
}

// eagerAttention is transformers' eager_attention_forward: the scores
// matmul, soft-capping, the causal mask, softmax (in fp32 under autocast
// or an upcasting family), dropout and the probabilities times v.
func (b *actBuilder) eagerAttention(p blockPlan, d blockDims, s qkv) *actT {
	m := b.r.m
	q, k := s.q, s.k
	if p.rec.scoresFP32 {
		// GPT-J's _attn: query.to(float32), key.to(float32) before
		// the scores matmul (which autocast casts back down).
		if q.dtype != FP32 {
			q = b.op("q.float", b.size(d.qDim, FP32), FP32, list(q))
		}
		if k.dtype != FP32 {
			k = b.op("k.float", FP32.Size(mulI64(int64(k.bytes), 8)/int64(k.dtype.Bits())), FP32, list(k))
		}
	}
	q, k = b.castIn(p, q.name, q), b.castIn(p, k.name, k)
	scores := p.batch * d.heads * p.seq * p.keys // elements of one s×s map per rank
	sd := p.e
	if !p.autocast {
		sd = promote(q.dtype, k.dtype)
	}
	sc := b.op("scores", sd.Size(scores), sd, list(q, k), q, k)
	b.ops[len(b.ops)-1].gemm = true
	sc.attn = true
	if m.AttnSoftcap > 0 {
		// scores / cap, tanh (saves its output), × cap (Gemma 2
		// eager_attention_forward).
		sc = b.op("scores/softcap", sc.bytes, sc.dtype, list(sc))
		sc = b.keep(b.op("scores.tanh", sc.bytes, sc.dtype, list(sc)))
		sc.attn = true
		sc = b.op("scores*softcap", sc.bytes, sc.dtype, list(sc))
		sc.attn = true
	}
	// transformers adds its float causal mask, built in the
	// embeddings' dtype (fp32 under autocast with fp32 weights), to
	// the eager scores: the sum is in the promoted dtype, and so is
	// the gradient softmax's backward returns.
	md := p.e
	if p.hfModeling && (m.Image == nil || p.rec.towerOneSequence || p.rec.towerPadMask) {
		md = promote(p.e, p.resid) // a tower's own mask too (Pixtral's, in the hidden states' dtype)
	}
	sm := b.op("scores_scaled_masked", md.Size(scores), md, list(sc))
	sm.attn = true
	if p.rec.scoreClamp {
		// torch.max(attn_weights, finfo.min): maximum saves both inputs
		// for its backward mask.
		sm = b.op("scores_clamped", p.e.Size(scores), p.e, list(sm), sm)
		sm.attn = true
	}
	probD := p.e
	if p.upcast || p.autocast {
		probD = FP32 // softmax is on autocast's fp32 list
	}
	var pr *actT
	switch {
	case p.rec.attnSinks || p.rec.localSinks && m.LocalLayer(d.layer):
		probD = promote(sm.dtype, p.baseDType)
		pr = b.softmaxWithSinks(p, d, sm, probD)
	case p.rec.localSinks:
		// A layer without sinks still subtracts the row max (max saves
		// its indices) and softmaxes in the scores' dtype
		// (modeling_mimo_v2_flash.py:322-323 at 5.23).
		probD = sm.dtype
		b.side("scores.max_indices", INT64.Size(p.batch*d.heads*p.seq), INT64).attn = true
		c := b.op("scores-max", sm.bytes, probD, list(sm))
		c.attn = true
		pr = b.keep(b.op("softmax", sm.bytes, probD, list(c)))
	default:
		pr = b.keep(b.op("softmax", probD.Size(scores), probD, list(sm)))
	}
	pr.attn = true
	dropD := p.e
	if p.autocast {
		dropD = probD // dropout runs on the fp32 probabilities
	}
	if probD != dropD {
		pr = b.op("probs_cast", dropD.Size(scores), dropD, list(pr))
		pr.attn = true
	}
	if p.dropAttn > 0 {
		pr = b.op("attn_dropout", dropD.Size(scores), dropD, list(pr))
		pr.attn = true
		b.side("attn_dropout.mask", Bool.Size(scores), Bool).attn = true
	}
	if dropD != p.e {
		pr = b.op("probs_autocast", p.e.Size(scores), p.e, list(pr)) // matmul's autocast copy
		pr.attn = true
	}
	return b.probsV(p, d, s, pr)
}

// probsV is eager attention's last product, the probabilities pr times
// v, which ends eager_attention_forward.
func (b *actBuilder) probsV(p blockPlan, d blockDims, s qkv, pr *actT) *actT {
	v := b.castIn(p, s.v.name, s.v)
	if s.vStrided && p.batch > 1 {
		// torch.matmul folds (batch, heads) into bmm's batch by
		// expand + reshape, which copies a head-strided view unless the
		// batch is one; the product saves the copy (torch 2.15, measured:
		// _unsafe_view [b·heads, s, v_head_dim]), not the wider output.
		v = b.op("v.reshape", b.size(d.oDim, v.dtype), v.dtype, list(v))
	}
	o := b.op("probs@v", b.size(d.oDim, p.e), p.e, list(pr, v), pr, v)
	b.ops[len(b.ops)-1].gemm = true
	if p.rec.eagerQKHeld {
		// eager_attention_forward's query and key arguments, referenced
		// until it returns (transformers 5.23.0
		// models/gemma4/modeling_gemma4.py:812-839): under no grad their
		// matmul saves neither, so they would go after the scores.
		b.hold(s.q, s.k)
	}
	return o
}

// softmaxWithSinks is gpt-oss's eager softmax (modeling_gpt_oss.py
// eager_attention_forward): each head's sink logit (a parameter in the
// weights' dtype) concatenated as one more key column, the row max
// subtracted (max saves its indices), softmax over the s+1 columns in
// their dtype (saves its output), the sink column dropped by a view.
func (b *actBuilder) softmaxWithSinks(p blockPlan, d blockDims, sm *actT, probD DType) *actT {
	wide := probD.Size(p.batch * d.heads * p.seq * (p.keys + 1))
	c := b.op("scores.sinks", wide, probD, list(sm))
	b.side("scores.max_indices", INT64.Size(p.batch*d.heads*p.seq), INT64).attn = true
	c.attn = true
	c = b.op("scores-max", wide, probD, list(c))
	c.attn = true
	return b.keep(b.op("softmax", wide, probD, list(c)))
}
