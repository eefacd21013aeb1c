package vram

import (
	"errors"
	"fmt"
)

// The SigLIP vision encoder (transformers/models/siglip/modeling_siglip.py,
// SiglipVisionModel), Gemma 3's vision tower: a Conv2d patch embedding with
// a bias and learned positions, no class token and no norm on the
// embeddings, pre-LN blocks as CLIP's (SiglipEncoderLayer: layer_norm1,
// biased k/v/q/out projections, layer_norm2, an MLP of fc1 and fc2 with
// gelu_pytorch_tanh) and post_layernorm on every token's output
// (last_hidden_state). Its attention is eager_attention_forward (the
// softmax in fp32) or SDPA, never causal, with no mask for images.
// SiglipVisionTransformer adds a multihead-attention pooling head unless the
// config says vision_use_head false, as Gemma 3's does; the head is not
// modelled.
func init() {
	register(&family{
		name: "siglip_vision_model", source: "transformers/models/siglip/modeling_siglip.py", kind: encoder, images: true, towerOnly: true,
		defaults: Model{MLP: "gelu_pytorch_tanh", Norm: "layernorm", Position: "learned", Bias: BiasAll, Head: "none"},
		// SiglipVisionConfig.__init__'s defaults, which a wrapper's
		// vision_config may leave out.
		configDefaults: map[string]any{"hidden_size": 768.0, "intermediate_size": 3072.0, "num_hidden_layers": 12.0,
			"num_attention_heads": 12.0, "num_channels": 3.0, "image_size": 224.0, "patch_size": 16.0, "hidden_act": "gelu_pytorch_tanh"},
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden, m.Heads = c.int("num_hidden_layers"), c.int("hidden_size"), c.int("num_attention_heads")
			m.FFN = c.int("intermediate_size")
			m.Image = &Image{Size: c.int("image_size"), Patch: c.int("patch_size"), Channels: c.optInt("num_channels", 3)}
			if act := c.optString("hidden_act", ""); act != "" && act != "gelu_pytorch_tanh" {
				c.fail(fmt.Sprintf("hidden_act %q: the SigLIP vision encoder is modelled with gelu_pytorch_tanh", act))
			}
			// SiglipVisionTransformer: use_head = True unless the config
			// has vision_use_head.
			if c.optBool("vision_use_head", true) {
				c.fail("vision_use_head: SigLIP's attention-pooling head is not modelled (Gemma 3's tower sets vision_use_head false)")
			}
		},
		toConfig: func(m Model, c map[string]any) {
			c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["intermediate_size"] = m.Layers, m.Hidden, m.Heads, m.FFN
			c["image_size"], c["patch_size"], c["num_channels"] = m.Image.Size, m.Image.Patch, m.Image.Channels
			c["hidden_act"], c["vision_use_head"] = m.MLP, false
		},
		check: func(m Model) error {
			switch {
			case m.Image == nil:
				return errors.New("model.image (size, patch, channels) is required for family siglip_vision_model")
			case m.Image.ClassToken || m.Image.Registers != 0:
				return errors.New("model.image: the SigLIP vision encoder has no class token and no registers")
			case m.MLP != "gelu_pytorch_tanh":
				return fmt.Errorf("model.mlp %q: the SigLIP vision encoder's MLP is gelu_pytorch_tanh", m.MLP)
			case m.Head != "none":
				return fmt.Errorf("model.head %q: the SigLIP vision encoder returns its hidden states (head none)", m.Head)
			}
			return nil
		},
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			im := m.Image
			if im == nil {
				im = &Image{} // Validate reports it missing
			}
			// SiglipVisionEmbeddings: patch_embedding (with a bias), then
			// position_embedding.
			l.add("vision_model.embeddings.patch_embedding.weight", "other", d.h, int64(im.Channels), int64(im.Patch), int64(im.Patch))
			l.add("vision_model.embeddings.patch_embedding.bias", "other", d.h)
			l.add("vision_model.embeddings.position_embedding.weight", "position", int64(im.Tokens()), d.h)
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf("vision_model.encoder.layers.%d.", i)
				l.norm(p+"layer_norm1", true, d.h)
				// SiglipAttention creates k, v, q, then out.
				l.linear(p+"self_attn.k_proj", "k_proj", d.h, d.q, true)
				l.linear(p+"self_attn.v_proj", "v_proj", d.h, d.q, true)
				l.linear(p+"self_attn.q_proj", "q_proj", d.h, d.q, true)
				l.linear(p+"self_attn.out_proj", "o_proj", d.q, d.h, true)
				l.norm(p+"layer_norm2", true, d.h)
				l.linear(p+"mlp.fc1", "up_proj", d.h, d.f, true)
				l.linear(p+"mlp.fc2", "down_proj", d.f, d.h, true)
			}
			// post_layernorm normalises the last hidden state the wrapper
			// reads: it trains with the tower (not a head the features bypass).
			l.outside()
			l.norm("vision_model.post_layernorm", true, d.h)
		},
		buffers: func(m Model, b *bufferList) {
			if m.Image != nil {
				b.add("vision_model.embeddings.position_ids", -1, INT64, 1, int64(m.Image.Tokens()))
			}
		},
		// eager_attention_forward upcasts the softmax to fp32;
		// post_layernorm normalises every token (last_hidden_state).
		recipe:     func(Model, libVersion) recipe { return recipe{towerPostNorm: true} },
		towerEmbed: siglipEmbed,
	})
}

// siglipEmbed is SiglipVisionEmbeddings.forward as a tower: the pixels
// cast to the patch embedding's dtype, the convolution (it saves the
// pixels when its weight trains), the positions looked up and added.
func siglipEmbed(b *actBuilder, p blockPlan, m Model, n int64, grad bool) (*actT, []*actT) {
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
	b.tokens = n * int64(im.Tokens())
	x := b.op("vision.patch_embedding", b.size(hv, p.e), p.e, list(pixIn), saves...)
	if grad && p.autocast {
		b.side("vision.patch_embedding.weight_cast", p.e.Size(hv*int64(im.Channels*im.Patch*im.Patch)), p.e).weightCopy = true
	}
	pos := b.op("vision.position_embedding", p.resid.Size(int64(im.Tokens())*hv), p.resid, nil)
	d := promote(p.e, p.resid)
	return b.op("vision.embeddings.add_positions", b.size(hv, d), d, list(x, pos)), nil
}

// siglip896 is SigLIP so400m/14 at 896 px, Gemma 3's tower
// (google/gemma-3-4b-pt config.json vision_config).
func siglip896() Model {
	return Model{Family: "siglip_vision_model", Layers: 27, Hidden: 1152, Heads: 16, FFN: 4304,
		Image: &Image{Size: 896, Patch: 14, Channels: 3}}
}
