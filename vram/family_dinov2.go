package vram

import (
	"errors"
	"fmt"
)

// DINOv2 (transformers/models/dinov2/modeling_dinov2.py): ViT's pre-LN
// encoder over image patches with a learned LayerScale on each residual
// branch, a mask token, no pooler, eager attention's softmax in fp32, and
// (use_swiglu_ffn, the giant model) a SwiGLU MLP whose gate and up are the
// two halves of one weights_in matmul.
func init() {
	register(&family{
		name: "dinov2", source: "transformers/models/dinov2/modeling_dinov2.py", kind: encoder, images: true,
		defaults:   Model{MLP: "gelu", Norm: "layernorm", Position: "learned", Bias: BiasAll, Head: "none"},
		fromConfig: func(c *hfReader, m *Model) { dinov2Config(c, m, 0, 14) },
		toConfig:   func(m Model, c map[string]any) { writeDinov2Config(m, c) },
		check:      dinov2Check,
		recipe:     func(Model, libVersion) recipe { return recipe{layerScale: true, fusedGateUp: true} },
		tensors:    func(m Model, l *tensorList) { dinov2Tensors(m, l, false) },
		presets: map[string]Preset{
			"dinov2-large": {Model{Name: "facebook/dinov2-large", Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096,
				Image: &Image{Size: 518, Patch: 14, Channels: 3, ClassToken: true}}, hf("facebook/dinov2-large")},
			"dinov2-giant": {Model{Name: "facebook/dinov2-giant", Layers: 40, Hidden: 1536, Heads: 24, FFN: 4096, MLP: "swiglu",
				Image: &Image{Size: 518, Patch: 14, Channels: 3, ClassToken: true}}, hf("facebook/dinov2-giant")},
		},
	})
}

// dinov2Config reads a Dinov2Config (Dinov2WithRegistersConfig adds
// num_register_tokens): the MLP width from mlp_ratio, rounded for SwiGLU
// as Dinov2SwiGLUFFN does. patch is the class's patch_size (14 for
// Dinov2Config, 16 for Dinov2WithRegistersConfig).
func dinov2Config(c *hfReader, m *Model, registers, patch int) {
	m.Layers = c.optInt("num_hidden_layers", 12)
	m.Hidden = c.optInt("hidden_size", 768)
	m.Heads = c.optInt("num_attention_heads", 12)
	ratio := c.optFloat("mlp_ratio", 4)
	f := int(float64(m.Hidden) * ratio)
	if c.optBool("use_swiglu_ffn", false) {
		m.MLP = "swiglu"
		f = (int(float64(f)*2/3) + 7) / 8 * 8
	}
	m.FFN = f
	if c.optFloat("drop_path_rate", 0) != 0 {
		c.fail(fmt.Sprintf("drop_path_rate = %v: stochastic depth is not modelled", c.optFloat("drop_path_rate", 0)))
	}
	m.Image = &Image{Size: c.optInt("image_size", 224), Patch: c.optInt("patch_size", patch), Channels: c.optInt("num_channels", 3), ClassToken: true, Registers: registers,
		NoMaskToken: !c.optBool("use_mask_token", true)}
}

func writeDinov2Config(m Model, c map[string]any) {
	c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"] = m.Layers, m.Hidden, m.Heads
	c["mlp_ratio"] = float64(m.FFN) / float64(m.Hidden)
	if m.MLP == "swiglu" {
		// Dinov2SwiGLUFFN: (int(h·ratio·2/3) + 7) // 8 · 8 = ffn for ratio 1.5·ffn/h.
		c["use_swiglu_ffn"], c["mlp_ratio"] = true, 1.5*float64(m.FFN)/float64(m.Hidden)
	}
	if im := m.Image; im != nil {
		c["image_size"], c["patch_size"], c["num_channels"] = im.Size, im.Patch, im.Channels
		if im.Registers > 0 {
			c["num_register_tokens"] = im.Registers
		}
		if im.NoMaskToken {
			c["use_mask_token"] = false
		}
	}
}

func dinov2Check(m Model) error {
	switch {
	case m.Image == nil:
		return errors.New("model.image (size, patch, channels) is required for DINOv2")
	case m.MLP != "gelu" && m.MLP != "swiglu":
		return fmt.Errorf("model.mlp %q: DINOv2 has a GELU MLP or a SwiGLU one (use_swiglu_ffn)", m.MLP)
	case m.Pooler || m.Head != "none":
		return errors.New("model: DINOv2 has no pooler or task head here (head none)")
	}
	return nil
}

// dinov2Tensors lists Dinov2Model's parameters (with register tokens for
// Dinov2WithRegistersModel).
func dinov2Tensors(m Model, l *tensorList, registers bool) {
	d := m.dims()
	im := m.Image
	if im == nil {
		im = &Image{} // Validate reports it missing
	}
	l.add("embeddings.cls_token", "other", 1, 1, d.h)
	if !im.NoMaskToken {
		// Dinov2Embeddings: a mask token only with config.use_mask_token.
		l.add("embeddings.mask_token", "other", 1, d.h)
	}
	if registers {
		l.add("embeddings.register_tokens", "other", 1, int64(im.Registers), d.h)
	}
	patches := int64(im.Tokens() - im.Registers)
	l.add("embeddings.position_embeddings", "position", 1, patches, d.h)
	l.add("embeddings.patch_embeddings.projection.weight", "other", d.h, int64(im.Channels), int64(im.Patch), int64(im.Patch))
	l.add("embeddings.patch_embeddings.projection.bias", "bias", d.h)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("encoder.layer.%d.", i)
		l.norm(p+"norm1", true, d.h)
		l.linear(p+"attention.attention.query", "q_proj", d.h, d.q, true)
		l.linear(p+"attention.attention.key", "k_proj", d.h, d.q, true)
		l.linear(p+"attention.attention.value", "v_proj", d.h, d.q, true)
		l.linear(p+"attention.output.dense", "o_proj", d.q, d.h, true)
		l.add(p+"layer_scale1.lambda1", "other", d.h)
		l.norm(p+"norm2", true, d.h)
		if m.MLP == "swiglu" {
			l.linear(p+"mlp.weights_in", "gate_up_proj", d.h, 2*d.f, true, Part{"gate_proj", d.f}, Part{"up_proj", d.f})
			l.linear(p+"mlp.weights_out", "down_proj", d.f, d.h, true)
		} else {
			l.linear(p+"mlp.fc1", "up_proj", d.h, d.f, true)
			l.linear(p+"mlp.fc2", "down_proj", d.f, d.h, true)
		}
		l.add(p+"layer_scale2.lambda1", "other", d.h)
	}
	l.headSide()
	l.norm("layernorm", true, d.h)
}
