package vram

import "fmt"

// Qwen3-Omni (transformers 5.23.0
// models/qwen3_omni_moe/modeling_qwen3_omni_moe.py,
// Qwen3OmniMoeForConditionalGeneration l.3950-3970; its config,
// Qwen3OmniMoeConfig, configuration_qwen3_omni_moe.py l.537-625, nests
// thinker_config, talker_config and code2wav_config):
//   - the thinker (Qwen3OmniMoeThinkerForConditionalGeneration l.2161-2175
//     over Qwen3OmniMoeThinkerModel l.1752-1775): the audio encoder
//     (family qwen3_omni_moe_audio_encoder, model.audio), the vision
//     encoder (qwen3_omni_moe_vision_encoder, model.vision.tower) and the
//     language model (qwen3_omni_moe_text), then lm_head, tied to the
//     token embedding with the thinker config's tie_word_embeddings
//     (default false, l.235; l.2165). As Qwen3-VL, the vision encoder's
//     mergers — the final one and one for each deepstack block, a
//     LayerNorm (on each patch, or on each 2 × 2 neighbourhood's vector
//     for the deepstack ones), Linear, GELU, Linear to out_hidden_size
//     (l.963-983, 1140-1169) — are the projector, and the deepstack
//     features are added to the image tokens after the first decoder
//     layers (l.1722-1726); the rotary embedding interleaves the 3-D
//     positions' sections. The audio encoder's proj1 and proj2 (to
//     output_dim) are the audio projector; its features are
//     masked_scattered over the audio tokens (l.1989-1994). Both widths
//     must be the language model's (config.json's out_hidden_size and
//     output_dim; the classes' 3,584 are not the text class's 2,048).
//   - with enable_audio_output (default true, l.597; l.3960-3965), the
//     speech generator (model.speech): the talker
//     (qwen3_omni_moe_talker) with text_projection and hidden_projection,
//     MLPs from the thinker's width (thinker_hidden_size, which must be
//     it) to the talker's, its code predictor
//     (qwen3_omni_moe_talker_code_predictor) and code2wav
//     (qwen3_omni_moe_code2wav).
//
// Names: thinker.model.audio_tower.…, thinker.model.visual.…,
// thinker.model.language_model.…, thinker.lm_head, talker.…, code2wav.…
// Plans run the text and the images: the audio encoder's and the speech
// generator's forwards are not modelled (audio.go, speech.go). vLLM and
// SGLang serve the thinker and load neither the talker nor code2wav.
func init() {
	register(&family{
		name: qwen3OmniMoeModelType, source: "transformers/models/qwen3_omni_moe/modeling_qwen3_omni_moe.py (transformers 5.23.0)",
		servingOnly: qwen3OmniServingOnly,
		has4:        qwen3OmniHas4,
		tensors:     func(m Model, l *tensorList) { m.visionTensors(l) },
		vision:      qwen3OmniWrapper(),
		fromConfig:  qwen3OmniFromConfig,
		toConfig:    qwen3OmniToConfig,
		presets: map[string]Preset{
			// Qwen/Qwen3-Omni-30B-A3B-Instruct: its released config.json
			// (as transformers 5.7 loads it, reproduced in a public model
			// report with the checkpoint's 35,259,818,545 stored
			// parameters; the classes' defaults describe none of the
			// releases). The thinker: a Qwen3-30B-A3B-shaped language
			// model (48 layers 2,048 wide, 32 heads of 128 over 4 KV
			// heads, 128 experts of 768, 8 a token; 152,064 tokens,
			// 65,536 positions, untied), the 27-block vision encoder and
			// the 32-block audio encoder 1,280 wide; the talker (20
			// layers 1,024 wide, 128 experts of 384, 6 a token, a shared
			// expert of 768), its 5-layer code predictor of 16 code
			// groups and code2wav. 35,259,818,545 parameters as
			// transformers 5.23 builds it on the meta device.
			"qwen3-omni-30b-a3b-instruct": {qwen3Omni("Qwen/Qwen3-Omni-30B-A3B-Instruct", true), hf("Qwen/Qwen3-Omni-30B-A3B-Instruct")},
			// Qwen/Qwen3-Omni-30B-A3B-Thinking and -Captioner: the
			// thinker alone (enable_audio_output false), taken as the
			// Instruct's thinker: their model cards say the Thinking
			// model holds the thinker only and the Captioner is
			// Qwen3-Omni-30B-A3B fine-tuned for audio captions with text
			// output; MTEB's model registry gives the Captioner
			// 31,719,205,488 parameters, the Instruct's thinker as
			// transformers 5.23 builds it on the meta device. Their
			// config.json files were not at hand.
			"qwen3-omni-30b-a3b-thinking":  {qwen3Omni("Qwen/Qwen3-Omni-30B-A3B-Thinking", false), hf("Qwen/Qwen3-Omni-30B-A3B-Thinking")},
			"qwen3-omni-30b-a3b-captioner": {qwen3Omni("Qwen/Qwen3-Omni-30B-A3B-Captioner", false), hf("Qwen/Qwen3-Omni-30B-A3B-Captioner")},
		},
	})
}

// qwen3OmniWrapper is the wrapper's declaration: Qwen3-VL's deepstack and
// interleaved rotary embedding, the mergers under their Qwen3-Omni names,
// the audio side and the speech generator. The processor's largest image
// and video sizes are not declared: vLLM's profile runs the tower's own
// image size.
func qwen3OmniWrapper() *visionWrapper {
	return &visionWrapper{
		textPrefix: "thinker.model.language_model.", headPrefix: "thinker.", towerPrefix: "thinker.model.visual.", featureLayer: -1,
		projector: qwen3OmniProjector,
		project: func(b *actBuilder, p blockPlan, v Vision, x *actT, hv, h int64) *actT {
			return qwen3VLMerger(b, p, v, "merger.", x, hv, h, false)
		},
		tap:         qwen3VLTap,
		textRecipe:  func(rec *recipe, _ libVersion) { rec.mropeInterleaved = true },
		textMasks:   qwen3VLDeepstackMask,
		afterLayer:  qwen3VLDeepstackAdd,
		audioPrefix: "thinker.model.audio_tower.",
		audioProjector: func(a Audio, l *tensorList, h int64) {
			ha := int64(a.Tower.Hidden)
			l.linear("thinker.model.audio_tower.proj1", "other", ha, ha, true)
			l.linear("thinker.model.audio_tower.proj2", "other", ha, h, true)
		},
		speechStages:  [3]string{"qwen3_omni_moe_talker", "qwen3_omni_moe_talker_code_predictor", "qwen3_omni_moe_code2wav"},
		speech:        qwen3OmniSpeech,
		speechBuffers: qwen3OmniSpeechBuffers,
	}
}

// qwen3OmniProjector lists the vision encoder's mergers (l.963-983,
// 1140-1169): merger_list, one for each deepstack block, its LayerNorm
// over merge² × the tower's width, then the final merger, its LayerNorm
// over the tower's width; each mlp.0 (merge² × width square) and mlp.2 (to
// the language model's width), with biases.
func qwen3OmniProjector(v Vision, l *tensorList, hv, h int64) {
	mm := int64(1)
	taps := 0
	if im := v.Tower.Image; im != nil {
		mm, taps = int64(im.Merge*im.Merge), im.Deepstack.Len()
	}
	merger := func(p string, norm int64) {
		l.norm(p+"ln_q", true, norm)
		l.linear(p+"mlp.0", "other", mm*hv, mm*hv, true)
		l.linear(p+"mlp.2", "other", mm*hv, h, true)
	}
	for i := 0; i < taps; i++ {
		merger(fmt.Sprintf("thinker.model.visual.merger_list.%d.", i), mm*hv)
	}
	merger("thinker.model.visual.merger.", hv)
}

// qwen3OmniSpeech lists the speech generator's tensors: the talker's own,
// its text_projection and hidden_projection (Qwen3OmniMoeTalkerResizeMLP,
// l.2391-2401: thinker width → the talker's intermediate_size → its width,
// with biases), the code predictor's, code2wav's.
func qwen3OmniSpeech(m Model, l *tensorList) {
	s := m.Speech
	t := s.Talker.Normalize()
	stageTensors(t, "talker.", l)
	for _, p := range []string{"talker.text_projection.", "talker.hidden_projection."} {
		l.linear(p+"linear_fc1", "other", int64(m.Hidden), int64(t.FFN), true)
		l.linear(p+"linear_fc2", "other", int64(t.FFN), int64(t.Hidden), true)
	}
	stageTensors(s.Predictor, "talker.code_predictor.", l)
	stageTensors(s.Vocoder, "code2wav.", l)
}

// qwen3OmniSpeechBuffers lists the stages' rotary buffers and code2wav's
// code_offset under their names.
func qwen3OmniSpeechBuffers(m Model, b *bufferList) {
	s := m.Speech
	stageBuffers(s.Talker, "talker.", b)
	stageBuffers(s.Predictor, "talker.code_predictor.", b)
	stageBuffers(s.Vocoder, "code2wav.", b)
}

// qwen3OmniFromConfig reads a Qwen3OmniMoeConfig: the thinker_config's
// text_config, vision_config and audio_config (each key left out taking
// its class's default) and tie_word_embeddings, and with
// enable_audio_output the talker_config (with its code_predictor_config)
// and code2wav_config.
func qwen3OmniFromConfig(c *hfReader, m *Model) {
	tc, ok := c.sub("thinker_config")
	if !ok {
		return
	}
	th := hfReader{c: tc}
	text := th.nestedAs("text_config", "qwen3_omni_moe_text")
	tower := th.nestedAs("vision_config", "qwen3_omni_moe_vision_encoder")
	audio := th.nestedAs("audio_config", "qwen3_omni_moe_audio_encoder")
	tied := th.optBool("tie_word_embeddings", false)
	for _, w := range []struct{ sub, key, what string }{{"vision_config", "out_hidden_size", "merged image features"}, {"audio_config", "output_dim", "audio features"}} {
		sc, _ := th.sub(w.sub)
		sr := hfReader{c: sc}
		out := sr.optInt(w.key, 3584)
		switch {
		case th.err != nil:
		case sr.err != nil:
			th.fail(w.sub + "." + sr.err.Error())
		case out != text.Hidden:
			th.fail(fmt.Sprintf("%s.%s = %d must equal text_config.hidden_size = %d: the %s replace token embeddings (masked_scatter)", w.sub, w.key, out, text.Hidden, w.what))
		}
	}
	if th.err != nil {
		c.fail("thinker_config." + th.err.Error())
		return
	}
	name := m.Name
	*m = text
	m.Name = name
	m.TiedEmbeddings = tied
	m.Vision = &Vision{Family: qwen3OmniMoeModelType, Tower: tower, FeatureLayer: -1}
	m.Audio = &Audio{Tower: audio}
	if !c.optBool("enable_audio_output", true) {
		m.note("config.json", "enable_audio_output: false — Qwen3OmniMoeForConditionalGeneration builds the thinker alone, without the talker and code2wav")
		return
	}
	m.Speech = qwen3OmniReadSpeech(c, m.Hidden)
}

// qwen3OmniReadSpeech reads the speech generator's configs; the talker's
// thinker_hidden_size (default 2,048, l.462) must be the thinker's width h.
func qwen3OmniReadSpeech(c *hfReader, h int) *Speech {
	talker := c.nestedAs("talker_config", "qwen3_omni_moe_talker")
	vocoder := c.nestedAs("code2wav_config", "qwen3_omni_moe_code2wav")
	tc, _ := c.sub("talker_config")
	tr := hfReader{c: tc}
	predictor := tr.nestedAs("code_predictor_config", "qwen3_omni_moe_talker_code_predictor")
	if in := tr.optInt("thinker_hidden_size", 2048); tr.err == nil && in != h {
		tr.fail(fmt.Sprintf("thinker_hidden_size = %d must equal thinker_config.text_config.hidden_size = %d: text_projection and hidden_projection read the thinker's states", in, h))
	}
	if tr.err != nil && c.err == nil {
		c.fail("talker_config." + tr.err.Error())
	}
	return &Speech{Talker: talker, Predictor: predictor, Vocoder: vocoder}
}

// qwen3OmniToConfig writes a Qwen3OmniMoeConfig: the thinker_config (the
// language model as text_config, the towers as vision_config and
// audio_config, their output widths the language model's), and with a
// speech generator enable_audio_output and its stages' configs.
func qwen3OmniToConfig(m Model, c map[string]any) {
	text := m
	text.Vision, text.Audio, text.Speech, text.Name = nil, nil, nil, ""
	tower := m.Vision.Tower
	tower.Name = ""
	vc := tower.HFConfig()
	vc["out_hidden_size"] = m.Hidden
	th := map[string]any{"model_type": "qwen3_omni_moe_thinker", "text_config": text.HFConfig(), "vision_config": vc, "tie_word_embeddings": m.TiedEmbeddings}
	if m.Audio != nil {
		a := m.Audio.Tower
		a.Name = ""
		ac := a.HFConfig()
		ac["output_dim"] = m.Hidden
		th["audio_config"] = ac
	}
	// The released special tokens (audio 151675, image 151655, video
	// 151656, audio start 151669, vision start 151652), or the last ids
	// of a smaller vocabulary. The thinker's config class has no
	// vision_start_token_id, which get_rope_index reads to find the
	// images (modeling_qwen3_omni_moe.py:290, 311): config.json's key.
	ids := []int{151675, 151655, 151656, 151669, 151652}
	if m.Vocab <= 151675 {
		ids = []int{m.Vocab - 1, m.Vocab - 2, m.Vocab - 3, m.Vocab - 4, m.Vocab - 5}
	}
	th["audio_token_id"], th["image_token_id"], th["video_token_id"], th["audio_start_token_id"] = ids[0], ids[1], ids[2], ids[3]
	th["vision_start_token_id"] = ids[4]
	c["thinker_config"] = th
	c["enable_audio_output"] = m.Speech != nil
	if s := m.Speech; s != nil {
		tk := s.Talker.HFConfig()
		delete(tk, "model_type") // Qwen3OmniMoeTalkerConfig has none
		tk["thinker_hidden_size"], tk["code_predictor_config"] = m.Hidden, s.Predictor.HFConfig()
		if im := tower.Image; im != nil {
			tk["spatial_merge_size"] = im.Merge
		}
		if cd := s.Predictor.Codec; cd != nil {
			tk["num_code_groups"] = cd.Groups
		}
		voc := s.Vocoder.HFConfig()
		delete(voc, "model_type") // Qwen3OmniMoeCode2WavConfig has none
		c["talker_config"], c["code2wav_config"] = tk, voc
	}
}

// qwen3Omni is the released Qwen3-Omni-30B-A3B as named, with the speech
// generator or (speech false) the thinker alone.
func qwen3Omni(name string, speech bool) Model {
	m := Model{Name: name, Family: "qwen3_omni_moe_text", Layers: 48, Hidden: 2048, Heads: 32, KVHeads: 4, HeadDim: 128,
		FFN: 768, Vocab: 152064, MaxPosition: 65536, Experts: 128, ExpertsPerToken: 8, ExpertFFN: 768, Router: "softmax_topk_norm",
		Vision: &Vision{Family: qwen3OmniMoeModelType, Tower: Model{Family: "qwen3_omni_moe_vision_encoder", Layers: 27, Hidden: 1152, Heads: 16, FFN: 4304,
			Image: &Image{Size: 512, Patch: 16, Channels: 3, TemporalPatch: 2, Merge: 2, PositionTable: 2304, Deepstack: Blocks(8, 16, 24)}}, FeatureLayer: -1},
		Audio: &Audio{Tower: Model{Family: "qwen3_omni_moe_audio_encoder", Layers: 32, Hidden: 1280, Heads: 20, KVHeads: 20, FFN: 5120,
			MelBins: 128, SourcePositions: 1500, DownsampleChannels: 480}}}
	if !speech {
		return m
	}
	m.Speech = &Speech{
		Talker: Model{Family: "qwen3_omni_moe_talker", Layers: 20, Hidden: 1024, Heads: 16, KVHeads: 2, HeadDim: 128, FFN: 2048, Vocab: 3072,
			MaxPosition: 65536, Experts: 128, ExpertsPerToken: 6, ExpertFFN: 384, SharedExperts: 1, SharedExpertFFN: 768, Router: "softmax_topk_norm"},
		Predictor: Model{Family: "qwen3_omni_moe_talker_code_predictor", Layers: 5, Hidden: 1024, Heads: 16, KVHeads: 8, HeadDim: 128, FFN: 3072,
			Vocab: 2048, MaxPosition: 32768, Codec: &Codec{Groups: 16}},
		Vocoder: Model{Family: "qwen3_omni_moe_code2wav", Layers: 8, Hidden: 1024, Heads: 16, KVHeads: 16, HeadDim: 64, FFN: 3072, Vocab: 2048,
			MaxPosition: 8000, SlidingWindow: 72, Codec: &Codec{Groups: 16, DecoderDim: 1536, Upsample: Blocks(2, 2), DecoderUpsample: Blocks(8, 5, 4, 3)}},
	}
	return m
}

// qwen3OmniMoeModelType is the family's model_type, which the serving
// engines' tables of supported architectures are keyed by.
const qwen3OmniMoeModelType = "qwen3_omni_moe"
