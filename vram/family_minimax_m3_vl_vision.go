package vram

import (
	"errors"
	"fmt"
)

// MiniMax-M3's vision tower (transformers 5.23.0
// models/minimax_m3_vl/modeling_minimax_m3_vl.py, MiniMaxM3VLVisionModel
// l.1201-1251; its config is the wrapper's vision_config,
// MiniMaxM3VLVisionConfig, model_type minimax_m3_vl_vision): a CLIP-like
// encoder over Qwen2.5-VL's patches — a Conv3d patch embedding without a
// bias over temporal_patch_size frames (l.954-977), a LayerNorm before the
// blocks (pre_layrnorm, as the checkpoint spells it), no position table
// but a 3-D axial rotary embedding over part of each head (l.980-1034,
// transformers 5's two buffers), pre-LayerNorm blocks whose attention
// registers k_proj, v_proj, q_proj and out_proj, all biased (l.1066-1069),
// and a biased fc1 → GELU → fc2 MLP (l.1156-1168); no final norm. The
// spatial merge is the wrapper's projector's. A model's image size is the
// plan's (the processor resizes), the class's 2,016 by default. Its
// forward is not modelled yet (no towerEmbed): a plan with it is refused.
func init() {
	register(&family{
		name: "minimax_m3_vl_vision", source: "transformers/models/minimax_m3_vl/modeling_minimax_m3_vl.py (transformers 5.23.0)", kind: encoder, images: true, towerOnly: true,
		defaults:   Model{MLP: "gelu", Norm: "layernorm", Position: "rope", Bias: BiasAll, Head: "none"},
		fromConfig: m3VisionFromConfig,
		toConfig: func(m Model, c map[string]any) {
			im := m.Image
			c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["intermediate_size"] = m.Layers, m.Hidden, m.Heads, m.FFN
			c["num_channels"], c["image_size"], c["patch_size"] = im.Channels, im.Size, im.Patch
			c["temporal_patch_size"], c["spatial_merge_size"], c["hidden_act"] = im.TemporalPatch, im.Merge, "gelu"
		},
		check:   m3VisionCheck,
		tensors: m3VisionTensors,
		buffers: func(m Model, b *bufferList) {
			// compute_axial_rope_parameters (l.1009-1016): spatial_dim =
			// 2 · ((head_dim // 3) // 2) dimensions, every other one.
			n := int64(m.HeadDim/3) / 2
			b.add("rotary_emb.inv_freq", -1, FP32, n)
			b.add("rotary_emb.original_inv_freq", -1, FP32, n)
		},
	})
}

// m3VisionFromConfig reads a MiniMaxM3VLVisionConfig, each key missing
// taking the class's default (configuration_minimax_m3_vl.py:169-182).
func m3VisionFromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden = c.optInt("num_hidden_layers", 32), c.optInt("hidden_size", 1280)
	m.Heads, m.FFN = c.optInt("num_attention_heads", 16), c.optInt("intermediate_size", 5120)
	m.Image = &Image{Size: c.optInt("image_size", 2016), Patch: c.optInt("patch_size", 14), Channels: c.optInt("num_channels", 3),
		TemporalPatch: c.optInt("temporal_patch_size", 2), Merge: c.optInt("spatial_merge_size", 2)}
	if act := c.optString("hidden_act", "gelu"); act != "gelu" && c.err == nil {
		c.fail(fmt.Sprintf("hidden_act %q: the MiniMax-M3 vision MLP is modelled with gelu (the class's default)", act))
	}
}

// m3VisionCheck is the tower's rules.
func m3VisionCheck(m Model) error {
	im := m.Image
	switch {
	case im == nil:
		return errors.New("model.image (size, patch, channels, temporal_patch, merge) is required for a MiniMax-M3 vision tower")
	case im.ClassToken || im.Registers != 0 || im.Window != 0 || im.Deepstack != "" || im.PositionTable != 0:
		return errors.New("model.image: the MiniMax-M3 vision encoder has no class token, registers, windows, deepstack mergers or position table")
	case im.Patch < 1 || im.TemporalPatch < 1 || im.Merge < 1:
		return errors.New("model.image: patch (patch_size), temporal_patch and merge must be ≥ 1")
	case im.Size%(im.Patch*im.Merge) != 0:
		return fmt.Errorf("model.image.size = %d must be a multiple of patch × merge = %d (the processor resizes to one)", im.Size, im.Patch*im.Merge)
	case m.Heads < 1 || m.Hidden%m.Heads != 0:
		return fmt.Errorf("model.hidden = %d must be a multiple of heads = %d (num_attention_heads): the attention refuses another width (l.1059-1063)", m.Hidden, m.Heads)
	case m.MLP != "gelu" || m.Norm != "layernorm" || m.KVHeads != m.Heads || m.Bias != BiasAll:
		return errors.New("model: the MiniMax-M3 vision blocks are LayerNorm, biased multi-head attention and a biased gelu MLP")
	}
	return nil
}

// m3VisionTensors lists the tower's parameters in registration order: the
// patch embedding, pre_layrnorm, each block's attention (k, v, q, out),
// layer_norm1, MLP and layer_norm2 (l.1175-1178).
func m3VisionTensors(m Model, l *tensorList) {
	d := m.dims()
	im := m.Image
	if im == nil {
		im = &Image{}
	}
	l.add("embeddings.proj.weight", "other", d.h, int64(im.Channels), int64(im.TemporalPatch), int64(im.Patch), int64(im.Patch))
	l.norm("pre_layrnorm", true, d.h)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("layers.%d.", i)
		l.linear(p+"self_attn.k_proj", "k_proj", d.h, d.q, true)
		l.linear(p+"self_attn.v_proj", "v_proj", d.h, d.q, true)
		l.linear(p+"self_attn.q_proj", "q_proj", d.h, d.q, true)
		l.linear(p+"self_attn.out_proj", "o_proj", d.q, d.h, true)
		l.norm(p+"layer_norm1", true, d.h)
		l.linear(p+"mlp.fc1", "fc1", d.h, d.f, true)
		l.linear(p+"mlp.fc2", "fc2", d.f, d.h, true)
		l.norm(p+"layer_norm2", true, d.h)
	}
}
