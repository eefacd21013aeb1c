package vram

import (
	"fmt"
)

// Qwen3-VL (transformers 4.57 models/qwen3_vl/modeling_qwen3_vl.py,
// Qwen3VLForConditionalGeneration l.1260-1380): the vision encoder
// (qwen3_vl_vision) closed by its PatchMerger — a LayerNorm on each patch,
// then each 2×2 neighbourhood of patches as one vector through Linear,
// GELU, Linear into the language model's width (l.95-110) — and one
// deepstack merger for each block of deepstack_visual_indexes (the same,
// its LayerNorm over the 2×2 neighbourhood's vector, use_postshuffle_norm),
// run on that block's output as the tower's loop passes it (l.737-743); a
// Qwen3 language model (q_norm, k_norm) whose rotary embedding reads 3-D
// position ids (3 × batch × sequence, get_rope_index) and interleaves the
// three sections' frequencies (apply_interleaved_mrope, l.324-342) into one
// cos and one sin of batch × sequence × head_dim, which every layer saves;
// after each of the first len(deepstack) decoder layers the text model adds
// deepstack feature i to the image tokens' hidden states
// (_deepstack_process, l.891-898: hidden_states[visual_pos_masks, :].clone()
// + visual_embeds, written back with index_put_). The image features are
// concatenated, cast to the embeddings' dtype and masked_scattered over the
// image tokens (l.1133-1140), as in LLaVA. Names: model.visual.…,
// model.language_model.…, lm_head. Configs nest text_config and
// vision_config; tie_word_embeddings is the top level's (Qwen3VLConfig).
// qwen3VLModelType is this family's model_type, by which the serving engines' tables
// name it (vision_tp.go).
const qwen3VLModelType = "qwen3_vl"

func init() {
	register(&family{
		name: qwen3VLModelType, gguf: "qwen3vl", source: "transformers/models/qwen3_vl/modeling_qwen3_vl.py",
		tensors:    func(m Model, l *tensorList) { m.visionTensors(l) },
		vision:     qwen3VLWrapper(),
		fromConfig: func(c *hfReader, m *Model) { qwen3VLReadConfig(c, m, "qwen3", "qwen3_vl") },
		toConfig:   func(m Model, c map[string]any) { qwen3VLWriteConfig(m, c, "qwen3_vl_text", "qwen3_vl") },
		presets: map[string]Preset{
			// Qwen/Qwen3-VL-8B-Instruct: a Qwen3-8B-shaped language model
			// (256k positions) and the 27-block vision encoder.
			"qwen3-vl-8b": {Model{Name: "Qwen/Qwen3-VL-8B-Instruct", Family: "qwen3", Layers: 36, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 12288,
				Vocab: 151936, MaxPosition: 262144, Vision: &Vision{Family: "qwen3_vl", Tower: qwen3Tower(false)}}, hf("Qwen/Qwen3-VL-8B-Instruct")},
			// Qwen/Qwen3-VL-4B-Instruct: Qwen3-4B-shaped (tied embeddings)
			// with the 24-block encoder.
			"qwen3-vl-4b": {Model{Name: "Qwen/Qwen3-VL-4B-Instruct", Family: "qwen3", Layers: 36, Hidden: 2560, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 9728,
				Vocab: 151936, MaxPosition: 262144, TiedEmbeddings: true, Vision: &Vision{Family: "qwen3_vl", Tower: qwen3Tower(true)}}, hf("Qwen/Qwen3-VL-4B-Instruct")},
			// Qwen/Qwen3-VL-2B-Instruct: Qwen3-1.7B-shaped (tied embeddings)
			// with the 24-block encoder.
			"qwen3-vl-2b": {Model{Name: "Qwen/Qwen3-VL-2B-Instruct", Family: "qwen3", Layers: 28, Hidden: 2048, Heads: 16, KVHeads: 8, HeadDim: 128, FFN: 6144,
				Vocab: 151936, MaxPosition: 262144, TiedEmbeddings: true, Vision: &Vision{Family: "qwen3_vl", Tower: qwen3Tower(true)}}, hf("Qwen/Qwen3-VL-2B-Instruct")},
		},
	})
}

// qwen3VLReadConfig reads a Qwen3VLConfig (or Qwen3VLMoeConfig) as the
// wrapper family wrapper: text_config (Qwen3VLTextConfig, read as family
// text with its defaults) and vision_config, either of which may be left
// out (the nested classes' defaults); tie_word_embeddings is the top
// level's (Qwen3VLConfig's default false); the merger's out_hidden_size
// must be the text width; the rope's mrope_section must cover half the
// head.
func qwen3VLReadConfig(c *hfReader, m *Model, textFamily, wrapper string) {
	tc, _ := c.c["text_config"].(map[string]any)
	if tc == nil {
		// Qwen3VLConfig reads no text keys at its top level (unlike
		// Qwen2.5-VL's): they would be dropped for the class's defaults.
		for _, k := range []string{"num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
			"num_key_value_heads", "head_dim", "vocab_size", "num_experts", "moe_intermediate_size"} {
			if _, ok := c.c[k]; ok {
				c.fail(fmt.Sprintf("text_config: a Qwen3-VL config nests its language model's keys in text_config (an object); the top level's %q would be ignored", k))
				return
			}
		}
	}
	text := c.nestedAs("text_config", textFamily)
	tower := c.nestedAs("vision_config", "qwen3_vl_vision")
	if c.err != nil {
		return
	}
	name := m.Name
	*m = text
	m.Name = name
	// Qwen3VLTextConfig's defaults (configuration_qwen3_vl.py:84-98,
	// transformers 5.23.0) are Qwen3Config's but for 128,000 positions.
	if _, ok := tc["max_position_embeddings"]; !ok {
		m.MaxPosition = 128000
	}
	m.TiedEmbeddings = c.optBool("tie_word_embeddings", false)
	// out_hidden_size defaults to 3584 (configuration_qwen3_vl.py:53,
	// configuration_qwen3_vl_moe.py:148), whatever the text width: the
	// classes' defaults (4,096 and 2,048 wide) build mergers whose features
	// cannot replace the token embeddings.
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
	rs, _ := tc["rope_scaling"].(map[string]any)
	sec, _ := rs["mrope_section"].([]any)
	sum := 0
	for _, s := range sec {
		f, _ := s.(float64)
		sum += int(f)
	}
	hd := m.HeadDim
	if hd == 0 && m.Heads > 0 {
		hd = m.Hidden / m.Heads // Qwen3VLMoeTextConfig's head_dim None (l.116)
	}
	if len(sec) != 3 || sum*2 != hd {
		c.fail(fmt.Sprintf("text_config.rope_scaling.mrope_section %v: three sections summing to head_dim / 2 = %d are expected", sec, hd/2))
		return
	}
	m.Vision = &Vision{Family: wrapper, Tower: tower, FeatureLayer: -1}
}

// qwen3VLWrapper is the Qwen3-VL wrapper's declaration (Qwen3-VL-MoE's
// too): the mergers, the deepstack taps and their hook, the interleaved
// rotary embedding.
func qwen3VLWrapper() *visionWrapper {
	return &visionWrapper{
		textPrefix: "model.language_model.", towerPrefix: "model.visual.", featureLayer: -1,
		projector: qwen3VLProjector,
		project: func(b *actBuilder, p blockPlan, v Vision, x *actT, hv, h int64) *actT {
			return qwen3VLMerger(b, p, v, "merger.", x, hv, h, false)
		},
		tap:        qwen3VLTap,
		textRecipe: func(rec *recipe, _ libVersion) { rec.mropeInterleaved = true },
		textMasks:  qwen3VLDeepstackMask,
		afterLayer: qwen3VLDeepstackAdd,
		// The image processor's size.longest_edge, 4096² pixels (16,384
		// tokens an image), and the video processor's size (the released
		// video_preprocessor_config.json: shortest_edge 4096, longest_edge
		// 25165824 = 24576 × 32 × 32).
		maxPixels: 16777216, video: qwen3Video, videoMinPixels: 4096, videoMaxPixels: 25165824,
	}
}

// qwen3VLTap is the deepstack merger of tower block block, where the
// tower taps it (l.737-743).
func qwen3VLTap(b *actBuilder, p blockPlan, v Vision, block int, x *actT, hv, h int64) *actT {
	for i, t := range v.Tower.Image.Deepstack.Indexes() {
		if t == block {
			return qwen3VLMerger(b, p, v, fmt.Sprintf("deepstack_merger_list.%d.", i), x, hv, h, true)
		}
	}
	return nil
}

// qwen3VLWriteConfig writes a Qwen3VLConfig (Qwen3VLMoeConfig) with the
// text and vision model_types given.
func qwen3VLWriteConfig(m Model, c map[string]any, textType, visionType string) {
	v := m.Vision
	text := m
	text.Vision, text.Name = nil, ""
	tc := text.HFConfig()
	tc["model_type"] = textType
	// The three rotary sections as released: [24, 20, 20] for head_dim
	// 128, the rest of half the head to time.
	half := m.HeadDim / 2
	hw := half * 5 / 16
	tc["rope_scaling"] = map[string]any{"rope_type": "default", "mrope_interleaved": true, "mrope_section": []int{half - 2*hw, hw, hw}}
	c["text_config"] = tc
	tower := v.Tower
	tower.Name = ""
	vc := tower.HFConfig()
	vc["model_type"] = visionType
	vc["out_hidden_size"] = m.Hidden
	c["vision_config"] = vc
	// The last token ids stand for the image and the vision markers.
	c["image_token_id"], c["video_token_id"] = m.Vocab-1, m.Vocab-2
	c["vision_start_token_id"], c["vision_end_token_id"] = m.Vocab-3, m.Vocab-4
	c["tie_word_embeddings"] = m.TiedEmbeddings
}

// qwen3VLProjector lists the tower's mergers (l.95-110, 580-591): the
// final one (its LayerNorm over the tower's width) and one for each
// deepstack block (its LayerNorm over merge² × the tower's width).
func qwen3VLProjector(v Vision, l *tensorList, hv, h int64) {
	mm := int64(1)
	taps := 0
	if im := v.Tower.Image; im != nil {
		mm, taps = int64(im.Merge*im.Merge), im.Deepstack.Len()
	}
	l.norm("model.visual.merger.norm", true, hv)
	l.linear("model.visual.merger.linear_fc1", "other", mm*hv, mm*hv, true)
	l.linear("model.visual.merger.linear_fc2", "other", mm*hv, h, true)
	for i := 0; i < taps; i++ {
		p := fmt.Sprintf("model.visual.deepstack_merger_list.%d.", i)
		l.norm(p+"norm", true, mm*hv)
		l.linear(p+"linear_fc1", "other", mm*hv, mm*hv, true)
		l.linear(p+"linear_fc2", "other", mm*hv, h, true)
	}
}

// qwen3VLMerger is a Qwen3VLVisionPatchMerger's ops (l.103-107) on the
// tower's hidden states x (the patches): its LayerNorm on each patch, or
// with postShuffle on each merge² neighbourhood's vector; fc1, GELU (saves
// its input), fc2. It returns the features of the b.tokens image tokens.
func qwen3VLMerger(b *actBuilder, p blockPlan, v Vision, name string, x *actT, hv, h int64, postShuffle bool) *actT {
	im := *v.Tower.Image
	mm := int64(im.Merge * im.Merge)
	merged := b.tokens // the images' tokens in the language model
	var y *actT
	if postShuffle {
		y = b.norm(p, name+"norm", "layernorm", x, mm*hv)
	} else {
		b.tokens = merged * mm
		y = b.norm(p, name+"norm", "layernorm", x, hv)
		b.tokens = merged
	}
	inner := mm * hv / b.r.projectorShard() // vision_tp.go
	y = b.linear(p, name+"linear_fc1", "other", y, mm*hv, inner)
	y = b.op(name+"gelu", b.size(inner, y.dtype), y.dtype, list(y), y)
	return b.linear(p, name+"linear_fc2", "other", y, inner, h)
}

// qwen3VLDeepstackMask is the deepstack features as the text model gets
// them: a list built before the blocks, referenced by the model's forward
// until it returns and read beside the first len(deepstack) layers, never
// an input of a checkpointed layer (merger outputs: image tokens × hidden
// in the compute dtype each). Where the mergers train, feature i's
// gradient appears in layer i's backward (its add's) and waits for the
// embedding side's backward, where its merger consumes it.
func qwen3VLDeepstackMask(r *resolved, p blockPlan) []maskPart {
	v := r.m.Vision
	tokens := int64(r.MicroBatch) * int64(r.images) * int64(v.ImageTokens())
	one := p.e.Size(mulI64(tokens, int64(r.m.Hidden)))
	var out []maskPart
	for i := 0; i < v.Tower.Image.Deepstack.Len(); i++ {
		mp := maskPart{bytes: one, to: r.m.Layers, beside: true, gradAt: i}
		if r.trains(Tensor{part: projectorPart}) && i < r.m.Layers {
			mp.grad = one
		}
		out = append(out, mp)
	}
	return out
}

// qwen3VLDeepstackAdd is _deepstack_process after decoder layer layer
// (l.891-898) on its output x: the feature cast to the hidden states'
// dtype (a copy when they differ), the image tokens' rows gathered with
// the bool mask, a clone, the sum, and index_put_ writing it back in
// place. Its backward copies the whole hidden-state gradient to zero the
// image rows (index_put's backward). The gather and index_put_ save the
// mask's nonzero indices (int64, 16 bytes an image token); they are left
// out, as saving them would put these ops into a checkpointed layer's
// recomputation, which they are not part of (the text model's loop runs
// them outside the layer).
func qwen3VLDeepstackAdd(b *actBuilder, p blockPlan, layer int, x *actT) *actT {
	r := b.r
	h := int64(r.m.Hidden)
	tokens := b.tokens
	full := x.bytes
	b.tokens = int64(r.MicroBatch) * int64(r.images) * int64(r.m.Vision.ImageTokens())
	feat := b.external("deepstack", b.size(h, p.e), p.e)
	if feat.dtype != x.dtype {
		feat = b.op("deepstack.to", b.size(h, x.dtype), x.dtype, list(feat))
	}
	sel := b.op("hidden[visual_pos_masks]", b.size(h, x.dtype), x.dtype, list(x))
	cl := b.op("hidden[visual_pos_masks].clone", b.size(h, x.dtype), x.dtype, list(sel))
	sum := b.op("+visual_embeds", b.size(h, x.dtype), x.dtype, list(cl, feat))
	b.op("hidden[visual_pos_masks]=", 0, x.dtype, list(x, sum))
	b.gradWorkspace(full)
	b.tokens = tokens
	return x
}
