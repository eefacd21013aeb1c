package vram

import (
	"fmt"
	"slices"
	"strings"
)

// Multimodal models with an audio tower (Model.Audio) beside their vision
// tower. The wrapper family declares the names and the projector
// (visionWrapper.audioPrefix, audioProjector); the tower is a tower-only
// family of its own (audioTower). This file lists their parameters
// and buffers after the language model's and before the output layer, the
// order in which the wrapper's base model registers them (Gemma 4,
// transformers 5.23.0 models/gemma4/modeling_gemma4.py Gemma4Model
// l.2231-2252: vision_tower, language_model, audio_tower, embed_vision,
// embed_audio; the engine keeps listing embed_vision with the vision tower).
//
// Their forward is not modelled: a plan runs the text and the images, the
// audio tower's weights are counted as the runtimes load them, and no
// training plan trains them (audioPart). vLLM builds neither where
// limit_mm_per_prompt allows no audio (Inference.audioOff); elsewhere it
// keeps them whole on every tensor-parallel rank: vLLM 0.33 builds the
// tower with transformers' module and replaces its linears with
// replicated ones (model_executor/models/gemma4_mm.py l.1115-1139,
// transformers/utils.py l.301-322 "replicate"), and its projector is a
// ReplicatedLinear (gemma4_mm.py l.1010-1016). vLLM profiles one
// modality, the one with the most tokens an item
// (v1/worker/gpu_model_runner.py l.1696): Gemma 4's video (32 frames of
// 78, gemma4_mm.py l.272-296) before its audio (audio_seq_length 750);
// the carve's profile runs the images (vllm_mm.go).

// audioTensors lists an audio tower's tensors under the wrapper's audio
// prefix, then its projector's, outside the blocks and ahead of a trailing
// output layer (lm_head, registered after the base model).
func (m Model) audioTensors(l *tensorList) {
	w := m.visionWrapperOf()
	if m.Audio == nil || w == nil || w.audioProjector == nil {
		return
	}
	tower := m.Audio.Tower.Normalize()
	tf := lookupFamily(tower.Family)
	if tf == nil || tf.tensors == nil {
		return
	}
	n := len(l.ts)
	for n > 0 && l.ts[n-1].Role == "lm_head" {
		n--
	}
	head := slices.Clone(l.ts[n:])
	l.ts = l.ts[:n]
	l.outside()
	start := len(l.ts)
	tf.tensors(tower, l)
	for i := start; i < len(l.ts); i++ {
		t := &l.ts[i]
		t.Name = w.audioPrefix + t.Name
		t.Layer, t.head = -1, false
	}
	l.outside()
	w.audioProjector(*m.Audio, l, int64(m.Hidden))
	for i := start; i < len(l.ts); i++ {
		l.ts[i].part = audioPart
	}
	l.ts = append(l.ts, head...)
}

// audioBuffers adds an audio tower's buffers under the wrapper's audio
// prefix (the projectors have none).
func (m Model) audioBuffers(b *bufferList) {
	w := m.visionWrapperOf()
	if m.Audio == nil || w == nil || w.audioProjector == nil {
		return
	}
	for _, bf := range m.Audio.Tower.Buffers() {
		bf.Name, bf.Layer = w.audioPrefix+bf.Name, -1
		b.bs = append(b.bs, bf)
	}
}

// validateAudio checks the audio side of a model, if any: a wrapper that
// has one, and a valid audio tower.
func (m Model) validateAudio() error {
	if m.Audio == nil {
		return nil
	}
	if w := m.visionWrapperOf(); w == nil || w.audioProjector == nil {
		known := familiesWhere(func(f *family) bool { return f.vision != nil && f.vision.audioProjector != nil })
		return fmt.Errorf("model.audio: an audio tower goes with a multimodal wrapper that has one (model.vision.family: %s)", strings.Join(known, ", "))
	}
	tower := m.Audio.Tower
	if err := tower.validate(true); err != nil {
		return fmt.Errorf("model.audio.tower: %s", strings.TrimPrefix(err.Error(), "model."))
	}
	if tf := lookupFamily(tower.Family); !audioTower(tf) {
		towers := familiesWhere(audioTower)
		return fmt.Errorf("model.audio.tower.family %q is not an audio tower; known: %s", tower.Family, strings.Join(towers, ", "))
	}
	return nil
}

// audioTower reports whether f is a multimodal model's audio tower: a
// tower-only family of conformer blocks (model.conformer) or one that
// reads log-mel frames (model.mel_bins).
func audioTower(f *family) bool { return f != nil && f.towerOnly && (f.conformer || f.audio) }

// audioNote says what a serving or inference plan makes of m's audio
// tower, or "" without one.
func (in Inference) audioNote(m Model) string {
	if m.Audio == nil {
		return ""
	}
	if in.audioOff {
		// vLLM 0.33 builds a tower whose modalities all have a limit of 0
		// as missing layers (model_executor/models/interfaces.py
		// l.347-396, _mark_tower_model; gemma4_mm.py l.1121).
		return "limit_mm_per_prompt allows no audio: vLLM loads the model without the audio tower and its projector (model.audio)"
	}
	var n int64
	for _, t := range m.tensors() {
		if t.part == audioPart {
			n += t.Numel()
		}
	}
	runs := "the text and the images"
	if m.Vision != nil && !m.Vision.TowerRuns() {
		runs = "the text" // nor is the vision tower's (vision.go)
	}
	return fmt.Sprintf("the audio tower and its projector (model.audio, %d parameters) are loaded with the weights; their forward is not modelled: the plan runs %s only", n, runs)
}
