package vram

// Multi-head latent attention as transformers 5 runs it. From 5.0
// DeepSeek-V2's and DeepSeek-V3's attention keeps the compressed latents
// in the cache and expands them into keys and values afterwards, in every
// layer (5.23.0 deepseek_v3/modeling_deepseek_v3.py:407-463,
// deepseek_v2/modeling_deepseek_v2.py:348-399); recipe.latentCache, set
// by those families' recipes from transformers 5.0 on, builds q, k and v
// with latentQKV5 in place of latentQKV (4.57's order: kv_b_proj on the
// normed latent, k and v concatenated, the cache copying the full-head k
// and v).
//
// Measured on the CPU with torch 2.15 (one attention layer's forward
// under saved_tensors_hooks and a storage tracker, fp32 and bf16
// autocast): the cache's latents are new tensors, the normed latent one
// kv_b_proj saves (or its autocast copy), the rotary key one only the
// cache holds; key_states is a fresh tensor in kv_b_proj's dtype that SDPA
// (or the eager scores matmul) saves; value_states is a view of kv_b_proj's
// output, whose whole storage SDPA saves.

// latentQKV5 builds MLA's q, k and v for heads heads per rank as
// transformers 5's DeepseekV3Attention.forward does
// (modeling_deepseek_v3.py:437-463; DeepseekV2Attention.forward,
// modeling_deepseek_v2.py:378-399, with its complex rotary):
//
//   - q as before (l.437-442), kv_a_proj_with_mqa (l.444) and the
//     compressed part's RMSNorm (l.446), both latents viewed as one head
//     (l.448-449);
//   - the rotary parts rotated (l.451-455; v2 l.391) as latentRope does;
//   - past_key_values.update(kv_nope, k_rot) (l.458-459) with a cache:
//     DynamicLayer.update concatenates them onto empty tensors made in
//     kv_nope's dtype (cache_utils.py:113-116, 136-137), so both are
//     copies in the promoted dtype (autocast's cat casts a narrower k_rot
//     first), which the returned cache keeps; they replace the latents;
//   - query_states = cat(q_pass, q_rot) (l.461), in the promoted dtype;
//   - expand_kv (l.407-424): kv_b_proj on the latent (l.416, which saves
//     its input), key_states = new_empty in that output's dtype (l.421),
//     the pass-through part and the expanded rotary key copied into it
//     (l.422-423; copy_ saves nothing); value_states a view of kv_b_proj's
//     output (l.417).
//
// Against 4.57 the cache holds r + dr per token, not the full-head k and
// v; the key is in kv_b_proj's dtype (bf16 under autocast), not promoted
// to the rotary part's fp32; and attention saves the whole kv_b_proj
// output for the value.
//
// qResid is q_a_layernorm's output, which DSA's indexer reads
// (dsa_indexer5.go); nil without a q LoRA rank. locals are what the
// forward's local variables hold until it returns, after o_proj
// (l.481): q_pass and q_rot (q_b_proj's output, whose view q_pass is,
// l.440-442, and the rotated q_rot, l.453-455), compressed_kv (l.444)
// and, without a cache to rebind them (l.458-459), k_pass (the normed
// latent) and the rotated k_rot; deepseek_v32/modeling_deepseek_v32.py
// alike (l.414-418, 424, 428, 476), where q_resid, q_a_layernorm's
// output, is a local too. Transient in the engine's order otherwise (or
// their autocast copies saved in their place), they are live beside what
// runs between expand_kv and o_proj (DSA's indexer; measured at the peak
// of the tiny DeepSeek-V3.2's checkpointed steps: 1,114,112 bytes more in
// fp32, 491,520 more under bf16 autocast).
func (b *actBuilder) latentQKV5(p blockPlan, x *actT, heads int64) (q, k, v, qResid *actT, locals []*actT) {
	m := b.r.m
	h := int64(m.Hidden)
	dn, dr, dv := int64(m.QKNopeDim), int64(m.QKRopeDim), int64(m.VHeadDim)
	r := int64(m.KVLoRARank)
	q, qResid = b.latentQueryResid(p, x, heads)
	ckv := b.linear(p, "kv_a_proj_with_mqa", "k_proj", x, h, r+dr)
	kvn := b.norm(p, "kv_a_layernorm", "rmsnorm", ckv, r)
	if !m.latentRoped() {
		// Kimi-Linear's MLA (kimi_linear/modeling_kimi_linear.py:277-294 at
		// 5.23.0): query_states is q_proj's output viewed (l.281), k_rot a
		// view of compressed_kv (l.284, 288), neither rotated.
		locals = []*actT{q, qResid, ckv}
		if !p.useCache || !p.hfModeling {
			locals = append(locals, kvn)
		}
		kvn, kr := b.latentCache5(p, kvn, ckv)
		kv := b.linear(p, "kv_b_proj", "v_proj", kvn, r, heads*(dn+dv))
		k = b.op("key_states", b.size(heads*(dn+dr), kv.dtype), kv.dtype, list(kv, kr))
		return q, k, kv, qResid, locals
	}
	qr, kr := b.latentRope(p, q, ckv, heads)
	locals = []*actT{q, qr, qResid, ckv}
	if !p.useCache || !p.hfModeling {
		locals = append(locals, kr, kvn)
	}
	kvn, kr = b.latentCache5(p, kvn, kr)
	qd := promote(q.dtype, qr.dtype)
	q = b.op("q_cat", b.size(heads*(dn+dr), qd), qd, list(q, qr))
	kv := b.linear(p, "kv_b_proj", "v_proj", kvn, r, heads*(dn+dv))
	k = b.op("key_states", b.size(heads*(dn+dr), kv.dtype), kv.dtype, list(kv, kr))
	return q, k, kv, qResid, locals
}

// latentCache5 is past_key_values.update(kv_nope, k_rot) with a cache
// (see latentQKV5): copies of both latents in their promoted dtype, which
// the returned cache holds and attention reads; without one the latents
// as they are.
func (b *actBuilder) latentCache5(p blockPlan, kvn, kr *actT) (*actT, *actT) {
	if !p.useCache || !p.hfModeling {
		return kvn, kr
	}
	r, dr := int64(b.r.m.KVLoRARank), int64(b.r.m.QKRopeDim)
	cd := promote(kvn.dtype, kr.dtype)
	kvn = b.op("cache.kv_nope", b.size(r, cd), cd, list(kvn))
	if kr.dtype != cd {
		kr = b.op("cache.k_rot.to", b.size(dr, cd), cd, list(kr))
	}
	kr = b.op("cache.k_rot", b.size(dr, cd), cd, list(kr))
	p.holdOutput(kvn, kr)
	return kvn, kr
}

// latentRoped reports whether MLA rotates the rotary parts of q and of
// the shared key: every MLA family but Kimi-Linear's (Position "none",
// whose parts keep their rotary widths unrotated).
func (m Model) latentRoped() bool {
	return m.Position != "none"
}
