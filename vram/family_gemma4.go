package vram

// Gemma 4 (transformers 5.23.0 models/gemma4/modeling_gemma4.py,
// Gemma4ForConditionalGeneration l.2598-2608 over Gemma4Model
// l.2231-2252): the vision encoder (gemma4_vision), whose pooled soft
// tokens Gemma4MultimodalEmbedder (l.2123-2144) normalizes with a
// weightless RMSNorm and projects to the language model's width
// (embed_vision.embedding_projection, no bias), masked_scattered over the
// image tokens (l.2396-2412) of the language model (gemma4_text); the
// output layer is tied by the top level's tie_word_embeddings (Gemma4Config
// l.381, default true). Names: model.vision_tower.…, model.embed_vision.…,
// model.language_model.…, lm_head. Configs nest text_config, vision_config
// and audio_config (configuration_gemma4.py l.364-372); the last two are
// optional, and without a vision_config the model is its language model
// alone (the class's defaults build that), which the engine reads as
// family gemma4_text. With an audio_config (the small releases') the
// model also has the audio tower (family gemma4_audio, model.audio) and
// its projector embed_audio, a Gemma4MultimodalEmbedder of the tower's
// output_proj_dims (l.2241, 2247-2251): their parameters and buffers are
// listed after the language model's (model.audio_tower.…,
// model.embed_audio.…), their forward is not modelled (audio.go). An
// audio_config without a vision_config is refused.
// Use of bidirectional attention among an image's tokens
// (use_bidirectional_attention "vision", l.2465-2477) changes masks only.
func init() {
	register(&family{
		name: gemma4ModelType, source: "transformers/models/gemma4/modeling_gemma4.py (transformers 5.23.0)",
		servingOnly: gemma4ServingOnly,
		only5:       true,
		tensors:     func(m Model, l *tensorList) { m.visionTensors(l) },
		vision: &visionWrapper{
			textPrefix: "model.language_model.", towerPrefix: "model.vision_tower.", featureLayer: -1,
			projector: func(v Vision, l *tensorList, hv, h int64) {
				l.linear("model.embed_vision.embedding_projection", "other", hv, h, false)
			},
			project: gemma4Project,
			// Gemma 4 returns image_hidden_states=image_features (l.2508).
			returnsFeatures: true,
			textMasks:       gemma4HeldEmbeds,
			audioPrefix:     "model.audio_tower.",
			audioProjector: func(a Audio, l *tensorList, h int64) {
				if cf := a.Tower.Conformer; cf != nil {
					l.linear("model.embed_audio.embedding_projection", "other", int64(cf.OutputDim), h, false)
				}
			},
		},
		fromConfig: gemma4FromConfig,
		toConfig:   gemma4ToConfig,
		presets: map[string]Preset{
			// google/gemma-4-31B-it: the released config.json (its
			// text_config and vision_config, as transformers 5.7 loads
			// them, reproduced in public model reports and tests; the
			// classes' defaults describe neither flagship — they are the
			// small E2B's docstring checkpoint — and transformers' sources
			// name no flagship's shape). 60 layers 5,376 wide, 32 heads;
			// the 50 sliding-window layers (1,024 tokens) 16 KV heads of
			// 256, the 10 global ones 4 of 512 with keys as values; MLPs
			// of 21,504; 262,144 tokens, tied; no per-layer embeddings;
			// final logits capped at 30; the tower of 27 blocks 1,152 wide.
			// 31,273,086,512 parameters as transformers 5.23 builds it on
			// the meta device.
			"gemma-4-31b": {gemma4Wrapped(gemma4Text31B("google/gemma-4-31B-it")), hf("google/gemma-4-31B-it")},
			// google/gemma-4-26B-A4B-it: its released config.json as
			// above (num_global_key_value_heads 2 is the one number
			// transformers' source gives, configuration_gemma4.py l.137).
			// 30 layers 2,816 wide, 16 heads; the 25 sliding-window layers
			// 8 KV heads of 256, the 5 global ones 2 of 512 with keys as
			// values; in every layer a dense MLP of 2,112 beside 128
			// experts of 704, 8 a token; the same tower. 25,805,933,872
			// parameters as transformers 5.23 builds it on the meta device.
			"gemma-4-26b-a4b": {gemma4Wrapped(gemma4Text26B("google/gemma-4-26B-A4B-it")), hf("google/gemma-4-26B-A4B-it")},
		},
	})
}

// gemma4Wrapped is language model text with the released tower.
func gemma4Wrapped(text Model) Model {
	text.Vision = &Vision{Family: "gemma4", Tower: gemma4Tower(), FeatureLayer: -1}
	return text
}

// gemma4FromConfig reads a Gemma4Config: text_config as family
// gemma4_text, vision_config (when given) as the tower, audio_config (when
// given, with a vision_config) as the audio tower, the top level's
// tie_word_embeddings.
func gemma4FromConfig(c *hfReader, m *Model) {
	text := c.nestedAs("text_config", "gemma4_text")
	v, hasVision := c.c["vision_config"]
	hasVision = hasVision && v != nil
	a, hasAudio := c.c["audio_config"]
	hasAudio = hasAudio && a != nil
	if hasAudio && !hasVision {
		c.fail("audio_config without vision_config: Gemma4Model then builds the language model and the audio tower alone (modeling_gemma4.py l.2236-2252), which is not modelled (the engine reads a config without vision_config as gemma4_text); the released configs with audio have both")
		return
	}
	var tower, audio Model
	if hasVision {
		tower = c.nestedAs("vision_config", "gemma4_vision")
	}
	if hasAudio {
		audio = c.nestedAs("audio_config", "gemma4_audio")
	}
	if c.err != nil {
		return
	}
	name := m.Name
	*m = text
	m.Name = name
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
	if !hasVision {
		m.note("config.json", "vision_config: none — Gemma4ForConditionalGeneration builds its language model alone, modelled as family gemma4_text (whose names are model.… for the checkpoint's model.language_model.…)")
		return
	}
	m.Vision = &Vision{Family: "gemma4", Tower: tower, FeatureLayer: -1}
	if hasAudio {
		m.Audio = &Audio{Tower: audio}
	}
}

// gemma4ToConfig writes a Gemma4Config: the language model as text_config,
// the tower as vision_config, the audio tower (if any) as audio_config,
// tie_word_embeddings, and the class's token ids (or the last ids of a
// smaller vocabulary).
func gemma4ToConfig(m Model, c map[string]any) {
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
	ids := []int{258880, 258884, 258881, 255999, 258882, 256000, 258883}
	if m.Vocab <= 258884 {
		for i := range ids {
			ids[i] = m.Vocab - 1 - i
		}
	}
	for i, k := range []string{"image_token_id", "video_token_id", "audio_token_id", "boi_token_id", "eoi_token_id", "boa_token_id", "eoa_token_index"} {
		c[k] = ids[i]
	}
}

// gemma4Project is what runs between the tower's blocks and the language
// model on the last hidden state x (b.tokens: the images' soft tokens)
// (transformers 5.23.0 models/gemma4/modeling_gemma4.py):
// Gemma4VisionPooler (l.662-693) zeroes the padding patches (masked_fill,
// a copy); averages each kernel² patches into the budget's soft tokens
// (output_length, l.2088-2089: the padded patches / kernel²) as an fp32
// matmul of one-hot weights (one_hot's int64, .float(), / k², the last
// saved for the states' gradient) with the fp32 states
// (hidden_states.float(), a copy), its mask of real soft tokens
// (weights == 0 over the patches), the cast back; scales by sqrt(hidden)
// in fp32. Gemma4VisionModel.forward (l.2105-2116) keeps the real soft
// tokens (hidden_states[pooler_mask], a copy), standardize subtracts
// std_bias and multiplies by std_scale in fp32, and casts to the
// embeddings' dtype; then Gemma4MultimodalEmbedder's weightless RMSNorm
// and its projection (l.2146-2147).
func gemma4Project(b *actBuilder, p blockPlan, v Vision, x *actT, hv, h int64) *actT {
	im := v.Tower.Image
	k := int64(max(1, im.Merge))
	real := b.tokens
	n := int64(b.r.tower.MicroBatch)
	patches := n * int64(b.r.tower.m.Image.Tokens()) // padded where transformers runs the tower
	out := patches / (k * k)
	b.tokens = patches
	y := b.op("vision.pooler.masked_fill", b.size(hv, x.dtype), x.dtype, list(x))
	f := y
	if k > 1 {
		oneHot := b.op("vision.pooler.one_hot", INT64.Size(mulI64(patches, out/n)), INT64, nil)
		w := b.op("vision.pooler.weights.float", FP32.Size(mulI64(patches, out/n)), FP32, list(oneHot))
		w = b.op("vision.pooler.weights", w.bytes, FP32, list(w))
		if y.dtype != FP32 {
			f = b.op("vision.pooler.float", b.size(hv, FP32), FP32, list(y))
		}
		b.tokens = out
		f = b.op("vision.pooler.avg_pool", b.size(hv, FP32), FP32, list(w, f), w)
		b.op("vision.pooler.mask", Bool.Size(mulI64(patches, out/n)), Bool, list(w))
		if x.dtype != FP32 {
			f = b.op("vision.pooler.to", b.size(hv, x.dtype), x.dtype, list(f))
		}
	}
	b.tokens = out
	if f.dtype != FP32 {
		f = b.op("vision.pooler.float", b.size(hv, FP32), FP32, list(f))
	}
	y = b.op("vision.pooler.scaled", b.size(hv, FP32), FP32, list(f))
	b.tokens = real
	y = b.op("vision.pooler_mask.index", b.size(hv, FP32), FP32, list(y))
	if im.Standardize {
		y = b.op("vision.std_bias.sub", b.size(hv, FP32), FP32, list(y))
		y = b.op("vision.std_scale.mul", b.size(hv, FP32), FP32, list(y))
	}
	if x.dtype != FP32 {
		y = b.op("vision.hidden_states.to", b.size(hv, x.dtype), x.dtype, list(y))
	}
	// The tower's inputs_embeds is a local of Gemma4VisionModel.forward,
	// referenced until it returns here (l.2097-2116): without a graph it
	// lives through every block.
	b.hold(b.towerEmbeds)
	y = b.norm(p, "embed_vision.embedding_pre_projection_norm", "l2", y, hv)
	return b.linear(p, "embed_vision.embedding_projection", "other", y, hv, h)
}

// gemma4HeldEmbeds is llm_inputs_embeds (perLayerLookup), which
// Gemma4Model.forward holds beside the language model's layers until it
// returns (modeling_gemma4.py l.2389-2391 at 5.23.0): with per-layer
// inputs only.
func gemma4HeldEmbeds(r *resolved, p blockPlan) []maskPart {
	m := r.m
	if !p.rec.perLayerInputs5 || m.PerLayerInput == 0 {
		return nil
	}
	tokens := int64(r.MicroBatch) * int64(r.SeqLen)
	return []maskPart{{bytes: p.resid.Size(mulI64(tokens, int64(m.Hidden))), from: 0, to: m.Layers, beside: true}}
}

// gemma4ModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const gemma4ModelType = "gemma4"
