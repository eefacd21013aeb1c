package vram

// Llama 4 as released (transformers/models/llama4/modeling_llama4.py,
// Llama4ForConditionalGeneration): the vision encoder (vision_config,
// family llama4_vision_model, its pixel-shuffle adapter included),
// Llama4MultiModalProjector (linear_1, no bias) and the language model
// (text_config, family llama4_text, as Llama4ForCausalLM under
// language_model). get_image_features returns the adapter's output;
// forward flattens it, projects it, casts it to the embeddings' dtype and
// masked_scatters it over the image tokens (no concatenation); the loss
// gathers the shifted logits, in their own dtype, where the attention mask
// is set before CrossEntropyLoss. Names: vision_model.…,
// multi_modal_projector.linear_1, language_model.model.…,
// language_model.lm_head. The text model alone is family llama4_text.
// llama4ModelType is the wrapper's model_type.
const llama4ModelType = "llama4"

func init() {
	register(&family{
		name: llama4ModelType, source: "transformers/models/llama4/modeling_llama4.py",
		tensors: func(m Model, l *tensorList) { m.visionTensors(l) },
		vision: &visionWrapper{
			textPrefix: "language_model.model.", headPrefix: "language_model.", towerPrefix: "vision_model.", featureLayer: -1,
			// Llama4ImageProcessorFast: up to max_patches (16) tiles
			// and, past one, a global tile (image_processing_llama4_fast.py
			// l.338, 428-445, transformers 4.57.6), rescaled and
			// normalized in bf16 (l.347-367).
			tiles: 16, pixels: BF16,
			projector: func(v Vision, l *tensorList, hv, h int64) {
				l.linear("multi_modal_projector.linear_1", "other", int64(v.Tower.Image.AdapterDim), h, false)
			},
			project:    llama4Project,
			noCat:      true,
			textRecipe: func(rec *recipe, _ libVersion) { rec.maskedShiftLoss, rec.shiftLossInDType = true, true },
		},
		fromConfig: llama4FromConfig,
		toConfig: func(m Model, c map[string]any) {
			m.writeWrapped(c, "llama4")
		},
		// Llama 4 Scout and Maverick as released: the text models of their
		// config.json (llama4_text's "-text" presets) with the vision
		// encoder of their vision_config (336 px, 144 tokens an image).
		presets: map[string]Preset{
			"llama-4-scout":        {llama4Full(llama4ScoutText(), "meta-llama/Llama-4-Scout-17B-16E"), hf("meta-llama/Llama-4-Scout-17B-16E")},
			"llama-4-maverick":     {llama4Full(llama4MaverickText(), "meta-llama/Llama-4-Maverick-17B-128E"), hf("meta-llama/Llama-4-Maverick-17B-128E")},
			"llama-4-maverick-fp8": {llama4Full(llama4MaverickFP8Text(), "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8"), hf("meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8")},
		},
	})
}

// llama4Tower is the vision encoder of Llama 4 Scout and Maverick (their
// config.json vision_config): 34 blocks 1408 wide over 336-px images of
// 14-px patches, pixel shuffle 0.5 into 144 tokens, adapter 4096 wide.
func llama4Tower() Model {
	return Model{Family: "llama4_vision_model", Layers: 34, Hidden: 1408, Heads: 16, FFN: 5632,
		Image: &Image{Size: 336, Patch: 14, Channels: 3, ClassToken: true, Merge: 2, AdapterDim: 4096}}
}

// llama4Full is a text model with the vision encoder.
func llama4Full(m Model, name string) Model {
	m.Name = name
	m.Vision = &Vision{Family: llama4ModelType, Tower: llama4Tower()}
	return m
}

// llama4FromConfig reads a llama4 config.json: the text model from
// text_config, the tower from vision_config. Either left out takes its
// class's defaults (configuration_llama4.py:225-228, transformers 5.23.0),
// and the vision class's (l.56-74) are refused: transformers builds them
// but cannot run them, fc1 taking intermediate_size (5632) inputs where
// the pixel shuffle makes 4 · hidden_size (3072), linear_1
// vision_output_dim (7680) where fc2 makes projector_output_dim (4096)
// (modeling_llama4.py:681-682, 697, 731).
func llama4FromConfig(c *hfReader, m *Model) {
	tower, ok := c.readWrapped(m, "llama4_text", "llama4_vision_model")
	if !ok {
		return
	}
	m.Vision = &Vision{Family: llama4ModelType, Tower: tower}
}

// llama4Project is the tower's vision adapter on its last hidden state x
// (after layernorm_post, class token included), then the projector:
// pixel_shuffle drops the class token (a view), permutes twice (two
// contiguous copies of the patches), Llama4VisionMLP2 runs fc1, GELU, fc2,
// GELU (each saving its input; projector_dropout 0 is a no-op), all with
// the tower's weights; linear_1 projects to the language model's width.
// Under vLLM's TP (vision_tp.go) fc1 makes the rank's share of the inner
// width, fc2 all-reduces it, and linear_1 makes the rank's share of the
// output, then gathers it.
func llama4Project(b *actBuilder, p blockPlan, v Vision, x *actT, hv, h int64) *actT {
	im := v.Tower.Image
	k := int64(im.Merge)
	a := int64(im.AdapterDim)
	tp := b.r.projectorShard()
	pt := p.withFrozen(!b.r.towerTrains())
	images := b.tokens
	b.tokens = images * k * k
	s := b.op("vision_adapter.pixel_shuffle.contiguous", b.size(hv, x.dtype), x.dtype, list(x))
	s = b.op("vision_adapter.pixel_shuffle.contiguous2", b.size(hv, x.dtype), x.dtype, list(s))
	b.tokens = images
	y := b.linear(pt, "vision_adapter.mlp.fc1", "other", s, hv*k*k, a/tp)
	y = b.op("vision_adapter.mlp.gelu1", b.size(a/tp, y.dtype), y.dtype, list(y), y)
	y = b.linear(pt, "vision_adapter.mlp.fc2", "other", y, a/tp, a)
	y = b.op("vision_adapter.mlp.gelu2", b.size(a, y.dtype), y.dtype, list(y), y)
	out := b.linear(p, "multi_modal_projector.linear_1", "other", y, a, h/tp)
	if tp > 1 {
		out = b.op("multi_modal_projector.linear_1.all_gather", b.size(h, out.dtype), out.dtype, list(out))
	}
	return out
}
