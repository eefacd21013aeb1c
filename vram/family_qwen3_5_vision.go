package vram

import (
	"errors"
	"fmt"
	"math"
)

// The Qwen3.5 vision encoder (transformers 5.23.0
// models/qwen3_5/modeling_qwen3_5.py, Qwen3_5VisionModel l.1117-1150), the
// tower of qwen3_5 and qwen3_5_moe models (its config is their
// vision_config, Qwen3_5VisionConfig or Qwen3_5MoeVisionConfig, model_type
// qwen3_5_vision or qwen3_5_moe_vision): Qwen3-VL's encoder (family
// qwen3_vl_vision, whose tensors and activations it shares) without the
// deepstack mergers — a biased Conv3d patch embedding, a learned square
// position table bilinearly resampled to each image's grid, a 2D rotary
// embedding, pre-LayerNorm blocks with a fused biased qkv and a
// gelu_pytorch_tanh MLP (l.941-1115). Its one PatchMerger (l.974-991,
// 1145-1148) is the wrapper's projector. Its rotary embedding keeps
// transformers 5's two buffers (l.80-91). A model's image size is the
// plan's (the processor resizes), 512×512 by default.
func init() {
	register(&family{
		name: "qwen3_5_vision", source: "transformers/models/qwen3_5/modeling_qwen3_5.py (transformers 5.23.0)", kind: encoder, images: true, towerOnly: true,
		defaults:   Model{MLP: "gelu_pytorch_tanh", Norm: "layernorm", Position: "rope", Bias: BiasAll, Head: "none"},
		fromConfig: qwen35VisionFromConfig,
		toConfig: func(m Model, c map[string]any) {
			im := m.Image
			c["depth"], c["hidden_size"], c["num_heads"], c["intermediate_size"] = m.Layers, m.Hidden, m.Heads, m.FFN
			c["in_channels"], c["patch_size"], c["temporal_patch_size"] = im.Channels, im.Patch, im.TemporalPatch
			c["spatial_merge_size"], c["num_position_embeddings"], c["hidden_act"] = im.Merge, im.PositionTable, "gelu_pytorch_tanh"
			c["image_size"] = im.Size
		},
		check:   qwen35VisionCheck,
		tensors: qwen3VisionTensors,
		buffers: func(m Model, b *bufferList) {
			// compute_axial_rope_parameters (l.94-112): head_dim //
			// 2 spatial dimensions, every other one.
			n := int64(m.HeadDim/2+1) / 2
			b.add("rotary_pos_emb.inv_freq", -1, FP32, n)
			b.add("rotary_pos_emb.original_inv_freq", -1, FP32, n)
		},
		towerEmbed: qwen3VisionEmbed,
		block:      qwen3VisionBlock,
		// No _input_embed_layer: transformers 5 hooks no input embeddings
		// in it (tower_records5.go).
		unhookedTower: true,
	})
}

// qwen35VisionFromConfig reads a Qwen3_5VisionConfig, each key missing
// taking the class's default (configuration_qwen3_5.py l.137-147;
// attribute_map: num_attention_heads is num_heads, num_hidden_layers
// depth). The wrapper reads out_hidden_size.
func qwen35VisionFromConfig(c *hfReader, m *Model) {
	m.Layers = c.optInt("depth", c.optInt("num_hidden_layers", 27))
	m.Hidden, m.FFN = c.optInt("hidden_size", 1152), c.optInt("intermediate_size", 4304)
	m.Heads = c.optInt("num_heads", c.optInt("num_attention_heads", 16))
	// image_size is not a config key transformers reads; the engine
	// writes the plan's there (toConfig) and reads it back.
	m.Image = &Image{Size: c.optInt("image_size", 512), Patch: c.optInt("patch_size", 16), Channels: c.optInt("in_channels", 3),
		TemporalPatch: c.optInt("temporal_patch_size", 2), Merge: c.optInt("spatial_merge_size", 2),
		PositionTable: c.optInt("num_position_embeddings", 2304)}
	if act := c.optString("hidden_act", "gelu_pytorch_tanh"); act != "gelu_pytorch_tanh" && c.err == nil {
		c.fail(fmt.Sprintf("hidden_act %q: the Qwen3.5 vision MLP is modelled with gelu_pytorch_tanh", act))
	}
}

// qwen35VisionCheck is the tower's rules.
func qwen35VisionCheck(m Model) error {
	im := m.Image
	if im == nil {
		return errors.New("model.image (size, patch, channels, temporal_patch, merge, position_table) is required for a Qwen3.5 vision tower")
	}
	side := int(math.Sqrt(float64(im.PositionTable)))
	switch {
	case im.ClassToken || im.Registers != 0 || im.Window != 0 || im.Deepstack != "":
		return errors.New("model.image: the Qwen3.5 vision encoder has no class token, registers, windows or deepstack mergers")
	case im.Patch < 1 || im.TemporalPatch < 1 || im.Merge < 1:
		return errors.New("model.image: patch (patch_size), temporal_patch and merge must be ≥ 1")
	case im.Size%(im.Patch*im.Merge) != 0:
		return fmt.Errorf("model.image.size = %d must be a multiple of patch × merge = %d (the processor resizes to one)", im.Size, im.Patch*im.Merge)
	case im.PositionTable < 1 || side*side != im.PositionTable:
		return fmt.Errorf("model.image.position_table = %d (num_position_embeddings) must be a positive square: the table is a square grid", im.PositionTable)
	case m.Heads < 1 || m.Hidden%m.Heads != 0:
		return fmt.Errorf("model.hidden = %d must be a multiple of heads = %d (num_heads): the attention splits the width evenly", m.Hidden, m.Heads)
	case m.MLP != "gelu_pytorch_tanh" || m.Norm != "layernorm" || m.KVHeads != m.Heads:
		return errors.New("model: the Qwen3.5 vision blocks are LayerNorm, multi-head attention and a gelu_pytorch_tanh MLP")
	}
	return nil
}
