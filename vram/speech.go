package vram

import (
	"fmt"
	"slices"
	"strings"
)

// Multimodal models that talk: a speech generator (Model.Speech) after the
// language model, stages of tower-only families of their own that the
// wrapper family names (visionWrapper.speechStages) and lists
// (visionWrapper.speech, speechBuffers) with what joins them to the
// language model. This file lists their parameters and buffers last, as
// the wrapper registers them after its language model (Qwen3-Omni,
// transformers 5.23.0 models/qwen3_omni_moe/modeling_qwen3_omni_moe.py
// Qwen3OmniMoeForConditionalGeneration l.3954-3965: thinker, then talker
// and code2wav).
//
// Their forward is not modelled: no plan runs or trains them
// (speechPart), and a plan's text generation does not pass through them
// (ActiveParamCount). transformers builds and loads them; vLLM and SGLang,
// which serve the language model's text, load none of them: vLLM 0.33's
// thinker maps the checkpoint's talker. and code2wav. weights to nothing
// (model_executor/models/qwen3_omni_moe_thinker.py l.1623-1633), SGLang
// 0.5.23 skips them without enable_talker (srt/models/qwen3_omni_moe.py
// l.554, 603).

// speechStep is one of a speech generator's stages with its name.
type speechStep struct {
	name string
	m    Model
}

// stages are the speech generator's stages in order.
func (s Speech) stages() [3]speechStep {
	return [3]speechStep{{"talker", s.Talker}, {"predictor", s.Predictor}, {"vocoder", s.Vocoder}}
}

// each is s with f applied to each present stage.
func (s *Speech) each(f func(Model) Model) *Speech {
	c := *s
	for _, p := range []*Model{&c.Talker, &c.Predictor, &c.Vocoder} {
		if p.Family != "" {
			*p = f(*p)
		}
	}
	return &c
}

// speechStage reports whether family name is a stage of some wrapper's
// speech generator.
func speechStage(name string) bool {
	for _, f := range families {
		if f.vision != nil && name != "" && (f.vision.speechStages[0] == name || f.vision.speechStages[1] == name || f.vision.speechStages[2] == name) {
			return true
		}
	}
	return false
}

// speechTensors lists the speech generator's tensors after the rest, as
// the wrapper declares them, outside the blocks.
func (m Model) speechTensors(l *tensorList) {
	w := m.visionWrapperOf()
	if m.Speech == nil || w == nil || w.speech == nil {
		return
	}
	l.outside()
	start := len(l.ts)
	w.speech(m, l)
	for i := start; i < len(l.ts); i++ {
		t := &l.ts[i]
		t.Layer, t.head, t.part = -1, false, speechPart
	}
	l.outside()
}

// stageTensors lists a stage's tensors as its family lists them, under
// prefix (for a wrapper's speech).
func stageTensors(st Model, prefix string, l *tensorList) {
	f := lookupFamily(st.Family)
	if f == nil || f.tensors == nil {
		return
	}
	start := len(l.ts)
	f.tensors(st.Normalize(), l)
	for i := start; i < len(l.ts); i++ {
		l.ts[i].Name = prefix + l.ts[i].Name
	}
}

// speechBuffers adds the speech generator's buffers, as the wrapper
// declares them.
func (m Model) speechBuffers(b *bufferList) {
	w := m.visionWrapperOf()
	if m.Speech == nil || w == nil || w.speechBuffers == nil {
		return
	}
	w.speechBuffers(m, b)
}

// stageBuffers adds a stage's buffers under prefix (for a wrapper's
// speechBuffers).
func stageBuffers(st Model, prefix string, b *bufferList) {
	if st.Family == "" {
		return
	}
	for _, bf := range st.Buffers() {
		bf.Name, bf.Layer = prefix+bf.Name, -1
		b.bs = append(b.bs, bf)
	}
}

// validateSpeech checks the speech generator, if any: a wrapper that
// builds one, each stage of the family the wrapper builds there, and
// valid.
func (m Model) validateSpeech() error {
	if m.Speech == nil {
		return nil
	}
	w := m.visionWrapperOf()
	if w == nil || w.speech == nil {
		known := familiesWhere(func(f *family) bool { return f.vision != nil && f.vision.speech != nil })
		return fmt.Errorf("model.speech: a speech generator goes with a multimodal wrapper that builds one (model.vision.family: %s)", strings.Join(known, ", "))
	}
	for i, st := range m.Speech.stages() {
		want := w.speechStages[i]
		switch {
		case st.m.Family != want && want == "":
			return fmt.Errorf("model.speech.%s: %s's speech generator has no %s (family %q given)", st.name, m.Vision.Family, st.name, st.m.Family)
		case st.m.Family != want:
			return fmt.Errorf("model.speech.%s.family %q: %s's %s is family %s", st.name, st.m.Family, m.Vision.Family, st.name, want)
		case want == "":
			continue
		}
		if err := st.m.validate(true); err != nil {
			return fmt.Errorf("model.speech.%s: %s", st.name, strings.TrimPrefix(err.Error(), "model."))
		}
	}
	return nil
}

// speechRanges bounds a stage's codec (Model.Codec) and the speech
// generator's stages' size fields.
func (m Model) speechRanges() error {
	if c := m.Codec; c != nil {
		if c.Groups < 0 || c.Groups > maxChannels || c.DecoderDim < 0 || c.DecoderDim > maxWidth {
			return fmt.Errorf("model.codec: groups = %d must be in [0, %d], decoder_dim = %d in [0, %d]", c.Groups, maxChannels, c.DecoderDim, maxWidth)
		}
		for _, l := range []BlockList{c.Upsample, c.DecoderUpsample} {
			ix := l.Indexes()
			if len(ix) > 16 || len(ix) > 0 && (slices.Min(ix) < 0 || slices.Max(ix) > maxChannels) {
				return fmt.Errorf("model.codec: upsample %v and decoder_upsample %v list at most 16 factors, each in [0, %d]", c.Upsample.Indexes(), c.DecoderUpsample.Indexes(), maxChannels)
			}
		}
	}
	s := m.Speech
	if s == nil {
		return nil
	}
	for _, st := range s.stages() {
		if st.m.Family == "" {
			continue
		}
		if st.m.Vision != nil || st.m.Audio != nil || st.m.Speech != nil {
			return fmt.Errorf("model.speech.%s has a vision, audio or speech side of its own", st.name)
		}
		if err := st.m.Normalize().ranges(); err != nil {
			return fmt.Errorf("model.speech.%s: %s", st.name, strings.TrimPrefix(err.Error(), "model."))
		}
	}
	return nil
}

// speechNote says what a serving or inference plan makes of m's speech
// generator, or "" without one.
func (in Inference) speechNote(m Model) string {
	if m.Speech == nil {
		return ""
	}
	var n int64
	for _, t := range m.tensors() {
		if t.part == speechPart {
			n += t.Numel()
		}
	}
	if in.runtime == runVLLM || in.runtime == runSGLang {
		return fmt.Sprintf("the checkpoint also stores the speech generator (model.speech, %d parameters), which the serving engine does not load: it serves the text output", n)
	}
	return fmt.Sprintf("the speech generator (model.speech, %d parameters) is loaded with the weights; its forward is not modelled: the plan generates text only", n)
}
