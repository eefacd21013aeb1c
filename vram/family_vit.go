package vram

import (
	"errors"
	"fmt"
)

// ViT (transformers/models/vit/modeling_vit.py): a pre-LN encoder over image
// patches (a Conv2d patch embedding, a class token, learned positions), a
// final LayerNorm and a pooler. ViTModel has no prefix; a classifier wraps
// it as vit.
func init() {
	register(&family{
		name: "vit", source: "transformers/models/vit/modeling_vit.py", kind: encoder, images: true,
		defaults: Model{MLP: "gelu", Norm: "layernorm", Position: "learned", Bias: BiasAll, Head: "none"},
		fromConfig: func(c *hfReader, m *Model) {
			// A key config.json leaves out takes the class's default
			// (configuration_vit.py:50-63, transformers 5.23.0).
			m.Layers, m.Hidden = c.optInt("num_hidden_layers", 12), c.optInt("hidden_size", 768)
			m.Heads, m.FFN = c.optInt("num_attention_heads", 12), c.optInt("intermediate_size", 3072)
			m.KVHeads = c.optInt("num_key_value_heads", m.Heads)
			m.MaxPosition, m.HeadDim = c.optInt("max_position_embeddings", 0), c.optInt("head_dim", 0)
			m.Image = &Image{Size: c.optInt("image_size", 224), Patch: c.optInt("patch_size", 16), Channels: c.optInt("num_channels", 3), ClassToken: true}
			m.Pooler = true
		},
		toConfig: func(m Model, c map[string]any) {
			c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["intermediate_size"] = m.Layers, m.Hidden, m.Heads, m.FFN
			c["image_size"], c["patch_size"], c["num_channels"] = m.Image.Size, m.Image.Patch, m.Image.Channels
		},
		check: func(m Model) error {
			if m.Image == nil {
				return errors.New("model.image (size, patch, channels) is required for family vit")
			}
			return nil
		},
		tensors: func(m Model, l *tensorList) {
			d := m.dims()
			root := ""
			if m.Head != "none" {
				root = "vit."
			}
			im := m.Image
			if im == nil {
				im = &Image{} // Validate reports it missing
			}
			l.add(root+"embeddings.cls_token", "other", 1, 1, d.h)
			l.add(root+"embeddings.position_embeddings", "position", 1, int64(im.Tokens()), d.h)
			l.add(root+"embeddings.patch_embeddings.projection.weight", "other", d.h, int64(im.Channels), int64(im.Patch), int64(im.Patch))
			l.add(root+"embeddings.patch_embeddings.projection.bias", "bias", d.h)
			for i := 0; i < m.Layers; i++ {
				l.block(i)
				p := fmt.Sprintf(root+"encoder.layer.%d.", i)
				l.norm(p+"layernorm_before", true, d.h)
				l.linear(p+"attention.attention.query", "q_proj", d.h, d.q, true)
				l.linear(p+"attention.attention.key", "k_proj", d.h, d.q, true)
				l.linear(p+"attention.attention.value", "v_proj", d.h, d.q, true)
				l.linear(p+"attention.output.dense", "o_proj", d.q, d.h, true)
				l.norm(p+"layernorm_after", true, d.h)
				l.linear(p+"intermediate.dense", "up_proj", d.h, d.f, true)
				l.linear(p+"output.dense", "down_proj", d.f, d.h, true)
			}
			l.headSide()
			l.norm(root+"layernorm", true, d.h)
			if m.Pooler {
				l.linear(root+"pooler.dense", "other", d.h, d.h, true)
			}
			if classes, _ := m.headClasses(); classes > 0 {
				l.linear("classifier", "other", d.h, int64(classes), true)
			}
		},
		// eager attention's softmax in the scores' dtype.
		recipe: func(Model, libVersion) recipe { return recipe{softmaxInDType: true} },
		presets: map[string]Preset{
			"vit-base-patch16-224":  {Model{Name: "vit-base-patch16-224", Layers: 12, Hidden: 768, Heads: 12, FFN: 3072, Pooler: true, Image: &Image{Size: 224, Patch: 16, Channels: 3, ClassToken: true}}, hf("google/vit-base-patch16-224-in21k")},
			"vit-large-patch16-224": {Model{Name: "vit-large-patch16-224", Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096, Pooler: true, Image: &Image{Size: 224, Patch: 16, Channels: 3, ClassToken: true}}, hf("google/vit-large-patch16-224-in21k")},
		},
	})
}
