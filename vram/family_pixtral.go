package vram

import (
	"errors"
	"fmt"
)

// Pixtral's vision encoder (transformers/models/pixtral/modeling_pixtral.py,
// PixtralVisionModel), the tower of Mistral 3 (Mistral Small 3.1/3.2): a
// Conv2d patch embedding without a bias, every image's patches flattened
// and concatenated into one sequence (torch.cat), ln_pre (an RMSNorm), a
// 2D rotary embedding (cos and sin of every patch, in fp32 and cast to the
// hidden states' dtype) and a block-diagonal float mask over the whole
// sequence (generate_block_attention_mask: images attend within
// themselves), both built once and read by every block; pre-RMSNorm
// blocks with bias-free q, k, v, o and a gated MLP. Attention runs over the
// concatenation — batch one, every image's patches — so eager scores and
// the mask grow with the square of the images' patches together. The
// plan's images are image_size pixels square (the processor's longest
// edge, 1540 as released).
func init() {
	register(&family{
		name: "pixtral", source: "transformers/models/pixtral/modeling_pixtral.py", kind: encoder, images: true, towerOnly: true,
		defaults: Model{MLP: "swiglu", Norm: "rmsnorm", Position: "rope", Bias: BiasNone, Head: "none"},
		// PixtralVisionConfig.__init__'s defaults.
		configDefaults: map[string]any{"hidden_size": 1024.0, "intermediate_size": 4096.0, "num_hidden_layers": 24.0,
			"num_attention_heads": 16.0, "num_channels": 3.0, "image_size": 1024.0, "patch_size": 16.0, "hidden_act": "gelu"},
		fromConfig: func(c *hfReader, m *Model) {
			m.Layers, m.Hidden, m.Heads, m.FFN = c.int("num_hidden_layers"), c.int("hidden_size"), c.int("num_attention_heads"), c.int("intermediate_size")
			if hd := c.optInt("head_dim", 0); hd != 0 && m.Heads > 0 && hd*m.Heads != m.Hidden {
				c.fail(fmt.Sprintf("head_dim %d: Pixtral's attention splits hidden_size %d over %d heads", hd, m.Hidden, m.Heads))
			}
			switch act := c.optString("hidden_act", "gelu"); act {
			case "silu":
				m.MLP = "swiglu"
			case "gelu":
				m.MLP = "geglu"
			default:
				c.fail(fmt.Sprintf("hidden_act %q: Pixtral's gated MLP is modelled with silu or gelu", act))
			}
			m.Image = &Image{Size: c.int("image_size"), Patch: c.int("patch_size"), Channels: c.optInt("num_channels", 3)}
		},
		toConfig: func(m Model, c map[string]any) {
			c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["intermediate_size"] = m.Layers, m.Hidden, m.Heads, m.FFN
			c["image_size"], c["patch_size"], c["num_channels"] = m.Image.Size, m.Image.Patch, m.Image.Channels
			c["head_dim"] = m.Hidden / max(1, m.Heads)
			c["hidden_act"] = map[string]string{"swiglu": "silu", "geglu": "gelu"}[m.MLP]
		},
		check: func(m Model) error {
			switch {
			case m.Image == nil:
				return errors.New("model.image (size, patch, channels) is required for family pixtral")
			case m.Image.ClassToken || m.Image.Registers != 0:
				return errors.New("model.image: Pixtral's vision encoder has no class token and no registers")
			case m.MLP != "swiglu" && m.MLP != "geglu":
				return fmt.Errorf("model.mlp %q: Pixtral's MLP is gated (swiglu for silu, geglu for gelu)", m.MLP)
			case m.Norm != "rmsnorm" || m.Head != "none":
				return fmt.Errorf("model: Pixtral's vision encoder has RMSNorms and no head (norm %q, head %q)", m.Norm, m.Head)
			}
			return nil
		},
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			im := m.Image
			if im == nil {
				im = &Image{} // Validate reports it missing
			}
			l.add("patch_conv.weight", "other", d.h, int64(im.Channels), int64(im.Patch), int64(im.Patch))
			l.norm("ln_pre", false, d.h)
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf("transformer.layers.%d.", i)
				// PixtralAttentionLayer creates attention_norm, feed_forward,
				// attention (k, v, q, o), ffn_norm.
				l.norm(p+"attention_norm", false, d.h)
				mlpGated(m, l, p+"feed_forward.", d.f, -1)
				l.linear(p+"attention.k_proj", "k_proj", d.h, d.q, false)
				l.linear(p+"attention.v_proj", "v_proj", d.h, d.q, false)
				l.linear(p+"attention.q_proj", "q_proj", d.h, d.q, false)
				l.linear(p+"attention.o_proj", "o_proj", d.q, d.h, false)
				l.norm(p+"ffn_norm", false, d.h)
			}
		},
		buffers: func(m Model, b *bufferList) {
			// PixtralRotaryEmbedding's inv_freq: every patch position of
			// the largest image, head_dim wide (cat of its two halves).
			if im := m.Image; im != nil && im.Patch > 0 {
				side := int64(im.Size / im.Patch)
				b.add("patch_positional_embedding.inv_freq", -1, FP32, side*side, int64(m.Hidden/max(1, m.Heads)))
			}
		},
		// The tower attends over every image's patches at once, under the
		// shared block-diagonal mask its embedding builds.
		recipe:     func(Model, libVersion) recipe { return recipe{towerOneSequence: true} },
		towerEmbed: pixtralEmbed,
	})
}

// pixtralEmbed is PixtralVisionModel.forward up to the first block: the
// pixels (in the weights' dtype: get_image_features does not cast them),
// the patch convolution (it saves the pixels when its weight trains), the
// patches of every image flattened and concatenated (a copy), ln_pre, the
// rotary embedding's cos and sin (fp32, cast to the hidden states' dtype)
// and the block-diagonal mask in that dtype, which the blocks share.
func pixtralEmbed(b *actBuilder, p blockPlan, m Model, n int64, grad bool) (*actT, []*actT) {
	im := *m.Image
	hv, hd := int64(m.Hidden), int64(m.Hidden/m.Heads)
	N := n * int64(im.Tokens())
	pixels := n * int64(im.Channels*im.Size*im.Size)
	px := b.batchInput("pixel_values", p.baseDType.Size(pixels), p.baseDType)
	pixIn := b.castIn(p, "vision.patch_conv.pixels", px)
	var saves []*actT
	if grad {
		saves = append(saves, pixIn)
	}
	b.tokens = N
	x := b.op("vision.patch_conv", b.size(hv, p.e), p.e, list(pixIn), saves...)
	if grad && p.autocast {
		b.side("vision.patch_conv.weight_cast", p.e.Size(hv*int64(im.Channels*im.Patch*im.Patch)), p.e).weightCopy = true
	}
	x = b.op("vision.patch_embeds.cat", b.size(hv, p.e), p.e, list(x))
	x = b.norm(p, "vision.ln_pre", m.Norm, x, hv)
	freqs := b.op("vision.rotary.freqs", b.size(hd, FP32), FP32, nil)
	cos := b.op("vision.rotary.cos", b.size(hd, FP32), FP32, list(freqs))
	sin := b.op("vision.rotary.sin", b.size(hd, FP32), FP32, list(freqs))
	if x.dtype != FP32 {
		cos = b.op("vision.rotary.cos.to", b.size(hd, x.dtype), x.dtype, list(cos))
		sin = b.op("vision.rotary.sin.to", b.size(hd, x.dtype), x.dtype, list(sin))
	}
	mask := b.op("vision.block_attention_mask", x.dtype.Size(mulI64(N, N)), x.dtype, nil)
	return x, []*actT{cos, sin, mask}
}
