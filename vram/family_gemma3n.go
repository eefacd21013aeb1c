package vram

// Gemma 3n (transformers 5.23.0 models/gemma3n/modeling_gemma3n.py,
// Gemma3nForConditionalGeneration l.2183-2193 over Gemma3nModel
// l.1922-1935; its config, Gemma3nConfig, configuration_gemma3n.py
// l.428-489, nests text_config, vision_config and audio_config, each its
// class's defaults when missing or null): the vision tower (family
// gemma3n_vision, timm's MobileNetV5 through TimmWrapperModel), the
// language model (gemma3n_text, model.language_model.…), the audio tower
// (gemma3n_audio, model.audio), and two Gemma3nMultimodalEmbedders
// (l.1866-1886), embed_vision and embed_audio: each a table of the
// modality's hard tokens (its config's vocab_size rows of its
// hidden_size), two RMSNorms of that width with weights
// (hard_embedding_norm, soft_embedding_norm), a bias-free
// embedding_projection to the language model's width and a weightless
// RMSNorm after it. lm_head is tied to the language model's token
// embedding by the top level's tie_word_embeddings (l.2184, l.488,
// default true). Names: model.vision_tower.timm_model.…,
// model.language_model.…, model.audio_tower.…, model.embed_vision.…,
// model.embed_audio.…, lm_head.
//
// Plans run the text: neither tower's forward is modelled (the vision
// tower is a convolutional network, not the engine's ViT blocks; audio.go),
// their weights and buffers are; a serving engine's profile of images and
// audio (vLLM's runs the vision encoder on its dummy images) is not.
// The language model's layers reusing earlier layers' keys and values and
// its per-layer embeddings are family gemma3n_text's.
func init() {
	register(&family{
		name: gemma3nModelType, source: "transformers/models/gemma3n/modeling_gemma3n.py (transformers 5.23.0)",
		servingOnly: gemma3nServingOnly,
		tensors:     func(m Model, l *tensorList) { m.visionTensors(l) },
		vision: &visionWrapper{
			textPrefix: "model.language_model.", towerPrefix: "model.vision_tower.timm_model.", featureLayer: -1,
			projector: func(v Vision, l *tensorList, hv, h int64) {
				gemma3nEmbedder(l, "model.embed_vision.", int64(v.Tower.Vocab), hv, h)
			},
			audioPrefix: "model.audio_tower.",
			audioProjector: func(a Audio, l *tensorList, h int64) {
				gemma3nEmbedder(l, "model.embed_audio.", int64(a.Tower.Vocab), int64(a.Tower.Hidden), h)
			},
		},
		fromConfig: gemma3nFromConfig,
		toConfig:   gemma3nToConfig,
		presets: map[string]Preset{
			// google/gemma-3n-E4B-it: Gemma3nConfig's defaults, whose
			// classes name google/gemma-3n-E4B as their checkpoint
			// (configuration_gemma3n.py l.34, 235, 335, 428): 35 layers
			// 2,048 wide, the last 15 reusing keys and values, MLPs of
			// 16,384; the MobileNetV5 tower and the 12-block audio
			// conformer 1,536 wide, as the released config.json nests
			// them (its shape keys are the classes' defaults; the file
			// itself was not at hand). 7,818,517,072 parameters as
			// transformers 5.23 builds it on the meta device; the
			// checkpoint also stores the shared layers' k_proj, v_proj
			// and k_norm (31,461,120 more, storedOnly).
			"gemma-3n-e4b-it": {gemma3nWrapped(gemma3nTextE4B("google/gemma-3n-E4B-it")), hf("google/gemma-3n-E4B-it")},
			// google/gemma-3n-E2B-it: the same towers and widths, 30
			// layers with MLPs of 8,192 and the last 10 reusing keys and
			// values (its released text_config, as public ports of the
			// checkpoint reproduce it; the file itself was not at hand).
			// 5,418,464,192 parameters as transformers 5.23 builds it on
			// the meta device, 20,974,080 more stored.
			"gemma-3n-e2b-it": {gemma3nWrapped(gemma3nTextE2B("google/gemma-3n-E2B-it")), hf("google/gemma-3n-E2B-it")},
		},
	})
}

// gemma3nModelType is the wrapper's model_type, which the language model's
// rules name (family_gemma3n_text.go).
const gemma3nModelType = "gemma3n"

// gemma3nEmbedder lists a Gemma3nMultimodalEmbedder under p: the hard
// tokens' table (a lookup table, as a position table is), the two norms of
// the modality's width w, the projection to the language model's h; the
// weightless post-projection norm has none.
func gemma3nEmbedder(l *tensorList, p string, vocab, w, h int64) {
	l.add(p+"embedding.weight", "position", vocab, w)
	l.norm(p+"hard_embedding_norm", false, w)
	l.norm(p+"soft_embedding_norm", false, w)
	l.linear(p+"embedding_projection", "other", w, h, false)
}

// gemma3nWrapped is language model text with the released towers: the
// vision and audio configs' class defaults.
func gemma3nWrapped(text Model) Model {
	vision := Model{Family: "gemma3n_vision", Hidden: 2048, Vocab: 128}
	gemma3nVisionShape(&vision)
	text.Vision = &Vision{Family: "gemma3n", Tower: vision, FeatureLayer: -1}
	text.Audio = &Audio{Tower: Model{Family: "gemma3n_audio", Layers: 12, Hidden: 1536, Heads: 8, KVHeads: 8, HeadDim: 192, FFN: 6144, Vocab: 128,
		Conformer: &Conformer{SubsampleChannels: [2]int{128, 32}, ConvKernel: 5, InputFeatures: 128, Chunk: 12, ContextLeft: 13}}}
	return text
}

// gemma3nTextE2B is the language model of the released Gemma 3n E2B.
func gemma3nTextE2B(name string) Model {
	m := gemma3nTextE4B(name)
	m.Layers, m.FFN, m.KVSharedLayers = 30, 8192, 10
	return m
}

// gemma3nFromConfig reads a Gemma3nConfig: text_config as family
// gemma3n_text, vision_config and audio_config as the towers, the top
// level's tie_word_embeddings.
func gemma3nFromConfig(c *hfReader, m *Model) {
	text := c.nestedAs("text_config", "gemma3n_text")
	vision := c.nestedAs("vision_config", "gemma3n_vision")
	audio := c.nestedAs("audio_config", "gemma3n_audio")
	if c.err != nil {
		return
	}
	name := m.Name
	*m = text
	m.Name = name
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
	m.Vision = &Vision{Family: "gemma3n", Tower: vision, FeatureLayer: -1}
	m.Audio = &Audio{Tower: audio}
}

// gemma3nToConfig writes a Gemma3nConfig: the language model as
// text_config, the towers as vision_config and audio_config,
// tie_word_embeddings.
func gemma3nToConfig(m Model, c map[string]any) {
	text := m
	text.Vision, text.Audio, text.Name = nil, nil, ""
	c["text_config"] = text.HFConfig()
	tower := m.Vision.Tower
	tower.Name = ""
	c["vision_config"] = tower.HFConfig()
	if m.Audio != nil {
		audio := m.Audio.Tower
		audio.Name = ""
		c["audio_config"] = audio.HFConfig()
	}
	c["tie_word_embeddings"] = m.TiedEmbeddings
}
