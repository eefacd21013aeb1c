package vram

import (
	"errors"
	"fmt"
	"math"
)

// Llama 4's vision encoder (transformers/models/llama4/modeling_llama4.py,
// Llama4VisionModel), the tower of the llama4 models: the patches unfolded
// and projected without a bias (Llama4UnfoldConvolution), a class token
// appended after them, learned positions (positional_embedding_vlm) and
// layernorm_pre; pre-LN blocks (Llama4VisionEncoderLayer: biased q, k, v
// and o projections, a 2D rotary embedding applied as a complex product in
// fp32, non-causal attention whose eager path keeps the softmax in the
// scores' dtype, an exact-GELU MLP with biases); layernorm_post on every
// token, the class token dropped, and the vision adapter
// (Llama4VisionPixelShuffleMLP: a pixel shuffle of pixel_shuffle_ratio,
// then fc1 and fc2 without biases, each followed by GELU) — the last is
// the tower's own, built by the wrapper's projector (family_llama4.go).
func init() {
	register(&family{
		name: "llama4_vision_model", source: "transformers/models/llama4/modeling_llama4.py", kind: encoder, images: true, towerOnly: true,
		defaults: Model{MLP: "gelu", Norm: "layernorm", Position: "rope", Bias: BiasAll, Head: "none"},
		// Llama4VisionConfig.__init__'s defaults.
		configDefaults: map[string]any{"hidden_size": 768.0, "num_hidden_layers": 34.0, "num_attention_heads": 16.0, "num_channels": 3.0,
			"intermediate_size": 5632.0, "vision_output_dim": 7680.0, "image_size": 448.0, "patch_size": 14.0, "pixel_shuffle_ratio": 0.5,
			"projector_input_dim": 4096.0, "projector_output_dim": 4096.0, "hidden_act": "gelu"},
		fromConfig: llama4VisionFromConfig,
		toConfig: func(m Model, c map[string]any) {
			im := m.Image
			c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["intermediate_size"] = m.Layers, m.Hidden, m.Heads, m.FFN
			c["image_size"], c["patch_size"], c["num_channels"] = im.Size, im.Patch, im.Channels
			c["pixel_shuffle_ratio"] = 1 / float64(max(1, im.Merge))
			c["projector_input_dim"], c["projector_output_dim"], c["vision_output_dim"] = im.AdapterDim, im.AdapterDim, im.AdapterDim
			c["hidden_act"], c["multi_modal_projector_bias"], c["vision_feature_select_strategy"] = "gelu", false, "default"
		},
		check: llama4VisionCheck,
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			im := m.Image
			if im == nil {
				im = &Image{} // Validate reports it missing
			}
			// named_parameters: the model's own parameters, then its modules
			// in the order __init__ creates them.
			l.add("class_embedding", "other", d.h)
			l.add("positional_embedding_vlm", "position", int64(im.Tokens()), d.h)
			l.linear("patch_embedding.linear", "other", int64(im.Channels*im.Patch*im.Patch), d.h, false)
			l.norm("layernorm_pre", true, d.h)
			l.norm("layernorm_post", true, d.h)
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf("model.layers.%d.", i)
				l.linear(p+"self_attn.q_proj", "q_proj", d.h, d.q, true)
				l.linear(p+"self_attn.k_proj", "k_proj", d.h, d.q, true)
				l.linear(p+"self_attn.v_proj", "v_proj", d.h, d.q, true)
				l.linear(p+"self_attn.o_proj", "o_proj", d.q, d.h, true)
				l.linear(p+"mlp.fc1", "up_proj", d.h, d.f, true)
				l.linear(p+"mlp.fc2", "down_proj", d.f, d.h, true)
				l.norm(p+"input_layernorm", true, d.h)
				l.norm(p+"post_attention_layernorm", true, d.h)
			}
			// The vision adapter reads the last hidden state: it trains with
			// the tower (outside the blocks, not a head the features bypass).
			l.outside()
			a := int64(im.AdapterDim)
			l.linear("vision_adapter.mlp.fc1", "other", d.h*int64(im.Merge*im.Merge), a, false)
			l.linear("vision_adapter.mlp.fc2", "other", a, a, false)
		},
		// vision_eager_attention_forward's softmax keeps the scores' dtype;
		// layernorm_post normalises every token; the rotary embedding is a
		// complex product (vision_apply_rotary_emb).
		recipe: func(Model, libVersion) recipe {
			return recipe{towerPostNorm: true, softmaxInDType: true, ropeComplex: true}
		},
		towerEmbed: llama4VisionEmbed,
	})
}

// llama4VisionFromConfig reads a Llama4VisionConfig. The pixel shuffle's
// output feeds fc1 (intermediate_size wide), whose output fc2 and the
// projector read: the checkpoints have projector_input_dim =
// projector_output_dim = vision_output_dim, and only that is modelled.
func llama4VisionFromConfig(c *hfReader, m *Model) {
	m.Layers, m.Hidden, m.Heads, m.FFN = c.int("num_hidden_layers"), c.int("hidden_size"), c.int("num_attention_heads"), c.int("intermediate_size")
	ratio := c.optFloat("pixel_shuffle_ratio", 0.5)
	merge := int(math.Round(1 / ratio))
	if !(ratio > 0) || math.Abs(1/ratio-float64(merge)) > 1e-9 {
		c.fail(fmt.Sprintf("pixel_shuffle_ratio %v: a ratio of 1/n is modelled (0.5 as released)", ratio))
		return
	}
	adapter := c.int("projector_input_dim")
	if out, vo := c.optInt("projector_output_dim", adapter), c.optInt("vision_output_dim", adapter); out != adapter || vo != adapter {
		c.fail(fmt.Sprintf("projector_input_dim %d, projector_output_dim %d, vision_output_dim %d: the vision adapter is modelled with the three equal, as released", adapter, out, vo))
		return
	}
	if act := c.optString("hidden_act", "gelu"); act != "gelu" {
		c.fail(fmt.Sprintf("hidden_act %q: Llama 4's vision MLP is nn.GELU (exact), whatever the config says", act))
	}
	if c.optBool("multi_modal_projector_bias", false) {
		c.fail("multi_modal_projector_bias: Llama4MultiModalProjector's linear_1 has no bias")
	}
	if s := c.optString("vision_feature_select_strategy", "default"); s != "default" {
		c.fail(fmt.Sprintf("vision_feature_select_strategy %q: the tower's adapter output is what Llama 4 projects (\"default\")", s))
	}
	m.Image = &Image{Size: c.int("image_size"), Patch: c.int("patch_size"), Channels: c.optInt("num_channels", 3), ClassToken: true, Merge: merge, AdapterDim: adapter}
}

// llama4VisionCheck checks what the tower's modules fix.
func llama4VisionCheck(m Model) error {
	im := m.Image
	switch {
	case im == nil:
		return errors.New("model.image (size, patch, channels, merge, adapter_dim) is required for family llama4_vision_model")
	case !im.ClassToken || im.Registers != 0:
		return errors.New("model.image: Llama 4's vision encoder has a class token (after the patches) and no registers")
	case im.Merge < 1 || im.AdapterDim < 1:
		return fmt.Errorf("model.image: merge %d (1 / pixel_shuffle_ratio) and adapter_dim %d (projector_input_dim) must be ≥ 1", im.Merge, im.AdapterDim)
	case (im.Size/im.Patch)%im.Merge != 0:
		return fmt.Errorf("model.image: the %d patches a side must divide by merge %d (the pixel shuffle)", im.Size/im.Patch, im.Merge)
	case m.MLP != "gelu" || m.Norm != "layernorm" || m.Head != "none":
		return fmt.Errorf("model: Llama 4's vision encoder has an exact-GELU MLP, LayerNorms and no head (mlp %q, norm %q, head %q)", m.MLP, m.Norm, m.Head)
	}
	return nil
}

// llama4VisionEmbed is Llama4VisionModel.forward up to the first block:
// the pixels (in the weights' dtype: get_image_features does not cast
// them) unfolded into patches (a copy; its backward is a fold), permuted
// and reshaped for the linear (another copy, which the matmul saves when
// its weight trains), the class embedding concatenated after the patches
// (torch.cat promotes to the parameter's dtype: fp32 under autocast), the
// positions added, layernorm_pre.
func llama4VisionEmbed(b *actBuilder, p blockPlan, m Model, n int64, grad bool) (*actT, []*actT) {
	im := *m.Image
	hv := int64(m.Hidden)
	patches := int64(im.Tokens() - 1)
	per := int64(im.Channels * im.Patch * im.Patch)
	b.tokens = n * patches
	px := b.batchInput("pixel_values", p.baseDType.Size(b.tokens*per), p.baseDType)
	unf := b.op("vision.patch_embedding.unfold", b.size(per, px.dtype), px.dtype, list(px))
	in := b.castIn(p, "vision.patch_embedding.unfolded", unf)
	flat := b.op("vision.patch_embedding.reshape", b.size(per, in.dtype), in.dtype, list(in))
	var saves []*actT
	if grad {
		saves = append(saves, flat)
	}
	x := b.op("vision.patch_embedding.linear", b.size(hv/towerShard(p), p.e), p.e, list(flat), saves...)
	if towerShard(p) > 1 {
		// vLLM's column-parallel linear, its output gathered (vision_tp.go)
		x = b.op("vision.patch_embedding.all_gather", b.size(hv, p.e), p.e, list(x))
	}
	if grad && p.autocast {
		b.side("vision.patch_embedding.linear.weight_cast", p.e.Size(hv*per), p.e).weightCopy = true
	}
	b.tokens = n * int64(im.Tokens())
	d := promote(p.e, p.baseDType)
	x = b.op("vision.class_embedding.cat", b.size(hv, d), d, list(x))
	x = b.op("vision.add_positions", b.size(hv, d), d, list(x))
	return b.norm(p, "vision.layernorm_pre", m.Norm, x, hv), nil
}
