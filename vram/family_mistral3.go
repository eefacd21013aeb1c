package vram

import "fmt"

// Mistral 3 (transformers/models/mistral3/modeling_mistral3.py,
// Mistral3ForConditionalGeneration; Mistral Small 3.1 and 3.2): Pixtral's
// vision encoder (vision_config, family pixtral), Mistral3MultiModalProjector
// and a Mistral language model (text_config, family mistral).
// get_image_features runs the tower with output_hidden_states=True and
// takes hidden_states[vision_feature_layer] (-1); the projector's RMSNorm,
// then Mistral3PatchMerger — each image's patches unfolded into
// spatial_merge_size² groups (F.unfold, a copy per image) and
// concatenated (another), merging_layer (no bias) — then linear_1, GELU,
// linear_2 (biases as multimodal_projector_bias says, none as released).
// forward concatenates the images' features, casts them to the
// embeddings' dtype and masked_scatters them over the image tokens; the
// loss is the causal LM loss on upcast logits. Names: model.vision_tower.…,
// model.multi_modal_projector.…, model.language_model.…, lm_head.
// mistral3ModelType is this family's model_type, by which the serving engines' tables
// name it (vision_tp.go).
const mistral3ModelType = "mistral3"

func init() {
	register(&family{
		name: mistral3ModelType, source: "transformers/models/mistral3/modeling_mistral3.py",
		tensors: func(m Model, l *tensorList) { m.visionTensors(l) },
		vision: &visionWrapper{
			textPrefix: "model.language_model.", towerPrefix: "model.vision_tower.", featureLayer: -1,
			projector: func(v Vision, l *tensorList, hv, h int64) {
				k := int64(max(1, v.Tower.Image.Merge))
				l.norm("model.multi_modal_projector.norm", false, hv)
				l.linear("model.multi_modal_projector.patch_merger.merging_layer", "other", hv*k*k, hv, false)
				l.linear("model.multi_modal_projector.linear_1", "other", hv, h, !v.NoProjectorBias)
				l.linear("model.multi_modal_projector.linear_2", "other", h, h, !v.NoProjectorBias)
			},
			project:      mistral3Project,
			hiddenStates: true,
		},
		fromConfig: mistral3FromConfig,
		toConfig: func(m Model, c map[string]any) {
			m.writeWrapped(c, "mistral3")
			c["spatial_merge_size"] = m.Vision.Tower.Image.Merge
			c["multimodal_projector_bias"] = !m.Vision.NoProjectorBias
		},
		// Mistral Small 3.1 (its config.json: Mistral-Small-24B's text model
		// with 131,072 positions, and Pixtral's tower at 1540 px, 14-px
		// patches merged 2×2 into 3,025 tokens an image).
		presets: map[string]Preset{
			"mistral-small-3.1-24b": {Model{Name: "mistralai/Mistral-Small-3.1-24B-Base-2503", Family: "mistral", Layers: 40, Hidden: 5120, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 32768, Vocab: 131072, MaxPosition: 131072,
				Vision: &Vision{Family: "mistral3", Tower: pixtralTower(), NoProjectorBias: true}}, hf("mistralai/Mistral-Small-3.1-24B-Base-2503")},
		},
	})
}

// pixtralTower is Mistral Small 3.1's vision encoder (vision_config): 24
// blocks 1024 wide, 16 heads, a silu-gated MLP of 4096, images of 1540 px
// in 14-px patches, merged 2×2 by the projector.
func pixtralTower() Model {
	return Model{Family: "pixtral", Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096, MLP: "swiglu",
		Image: &Image{Size: 1540, Patch: 14, Channels: 3, Merge: 2}}
}

// mistral3FromConfig reads a mistral3 config.json: the text model from
// text_config (a Mistral), the tower from vision_config (Pixtral), the
// merge from spatial_merge_size. A key config.json leaves out takes
// Mistral3Config's default (configuration_mistral3.py:51-97, transformers
// 5.23.0): a text_config or vision_config left out is Mistral Small 3.1's
// (mistral3TextDefaults, mistral3VisionDefaults). Its
// tie_word_embeddings (l.98, True) is not read: the engine ties as
// text_config says, as transformers 4.57 does and as the released
// checkpoints store lm_head.
func mistral3FromConfig(c *hfReader, m *Model) {
	c.wrapperSubDefaults("text_config", mistral3TextDefaults)
	c.wrapperSubDefaults("vision_config", mistral3VisionDefaults)
	tower, ok := c.readWrapped(m, "mistral", "pixtral")
	if !ok {
		return
	}
	if fl, ok := c.c["vision_feature_layer"].(float64); ok && fl != -1 || c.c["vision_feature_layer"] != nil && !ok {
		c.fail(fmt.Sprintf("vision_feature_layer = %v: the last hidden state (-1) is modelled", c.c["vision_feature_layer"]))
		return
	}
	if act := c.optString("projector_hidden_act", "gelu"); act != "gelu" {
		c.fail(fmt.Sprintf("projector_hidden_act %q: the Mistral 3 projector is modelled with gelu", act))
		return
	}
	k := c.optInt("spatial_merge_size", 2)
	if tower.Image != nil && k > 0 {
		if side := tower.Image.Size / max(1, tower.Image.Patch); side%k != 0 {
			c.fail(fmt.Sprintf("spatial_merge_size %d must divide the tower's %d patches a side", k, side))
			return
		}
		tower.Image.Merge = k
	}
	m.Vision = &Vision{Family: "mistral3", Tower: tower, NoProjectorBias: !c.optBool("multimodal_projector_bias", false)}
}

// mistral3TextDefaults and mistral3VisionDefaults are Mistral3Config's
// text_config and vision_config where config.json leaves them out: the
// init_kwargs of its SubConfigSpecs (configuration_mistral3.py:52-88).
var (
	mistral3TextDefaults = map[string]any{"model_type": "mistral", "attention_dropout": 0.0, "head_dim": 128.0, "hidden_act": "silu",
		"hidden_size": 5120.0, "initializer_range": 0.02, "intermediate_size": 32768.0, "max_position_embeddings": 131072.0,
		"num_attention_heads": 32.0, "num_hidden_layers": 40.0, "num_key_value_heads": 8.0, "rms_norm_eps": 1e-05,
		"rope_theta": 1000000000.0, "sliding_window": nil, "use_cache": true, "vocab_size": 131072.0}
	mistral3VisionDefaults = map[string]any{"model_type": "pixtral", "intermediate_size": 4096.0, "hidden_size": 1024.0, "patch_size": 14.0,
		"image_size": 1540.0, "num_hidden_layers": 24.0, "num_attention_heads": 16.0, "vocab_size": 32000.0, "head_dim": 64.0, "hidden_act": "gelu"}
)

// mistral3Project is Mistral3MultiModalProjector.forward on the selected
// hidden state x (b.tokens: the images' merged tokens): the RMSNorm over
// every patch, the patch merger's unfold (a copy of each image's patches,
// all alive until) their concatenation (another copy), merging_layer,
// linear_1, GELU (saving its input), linear_2.
func mistral3Project(b *actBuilder, p blockPlan, v Vision, x *actT, hv, h int64) *actT {
	k := int64(max(1, v.Tower.Image.Merge))
	merged := b.tokens
	b.tokens = merged * k * k
	y := b.norm(p, "multi_modal_projector.norm", "rmsnorm", x, hv)
	u := b.op("multi_modal_projector.patch_merger.unfold", b.size(hv, y.dtype), y.dtype, list(y))
	u = b.op("multi_modal_projector.patch_merger.cat", b.size(hv, y.dtype), y.dtype, list(u))
	b.tokens = merged
	y = b.linear(p, "multi_modal_projector.patch_merger.merging_layer", "other", u, hv*k*k, hv)
	inner := h / b.r.projectorShard() // vision_tp.go
	y = b.linear(p, "multi_modal_projector.linear_1", "other", y, hv, inner)
	y = b.op("multi_modal_projector.gelu", b.size(inner, y.dtype), y.dtype, list(y), y)
	return b.linear(p, "multi_modal_projector.linear_2", "other", y, inner, h)
}
