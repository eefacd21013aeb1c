package vram

import (
	"errors"
	"fmt"
	"math"
)

// Kimi-K2.5's vision tower, MoonViT (transformers 5.23.0
// models/kimi_k25/modeling_kimi_k25.py, Kimi_K25VisionModel l.469-551;
// its config is the wrapper's vision_config, Kimi_K25VisionConfig,
// model_type kimi_k25_vision): a biased Conv2d patch embedding (l.162-174)
// plus a learned pos_emb_height × pos_emb_width position table resampled
// bicubically to each image's patch grid and a fixed sinusoidal table over
// a video's frames (Kimi_K25VisionPositionEmbeddings l.117-159: the
// parameter position_embeddings, the non-persistent fp32 buffer
// time_position_embeddings of pos_emb_time + 1 rows), a 2-D axial rotary
// embedding over whole heads (l.177-235, transformers 5's two buffers),
// pre-LayerNorm blocks (norm1, norm2, then the attention, which registers
// its output proj before q_proj, k_proj and v_proj, all biased, l.307-321,
// then a biased fc1 → gelu_pytorch_tanh → fc2 MLP, l.238-246, 394-400)
// and a final LayerNorm (l.484) every token passes through before the
// temporal pooling of each merge × merge neighbourhood (l.545-546) that the
// wrapper's projector reads. A model's image size is the plan's (the
// processor resizes); by default the largest square the processor passes:
// max_patches 16,384 = 128² patches of 14 px (image_processing_kimi_k25.py
// l.90, 96), 1,792 px. Its forward is family_kimi_k25_vision_forward.go.
func init() {
	register(&family{
		name: "kimi_k25_vision", source: "transformers/models/kimi_k25/modeling_kimi_k25.py (transformers 5.23.0)", kind: encoder, images: true, towerOnly: true,
		defaults:   Model{MLP: "gelu_pytorch_tanh", Norm: "layernorm", Position: "rope", Bias: BiasAll, Head: "none"},
		fromConfig: k25VisionFromConfig,
		toConfig: func(m Model, c map[string]any) {
			im := m.Image
			side := int(math.Sqrt(float64(im.PositionTable)))
			c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["intermediate_size"] = m.Layers, m.Hidden, m.Heads, m.FFN
			c["patch_size"], c["pos_emb_height"], c["pos_emb_width"], c["pos_emb_time"] = im.Patch, side, side, im.TimeTable
			c["merge_kernel_size"], c["hidden_act"] = []int{im.Merge, im.Merge}, "gelu_pytorch_tanh"
			c["image_size"] = im.Size
		},
		check:   k25VisionCheck,
		tensors: k25VisionTensors,
		// final_layernorm runs on every patch before the pooling (l.544).
		recipe:     func(Model, libVersion) recipe { return recipe{towerPostNorm: true} },
		towerEmbed: k25VisionEmbed,
		block:      k25VisionBlock,
		// No _input_embed_layer: Kimi_K25VisionModel holds patch_embed,
		// rotary_emb, layers and final_layernorm (l.474-485), none of the
		// names get_input_embeddings looks for (tower_records5.go).
		unhookedTower: true,
		buffers: func(m Model, b *bufferList) {
			// compute_pos_embed (l.135-141): a zero row, then sin | cos of
			// each frame over the width; compute_axial_rope_parameters
			// (l.197-216): head_dim // 2 spatial dimensions, every other one.
			if m.Image != nil {
				b.add("patch_embed.pos_emb.time_position_embeddings", -1, FP32, int64(max(0, m.Image.TimeTable))+1, int64(m.Hidden))
			}
			n := int64(m.HeadDim/2+1) / 2
			b.add("rotary_emb.inv_freq", -1, FP32, n)
			b.add("rotary_emb.original_inv_freq", -1, FP32, n)
		},
	})
}

// k25VisionFromConfig reads a Kimi_K25VisionConfig, each key missing
// taking the class's default (configuration_kimi_k25.py:40-51). The
// release's remote-code names (init_pos_emb_height, …) are not the
// class's fields and transformers does not read them: neither does the
// engine.
func k25VisionFromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden = c.optInt("num_hidden_layers", 27), c.optInt("hidden_size", 1152)
	m.Heads, m.FFN = c.optInt("num_attention_heads", 16), c.optInt("intermediate_size", 4304)
	h, w := c.optInt("pos_emb_height", 64), c.optInt("pos_emb_width", 64)
	// image_size is not a config key transformers reads; the engine
	// writes the plan's there (toConfig) and reads it back.
	m.Image = &Image{Size: c.optInt("image_size", 1792), Patch: c.optInt("patch_size", 14), Channels: 3,
		PositionTable: h * w, TimeTable: c.optInt("pos_emb_time", 4), Merge: 2}
	if c.err != nil {
		return
	}
	switch act := c.optString("hidden_act", "gelu_pytorch_tanh"); {
	case act != "gelu_pytorch_tanh":
		c.fail(fmt.Sprintf("hidden_act %q: the Kimi-K2.5 vision MLP is modelled with gelu_pytorch_tanh (the class's default)", act))
	case h != w:
		// The forward resamples the table as a square of pos_emb_height
		// a side (num_grid_per_side, l.127, 148-154).
		c.fail(fmt.Sprintf("pos_emb_height = %d and pos_emb_width = %d: the table is resampled as a square of pos_emb_height a side (modeling_kimi_k25.py:127)", h, w))
	}
	if k := c.optList("merge_kernel_size"); k != nil {
		var a, b float64
		if len(k) == 2 {
			a, _ = k[0].(float64)
			b, _ = k[1].(float64)
		}
		if a != b || a < 1 || a > maxChannels || a != math.Trunc(a) {
			c.fail(fmt.Sprintf("merge_kernel_size %v: a square kernel of two equal positive sides is modelled", k))
			return
		}
		m.Image.Merge = int(a)
	}
	// head_dim is no field of the class, but the rotary embedding reads
	// one a config sets (l.211) where the attention splits hidden_size.
	if hd := c.optInt("head_dim", 0); hd != 0 && (m.Heads < 1 || hd != m.Hidden/m.Heads) && c.err == nil {
		c.fail(fmt.Sprintf("head_dim = %d: the attention splits hidden_size = %d into num_attention_heads = %d heads (l.312), which the rotary embedding must cover", hd, m.Hidden, m.Heads))
	}
}

// k25VisionCheck is the tower's rules.
func k25VisionCheck(m Model) error {
	im := m.Image
	if im == nil {
		return errors.New("model.image (size, patch, channels, merge, position_table, time_table) is required for a Kimi-K2.5 vision tower")
	}
	side := int(math.Sqrt(float64(im.PositionTable)))
	switch {
	case im.ClassToken || im.Registers != 0 || im.Window != 0 || im.Deepstack != "" || im.TemporalPatch > 1 || im.AdapterDim != 0 || im.Standardize || im.ClippedLinears:
		return errors.New("model.image: the Kimi-K2.5 vision encoder has no class token, registers, windows, deepstack mergers, temporal patches, adapter, standardization or clipped linears")
	case im.Channels != 3:
		return fmt.Errorf("model.image.channels = %d: the patch embedding reads 3 channels (nn.Conv2d(3, …), l.168)", im.Channels)
	case im.Patch < 1 || im.Merge < 1:
		return errors.New("model.image: patch (patch_size) and merge (merge_kernel_size) must be ≥ 1")
	case im.Size%(im.Patch*im.Merge) != 0:
		return fmt.Errorf("model.image.size = %d must be a multiple of patch × merge = %d (the processor pads to one)", im.Size, im.Patch*im.Merge)
	case im.PositionTable < 1 || side*side != im.PositionTable:
		return fmt.Errorf("model.image.position_table = %d (pos_emb_height × pos_emb_width) must be a positive square: the table is resampled as a square grid", im.PositionTable)
	case im.TimeTable < 0 || im.TimeTable > maxImageSide:
		return fmt.Errorf("model.image.time_table = %d (pos_emb_time) must be in [0, %d]", im.TimeTable, maxImageSide)
	case m.Heads < 1 || m.Hidden%m.Heads != 0:
		return fmt.Errorf("model.hidden = %d must be a multiple of heads = %d (num_attention_heads): the attention splits the width evenly (l.312)", m.Hidden, m.Heads)
	case m.Hidden%2 != 0:
		return fmt.Errorf("model.hidden = %d must be even: the frame table's sin | cos rows fill the width (l.137-141)", m.Hidden)
	case m.MLP != "gelu_pytorch_tanh" || m.Norm != "layernorm" || m.KVHeads != m.Heads || m.Bias != BiasAll:
		return errors.New("model: the Kimi-K2.5 vision blocks are LayerNorm, biased multi-head attention and a biased gelu_pytorch_tanh MLP")
	}
	return nil
}

// k25VisionTensors lists the tower's parameters in registration order: the
// patch embedding (proj, then the position table), each block's norm1,
// norm2, attention (proj, q, k, v) and MLP (l.397-400), the final norm
// (l.480-484).
func k25VisionTensors(m Model, l *tensorList) {
	d := m.dims()
	im := m.Image
	if im == nil {
		im = &Image{}
	}
	side := int64(math.Sqrt(float64(im.PositionTable)))
	p := int64(im.Patch)
	l.add("patch_embed.proj.weight", "other", d.h, 3, p, p)
	l.add("patch_embed.proj.bias", "bias", d.h)
	l.add("patch_embed.pos_emb.position_embeddings", "position", side, side, d.h)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("layers.%d.", i)
		l.norm(p+"norm1", true, d.h)
		l.norm(p+"norm2", true, d.h)
		l.linear(p+"attn.proj", "o_proj", d.q, d.h, true)
		l.linear(p+"attn.q_proj", "q_proj", d.h, d.q, true)
		l.linear(p+"attn.k_proj", "k_proj", d.h, d.q, true)
		l.linear(p+"attn.v_proj", "v_proj", d.h, d.q, true)
		l.linear(p+"mlp.fc1", "fc1", d.h, d.f, true)
		l.linear(p+"mlp.fc2", "fc2", d.f, d.h, true)
	}
	// final_layernorm normalises every token the projector reads: it
	// trains with the tower (not a head the features bypass).
	l.outside()
	l.norm("final_layernorm", true, d.h)
}
