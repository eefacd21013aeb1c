package vram

import (
	"errors"
	"fmt"
	"math"
)

// The Qwen3-VL vision encoder (transformers 4.57 models/qwen3_vl/
// modeling_qwen3_vl.py, Qwen3VLVisionModel l.541-741), the tower of qwen3_vl
// models; its config is their vision_config (whose model_type also reads
// qwen3_vl, hence this family's own name). A Conv3d patch embedding with a
// bias over temporal_patch_size frames (a still image repeated, l.60-77), a
// learned position table (pos_embed, num_position_embeddings entries on a
// square grid) bilinearly interpolated to each image's patch grid and added
// (fast_pos_embed_interpolate, l.642-701), a 2D rotary embedding computed
// once (rot_pos_emb, l.594-640), then pre-LayerNorm blocks with a fused
// biased qkv, the rotary embedding applied in fp32, attention over each
// image (no windows) and a biased fc1 → GELU(tanh) → fc2 MLP (l.44-57,
// 251-275). The final merger and the deepstack mergers (one for each block
// of deepstack_visual_indexes, l.580-591, 737-750) are the wrapper's
// projector (family_qwen3_vl.go). A model's image size is the plan's (the
// processor resizes); config.json does not fix it, and 512×512 is the
// default here.
func init() {
	register(&family{
		name: "qwen3_vl_vision", source: "transformers/models/qwen3_vl/modeling_qwen3_vl.py", kind: encoder, images: true, towerOnly: true,
		defaults: Model{MLP: "gelu_pytorch_tanh", Norm: "layernorm", Position: "rope", Bias: BiasAll, Head: "none"},
		// Qwen3VLVisionConfig.__init__'s defaults (configuration_qwen3_vl.py).
		configDefaults: map[string]any{"depth": 27.0, "hidden_size": 1152.0, "intermediate_size": 4304.0, "num_heads": 16.0,
			"in_channels": 3.0, "patch_size": 16.0, "spatial_merge_size": 2.0, "temporal_patch_size": 2.0,
			"num_position_embeddings": 2304.0, "hidden_act": "gelu_pytorch_tanh", "deepstack_visual_indexes": []any{8.0, 16.0, 24.0}},
		fromConfig: qwen3VisionFromConfig,
		toConfig: func(m Model, c map[string]any) {
			im := m.Image
			c["depth"], c["hidden_size"], c["num_heads"], c["intermediate_size"] = m.Layers, m.Hidden, m.Heads, m.FFN
			c["in_channels"], c["patch_size"], c["temporal_patch_size"] = im.Channels, im.Patch, im.TemporalPatch
			c["spatial_merge_size"], c["num_position_embeddings"], c["hidden_act"] = im.Merge, im.PositionTable, "gelu_pytorch_tanh"
			c["deepstack_visual_indexes"] = im.Deepstack.Indexes()
			c["image_size"] = im.Size
		},
		check:   qwen3VisionCheck,
		tensors: qwen3VisionTensors,
		buffers: func(m Model, b *bufferList) {
			// Qwen3VLVisionRotaryEmbedding(head_dim // 2).inv_freq (l.80-92, 577).
			b.add("rotary_pos_emb.inv_freq", -1, FP32, int64(m.HeadDim/4))
		},
		towerEmbed: qwen3VisionEmbed,
		block:      qwen3VisionBlock,
		// No _input_embed_layer: transformers 5 hooks no input embeddings
		// in it (tower_records5.go).
		unhookedTower: true,
	})
}

// qwen3VisionTensors lists the tower's parameters (Qwen3VLVisionModel
// l.541-591 up to its mergers, which the wrapper lists): the biased Conv3d
// patch embedding, the position table, then each block's norms, fused qkv,
// proj and MLP. Qwen3.5's tower has the same.
func qwen3VisionTensors(m Model, l *tensorList) {
	d := m.dims()
	im := m.Image
	if im == nil {
		im = &Image{}
	}
	l.add("patch_embed.proj.weight", "other", d.h, int64(im.Channels), int64(im.TemporalPatch), int64(im.Patch), int64(im.Patch))
	l.add("patch_embed.proj.bias", "bias", d.h)
	l.add("pos_embed.weight", "other", int64(im.PositionTable), d.h)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("blocks.%d.", i)
		l.norm(p+"norm1", true, d.h)
		l.norm(p+"norm2", true, d.h)
		l.linear(p+"attn.qkv", "qkv_proj", d.h, 3*d.q, true, Part{"q_proj", d.q}, Part{"k_proj", d.q}, Part{"v_proj", d.q})
		l.linear(p+"attn.proj", "o_proj", d.q, d.h, true)
		l.linear(p+"mlp.linear_fc1", "fc1", d.h, d.f, true)
		l.linear(p+"mlp.linear_fc2", "fc2", d.f, d.h, true)
	}
}

// qwen3VisionFromConfig reads a Qwen3VLVisionConfig.
func qwen3VisionFromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden, m.Heads, m.FFN = c.int("depth"), c.int("hidden_size"), c.int("num_heads"), c.int("intermediate_size")
	// image_size is not a config key transformers reads; the engine
	// writes the plan's there (toConfig) and reads it back.
	im := &Image{Size: c.optInt("image_size", 512), Patch: c.int("patch_size"), Channels: c.optInt("in_channels", 3),
		TemporalPatch: c.int("temporal_patch_size"), Merge: c.int("spatial_merge_size"), PositionTable: c.int("num_position_embeddings")}
	m.Image = im
	if act := c.optString("hidden_act", "gelu_pytorch_tanh"); act != "gelu_pytorch_tanh" {
		c.fail(fmt.Sprintf("hidden_act %q: the Qwen3-VL vision MLP is modelled with gelu_pytorch_tanh", act))
	}
	var taps []int
	for i, v := range c.optList("deepstack_visual_indexes") {
		f, ok := v.(float64)
		if !ok || f != math.Trunc(f) {
			c.fail(fmt.Sprintf("deepstack_visual_indexes[%d] = %v must be an integer", i, v))
			return
		}
		taps = append(taps, int(f))
	}
	im.Deepstack = Blocks(taps...)
}

// qwen3VisionCheck is the tower's rules.
func qwen3VisionCheck(m Model) error {
	im := m.Image
	if im == nil {
		return errors.New("model.image (size, patch, channels, temporal_patch, merge, position_table, deepstack) is required for family qwen3_vl_vision")
	}
	side := int(math.Sqrt(float64(im.PositionTable)))
	switch {
	case im.ClassToken || im.Registers != 0 || im.Window != 0:
		return errors.New("model.image: the Qwen3-VL vision encoder has no class token, registers or windows")
	case im.TemporalPatch < 1 || im.Merge < 1:
		return errors.New("model.image: temporal_patch and merge must be ≥ 1")
	case im.Size%(im.Patch*im.Merge) != 0:
		return fmt.Errorf("model.image.size = %d must be a multiple of patch × merge = %d (the processor resizes to one)", im.Size, im.Patch*im.Merge)
	case im.PositionTable < 1 || side*side != im.PositionTable:
		return fmt.Errorf("model.image.position_table = %d (num_position_embeddings) must be a positive square: the table is a square grid", im.PositionTable)
	case m.MLP != "gelu_pytorch_tanh" || m.Norm != "layernorm" || m.KVHeads != m.Heads:
		return errors.New("model: the Qwen3-VL vision blocks are LayerNorm, multi-head attention and a gelu_pytorch_tanh MLP")
	}
	last := -1
	for i, t := range im.Deepstack.Indexes() {
		if t <= last || t >= m.Layers {
			return fmt.Errorf("model.image.deepstack[%d] = %d: the deepstack blocks must be increasing block indexes in [0, layers = %d)", i, t, m.Layers)
		}
		last = t
	}
	return nil
}

// qwen3Tower is the Qwen3-VL vision encoder at 512×512 pixels: depth 27,
// width 1152, deepstack taps 8, 16, 24 (Qwen/Qwen3-VL-8B-Instruct's and
// 30B-A3B's vision_config), or with small true, depth 24, width 1024, taps
// 5, 11, 17 (Qwen3-VL-4B's and 2B's).
func qwen3Tower(small bool) Model {
	if small {
		return Model{Family: "qwen3_vl_vision", Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096,
			Image: &Image{Size: 512, Patch: 16, Channels: 3, TemporalPatch: 2, Merge: 2, PositionTable: 2304, Deepstack: Blocks(5, 11, 17)}}
	}
	return Model{Family: "qwen3_vl_vision", Layers: 27, Hidden: 1152, Heads: 16, FFN: 4304,
		Image: &Image{Size: 512, Patch: 16, Channels: 3, TemporalPatch: 2, Merge: 2, PositionTable: 2304, Deepstack: Blocks(8, 16, 24)}}
}

// qwen3VisionEmbed is the tower's forward up to the first block
// (Qwen3VLVisionModel.forward l.703-733): the pixels (one row of channels
// × frames × patch² values a patch) in the weights' dtype
// (get_image_features' pixel_values.type, l.1051), the biased Conv3d; the
// interpolated position table (fast_pos_embed_interpolate: the four
// corners' rows gathered from pos_embed, 4 × patches × width in the
// table's dtype, times their fp32 weights, summed three adds deep, each
// image's rows repeated and permuted into merge order, a copy each, then
// concatenated) added to the patches; the rotary angles of every patch
// and their cos and sin (fp32, kept for every block).
func qwen3VisionEmbed(b *actBuilder, p blockPlan, m Model, n int64, grad bool) (*actT, []*actT) {
	h, hd := int64(m.Hidden), int64(m.HeadDim)
	x := qwenPatchEmbed(b, p, m, n, grad) // the Conv3d's bias adds no activation
	N := b.tokens
	// The table's dtype is the weights' (nn.Embedding is not autocast).
	w := p.baseDType
	idx := b.op("vision.pos_embed.indices", INT64.Size(4*N), INT64, nil)
	wt := b.op("vision.pos_embed.weights", w.Size(4*N), w, nil)
	var idxSaved []*actT
	if grad {
		idxSaved = append(idxSaved, idx) // embedding_dense_backward reads the indices
	}
	rows := b.op("vision.pos_embed", w.Size(4*N*h), w, list(idx), idxSaved...)
	rows = b.op("vision.pos_embed*weights", w.Size(4*N*h), w, list(rows, wt), wt)
	s := b.op("vision.pos_embed.sum01", b.size(h, w), w, list(rows))
	s = b.op("vision.pos_embed.sum012", b.size(h, w), w, list(s, rows))
	s = b.op("vision.pos_embed.sum0123", b.size(h, w), w, list(s, rows))
	s = b.op("vision.pos_embed.repeat", b.size(h, w), w, list(s))
	s = b.op("vision.pos_embed.permute", b.size(h, w), w, list(s))
	s = b.op("vision.pos_embed.cat", b.size(h, w), w, list(s))
	d := promote(x.dtype, w)
	x = b.op("vision.patch_embed+pos_embed", b.size(h, d), d, list(x, s))
	pos := b.op("vision.rot_pos_emb", b.size(hd/2, FP32), FP32, nil)
	emb := b.op("vision.rotary.cat", b.size(hd, FP32), FP32, list(pos))
	cos := b.op("vision.rotary.cos", b.size(hd, FP32), FP32, list(emb))
	sin := b.op("vision.rotary.sin", b.size(hd, FP32), FP32, list(emb))
	return x, []*actT{cos, sin}
}

// qwen3VisionBlock lists a Qwen3VLVisionBlock's activations (l.251-275) for
// the micro-batch's images (one sequence of N patches): norm1 (LayerNorm),
// the attention over each image (qwenVisionAttention), the residual;
// norm2, linear_fc1, GELU(tanh) (saves its input), linear_fc2, the
// residual.
func qwen3VisionBlock(r *resolved, layer int) BlockActivations {
	m := r.m
	p := r.blockPlan(layer)
	im := *m.Image
	N := int64(r.MicroBatch) * int64(im.Tokens())
	b := newActBuilder(r, N)
	h, f, hd := int64(m.Hidden), int64(m.FFN), int64(m.HeadDim)
	x := b.external("input", b.size(h, p.resid), p.resid)
	cos := b.external("cos", b.size(hd, FP32), FP32)
	sin := b.external("sin", b.size(hd, FP32), FP32)

	a := b.norm(p, "norm1", "layernorm", x, h)
	// Without flash attention the blocks split q, k and v by cu_seqlens:
	// one chunk an image (l.222-244).
	y := qwenVisionAttention(b, p, m, a, cos, sin, [][2]int64{{int64(im.Tokens()), 1}}, int64(r.MicroBatch))
	b.hold(a)
	x1 := b.residualAdd(p, "attn_residual", h, x, y)
	a2 := b.norm(p, "norm2", "layernorm", x1, h)
	f /= towerShard(p) // a serving engine's TP rank's share (vision_tp.go)
	u := b.linear(p, "mlp.linear_fc1", "fc1", a2, h, f)
	g := b.op("mlp.gelu_tanh", b.size(f, u.dtype), u.dtype, list(u), u)
	y2 := b.linear(p, "mlp.linear_fc2", "fc2", g, f, h)
	b.hold(a2)
	out := b.residualAdd(p, "mlp_residual", h, x1, y2)
	out.keepAlive = true
	return b.summarize(x)
}
