package vram

import (
	"errors"
	"fmt"
)

// The CLIP vision encoder (transformers/models/clip/modeling_clip.py,
// CLIPVisionModel), LLaVA's vision tower: a Conv2d patch embedding without
// bias, a class embedding and learned positions, a LayerNorm on the
// embeddings (pre_layrnorm), pre-LN blocks with biased q/k/v/out
// projections and a quick-GELU MLP (fc1, fc2), and post_layernorm on the
// class token's output only (the pooled output). Its attention is
// eager_attention_forward (the softmax in fp32) or SDPA, never causal and
// with no mask for images. A key config.json (or a wrapper's
// vision_config) leaves out takes the class's default
// (configuration_clip.py:97-109, CLIPVisionConfig, transformers 5.23.0).
func init() {
	register(&family{
		name: "clip_vision_model", source: "transformers/models/clip/modeling_clip.py", kind: encoder, images: true,
		defaults: Model{MLP: "quick_gelu", Norm: "layernorm", Position: "learned", Bias: BiasAll, Head: "none"},
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden = c.optInt("num_hidden_layers", 12), c.optInt("hidden_size", 768)
			m.Heads, m.FFN = c.optInt("num_attention_heads", 12), c.optInt("intermediate_size", 3072)
			m.Image = &Image{Size: c.optInt("image_size", 224), Patch: c.optInt("patch_size", 32), Channels: c.optInt("num_channels", 3), ClassToken: true}
			switch act := c.optString("hidden_act", ""); act {
			case "quick_gelu", "":
			case "gelu":
				m.MLP = "gelu"
			default:
				c.fail(fmt.Sprintf("hidden_act %q: the CLIP vision encoder is modelled with quick_gelu or gelu", act))
			}
		},
		toConfig: func(m Model, c map[string]any) {
			c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["intermediate_size"] = m.Layers, m.Hidden, m.Heads, m.FFN
			c["image_size"], c["patch_size"], c["num_channels"] = m.Image.Size, m.Image.Patch, m.Image.Channels
			c["hidden_act"] = m.MLP
		},
		check: func(m Model) error {
			switch {
			case m.Image == nil:
				return errors.New("model.image (size, patch, channels) is required for family clip_vision_model")
			case !m.Image.ClassToken || m.Image.Registers != 0:
				return errors.New("model.image: the CLIP vision encoder has a class token and no registers")
			case m.MLP != "quick_gelu" && m.MLP != "gelu":
				return fmt.Errorf("model.mlp %q: the CLIP vision encoder's MLP is quick_gelu (or gelu)", m.MLP)
			case m.Head != "none":
				return fmt.Errorf("model.head %q: the CLIP vision encoder returns its hidden states (head none)", m.Head)
			}
			return nil
		},
		tensors: clipVisionTensors,
		buffers: func(m Model, b *bufferList) {
			if m.Image != nil {
				b.add("vision_model.embeddings.position_ids", -1, INT64, 1, int64(m.Image.Tokens()))
			}
		},
		// eager_attention_forward upcasts the softmax to fp32; the
		// embeddings pass through pre_layrnorm; post_layernorm reads the
		// class token only.
		recipe:     func(Model, libVersion) recipe { return recipe{embedNorm: true, pooledNorm: true} },
		towerEmbed: clipVisionEmbed,
		presets: map[string]Preset{
			"clip-vit-large-patch14-336": {Model{Name: "clip-vit-large-patch14-336", Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096,
				Image: &Image{Size: 336, Patch: 14, Channels: 3, ClassToken: true}}, hf("openai/clip-vit-large-patch14-336")},
		},
	})
}

// clipVisionTensors lists the encoder's parameters in registration order.
func clipVisionTensors(m Model, l *tensorList) {
	d := m.dims()
	im := m.Image
	if im == nil {
		im = &Image{} // Validate reports it missing
	}
	// CLIPVisionEmbeddings: class_embedding, patch_embedding,
	// position_embedding, in that order.
	l.add("vision_model.embeddings.class_embedding", "other", d.h)
	l.add("vision_model.embeddings.patch_embedding.weight", "other", d.h, int64(im.Channels), int64(im.Patch), int64(im.Patch))
	l.add("vision_model.embeddings.position_embedding.weight", "position", int64(im.Tokens()), d.h)
	l.norm("vision_model.pre_layrnorm", true, d.h)
	for i := 0; i < m.Layers; i++ {
		l.block(i)
		p := fmt.Sprintf("vision_model.encoder.layers.%d.", i)
		// CLIPAttention creates k, v, q, then out.
		l.linear(p+"self_attn.k_proj", "k_proj", d.h, d.q, true)
		l.linear(p+"self_attn.v_proj", "v_proj", d.h, d.q, true)
		l.linear(p+"self_attn.q_proj", "q_proj", d.h, d.q, true)
		l.linear(p+"self_attn.out_proj", "o_proj", d.q, d.h, true)
		l.norm(p+"layer_norm1", true, d.h)
		l.linear(p+"mlp.fc1", "up_proj", d.h, d.f, true)
		l.linear(p+"mlp.fc2", "down_proj", d.f, d.h, true)
		l.norm(p+"layer_norm2", true, d.h)
	}
	l.headSide()
	l.norm("vision_model.post_layernorm", true, d.h)
}

// clipVisionEmbed is CLIPVisionEmbeddings.forward as a tower: the pixels cast to the
// patch embedding's dtype, the convolution (it saves the pixels
// when its weight trains), the class token concatenated in front
// (promoted to the class embedding's dtype), the positions added,
// then pre_layrnorm.
func clipVisionEmbed(b *actBuilder, p blockPlan, m Model, n int64, grad bool) (*actT, []*actT) {
	im := *m.Image
	hv := int64(m.Hidden)
	pixels := n * int64(im.Channels*im.Size*im.Size)
	px := b.batchInput("pixel_values", FP32.Size(pixels), FP32)
	if p.baseDType != FP32 {
		px = b.op("vision.pixel_values.to", p.baseDType.Size(pixels), p.baseDType, list(px))
	}
	pixIn := b.castIn(p, "vision.patch_embedding.pixels", px)
	var saves []*actT
	if grad {
		saves = append(saves, pixIn)
	}
	b.tokens = n * int64(im.Tokens()-1)
	x := b.op("vision.patch_embedding", b.size(hv, p.e), p.e, list(pixIn), saves...)
	if grad && p.autocast {
		b.side("vision.patch_embedding.weight_cast", p.e.Size(hv*int64(im.Channels*im.Patch*im.Patch)), p.e).weightCopy = true
	}
	b.tokens = n * int64(im.Tokens())
	d := promote(p.e, p.resid)
	x = b.op("vision.embeddings.cat", b.size(hv, d), d, list(x))
	pos := b.op("vision.position_embedding", p.resid.Size(int64(im.Tokens())*hv), p.resid, nil)
	x = b.op("vision.embeddings.add_positions", b.size(hv, p.resid), p.resid, list(x, pos))
	return b.norm(p, "vision.pre_layrnorm", m.Norm, x, hv), nil
}
