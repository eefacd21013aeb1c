package vram

import "fmt"

// MiniMax-M3 (transformers 5.23.0 models/minimax_m3_vl/
// modeling_minimax_m3_vl.py, MiniMaxM3SparseForConditionalGeneration
// l.1508-1518 over MiniMaxM3VLModel l.1347-1355): its own vision tower
// (minimax_m3_vl_vision), a projector and the language model
// (minimax_m3_vl_text), registered in that order, then lm_head, tied to
// the embedding when tie_word_embeddings is set (l.1510). The projector
// (MiniMaxM3VLMultiModalProjector l.1254-1273) maps each patch through
// linear_1, GELU, linear_2 to the text width, then each spatial_merge_size²
// neighbourhood of patches as one vector through merge_linear_1, GELU,
// merge_linear_2, every linear biased, projector_hidden_size the inner
// width. AutoModelForImageTextToText builds this class for the config;
// AutoModelForCausalLM builds only the text model for its text_config
// (MiniMaxM3VLForCausalLM). Names: model.vision_tower.…,
// model.multi_modal_projector.…, model.language_model.…, lm_head; the
// checkpoint's own (language_model.model.…, vision_tower.vision_model.…,
// patch_merge_mlp.…, experts one by one) are renamed on load
// (conversion_mapping.py:756-826). Configs nest text_config and
// vision_config (either may be left out: the class's defaults).
func init() {
	register(&family{
		name: minimaxM3VLModelType, source: "transformers/models/minimax_m3_vl/modeling_minimax_m3_vl.py (transformers 5.23.0)",
		servingOnly: m3ServingOnly,
		only5:       true,
		attention:   []string{"eager", "sdpa"}, // _supports_flash_attn = False (l.675)
		tensors:     func(m Model, l *tensorList) { m.visionTensors(l) },
		vision: &visionWrapper{
			textPrefix: "model.language_model.", towerPrefix: "model.vision_tower.", featureLayer: -1,
			projector: m3Projector,
			// No project: the tower's forward is not modelled, so no plan
			// reaches the image side (resolveVision refuses it).
		},
		fromConfig: m3ReadConfig,
		toConfig:   m3WriteConfig,
		// MiniMaxAI/MiniMax-M3: MiniMaxM3VLConfig's and its sub-configs'
		// defaults (configuration_minimax_m3_vl.py:81-118, 169-182, 201-204;
		// the classes name this checkpoint): 60 layers 6,144 wide, 64 heads
		// of 128 over 4 KV heads, 128 experts of 3,072 with 4 a token and a
		// shared expert of 3,072, 200,064 tokens untied, 524,288 positions;
		// a 32-block tower 1,280 wide (16 heads, an MLP of 5,120, 14-pixel
		// patches over 2 frames merged 2 × 2, 2,016-pixel images); a
		// projector 6,144 wide. The release's sparse_attention_config and
		// moe_layer_freq (which layers are block-sparse, which dense) were
		// not at hand, so every layer is full attention with a mixture of
		// experts, as the class builds without them, and the checkpoint's
		// mtp.* layers are not counted (no config key sizes them). As
		// transformers 5.23 builds it on the meta device: 235,858,437,120
		// parameters.
		presets: map[string]Preset{
			"minimax-m3": {Model{Name: "MiniMaxAI/MiniMax-M3", Family: "minimax_m3_vl_text", Layers: 60, Hidden: 6144, Heads: 64, KVHeads: 4, HeadDim: 128, FFN: 12288,
				Vocab: 200064, MaxPosition: 524288, Experts: 128, ExpertsPerToken: 4, ExpertFFN: 3072, SharedExperts: 1, SharedExpertFFN: 3072, RotaryPct: 1,
				Vision: &Vision{Family: "minimax_m3_vl", FeatureLayer: -1, Tower: Model{Family: "minimax_m3_vl_vision", Layers: 32, Hidden: 1280, Heads: 16, FFN: 5120,
					Image: &Image{Size: 2016, Patch: 14, Channels: 3, TemporalPatch: 2, Merge: 2}}}}, hf("MiniMaxAI/MiniMax-M3")},
		},
	})
}

// m3Projector lists MiniMaxM3VLMultiModalProjector's parameters (l.1263-1268)
// for a tower hv wide and a language model h wide: projector_hidden_size is
// h (m3ReadConfig requires it).
func m3Projector(v Vision, l *tensorList, hv, h int64) {
	mm := int64(1)
	if im := v.Tower.Image; im != nil {
		mm = int64(im.Merge * im.Merge)
	}
	p := "model.multi_modal_projector."
	l.linear(p+"linear_1", "other", hv, h, true)
	l.linear(p+"linear_2", "other", h, h, true)
	l.linear(p+"merge_linear_1", "other", mm*h, h, true)
	l.linear(p+"merge_linear_2", "other", h, h, true)
}

// m3ReadConfig reads a MiniMaxM3VLConfig: text_config as
// minimax_m3_vl_text, vision_config as the tower; tie_word_embeddings is
// the top level's, or the text config's where that one sets it
// (__post_init__ l.206-209). The engine sizes the projector's inner width
// as the language model's, so projector_hidden_size (the class's 6,144)
// must equal text_config.hidden_size.
func m3ReadConfig(c *hfReader, m *Model) {
	t := c.nestedAs("text_config", "minimax_m3_vl_text")
	tower := c.nestedAs("vision_config", "minimax_m3_vl_vision")
	if c.err != nil {
		return
	}
	name := m.Name
	*m = t
	m.Name = name
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false) || t.TiedEmbeddings
	if p := c.optInt("projector_hidden_size", 6144); p != m.Hidden && c.err == nil {
		c.fail(fmt.Sprintf("projector_hidden_size = %d: the engine models MiniMax-M3's projector as wide as text_config.hidden_size = %d", p, m.Hidden))
		return
	}
	m.Vision = &Vision{Family: "minimax_m3_vl", Tower: tower, FeatureLayer: -1}
}

// m3WriteConfig writes a MiniMaxM3VLConfig: the text and vision configs
// under their model_types, the projector as wide as the text model, the
// class's image and video token ids (or the vocabulary's last two).
func m3WriteConfig(m Model, c map[string]any) {
	text := m
	text.Vision, text.Name, text.TiedEmbeddings = nil, "", false
	tc := text.HFConfig()
	tc["model_type"] = "minimax_m3_vl_text"
	c["text_config"] = tc
	tower := m.Vision.Tower
	tower.Name = ""
	vc := tower.HFConfig()
	vc["model_type"] = "minimax_m3_vl_vision"
	c["vision_config"] = vc
	c["projector_hidden_size"], c["tie_word_embeddings"] = m.Hidden, m.TiedEmbeddings
	c["image_token_index"], c["video_token_index"] = 200025, 200026
	if m.Vocab <= 200026 {
		c["image_token_index"], c["video_token_index"] = m.Vocab-1, m.Vocab-2
	}
}

// minimaxM3VLModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const minimaxM3VLModelType = "minimax_m3_vl"
