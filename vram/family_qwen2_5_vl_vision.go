package vram

import (
	"errors"
	"fmt"
)

// The Qwen2.5-VL vision encoder (transformers/models/qwen2_5_vl/
// modeling_qwen2_5_vl.py, Qwen2_5_VisionTransformerPretrainedModel), the
// tower of qwen2_5_vl models; its config is their vision_config (whose
// model_type also reads qwen2_5_vl, hence this family's own name). A Conv3d
// patch embedding without bias over temporal_patch_size frames (a still
// image repeated), a 2D rotary embedding computed once, the patches
// reordered into windows, then pre-RMSNorm blocks with a fused biased qkv,
// the rotary embedding applied in fp32, attention within windows of
// window_size pixels (all of an image on fullatt_block_indexes) and a
// biased SwiGLU MLP. Every image of a batch is one sequence of patches; for
// eager and SDPA attention the blocks loop over the windows (or images),
// concatenating the outputs. The merger that closes the tower is the
// wrapper's projector (family_qwen2_5_vl.go). A model's image size is the
// plan's (the processor resizes within min_pixels … max_pixels); config.json
// does not fix it, and 448×448 is the default here.
func init() {
	register(&family{
		name: "qwen2_5_vl_vision", source: "transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py", kind: encoder, images: true, towerOnly: true,
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasAll, Head: "none"},
		// Qwen2_5_VLVisionConfig.__init__'s defaults.
		configDefaults: map[string]any{"depth": 32.0, "hidden_size": 3584.0, "intermediate_size": 3420.0, "num_heads": 16.0,
			"in_channels": 3.0, "patch_size": 14.0, "spatial_merge_size": 2.0, "temporal_patch_size": 2.0, "window_size": 112.0,
			"hidden_act": "silu", "fullatt_block_indexes": []any{7.0, 15.0, 23.0, 31.0}},
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden, m.Heads, m.FFN = c.int("depth"), c.int("hidden_size"), c.int("num_heads"), c.int("intermediate_size")
			// image_size is not a config key transformers reads; the
			// engine writes the plan's there (toConfig) and reads it back.
			im := &Image{Size: c.optInt("image_size", 448), Patch: c.int("patch_size"), Channels: c.optInt("in_channels", 3),
				TemporalPatch: c.int("temporal_patch_size"), Merge: c.int("spatial_merge_size"), Window: c.int("window_size")}
			m.Image = im
			if act := c.optString("hidden_act", "silu"); act != "silu" {
				c.fail(fmt.Sprintf("hidden_act %q: the Qwen2.5-VL vision MLP is modelled with silu", act))
			}
			l := c.optList("fullatt_block_indexes")
			if len(l) == 0 {
				c.fail("fullatt_block_indexes: at least one block attends to whole images")
				return
			}
			first, _ := l[0].(float64)
			period := int(first) + 1
			for i, v := range l {
				if f, ok := v.(float64); !ok || int(f) != period*(i+1)-1 {
					c.fail(fmt.Sprintf("fullatt_block_indexes[%d] = %v: global blocks other than every %d-th are not modelled", i, v, period))
					return
				}
			}
			if period*len(l) > m.Layers || period*(len(l)+1) <= m.Layers {
				c.fail(fmt.Sprintf("fullatt_block_indexes %v: every %d-th of depth %d blocks are expected", l, period, m.Layers))
				return
			}
			m.GlobalEvery = period
			if im.Patch > 0 {
				m.AttentionChunk = (im.Window / im.Patch) * (im.Window / im.Patch)
			}
		},
		toConfig: func(m Model, c map[string]any) {
			im := m.Image
			c["depth"], c["hidden_size"], c["num_heads"], c["intermediate_size"] = m.Layers, m.Hidden, m.Heads, m.FFN
			c["in_channels"], c["patch_size"], c["temporal_patch_size"] = im.Channels, im.Patch, im.TemporalPatch
			c["spatial_merge_size"], c["window_size"], c["hidden_act"] = im.Merge, im.Window, "silu"
			c["image_size"] = im.Size
			var full []int
			for i := m.GlobalEvery - 1; i < m.Layers; i += m.GlobalEvery {
				full = append(full, i)
			}
			c["fullatt_block_indexes"] = full
		},
		check: func(m Model) error {
			im := m.Image
			switch {
			case im == nil:
				return errors.New("model.image (size, patch, channels, temporal_patch, merge, window) is required for family qwen2_5_vl_vision")
			case im.ClassToken || im.Registers != 0:
				return errors.New("model.image: the Qwen2.5-VL vision encoder has no class token or registers")
			case im.TemporalPatch < 1 || im.Merge < 1:
				return errors.New("model.image: temporal_patch and merge must be ≥ 1")
			case im.Size%(im.Patch*im.Merge) != 0:
				return fmt.Errorf("model.image.size = %d must be a multiple of patch × merge = %d (the processor resizes to one)", im.Size, im.Patch*im.Merge)
			case im.Window%(im.Patch*im.Merge) != 0 || im.Window < im.Patch*im.Merge:
				return fmt.Errorf("model.image.window = %d must be a positive multiple of patch × merge = %d", im.Window, im.Patch*im.Merge)
			case m.GlobalEvery < 1 || m.AttentionChunk != (im.Window/im.Patch)*(im.Window/im.Patch):
				return fmt.Errorf("model: global_every (the whole-image blocks' period) and attention_chunk = (window / patch)² = %d describe the windows", (im.Window/im.Patch)*(im.Window/im.Patch))
			case m.MLP != "swiglu" || m.Norm != "rmsnorm" || m.KVHeads != m.Heads:
				return errors.New("model: the Qwen2.5-VL vision blocks are RMSNorm, multi-head attention and a SwiGLU MLP")
			}
			return nil
		},
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			im := m.Image
			if im == nil {
				im = &Image{}
			}
			l.add("patch_embed.proj.weight", "other", d.h, int64(im.Channels), int64(im.TemporalPatch), int64(im.Patch), int64(im.Patch))
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf("blocks.%d.", i)
				l.norm(p+"norm1", false, d.h)
				l.norm(p+"norm2", false, d.h)
				l.linear(p+"attn.qkv", "qkv_proj", d.h, 3*d.q, true, Part{"q_proj", d.q}, Part{"k_proj", d.q}, Part{"v_proj", d.q})
				l.linear(p+"attn.proj", "o_proj", d.q, d.h, true)
				l.linear(p+"mlp.gate_proj", "gate_proj", d.h, d.f, true)
				l.linear(p+"mlp.up_proj", "up_proj", d.h, d.f, true)
				l.linear(p+"mlp.down_proj", "down_proj", d.f, d.h, true)
			}
		},
		buffers: func(m Model, b *bufferList) {
			// Qwen2_5_VisionRotaryEmbedding(head_dim / 2).inv_freq.
			b.add("rotary_pos_emb.inv_freq", -1, FP32, int64(m.HeadDim/4))
		},
		towerEmbed: qwenVisionEmbed,
		block:      qwenVisionBlock,
	})
}

// qwen25VLTower is the Qwen2.5-VL vision encoder at 448×448 pixels, as in
// Qwen/Qwen2.5-VL-7B-Instruct's vision_config (the 3B, 32B and 72B towers
// differ in out_hidden_size only, which is the language model's width).
func qwen25VLTower() Model {
	return Model{Family: "qwen2_5_vl_vision", Layers: 32, Hidden: 1280, Heads: 16, FFN: 3420,
		GlobalEvery: 8, AttentionChunk: 64, Image: &Image{Size: 448, Patch: 14, Channels: 3, TemporalPatch: 2, Merge: 2, Window: 112}}
}

// qwenVisionEmbed is the tower's forward up to the first block: the pixels
// (one row of channels × frames × patch² values a patch) in the weights'
// dtype (get_image_features' pixel_values.type), the Conv3d, the rotary
// angles of every patch (rot_pos_emb, then reordered into windows) and
// their cos and sin (fp32, kept for every block), and the patches
// reordered into windows (an index copy).
func qwenVisionEmbed(b *actBuilder, p blockPlan, m Model, n int64, grad bool) (*actT, []*actT) {
	h, hd := int64(m.Hidden), int64(m.HeadDim)
	x := qwenPatchEmbed(b, p, m, n, grad)
	pos := b.op("vision.rot_pos_emb", b.size(hd/2, FP32), FP32, nil)
	pos = b.op("vision.rot_pos_emb.window_order", b.size(hd/2, FP32), FP32, list(pos))
	emb := b.op("vision.rotary.cat", b.size(hd, FP32), FP32, list(pos))
	cos := b.op("vision.rotary.cos", b.size(hd, FP32), FP32, list(emb))
	sin := b.op("vision.rotary.sin", b.size(hd, FP32), FP32, list(emb))
	x = b.op("vision.window_order", b.size(h, x.dtype), x.dtype, list(x))
	return x, []*actT{cos, sin}
}

// qwenPatchEmbed is the Qwen towers' patch embedding for n images (the
// builder's tokens become their patches): the pixels (one row of channels ×
// frames × patch² values a patch) in the weights' dtype
// (get_image_features' pixel_values.type), then the Conv3d, which saves its
// input, and under autocast its weight's copy.
func qwenPatchEmbed(b *actBuilder, p blockPlan, m Model, n int64, grad bool) *actT {
	im := *m.Image
	h := int64(m.Hidden)
	N := n * int64(im.Tokens())
	b.tokens = N
	per := int64(im.Channels * im.TemporalPatch * im.Patch * im.Patch)
	px := b.batchInput("pixel_values", FP32.Size(N*per), FP32)
	if p.baseDType != FP32 {
		px = b.op("vision.pixel_values.type", p.baseDType.Size(N*per), p.baseDType, list(px))
	}
	return visionPatchConv(b, p, "vision.patch_embed", px, h, per, grad)
}

// visionPatchConv is a tower's patch convolution (op name) over its pixel
// rows px of per values each, to h channels: the pixels cast in under
// autocast, saved for the weight's gradient when the tower trains, and
// autocast's copy of the weight beside it (Qwen2.5-VL's and Kimi-K2.5's
// towers).
func visionPatchConv(b *actBuilder, p blockPlan, name string, px *actT, h, per int64, grad bool) *actT {
	pixIn := b.castIn(p, "vision.patch_embed.pixels", px)
	var saves []*actT
	if grad {
		saves = append(saves, pixIn)
	}
	x := b.op(name, b.size(h, p.e), p.e, list(pixIn), saves...)
	if grad && p.autocast {
		b.side(name+".weight_cast", p.e.Size(h*per), p.e).weightCopy = true
	}
	return x
}

// qwenVisionWindows lists one image's attention chunks as (patches, count)
// classes: for a global block the whole image; otherwise windows of
// window/patch patches a side, laid on the merged grid from its top left,
// the last row and column of windows cut short where the grid ends
// (get_window_index).
func qwenVisionWindows(im Image, global bool) [][2]int64 {
	g := int64(im.Size / im.Patch)
	if global {
		return [][2]int64{{g * g, 1}}
	}
	mg, wm, mm := g/int64(im.Merge), int64(im.Window/(im.Patch*im.Merge)), int64(im.Merge*im.Merge)
	full, rest := mg/wm, mg%wm
	var out [][2]int64
	add := func(rows, cols, count int64) {
		if rows > 0 && cols > 0 && count > 0 {
			out = append(out, [2]int64{rows * cols * mm, count})
		}
	}
	add(wm, wm, full*full)
	add(wm, rest, full)
	add(rest, wm, full)
	add(rest, rest, 1)
	return out
}

// qwenVisionBlock lists a Qwen2_5_VLVisionBlock's activations for the
// micro-batch's images (one sequence of N patches): norm1, the fused qkv
// (q, k, v views of it), the rotary embedding on q and k in fp32 (the
// products save the shared cos and sin only), attention chunk by chunk
// (each window's or image's q, k, v slices; the outputs concatenated),
// proj, the residual; norm2, the SwiGLU MLP, the residual. Windows of one
// size are accounted together: their saved tensors in full, the
// transients of one.
func qwenVisionBlock(r *resolved, layer int) BlockActivations {
	m := r.m
	p := r.blockPlan(layer)
	im := *m.Image
	N := int64(r.MicroBatch) * int64(im.Tokens())
	b := newActBuilder(r, N)
	h, f, hd := int64(m.Hidden), int64(m.FFN), int64(m.HeadDim)
	x := b.external("input", b.size(h, p.resid), p.resid)
	cos := b.external("cos", b.size(hd, FP32), FP32)
	sin := b.external("sin", b.size(hd, FP32), FP32)

	a := b.norm(p, "norm1", "rmsnorm", x, h)
	y := qwenVisionAttention(b, p, m, a, cos, sin, qwenVisionWindows(im, !m.LocalLayer(layer)), int64(r.MicroBatch))
	b.hold(a)
	x1 := b.residualAdd(p, "attn_residual", h, x, y)
	a2 := b.norm(p, "norm2", "rmsnorm", x1, h)
	y2 := b.gatedMLP(p, "mlp.", a2, h, f/towerShard(p))
	b.hold(a2)
	out := b.residualAdd(p, "mlp_residual", h, x1, y2)
	out.keepAlive = true
	return b.summarize(x)
}

// qwenVisionAttention is a Qwen vision block's attention on its normed
// input a (b.tokens patches, the micro-batch's n images): the fused qkv (q,
// k, v views of it), the rotary embedding on q and k in fp32 (the products
// save the shared cos and sin only), attention chunk by chunk (each
// window's or image's q, k, v slices; the outputs concatenated) and proj.
// chunks lists an image's chunks as (patches, count) classes; chunks of one
// size are accounted together: their saved tensors in full, the transients
// of one. Qwen2.5-VL's and Qwen3-VL's vision attention (modeling_qwen3_vl.py
// l.186-248) run the same ops.
func qwenVisionAttention(b *actBuilder, p blockPlan, m Model, a, cos, sin *actT, chunks [][2]int64, n int64) *actT {
	// Under a serving engine's TP a rank runs its heads (vision_tp.go): q,
	// k and v are h wide from here on, the fused qkv gathered whole first.
	full, tp := int64(m.Hidden), towerShard(p)
	h, heads := full/tp, int64(m.Heads)/tp
	qkv := b.linear(p, "attn.qkv", "qkv_proj", a, full, 3*h)
	if tp > 1 {
		qkv = qkvAllGather(b, qkv, full)
	}
	q, k, v := visionRope(b, "q", qkv, cos, sin, h), visionRope(b, "k", qkv, cos, sin, h), qkv
	o := visionChunkAttention(b, p, q, k, v, chunks, n, h, heads)
	return b.linear(p, "attn.proj", "o_proj", o, h, full)
}

// visionRope is apply_rotary_pos_emb_vision on x (q or k, h wide a patch;
// Qwen2.5-VL, and Kimi-K2.5's, transformers 5.23.0
// models/kimi_k25/modeling_kimi_k25.py:255-266): x.float() (a copy where
// x is not fp32), x·cos + rotate_half(x)·sin (the products save the
// shared cos and sin only), back to x's dtype.
func visionRope(b *actBuilder, name string, x, cos, sin *actT, h int64) *actT {
	t := x
	if t.dtype != FP32 {
		t = b.op(name+".float", b.size(h, FP32), FP32, list(x))
	}
	c := b.op(name+"*cos", b.size(h, FP32), FP32, list(t, cos))
	neg := b.op(name+".rotate_half.neg", b.size(h/2, FP32), FP32, list(t))
	rot := b.op(name+".rotate_half", b.size(h, FP32), FP32, list(neg, t))
	s := b.op(name+".rotate_half*sin", b.size(h, FP32), FP32, list(rot, sin))
	e := b.op(name+"_embed", b.size(h, FP32), FP32, list(c, s))
	if x.dtype != FP32 {
		e = b.op(name+"_embed.to", b.size(h, x.dtype), x.dtype, list(e))
	}
	return e
}

// visionChunkAttention is a packed vision tower's attention without flash
// attention: q, k and v (b.tokens patches, h wide over heads heads) split
// by cu_seqlens into chunks (as (patches, count) classes, count per image
// of n), attention chunk by chunk, the outputs concatenated (Qwen2.5-VL
// l.222-244; Kimi-K2.5, transformers 5.23.0
// models/kimi_k25/modeling_kimi_k25.py:359-381).
func visionChunkAttention(b *actBuilder, p blockPlan, q, k, v *actT, chunks [][2]int64, n, h, heads int64) *actT {
	N := b.tokens
	// One chunk class at a time: casts under autocast (copies of the
	// slices, which the attention saves); otherwise the slices are views
	// and saving one keeps its whole tensor.
	cast := func(name string, t *actT) *actT {
		if !p.autocast || t.dtype == p.e {
			return t
		}
		return b.op(name, b.size(h, p.e), p.e, list(t))
	}
	var outs []*actT
	for _, w := range chunks {
		size, count := w[0], w[1]*n
		b.tokens = size * count
		qc, kc, vc := cast("q.chunk", q), cast("k.chunk", k), cast("v.chunk", v)
		var o *actT
		if p.attnImpl == "eager" {
			// eager_attention_forward per chunk: q·kᵀ · scaling, softmax in
			// fp32, back to q's dtype, · v, transposed to (chunk, heads, d).
			one := p.e.Size(heads * size * size)
			sc := b.op("scores", one, p.e, list(qc, kc), qc, kc)
			sc.attn = true
			sc = b.op("scores*scaling", one, p.e, list(sc))
			sc.attn = true
			pr := b.keep(b.op("softmax", FP32.Size(heads*size*size*count), FP32, list(sc)))
			pr.attn = true
			if p.e != FP32 {
				pr = b.op("probs.to", p.e.Size(heads*size*size*count), p.e, list(pr))
				pr.attn = true
			}
			o = b.op("probs@v", b.size(h, p.e), p.e, list(pr, vc), pr, vc)
			o = b.op("attn_output.contiguous", b.size(h, p.e), p.e, list(o))
		} else {
			o = b.keep(b.op("sdpa", b.size(h, p.e), p.e, list(qc, kc, vc), qc, kc, vc))
			b.side("sdpa.logsumexp", b.size(heads, FP32), FP32)
		}
		outs = append(outs, o)
	}
	b.tokens = N
	return b.op("attn.cat", b.size(h, p.e), p.e, outs)
}
