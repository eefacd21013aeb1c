package vram

// latentQKV builds multi-head latent attention's q, k and v for heads
// heads per rank (DeepSeek-V2 §2.1.2; modeling_deepseek_v3.py
// DeepseekV3Attention.forward):
//
//   - q: q_a_proj, its RMSNorm, q_b_proj (or one q_proj without
//     q_lora_rank), split into the pass-through and rotary parts (views);
//   - kv_a_proj_with_mqa gives the compressed kv and one shared rotary key
//     (views of one output); the compressed part's RMSNorm and kv_b_proj
//     give every head's pass-through key and value (views of one output);
//   - the rotary parts are rotated (q·cos + rotate_half(q)·sin, in cos's
//     dtype: fp32 under autocast with fp32 weights), and the query and key
//     are concatenated from their parts — the shared rotary key expanded to
//     every head — in the promoted dtype (cat is on autocast's promote list);
//   - with a cache, its concatenation copies k and v in k's dtype.
//
// v is returned as the kv_b_proj output it is a view of.
func (b *actBuilder) latentQKV(p blockPlan, x *actT, heads int64) (q, k, v *actT) {
	m := b.r.m
	h := int64(m.Hidden)
	dn, dr, dv := int64(m.QKNopeDim), int64(m.QKRopeDim), int64(m.VHeadDim)
	r := int64(m.KVLoRARank)
	q = b.latentQuery(p, x, heads)
	ckv := b.linear(p, "kv_a_proj_with_mqa", "k_proj", x, h, r+dr)
	kv := b.linear(p, "kv_b_proj", "v_proj", b.norm(p, "kv_a_layernorm", "rmsnorm", ckv, r), r, heads*(dn+dv))
	qr, kr := b.latentRope(p, q, ckv, heads)
	qd, kd := promote(q.dtype, qr.dtype), promote(kv.dtype, kr.dtype)
	q = b.op("q_cat", b.size(heads*(dn+dr), qd), qd, list(q, qr))
	k = b.op("k_cat", b.size(heads*(dn+dr), kd), kd, list(kv, kr))
	v = kv
	if p.useCache && p.hfModeling {
		k = b.op("cache.k", b.size(heads*(dn+dr), k.dtype), k.dtype, list(k))
		v = b.op("cache.v", b.size(heads*dv, k.dtype), k.dtype, list(v))
	}
	return q, k, v
}

// latentQuery is MLA's query projection: q_a_proj, its RMSNorm and
// q_b_proj, or one q_proj without q_lora_rank.
func (b *actBuilder) latentQuery(p blockPlan, x *actT, heads int64) *actT {
	q, _ := b.latentQueryResid(p, x, heads)
	return q
}

// latentQueryResid is latentQuery with q_a_layernorm's output (q_resid),
// nil without a q LoRA rank.
func (b *actBuilder) latentQueryResid(p blockPlan, x *actT, heads int64) (q, resid *actT) {
	m := b.r.m
	h, w := int64(m.Hidden), heads*int64(m.QKNopeDim+m.QKRopeDim)
	if m.QLoRARank > 0 {
		rq := int64(m.QLoRARank)
		qa := b.linear(p, "q_a_proj", "q_proj", x, h, rq)
		resid = b.norm(p, "q_a_layernorm", "rmsnorm", qa, rq)
		return b.linear(p, "q_b_proj", "q_proj", resid, rq, w), resid
	}
	return b.linear(p, "q_proj", "q_proj", x, h, w), nil
}

// latentRope rotates the rotary parts of q (every head's) and of ckv
// (the one shared key), each a view of its projection's output.
func (b *actBuilder) latentRope(p blockPlan, q, ckv *actT, heads int64) (qr, kr *actT) {
	dr := int64(b.r.m.QKRopeDim)
	ropeD := func(d DType) DType {
		if p.hfModeling && p.autocast {
			return promote(d, p.resid) // cos and sin come in the hidden states' dtype
		}
		return d
	}
	if p.rec.complexRope {
		// q.float() as complex times freqs_cis (which the product saves),
		// type_as back to q's and k's dtype.
		qr = b.op("q_rope", b.size(heads*dr, FP32), FP32, list(q))
		kr = b.op("k_rope", b.size(dr, FP32), FP32, list(ckv))
		if q.dtype != FP32 {
			qr = b.op("q_rope.to", b.size(heads*dr, q.dtype), q.dtype, list(qr))
		}
		if ckv.dtype != FP32 {
			kr = b.op("k_rope.to", b.size(dr, ckv.dtype), ckv.dtype, list(kr))
		}
	} else {
		qr = b.op("q_rope", b.size(heads*dr, ropeD(q.dtype)), ropeD(q.dtype), list(q))
		kr = b.op("k_rope", b.size(dr, ropeD(ckv.dtype)), ropeD(ckv.dtype), list(ckv))
	}
	return qr, kr
}
