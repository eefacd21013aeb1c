package vram

// Kimi-K2.5's MoonViT forward as transformers 5.23.0 runs it
// (models/kimi_k25/modeling_kimi_k25.py, Kimi_K25VisionModel.forward
// l.525-551): the patch embedding with its resampled position table and
// frame table, the 2-D axial rotary embedding, the blocks over each image
// (no flash attention: cu_seqlens splits the packed patches, one chunk an
// image), then the final LayerNorm (the family's towerPostNorm). The
// residual stream is the patch embedding's dtype throughout: the Conv2d's
// output (the compute dtype under autocast), the position rows cast to it
// (l.159), each branch's output added in it.
//
// Under autocast that stream is bf16, so each LayerNorm (norm1, norm2,
// final_layernorm) casts it to fp32 and saves the copy, and q_proj, k_proj
// and v_proj each cast norm1's fp32 output back and save their own copy:
// layer_norm is on CUDA autocast's fp32 list (torch 2.15
// include/ATen/autocast_mode.h:874-875, AT_FORALL_FP32; normOf). CPU
// autocast has no such policy for layer_norm: it runs in bf16 there, and
// its output is the one tensor the three projections save. In the CPU
// trace of a trainable tower under autocast (kimi-k25-tiny-tower-amp_bf16-
// eager-none-adamw, +2.54 % peak) autograd saves 2,359,296 bytes less in
// the blocks and the final norm than the engine counts (1 MiB a block,
// 256 KiB the final norm; read with saved_tensors_hooks); the engine keeps
// CUDA's rule.

// k25TowerPlan is p with the tower's residual dtype: the compute dtype,
// not the fp32 of an autocast run's language model (its embeddings are
// fp32; the tower's are the Conv2d's output, l.172-174).
func k25TowerPlan(p blockPlan) blockPlan {
	p.resid = p.e
	return p
}

// k25VisionEmbed is the tower's forward up to its first block
// (Kimi_K25VisionPatchEmbed l.172-175, Kimi_K25VisionPositionEmbeddings
// l.143-159, the rotary embedding l.220-235): the pixels (3 × patch² a
// patch, in the model's dtype: nothing casts them) through the biased
// Conv2d, viewed as one row a patch; the bicubic resampling as one
// embedding_bag over the 16 taps a patch (get_vision_interpolation_
// indices_and_weights, vision_utils.py:231-303: int64 indices and fp32
// weights, n × 16 each; the bag saves the indices, its offsets, its
// offset2bag, bag_size and max_indices and the weights for its backward),
// plus the fp32 frame table's row 0 gathered a patch (single-frame
// images, get_vision_frame_index l.105-115), cast to the patches' dtype
// and added. The rotary embedding (no_grad, l.219-225): each patch's (h,
// w) position, their fp32 angles (2 × head_dim/4 a patch), cos and sin,
// each recomposed (transpose, flip: a copy) and concatenated to head_dim;
// cos and sin are kept for every block.
func k25VisionEmbed(b *actBuilder, p blockPlan, m Model, n int64, grad bool) (*actT, []*actT) {
	p = k25TowerPlan(p)
	im := *m.Image
	h, hd := int64(m.Hidden), int64(m.HeadDim)
	per := int64(3 * im.Patch * im.Patch)
	N := n * int64(im.Tokens())
	b.tokens = N
	px := b.batchInput("pixel_values", p.baseDType.Size(N*per), p.baseDType)
	x := visionPatchConv(b, p, "vision.patch_embed.proj", px, h, per, grad) // family_qwen2_5_vl_vision.go

	// The resampled table, in the table's dtype (the weights').
	w := p.baseDType
	const taps = 16 // bicubic: 4 × 4 (vision_utils.py:196-197)
	idx := b.op("vision.pos_emb.interp_indices", INT64.Size(N*taps), INT64, nil)
	wt := b.op("vision.pos_emb.interp_weights", FP32.Size(N*taps), FP32, nil)
	if w != FP32 {
		wt = b.op("vision.pos_emb.interp_weights.to", w.Size(N*taps), w, list(wt))
	}
	var bagSaves []*actT
	if grad {
		bagSaves = append(bagSaves, idx, wt)
	}
	pos := b.op("vision.pos_emb.embedding_bag", b.size(h, w), w, list(idx, wt), bagSaves...)
	if grad {
		b.side("vision.pos_emb.embedding_bag.offsets", INT64.Size(N), INT64)
		b.side("vision.pos_emb.embedding_bag.offset2bag", INT64.Size(N*taps), INT64)
		b.side("vision.pos_emb.embedding_bag.bag_size", INT64.Size(N), INT64)
		b.side("vision.pos_emb.embedding_bag.max_indices", INT64.Size(N), INT64)
	}
	frame := b.op("vision.pos_emb.frame_index", INT64.Size(N), INT64, nil)
	rows := b.op("vision.pos_emb.time_position_embeddings[frame]", b.size(h, FP32), FP32, list(frame))
	d := promote(w, FP32)
	pos = b.op("vision.pos_emb.pos+time", b.size(h, d), d, list(pos, rows))
	if d != x.dtype {
		pos = b.op("vision.pos_emb.to", b.size(h, x.dtype), x.dtype, list(pos))
	}
	x = b.op("vision.patch_embed+pos", b.size(h, x.dtype), x.dtype, list(x, pos))

	ids := b.op("vision.position_ids", INT64.Size(2*N), INT64, nil)
	freqs := b.op("vision.rotary.freqs", b.size(hd/2, FP32), FP32, list(ids))
	var out []*actT
	for _, fn := range []string{"cos", "sin"} {
		f := b.op("vision.rotary."+fn, b.size(hd/2, FP32), FP32, list(freqs))
		f = b.op("vision.rotary."+fn+".flip", b.size(hd/2, FP32), FP32, list(f))
		out = append(out, b.op("vision.rotary."+fn+".cat", b.size(hd, FP32), FP32, list(f)))
	}
	return x, out
}

// k25VisionBlock lists a Kimi_K25VisionEncoderLayer's activations
// (l.394-413) for the micro-batch's images (one packed sequence of N
// patches): norm1 (LayerNorm), q_proj, k_proj and v_proj, the rotary
// embedding on q and k in fp32 (apply_rotary_pos_emb_vision, l.255-266),
// attention over each image (l.359-381, visionChunkAttention), proj, the
// residual; norm2, fc1, GELU(tanh) (saves its input), fc2, the residual.
func k25VisionBlock(r *resolved, layer int) BlockActivations {
	m := r.m
	p := k25TowerPlan(r.blockPlan(layer))
	im := *m.Image
	n := int64(r.MicroBatch)
	N := n * int64(im.Tokens())
	b := newActBuilder(r, N)
	h, f, hd := int64(m.Hidden), int64(m.FFN), int64(m.HeadDim)
	x := b.external("input", b.size(h, p.resid), p.resid)
	cos := b.external("cos", b.size(hd, FP32), FP32)
	sin := b.external("sin", b.size(hd, FP32), FP32)

	a := b.norm(p, "norm1", "layernorm", x, h)
	q := b.linear(p, "attn.q_proj", "q_proj", a, h, h)
	k := b.linear(p, "attn.k_proj", "k_proj", a, h, h)
	v := b.linear(p, "attn.v_proj", "v_proj", a, h, h)
	q, k = visionRope(b, "q", q, cos, sin, h), visionRope(b, "k", k, cos, sin, h)
	o := visionChunkAttention(b, p, q, k, v, [][2]int64{{int64(im.Tokens()), 1}}, n, h, int64(m.Heads))
	y := b.linear(p, "attn.proj", "o_proj", o, h, h)
	b.hold(a)
	x1 := b.residualAdd(p, "attn_residual", h, x, y)
	a2 := b.norm(p, "norm2", "layernorm", x1, h)
	u := b.linear(p, "mlp.fc1", "fc1", a2, h, f)
	g := b.op("mlp.gelu_tanh", b.size(f, u.dtype), u.dtype, list(u), u)
	y2 := b.linear(p, "mlp.fc2", "fc2", g, f, h)
	b.hold(a2)
	out := b.residualAdd(p, "mlp_residual", h, x1, y2)
	out.keepAlive = true
	return b.summarize(x)
}
