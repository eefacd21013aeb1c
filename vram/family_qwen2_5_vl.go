package vram

import (
	"fmt"
	"strings"
)

// Qwen2.5-VL (transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py,
// Qwen2_5_VLForConditionalGeneration): the vision encoder
// (qwen2_5_vl_vision) and its PatchMerger — an RMSNorm, then each 2×2
// neighbourhood of patches as one vector through Linear, GELU, Linear into
// the language model's width, put back from window order — and a Qwen2
// language model whose rotary embedding is multimodal: positions in three
// sections (time, height, width), cos and sin computed for all three at
// once (3 × batch × sequence × head_dim each, kept through the blocks) and
// each layer cutting its own cos and sin out of them (torch.cat, saved by
// the products with q and k); each layer's attention also owns a rotary
// module (its inv_freq buffer). Image features are concatenated, cast to
// the embeddings' dtype and masked_scattered over the image tokens, as in
// LLaVA. Names: model.visual.…, model.language_model.…, lm_head (before
// 4.52: visual.… and model.…). Released configs are flat (the text keys at
// the top); 4.52 and later write text_config.
// qwen25VLModelType is this family's model_type, by which the serving engines' tables
// name it (vision_tp.go).
const qwen25VLModelType = "qwen2_5_vl"

func init() {
	register(&family{
		name: qwen25VLModelType, source: "transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py",
		tensors: func(m Model, l *tensorList) { m.visionTensors(l) },
		vision: &visionWrapper{
			textPrefix: "model.language_model.", towerPrefix: "model.visual.", featureLayer: -1,
			projector: func(v Vision, l *tensorList, hv, h int64) {
				mm := int64(1)
				if im := v.Tower.Image; im != nil {
					mm = int64(im.Merge * im.Merge)
				}
				l.norm("model.visual.merger.ln_q", false, hv)
				l.linear("model.visual.merger.mlp.0", "other", mm*hv, mm*hv, true)
				l.linear("model.visual.merger.mlp.2", "other", mm*hv, h, true)
			},
			project: func(b *actBuilder, p blockPlan, v Vision, x *actT, hv, h int64) *actT {
				im := *v.Tower.Image
				mm := int64(im.Merge * im.Merge)
				merged := b.tokens // b.tokens is the images' tokens in the language model
				b.tokens = merged * mm
				y := b.norm(p, "merger.ln_q", "rmsnorm", x, hv)
				b.tokens = merged
				inner := mm * hv / b.r.projectorShard() // vision_tp.go
				y = b.linear(p, "merger.mlp.0", "other", y, mm*hv, inner)
				y = b.op("merger.mlp.1.gelu", b.size(inner, y.dtype), y.dtype, list(y), y)
				y = b.linear(p, "merger.mlp.2", "other", y, inner, h)
				// hidden_states[argsort(window_index)]: back from window order.
				return b.op("merger.reverse_order", b.size(h, y.dtype), y.dtype, list(y))
			},
			rename: func(name string) string {
				switch {
				case strings.HasPrefix(name, "visual."):
					return "model." + name
				case strings.HasPrefix(name, "model.") && !strings.HasPrefix(name, "model.language_model.") && !strings.HasPrefix(name, "model.visual."):
					return "model.language_model." + strings.TrimPrefix(name, "model.")
				}
				return name
			},
			textRecipe: func(rec *recipe, lib libVersion) {
				// Before 5.0 each layer cut its cos and sin out of the
				// three-section tables (4.57 modeling_qwen2_5_vl.py:577-581);
				// 5.x's rotary embedding recomposes the sections once
				// (5.23 l.527-544) and the layers apply the plain rotary
				// (l.649), as Qwen3-VL's interleaved tables.
				if lib.before(5, 0) {
					rec.mropeSections = true
				} else {
					rec.mropeInterleaved = true
				}
			},
			// The released preprocessor_config.json's max_pixels: 3584²
			// pixels, 16,384 tokens an image ("4-16384 visual tokens", the
			// model card); videos come in pairs of frames of that size.
			maxPixels: 12845056, video: qwen2Video,
			textBuffers: func(m Model, b *bufferList) {
				for i := 0; i < m.Layers; i++ {
					b.add(fmt.Sprintf("model.layers.%d.self_attn.rotary_emb.inv_freq", i), i, FP32, int64(m.HeadDim/2))
				}
			},
		},
		fromConfig: qwen25VLFromConfig,
		toConfig:   qwen25VLToConfig,
		presets: map[string]Preset{
			// Qwen/Qwen2.5-VL-7B-Instruct: a Qwen2.5-7B language model
			// (vocab 152064, 128k positions) and the 32-block vision encoder.
			"qwen2.5-vl-7b": {Model{Name: "Qwen/Qwen2.5-VL-7B-Instruct", Family: "qwen2", Layers: 28, Hidden: 3584, Heads: 28, KVHeads: 4, FFN: 18944,
				Vocab: 152064, MaxPosition: 128000, Vision: &Vision{Family: "qwen2_5_vl", Tower: qwen25VLTower()}}, hf("Qwen/Qwen2.5-VL-7B-Instruct")},
			// Qwen/Qwen2.5-VL-3B-Instruct: Qwen2.5-3B (tied embeddings).
			"qwen2.5-vl-3b": {Model{Name: "Qwen/Qwen2.5-VL-3B-Instruct", Family: "qwen2", Layers: 36, Hidden: 2048, Heads: 16, KVHeads: 2, FFN: 11008,
				Vocab: 151936, MaxPosition: 128000, TiedEmbeddings: true, Vision: &Vision{Family: "qwen2_5_vl", Tower: qwen25VLTower()}}, hf("Qwen/Qwen2.5-VL-3B-Instruct")},
		},
	})
}

// qwen25VLTextDefaults are Qwen2_5_VLTextConfig's defaults where
// Qwen2Config's differ (configuration_qwen2_5_vl.py:109-116, transformers
// 5.23.0): a text key the config leaves out, flat or under text_config,
// takes these (Qwen2_5_VLConfig.__post_init__ builds the text config from
// the flat keys, l.196-202).
var qwen25VLTextDefaults = map[string]any{"vocab_size": 152064.0, "hidden_size": 8192.0, "intermediate_size": 29568.0,
	"num_hidden_layers": 80.0, "num_attention_heads": 64.0, "num_key_value_heads": 8.0}

// qwen25VLFromConfig reads a Qwen2.5-VL config: the text keys flat (as
// released) or under text_config (4.52 and later), the tower's
// vision_config, and the three rotary sections.
func qwen25VLFromConfig(c *hfReader, m *Model) {
	key, textKeys := "", c.c // a flat config, as released
	if tc, ok := c.c["text_config"].(map[string]any); ok {
		key, textKeys = "text_config", tc
	} else if v, ok := c.c["text_config"]; ok && v != nil {
		c.fail(fmt.Sprintf("%q must be an object, got %v", "text_config", v))
		return
	}
	keys := make(map[string]any, len(textKeys)+len(qwen25VLTextDefaults))
	for k, v := range qwen25VLTextDefaults {
		keys[k] = v
	}
	for k, v := range textKeys {
		if v != nil {
			keys[k] = v
		}
	}
	if v, ok := textKeys["num_key_value_heads"]; ok && v == nil {
		keys["num_key_value_heads"] = keys["num_attention_heads"] // None: num_attention_heads (l.134-135)
	}
	text := c.readAs(key, keys, "qwen2")
	tower := c.nestedAs("vision_config", "qwen2_5_vl_vision")
	if c.err != nil {
		return
	}
	name := m.Name
	*m = text
	m.Name = name
	// Qwen2_5_VLConfig ties the embeddings where either its own
	// tie_word_embeddings or its text config's says so (l.212-213).
	m.TiedEmbeddings = m.TiedEmbeddings || c.optBool("tie_word_embeddings", false)
	// out_hidden_size defaults to 3584 (l.64), whatever the language
	// model's width: the class's defaults (8,192 wide) build a merger
	// whose features cannot replace the token embeddings.
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
		c.fail(fmt.Sprintf("vision_config.out_hidden_size = %d must equal the language model's hidden_size = %d: the merged image features replace token embeddings", out, m.Hidden))
		return
	}
	rs, _ := textKeys["rope_scaling"].(map[string]any)
	sec, _ := rs["mrope_section"].([]any)
	sum := 0
	for _, s := range sec {
		f, _ := s.(float64)
		sum += int(f)
	}
	if len(sec) != 3 || sum*2 != m.Hidden/max(1, m.Heads) {
		c.fail(fmt.Sprintf("rope_scaling.mrope_section %v: three sections summing to head_dim / 2 are expected", sec))
	}
	m.Vision = &Vision{Family: "qwen2_5_vl", Tower: tower, FeatureLayer: -1}
}

// qwen25VLToConfig writes the nested config of 4.52 and later.
func qwen25VLToConfig(m Model, c map[string]any) {
	v := m.Vision
	text := m
	text.Vision, text.Name = nil, ""
	tc := text.HFConfig()
	delete(tc, "model_type")
	// The three rotary sections: a quarter of the rotated pairs for
	// time, the rest split between height and width ([16, 24, 24]
	// for head_dim 128, as released).
	half := m.HeadDim / 2
	t := half / 4
	tc["rope_scaling"] = map[string]any{"type": "mrope", "mrope_section": []int{t, (half - t) / 2, half - t - (half-t)/2}}
	c["text_config"] = tc
	tower := v.Tower
	tower.Name = ""
	vc := tower.HFConfig()
	delete(vc, "model_type")
	vc["out_hidden_size"] = m.Hidden
	c["vision_config"] = vc
	// The last token ids stand for the image and the vision markers.
	c["image_token_id"], c["video_token_id"] = m.Vocab-1, m.Vocab-2
	c["vision_start_token_id"], c["vision_end_token_id"] = m.Vocab-3, m.Vocab-4
	c["tie_word_embeddings"] = m.TiedEmbeddings
}
