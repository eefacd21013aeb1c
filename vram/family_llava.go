package vram

import (
	"fmt"
	"maps"
	"strings"
)

// LLaVA (transformers/models/llava/modeling_llava.py,
// LlavaForConditionalGeneration): a vision tower (vision_config, CLIP's
// vision encoder in LLaVA-1.5), a two-layer projector (linear_1, GELU,
// linear_2, LlavaMultiModalProjector) and a language model (text_config).
// get_image_features runs the tower with output_hidden_states=True, takes
// hidden_states[vision_feature_layer] (-2), drops the class token
// (vision_feature_select_strategy "default") and projects it; forward
// concatenates the images' features, casts them to the embeddings' dtype
// and masked_scatters them over the image placeholder tokens, then runs the
// language model on inputs_embeds. Parameters are named
// model.vision_tower.…, model.multi_modal_projector.…,
// model.language_model.… and lm_head (checkpoints saved before 4.52 use
// vision_tower.…, multi_modal_projector.…, language_model.model.… and
// language_model.lm_head, _checkpoint_conversion_mapping). A key
// config.json leaves out takes LlavaConfig's default
// (configuration_llava.py:52-78, transformers 5.23.0): a vision_config left
// out is CLIP ViT-L/14 at 336 px (llavaVisionDefaults), a text_config left
// out LlamaConfig's defaults.
// llavaModelType is this family's model_type, by which the serving engines' tables
// name it (vision_tp.go).
const llavaModelType = "llava"

func init() {
	register(&family{
		name: llavaModelType, source: "transformers/models/llava/modeling_llava.py",
		tensors: func(m Model, l *tensorList) { m.visionTensors(l) },
		vision: &visionWrapper{
			textPrefix: "model.language_model.", towerPrefix: "model.vision_tower.", featureLayer: -2,
			projector: func(v Vision, l *tensorList, hv, h int64) {
				l.linear("model.multi_modal_projector.linear_1", "other", hv, h, !v.NoProjectorBias)
				l.linear("model.multi_modal_projector.linear_2", "other", h, h, !v.NoProjectorBias)
			},
			project: func(b *actBuilder, p blockPlan, v Vision, x *actT, hv, h int64) *actT {
				inner := h / b.r.projectorShard() // vision_tp.go
				y := b.linear(p, "multi_modal_projector.linear_1", "other", x, hv, inner)
				y = b.op("multi_modal_projector.gelu", b.size(inner, y.dtype), y.dtype, list(y), y)
				return b.linear(p, "multi_modal_projector.linear_2", "other", y, inner, h)
			},
			hiddenStates: true, returnsFeatures: true,
			rename: func(name string) string {
				for _, r := range [][2]string{{"language_model.model.", "model.language_model."}, {"language_model.lm_head.", "lm_head."},
					{"vision_tower.", "model.vision_tower."}, {"multi_modal_projector.", "model.multi_modal_projector."}} {
					if rest, ok := strings.CutPrefix(name, r[0]); ok {
						return r[1] + rest
					}
				}
				return name
			},
		},
		fromConfig: func(c *hfReader, m *Model) {
			c.wrapperSubDefaults("vision_config", llavaVisionDefaults)
			tower, ok := c.readWrapped(m, "llama", "clip_vision_model")
			if !ok {
				return
			}
			v := &Vision{Family: "llava", Tower: tower, FeatureLayer: -2}
			switch fl := c.c["vision_feature_layer"].(type) {
			case nil:
			case float64:
				if fl != float64(int(fl)) || fl < -maxLayers || fl > maxLayers {
					c.fail(fmt.Sprintf("vision_feature_layer = %v must be an integer in [-%d, %d]", fl, maxLayers, maxLayers))
				}
				v.FeatureLayer = int(fl)
			default:
				c.fail(fmt.Sprintf("vision_feature_layer = %v: one layer's features are modelled, not a list", fl))
			}
			switch s := c.optString("vision_feature_select_strategy", ""); s {
			case "default", "":
			case "full":
				v.KeepClassToken = true
			default:
				c.fail(fmt.Sprintf("vision_feature_select_strategy %q: want default or full", s))
			}
			if act := c.optString("projector_hidden_act", ""); act != "" && act != "gelu" {
				c.fail(fmt.Sprintf("projector_hidden_act %q: the LLaVA projector is modelled with gelu", act))
			}
			v.NoProjectorBias = !c.optBool("multimodal_projector_bias", true)
			m.Vision = v
		},
		toConfig: func(m Model, c map[string]any) {
			v := m.Vision
			text := m
			text.Vision, text.Name = nil, ""
			c["model_type"] = "llava"
			c["text_config"] = text.HFConfig()
			tower := v.Tower
			tower.Name = ""
			c["vision_config"] = tower.HFConfig()
			k := v.FeatureLayer
			if k == 0 {
				k = -2
			}
			c["vision_feature_layer"] = k
			c["vision_feature_select_strategy"] = "default"
			if v.KeepClassToken {
				c["vision_feature_select_strategy"] = "full"
			}
			c["projector_hidden_act"] = "gelu"
			c["multimodal_projector_bias"] = !v.NoProjectorBias
			// The last token id stands for an image, as in LLaVA-1.5 (32000
			// of 32064); a tokenizer's added token in the released models.
			c["image_token_index"] = m.Vocab - 1
			c["image_seq_length"] = v.ImageTokens()
			c["tie_word_embeddings"] = m.TiedEmbeddings
		},
		presets: map[string]Preset{
			// llava-hf/llava-1.5-7b-hf: vicuna-7b-v1.5 (Llama 2 7B, vocab
			// 32064) and CLIP ViT-L/14 at 336 px.
			"llava-1.5-7b": {Model{Name: "llava-1.5-7b", Family: "llama", Layers: 32, Hidden: 4096, Heads: 32, FFN: 11008, Vocab: 32064, MaxPosition: 4096,
				Vision: &Vision{Family: "llava", Tower: clipL336()}}, hf("llava-hf/llava-1.5-7b-hf")},
			// llava-hf/llava-1.5-13b-hf: vicuna-13b-v1.5.
			"llava-1.5-13b": {Model{Name: "llava-1.5-13b", Family: "llama", Layers: 40, Hidden: 5120, Heads: 40, FFN: 13824, Vocab: 32064, MaxPosition: 4096,
				Vision: &Vision{Family: "llava", Tower: clipL336()}}, hf("llava-hf/llava-1.5-13b-hf")},
		},
	})
}

// llavaVisionDefaults is LlavaConfig's vision_config where config.json
// leaves it out: the init_kwargs of its SubConfigSpec
// (configuration_llava.py:53-66), CLIP ViT-L/14 at 336 px.
var llavaVisionDefaults = map[string]any{"model_type": "clip_vision_model", "intermediate_size": 4096.0, "hidden_size": 1024.0,
	"patch_size": 14.0, "image_size": 336.0, "num_hidden_layers": 24.0, "num_attention_heads": 16.0, "vocab_size": 32000.0, "projection_dim": 768.0}

// wrapperSubDefaults stands in for a wrapper's sub-config (key) that
// config.json leaves out or sets null: transformers' SubConfigSpec builds
// it from the wrapper's init_kwargs over the nested class's defaults
// (configuration_utils.py:259-268, transformers 5.23.0), where a
// sub-config given in part takes the nested class's alone.
func (r *hfReader) wrapperSubDefaults(key string, init map[string]any) {
	if r.c[key] == nil {
		r.c[key] = maps.Clone(init)
	}
}

// clipL336 is CLIP ViT-L/14 at 336 px, the LLaVA-1.5 tower.
func clipL336() Model {
	return Model{Family: "clip_vision_model", Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096,
		Image: &Image{Size: 336, Patch: 14, Channels: 3, ClassToken: true}}
}
