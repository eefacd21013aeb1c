package vram

import (
	"errors"
	"fmt"
	"math"
)

// Qwen3-Omni's vision encoder (transformers 5.23.0
// models/qwen3_omni_moe/modeling_qwen3_omni_moe.py,
// Qwen3OmniMoeVisionEncoder l.1129-1237; its config is the thinker's
// vision_config, Qwen3OmniMoeVisionEncoderConfig,
// configuration_qwen3_omni_moe.py l.74-104, model_type
// qwen3_omni_moe_vision_encoder), the vision tower of family
// qwen3_omni_moe: Qwen3-VL's encoder (family qwen3_vl_vision, whose
// tensors, embedding and blocks it shares) — a biased Conv3d patch
// embedding (l.1109-1118), a learned square position table bilinearly
// resampled to each image's grid, a 2-D rotary embedding, pre-LayerNorm
// blocks with a fused biased qkv and a gelu_pytorch_tanh MLP
// (l.1066-1107) — with transformers 5's two rotary buffers of head_dim /
// 4 frequencies (compute_axial_rope_parameters, l.1007-1025). Its mergers,
// the final one and one for each deepstack block (merger_list, merger:
// l.963-983, 1140-1169), are the wrapper's projector. A model's image size
// is the plan's (the processor resizes), 512×512 by default.
func init() {
	register(&family{
		name: "qwen3_omni_moe_vision_encoder", source: "transformers/models/qwen3_omni_moe/modeling_qwen3_omni_moe.py (transformers 5.23.0)",
		kind: encoder, images: true, towerOnly: true,
		defaults:   Model{MLP: "gelu_pytorch_tanh", Norm: "layernorm", Position: "rope", Bias: BiasAll, Head: "none"},
		fromConfig: qwen3OmniVisionFromConfig,
		toConfig: func(m Model, c map[string]any) {
			im := m.Image
			c["depth"], c["hidden_size"], c["num_heads"], c["intermediate_size"] = m.Layers, m.Hidden, m.Heads, m.FFN
			c["in_channels"], c["patch_size"], c["temporal_patch_size"] = im.Channels, im.Patch, im.TemporalPatch
			c["spatial_merge_size"], c["num_position_embeddings"], c["hidden_act"] = im.Merge, im.PositionTable, "gelu_pytorch_tanh"
			c["deepstack_visual_indexes"] = im.Deepstack.Indexes()
			c["image_size"] = im.Size
		},
		check:   qwen3OmniVisionCheck,
		tensors: qwen3VisionTensors,
		buffers: func(m Model, b *bufferList) {
			// torch.arange(0, head_dim // 2, 2): ceil(head_dim / 4).
			n := int64(m.HeadDim/2+1) / 2
			b.add("rotary_pos_emb.inv_freq", -1, FP32, n)
			b.add("rotary_pos_emb.original_inv_freq", -1, FP32, n)
		},
		towerEmbed: qwen3VisionEmbed,
		block:      qwen3VisionBlock,
		// No _input_embed_layer nor get_input_embeddings (l.1129-1237):
		// transformers 5 hooks no input embeddings in it
		// (tower_records5.go).
		unhookedTower: true,
	})
}

// qwen3OmniVisionFromConfig reads a Qwen3OmniMoeVisionEncoderConfig, each
// key left out taking the class's default (l.91-104; attribute_map:
// num_attention_heads is num_heads, num_hidden_layers depth). The wrapper
// reads out_hidden_size.
func qwen3OmniVisionFromConfig(c *hfReader, m *Model) {
	m.Layers = c.optInt("depth", c.optInt("num_hidden_layers", 27))
	m.Hidden, m.FFN = c.optInt("hidden_size", 1152), c.optInt("intermediate_size", 4304)
	m.Heads = c.optInt("num_heads", c.optInt("num_attention_heads", 16))
	// image_size is not a config key transformers reads; the engine
	// writes the plan's there (toConfig) and reads it back.
	im := &Image{Size: c.optInt("image_size", 512), Patch: c.optInt("patch_size", 16), Channels: c.optInt("in_channels", 3),
		TemporalPatch: c.optInt("temporal_patch_size", 2), Merge: c.optInt("spatial_merge_size", 2),
		PositionTable: c.optInt("num_position_embeddings", 2304), Deepstack: Blocks(8, 16, 24)}
	m.Image = im
	if act := c.optString("hidden_act", "gelu_pytorch_tanh"); act != "gelu_pytorch_tanh" && c.err == nil {
		c.fail(fmt.Sprintf("hidden_act %q: the Qwen3-Omni vision MLP is modelled with gelu_pytorch_tanh", act))
	}
	if raw, ok := c.c["deepstack_visual_indexes"]; ok && raw != nil {
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
}

// qwen3OmniVisionCheck is the tower's rules: Qwen3-VL's (its deepstack
// blocks increasing block indexes), the width split evenly over the heads.
func qwen3OmniVisionCheck(m Model) error {
	if m.Image == nil {
		return errors.New("model.image (size, patch, channels, temporal_patch, merge, position_table, deepstack) is required for a Qwen3-Omni vision tower")
	}
	if m.Heads < 1 || m.Hidden%m.Heads != 0 {
		return fmt.Errorf("model.hidden = %d must be a multiple of heads = %d (num_heads): the attention splits the width evenly", m.Hidden, m.Heads)
	}
	if m.Image.Patch < 1 {
		return errors.New("model.image.patch (patch_size) must be ≥ 1")
	}
	return qwen3VisionCheck(m)
}
