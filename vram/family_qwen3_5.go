package vram

import "fmt"

// Qwen3.5 (transformers 5.23.0 models/qwen3_5/modeling_qwen3_5.py,
// Qwen3_5ForConditionalGeneration l.1729-1740 over Qwen3_5Model
// l.1292-1306): the vision encoder (qwen3_5_vision) closed by its
// PatchMerger — a LayerNorm on each patch, then each 2×2 neighbourhood of
// patches as one vector through Linear, GELU, Linear into the language
// model's width (out_hidden_size, l.974-991) — over a Gated DeltaNet /
// gated-attention hybrid language model (qwen3_5_text) whose rotary
// embedding reads 3-D positions and interleaves their sections
// (l.134-200). No deepstack. AutoModelForCausalLM builds the text model
// alone for these configs (Qwen3_5ForCausalLM, "VLM compatibility",
// models/auto/modeling_auto.py l.917); the engine models the checkpoints'
// class, the image-text one. Names: model.visual.…,
// model.language_model.…, lm_head. Configs nest text_config and
// vision_config (either may be left out: the class's defaults);
// tie_word_embeddings is the top level's (Qwen3_5Config l.185, default
// false).
func init() {
	register(&family{
		name: qwen35ModelType, gguf: "qwen35", source: "transformers/models/qwen3_5/modeling_qwen3_5.py (transformers 5.23.0)",
		servingOnly: qwen35ServingOnly,
		only5:       true,
		tensors:     func(m Model, l *tensorList) { m.visionTensors(l) },
		vision:      qwen35Wrapper(),
		fromConfig:  func(c *hfReader, m *Model) { qwen35ReadConfig(c, m, "qwen3_5_text", "qwen3_5") },
		toConfig:    func(m Model, c map[string]any) { qwen35WriteConfig(m, c, "qwen3_5_text", "qwen3_5_vision") },
		presets: map[string]Preset{
			// Qwen/Qwen3.5-9B: Qwen3_5TextConfig's defaults describe this
			// model (its docstring, configuration_qwen3_5.py l.48-49): 32
			// layers 4,096 wide, every fourth gated attention (16 heads of
			// 256 over 4 KV heads, a quarter rotated), the others Gated
			// DeltaNet (16 key and 32 value heads of 128); MLPs of 12,288;
			// 248,320 tokens, untied; Qwen3_5VisionConfig's tower (27
			// blocks 1,152 wide). The class's shape is taken as the
			// release's (its config.json was not at hand); out_hidden_size
			// is the text width (the class's 3,584 would not fit), and the
			// 262,144 positions and one MTP layer are what Qwen3.5's
			// released configs carry: 9,409,813,744 parameters as
			// transformers 5.23 builds it on the meta device.
			"qwen3.5-9b": {Model{Name: "Qwen/Qwen3.5-9B", Family: "qwen3_5_text", Layers: 32, Hidden: 4096, Heads: 16, KVHeads: 4, HeadDim: 256, FFN: 12288,
				Vocab: 248320, MaxPosition: 262144, RotaryPct: 0.25, MTPLayers: 1, DeltaNet: qwen35DeltaNet(32),
				Vision: &Vision{Family: "qwen3_5", Tower: qwen35Tower()}}, hf("Qwen/Qwen3.5-9B")},
		},
	})
}

// qwen35DeltaNet is the released Gated DeltaNet (16 key heads, 32 value
// heads of 128, a 4-tap convolution) with every fourth of layers gated
// attention.
func qwen35DeltaNet(layers int) *DeltaNet {
	d := &DeltaNet{KeyHeads: 16, ValueHeads: 32, KeyDim: 128, ValueDim: 128, ConvKernel: 4}
	for i := 3; i < layers; i += 4 {
		d.Attention = append(d.Attention, i)
	}
	return d
}

// qwen35Tower is Qwen3_5VisionConfig's (and Qwen3_5MoeVisionConfig's)
// defaults at 512×512 pixels: 27 blocks 1,152 wide, 16 heads, an MLP of
// 4,304, 16-pixel patches over 2 frames merged 2 × 2, a 48 × 48 table.
func qwen35Tower() Model {
	return Model{Family: "qwen3_5_vision", Layers: 27, Hidden: 1152, Heads: 16, FFN: 4304,
		Image: &Image{Size: 512, Patch: 16, Channels: 3, TemporalPatch: 2, Merge: 2, PositionTable: 2304}}
}

// qwen35Wrapper is the Qwen3.5 wrapper's declaration (Qwen3.5-MoE's too):
// the merger (Qwen3-VL's without its deepstack mergers) and the
// interleaved rotary embedding. The processor's largest image and video
// sizes are not declared: vLLM's profile runs the tower's own image size.
func qwen35Wrapper() *visionWrapper {
	return &visionWrapper{
		textPrefix: "model.language_model.", towerPrefix: "model.visual.", featureLayer: -1,
		projector: qwen3VLProjector,
		project: func(b *actBuilder, p blockPlan, v Vision, x *actT, hv, h int64) *actT {
			return qwen3VLMerger(b, p, v, "merger.", x, hv, h, false)
		},
		textRecipe: func(rec *recipe, _ libVersion) { rec.mropeInterleaved = true },
	}
}

// qwen35ReadConfig reads a Qwen3_5Config (Qwen3_5MoeConfig) as the wrapper
// family wrapper: text_config read as family text, vision_config as the
// tower; tie_word_embeddings is the top level's; the merger's
// out_hidden_size (the class's default 3,584) must be the text width, as
// the image features replace token embeddings.
func qwen35ReadConfig(c *hfReader, m *Model, text, wrapper string) {
	t := c.nestedAs("text_config", text)
	tower := c.nestedAs("vision_config", "qwen3_5_vision")
	if c.err != nil {
		return
	}
	name := m.Name
	*m = t
	m.Name = name
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
	out := 3584
	if vc, ok := c.c["vision_config"].(map[string]any); ok {
		sub := hfReader{c: vc}
		out = sub.optInt("out_hidden_size", out)
		if sub.err != nil {
			c.fail("vision_config." + sub.err.Error())
			return
		}
	}
	if out != m.Hidden {
		c.fail(fmt.Sprintf("vision_config.out_hidden_size = %d must equal text_config.hidden_size = %d: the merged image features replace token embeddings", out, m.Hidden))
		return
	}
	m.Vision = &Vision{Family: wrapper, Tower: tower, FeatureLayer: -1}
}

// qwen35WriteConfig writes a Qwen3_5Config (Qwen3_5MoeConfig) with the text
// and vision model_types given.
func qwen35WriteConfig(m Model, c map[string]any, textType, visionType string) {
	text := m
	text.Vision, text.Name = nil, ""
	tc := text.HFConfig()
	tc["model_type"] = textType
	c["text_config"] = tc
	tower := m.Vision.Tower
	tower.Name = ""
	vc := tower.HFConfig()
	vc["model_type"] = visionType
	vc["out_hidden_size"] = m.Hidden
	c["vision_config"] = vc
	// The class's token ids (l.181-184), or the last ids of a smaller
	// vocabulary.
	ids := []int{248056, 248057, 248053, 248054}
	if m.Vocab <= 248057 {
		ids = []int{m.Vocab - 1, m.Vocab - 2, m.Vocab - 3, m.Vocab - 4}
	}
	c["image_token_id"], c["video_token_id"], c["vision_start_token_id"], c["vision_end_token_id"] = ids[0], ids[1], ids[2], ids[3]
	c["tie_word_embeddings"] = m.TiedEmbeddings
}

// qwen35ModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const qwen35ModelType = "qwen3_5"
