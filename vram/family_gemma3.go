package vram

import (
	"fmt"
	"math"
	"strings"
)

// Gemma 3 as released (transformers/models/gemma3/modeling_gemma3.py,
// Gemma3ForConditionalGeneration): SigLIP's vision encoder (vision_config,
// family siglip_vision_model), Gemma3MultiModalProjector and the Gemma 3
// language model (text_config, family gemma3_text). get_image_features
// takes the tower's last_hidden_state (after post_layernorm); the projector
// makes its patches a square grid (transpose, reshape, contiguous: a copy),
// average-pools it to mm_tokens_per_image tokens (AvgPool2d, which saves its
// input), normalises them with a Gemma RMSNorm and multiplies by
// mm_input_projection_weight (a bare parameter, hidden_vision ×
// hidden_text), cast back to the tower's dtype; the features are cast to the
// embeddings' dtype and masked_scattered over the image tokens, as LLaVA's.
// With token_type_ids an image's tokens attend to each other both ways (an
// or_mask_function: SDPA gets materialised masks), and the loss upcasts the
// logits and gathers the shifted ones under the attention mask before
// CrossEntropyLoss. Names: model.vision_tower.…, model.multi_modal_projector.…,
// model.language_model.…, lm_head (tied); before 4.52 vision_tower.…,
// multi_modal_projector.…, language_model.model.… (_checkpoint_conversion_mapping).
// The text model alone is family gemma3_text (Gemma3ForCausalLM).
// gemma3ModelType is this family's model_type, by which the serving engines' tables
// name it (vision_tp.go).
const gemma3ModelType = "gemma3"

func init() {
	register(&family{
		name: gemma3ModelType, source: "transformers/models/gemma3/modeling_gemma3.py",
		tensors: func(m Model, l *tensorList) { m.visionTensors(l) },
		vision: &visionWrapper{
			textPrefix: "model.language_model.", towerPrefix: "model.vision_tower.", featureLayer: -1,
			projector: func(v Vision, l *tensorList, hv, h int64) {
				l.add("model.multi_modal_projector.mm_input_projection_weight", "other", hv, h)
				l.norm("model.multi_modal_projector.mm_soft_emb_norm", false, hv)
			},
			project: gemma3Project,
			rename: func(name string) string {
				for _, r := range [][2]string{{"language_model.model.", "model.language_model."}, {"language_model.lm_head.", "lm_head."},
					{"vision_tower.", "model.vision_tower."}, {"multi_modal_projector.", "model.multi_modal_projector."}} {
					if rest, ok := strings.CutPrefix(name, r[0]); ok {
						return r[1] + rest
					}
				}
				return name
			},
			textRecipe: func(rec *recipe, _ libVersion) { rec.imageMasks, rec.maskedShiftLoss = true, true },
		},
		fromConfig: gemma3FromConfig,
		toConfig: func(m Model, c map[string]any) {
			m.writeWrapped(c, "gemma3")
			c["mm_tokens_per_image"] = m.Vision.ImageTokens()
		},
		// Gemma 3 4B and 27B as released (their config.json: text_config
		// and a SigLIP vision_config at 896 px, 256 tokens an image); the
		// instruction-tuned checkpoints (-it) publish the same config as
		// the pretrained ones (-pt). The text models alone are
		// gemma3_text's "-text" presets.
		presets: map[string]Preset{
			"gemma-3-4b-it": {Model{Name: "google/gemma-3-4b-it", Family: "gemma3_text", Layers: 34, Hidden: 2560, Heads: 8, KVHeads: 4, HeadDim: 256, FFN: 10240, Vocab: 262208, MaxPosition: 131072,
				TiedEmbeddings: true, SlidingWindow: 1024, GlobalEvery: 6, Vision: &Vision{Family: "gemma3", Tower: gemma3Tower()}}, hf("google/gemma-3-4b-it")},
			"gemma-3-27b-it": {Model{Name: "google/gemma-3-27b-it", Family: "gemma3_text", Layers: 62, Hidden: 5376, Heads: 32, KVHeads: 16, HeadDim: 128, FFN: 21504, Vocab: 262208, MaxPosition: 131072,
				TiedEmbeddings: true, SlidingWindow: 1024, GlobalEvery: 6, Vision: &Vision{Family: "gemma3", Tower: gemma3Tower()}}, hf("google/gemma-3-27b-it")},
			"gemma-3-4b": {Model{Name: "google/gemma-3-4b-pt", Family: "gemma3_text", Layers: 34, Hidden: 2560, Heads: 8, KVHeads: 4, HeadDim: 256, FFN: 10240, Vocab: 262208, MaxPosition: 131072,
				TiedEmbeddings: true, SlidingWindow: 1024, GlobalEvery: 6, Vision: &Vision{Family: "gemma3", Tower: gemma3Tower()}}, hf("google/gemma-3-4b-pt")},
			"gemma-3-27b": {Model{Name: "google/gemma-3-27b-pt", Family: "gemma3_text", Layers: 62, Hidden: 5376, Heads: 32, KVHeads: 16, HeadDim: 128, FFN: 21504, Vocab: 262208, MaxPosition: 131072,
				TiedEmbeddings: true, SlidingWindow: 1024, GlobalEvery: 6, Vision: &Vision{Family: "gemma3", Tower: gemma3Tower()}}, hf("google/gemma-3-27b-pt")},
		},
	})
}

// gemma3Tower is SigLIP at 896 px pooled 4×4 into 256 tokens an image.
func gemma3Tower() Model {
	t := siglip896()
	t.Image.Merge = 4
	return t
}

// gemma3FromConfig reads a gemma3 config.json: the text model from
// text_config, the tower from vision_config, the pooling from
// mm_tokens_per_image.
func gemma3FromConfig(c *hfReader, m *Model) {
	tower, ok := c.readWrapped(m, "gemma3_text", "siglip_vision_model")
	if !ok {
		return
	}
	if tower.Image != nil && tower.Image.Patch > 0 {
		side := tower.Image.Size / tower.Image.Patch
		tokens := c.optInt("mm_tokens_per_image", 256)
		per := int(math.Round(math.Sqrt(float64(tokens))))
		if per < 1 || per*per != tokens || side%per != 0 {
			c.fail(fmt.Sprintf("mm_tokens_per_image = %d must be a square whose side divides the tower's %d patches a side", tokens, side))
			return
		}
		tower.Image.Merge = side / per
	}
	m.Vision = &Vision{Family: "gemma3", Tower: tower}
}

// gemma3Project is Gemma3MultiModalProjector.forward on the tower's last
// hidden state x (b.tokens: the images' pooled tokens).
func gemma3Project(b *actBuilder, p blockPlan, v Vision, x *actT, hv, h int64) *actT {
	k := int64(max(1, v.Tower.Image.Merge))
	pooled := b.tokens
	b.tokens = pooled * k * k
	grid := b.op("multi_modal_projector.reshape.contiguous", b.size(hv, x.dtype), x.dtype, list(x))
	b.tokens = pooled
	y := b.op("multi_modal_projector.avg_pool", b.size(hv, x.dtype), x.dtype, list(grid), grid)
	y = b.norm(p, "multi_modal_projector.mm_soft_emb_norm", "rmsnorm", y, hv)
	y = b.linear(p, "multi_modal_projector.mm_input_projection", "other", y, hv, h)
	if y.dtype != x.dtype {
		y = b.op("multi_modal_projector.type_as", b.size(h, x.dtype), x.dtype, list(y)) // .type_as(vision_outputs)
	}
	return y
}
