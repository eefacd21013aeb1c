package vram

import (
	"fmt"
	"strings"
)

// Kimi-K2.5 (transformers 5.23.0 models/kimi_k25/modeling_kimi_k25.py,
// Kimi_K25ForConditionalGeneration l.734-745 over Kimi_K25Model
// l.576-582): its own vision tower (kimi_k25_vision), the language model
// (a DeepSeek-V3, family deepseek_v3, as AutoModel builds its text_config)
// and the projector, registered in that order, then lm_head, tied to the
// embedding when the top-level tie_word_embeddings is set (l.735;
// modeling_utils.py:2483 reads the wrapper's config, whose class defaults
// it to true, configuration_kimi_k25.py:81). The projector
// (Kimi_K25MultimodalProjection l.554-572) normalises each pooled tower
// patch (pre_norm, a LayerNorm projection_hidden_size wide), then maps
// each merge × merge neighbourhood as one vector through in_proj (as wide
// as its input), GELU and out_proj to the text width, both biased. The
// language model is transformers 5's DeepSeek-V3 (modeling_deepseek_v3.py),
// not the 4.57 layout family deepseek_v3 lists alone: fused experts
// (DeepseekV3Experts l.162-171) registered before the router and the
// shared experts (DeepseekV3MoE l.209-213), and a rotary embedding with
// transformers 5's two buffers (l.71-72). Names: model.vision_tower.…,
// model.language_model.…, model.mm_projector.…, lm_head; the checkpoint's
// own (vision_tower.encoder.blocks.…, wqkv, mm_projector.proj.0/2,
// language_model.model.…, experts one by one) are renamed on load
// (conversion_mapping.py:596-640, 2200). Configs nest text_config (a
// DeepseekV3Config; the release's model_type "kimi_k2" is rewritten to
// deepseek_v3, configuration_kimi_k25.py:85-86) and vision_config (either
// may be left out: the classes' defaults).
func init() {
	register(&family{
		name: kimiK25ModelType, source: "transformers/models/kimi_k25/modeling_kimi_k25.py (transformers 5.23.0)",
		servingOnly: "its modeling code is transformers 5's (grouped_mm experts, MLA's compressed cache, a vision tower of its own), which the training rules follow only where its traces at 5.23 hold",
		only5:       true,
		tensors:     k25Tensors,
		vision: &visionWrapper{
			textPrefix: "model.language_model.", towerPrefix: "model.vision_tower.", featureLayer: -1,
			projector:   k25Projector,
			textBuffers: k25TextBuffers,
			project:     k25Project,
		},
		fromConfig: k25ReadConfig,
		toConfig:   k25WriteConfig,
		// moonshotai/Kimi-K2.5: continual pretraining atop Kimi-K2-Base
		// (its model card), so the language model is the catalog's
		// kimi-k2-instruct (family deepseek_v3: 61 layers 7,168 wide, 64
		// heads of latent attention, one dense layer then 384 experts of
		// 2,048 with 8 a token and a shared expert, 163,840 tokens,
		// lm_head untied — the checkpoint stores language_model.lm_head,
		// conversion_mapping.py:599) with max_position_embeddings 262,144
		// (its 256K context, as model cards of its quantizations list
		// it); the tower and the projector are Kimi_K25VisionConfig's and
		// Kimi_K25Config's defaults (configuration_kimi_k25.py:44-53, 75),
		// MoonViT's 27 blocks 1,152 wide, 16 heads, an MLP of 4,304,
		// 14-pixel patches, a 64 × 64 position table, 4 frames, merged
		// 2 × 2. The release's config.json and quantization_config were
		// not at hand: no multi-token-prediction layer is counted and the
		// stored format is the model's dtype (bf16), not the release's.
		// As transformers 5.23 builds it on the meta device:
		// 1,026,879,353,328 parameters.
		presets: map[string]Preset{
			"kimi-k2.5": {Model{Name: "moonshotai/Kimi-K2.5", Family: "deepseek_v3", Layers: 61, Hidden: 7168, Heads: 64, FFN: 18432, Vocab: 163840, MaxPosition: 262144,
				Experts: 384, ExpertsPerToken: 8, SharedExperts: 1, ExpertFFN: 2048, DenseLayers: 1,
				QLoRARank: 1536, KVLoRARank: 512, QKNopeDim: 128, QKRopeDim: 64, VHeadDim: 128, HeadDim: 192,
				Vision: &Vision{Family: "kimi_k25", FeatureLayer: -1, Tower: Model{Family: "kimi_k25_vision", Layers: 27, Hidden: 1152, Heads: 16, FFN: 4304,
					Image: &Image{Size: 1792, Patch: 14, Channels: 3, Merge: 2, PositionTable: 4096, TimeTable: 4}}}}, hf("moonshotai/Kimi-K2.5")},
		},
	})
}

// k25Tensors lists the model's tensors in Kimi_K25ForConditionalGeneration's
// state-dict order: the tower, the language model's body, the projector
// (registered after it, l.579-581), then lm_head.
func k25Tensors(m Model, l *tensorList) {
	w := m.visionWrapperOf()
	tower, ok := m.towerTensors(l, w)
	if !ok {
		return
	}
	start := len(l.ts)
	m.wrappedTextTensors(l, w, k25TextTensors)
	// lm_head (the one name outside the language model's prefix) moves
	// after the projector.
	var body, head []Tensor
	for _, t := range l.ts[start:] {
		if strings.HasPrefix(t.Name, w.textPrefix) {
			body = append(body, t)
		} else {
			head = append(head, t)
		}
	}
	l.ts = append(l.ts[:start], body...)
	m.projectorTensors(l, w, tower)
	l.ts = append(l.ts, head...)
}

// k25TextTensors lists the language model as transformers 5.23 builds a
// DeepSeek-V3 (the blocks' latent attention, dense MLPs in the first
// first_k_dense_replace layers, then the fused experts, the router and
// the shared experts as one MLP); another family as it lists itself.
func k25TextTensors(m Model, l *tensorList) {
	if m.Family != "deepseek_v3" {
		lookupFamily(m.Family).tensors(m, l)
		return
	}
	standardDecoder{attn: mlaTensors, mlp: dsaMLP}.tensors(m, l)
}

// k25TextBuffers adds the buffer transformers 5's DeepSeek-V3 has beside
// the family's (inv_freq and the routers' e_score_correction_bias): the
// rotary embedding's original_inv_freq (modeling_deepseek_v3.py:72).
func k25TextBuffers(m Model, b *bufferList) {
	if m.Family == "deepseek_v3" {
		b.add("model.rotary_emb.original_inv_freq", -1, FP32, int64(m.QKRopeDim)/2)
	}
}

// k25Projector lists Kimi_K25MultimodalProjection's parameters (l.557-564)
// for a tower hv wide and a language model h wide: pre_norm is
// projection_hidden_size wide, which k25ReadConfig requires to be hv.
func k25Projector(v Vision, l *tensorList, hv, h int64) {
	mm := int64(1)
	if im := v.Tower.Image; im != nil {
		mm = int64(im.Merge * im.Merge)
	}
	p := "model.mm_projector."
	l.norm(p+"pre_norm", true, hv)
	l.linear(p+"in_proj", "other", mm*hv, mm*hv, true)
	l.linear(p+"out_proj", "other", mm*hv, h, true)
}

// k25Project is the tower's temporal pooling and the projector on the
// final LayerNorm's output x (b.tokens merged patches): the merge index
// (int64, one a patch, get_vision_temporal_merge_index l.429-451)
// gathers each merge × merge neighbourhood's rows (a copy the index's
// backward reads the index for), their mean over the single frame
// another (l.545-546); then Kimi_K25MultimodalProjection (l.566-572):
// pre_norm over each patch, viewed as one vector a neighbourhood,
// in_proj, GELU (saves its input), out_proj to the text width.
// get_image_features' squeeze and split are views (l.598-602).
func k25Project(b *actBuilder, p blockPlan, v Vision, x *actT, hv, h int64) *actT {
	mm := int64(v.Tower.Image.Merge * v.Tower.Image.Merge)
	merged := b.tokens
	b.tokens = merged * mm
	idx := b.op("vision.merge_index", INT64.Size(b.tokens), INT64, nil)
	// Saved for the gather's backward; without a gradient through the
	// tower imageSide drops the save (withoutGrad, noGraph).
	y := b.op("vision.hidden_states[merge_index]", b.size(hv, x.dtype), x.dtype, list(x, idx), idx)
	y = b.op("vision.pooled.mean", b.size(hv, x.dtype), x.dtype, list(y))
	y = b.norm(p, "mm_projector.pre_norm", "layernorm", y, hv)
	b.tokens = merged
	y = b.linear(p, "mm_projector.in_proj", "other", y, mm*hv, mm*hv)
	y = b.op("mm_projector.gelu", b.size(mm*hv, y.dtype), y.dtype, list(y), y)
	return b.linear(p, "mm_projector.out_proj", "other", y, mm*hv, h)
}

// k25ReadConfig reads a Kimi_K25Config: text_config as deepseek_v3 (or
// kimi_k2, which __post_init__ rewrites to it, l.85-86), vision_config as
// the tower; tie_word_embeddings is the top level's (the class's true,
// l.81). The projector's pre_norm normalises each tower patch (l.568), so
// projection_hidden_size (the class's 1,152) must equal
// vision_config.hidden_size.
func k25ReadConfig(c *hfReader, m *Model) {
	if sub, ok := c.c["text_config"].(map[string]any); ok {
		if mt, _ := sub["model_type"].(string); mt != "" && mt != "deepseek_v3" && mt != "kimi_k2" {
			c.fail(fmt.Sprintf("text_config.model_type %q: Kimi-K2.5's language model is modelled as DeepSeek-V3 (deepseek_v3, or kimi_k2)", mt))
			return
		}
	}
	t := c.nestedAs("text_config", "deepseek_v3")
	tower := c.nestedAs("vision_config", "kimi_k25_vision")
	if c.err != nil {
		return
	}
	name := m.Name
	*m = t
	m.Name = name
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", true)
	if p := c.optInt("projection_hidden_size", 1152); p != tower.Hidden && c.err == nil {
		c.fail(fmt.Sprintf("projection_hidden_size = %d: Kimi-K2.5's projector normalises each tower patch (modeling_kimi_k25.py:568), so it must equal vision_config.hidden_size = %d", p, tower.Hidden))
		return
	}
	m.Vision = &Vision{Family: "kimi_k25", Tower: tower, FeatureLayer: -1}
}

// k25WriteConfig writes a Kimi_K25Config: the text and vision configs
// under their model_types, the projector as wide as the tower, the
// top-level tie_word_embeddings.
func k25WriteConfig(m Model, c map[string]any) {
	text := m
	text.Vision, text.Name, text.TiedEmbeddings = nil, "", false
	c["text_config"] = text.HFConfig()
	tower := m.Vision.Tower
	tower.Name = ""
	c["vision_config"] = tower.HFConfig()
	c["projection_hidden_size"], c["tie_word_embeddings"] = tower.Hidden, m.TiedEmbeddings
}

// kimiK25ModelType is the family's model_type, which the serving engines' tables
// of supported architectures are keyed by.
const kimiK25ModelType = "kimi_k25"
