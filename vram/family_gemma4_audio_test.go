package vram

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gemma4SmallAudio is a small Gemma 4 audio_config (two blocks 48 wide,
// four heads, a 16 → 8 channel front end, kernel 3, output 40).
const gemma4SmallAudio = `"audio_config": {"hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "subsampling_conv_channels": [16, 8], "conv_kernel_size": 3, "output_proj_dims": 40`

// TestGemma4AudioInventory: for each config in testdata/gemma4_audio
// (written by transformers 5.23.0 on the meta device, as examples/measure
// writes an inventory: AutoConfig.for_model("gemma4", **hf_config),
// AutoModelForImageTextToText.from_config under torch.device("meta"),
// named_parameters() and named_buffers()), the engine lists the same
// parameters (names, shapes, total) and buffers (names, shapes, dtypes, in
// order), and the audio tower's and embed_audio's parameters in
// transformers' order after the language model's and before lm_head (the
// engine lists the language model's own in an order of its own, and
// embed_vision with the vision tower). defaults.json is the
// classes' defaults with a vision_config and an audio_config (the
// docstring's "similar to google/gemma-4-e2b-it" configuration, not a
// released one); small.json a small untied model whose audio tower has no
// clipped linears.
func TestGemma4AudioInventory(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "gemma4_audio", "*.json"))
	if len(files) != 2 {
		t.Fatalf("%d inventories in testdata/gemma4_audio, want 2", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var inv struct {
			inventory
			HFConfig json.RawMessage `json:"hf_config"`
		}
		if err := json.Unmarshal(b, &inv); err != nil {
			t.Fatal(err)
		}
		m, err := FromHFConfig(inv.HFConfig)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		// Every parameter, by name and shape, and the total.
		ours := map[string]string{}
		for _, x := range m.Tensors() {
			ours[x.Name] = fmt.Sprint(x.Shape)
		}
		for _, p := range inv.Parameters {
			if got, ok := ours[p.Name]; !ok || got != fmt.Sprint(p.Shape) {
				t.Errorf("%s: transformers has %s %v, the engine %q", f, p.Name, p.Shape, got)
			}
			delete(ours, p.Name)
		}
		for n := range ours {
			t.Errorf("%s: the engine has %s, transformers does not", f, n)
		}
		if m.ParamCount() != inv.Total {
			t.Errorf("%s: %d parameters, transformers %d", f, m.ParamCount(), inv.Total)
		}
		// The audio side in transformers' order, after the language model
		// and before the output layer.
		audio := func(n string) bool {
			return strings.HasPrefix(n, "model.audio_tower.") || strings.HasPrefix(n, "model.embed_audio.")
		}
		var theirs, seq []string
		for _, p := range inv.Parameters {
			if audio(p.Name) {
				theirs = append(theirs, p.Name)
			}
		}
		lastText, firstAudio, head := -1, -1, -1
		for i, x := range m.Tensors() {
			switch {
			case audio(x.Name):
				seq = append(seq, x.Name)
				if firstAudio < 0 {
					firstAudio = i
				}
			case strings.HasPrefix(x.Name, "model.language_model."):
				lastText = i
			case x.Name == "lm_head.weight":
				head = i
			}
		}
		if !slices.Equal(seq, theirs) || firstAudio < lastText || head >= 0 && head < firstAudio+len(seq) {
			t.Errorf("%s: the audio side's %d tensors from %d (the language model's last at %d, lm_head at %d), transformers' %d in order", f, len(seq), firstAudio, lastText, head, len(theirs))
		}
		var tb, ob []string
		for _, x := range inv.Buffers {
			tb = append(tb, fmt.Sprint(x.Name, x.Shape, x.DType))
		}
		for _, x := range m.Buffers() {
			ob = append(ob, fmt.Sprint(x.Name, x.Shape, map[DType]string{FP32: "float32", BF16: "bfloat16", INT64: "int64", Bool: "bool"}[x.DType]))
		}
		if !slices.Equal(ob, tb) {
			t.Errorf("%s: the engine's %d buffers are not transformers' %d in order", f, len(ob), len(tb))
		}
	}
}

// TestGemma4Audio: the parameter and buffer counts of Gemma 4 models with
// an audio tower as transformers 5.23 builds them on the meta device, the
// tower's and its projector's share, and the round trip of the engine's
// own config.
func TestGemma4Audio(t *testing.T) {
	small := `{"model_type": "gemma4", "text_config": {` + gemma4SmallText + `, "global_head_dim": 32}, ` + gemma4SmallVision
	for _, c := range []struct {
		name, json            string
		params, audio, embed  int64
		buffers, audioBuffers int
	}{
		// transformers 5.23.0: AutoConfig.for_model("gemma4", **config),
		// AutoModelForImageTextToText.from_config under
		// torch.device("meta"), sum(p.numel()) over model.parameters(),
		// model.model.audio_tower.parameters() and
		// model.model.embed_audio.parameters(), len(named_buffers()).
		{"the classes' defaults", `{"model_type": "gemma4", "vision_config": {}, "audio_config": {}}`, 5554675488, 304824608, 3538944, 531, 493},
		{"small", small + `, ` + gemma4SmallAudio + `}}`, 466856, 116584, 2560, 96, 83},
		{"small, unclipped, untied", strings.Replace(small, `"gemma4",`, `"gemma4", "tie_word_embeddings": false,`, 1) + `, ` + gemma4SmallAudio + `, "use_clipped_linears": false}}`, 530856, 116584, 2560, 16, 3},
		{"the audio class's defaults", small + `, "audio_config": {}}`, 305270624, 304824608, 98304, 506, 493},
		{"an odd head width", small + `, ` + strings.Replace(gemma4SmallAudio, `"hidden_size": 48`, `"hidden_size": 36`, 1) + `}}`, 417314, 67042, 2560, 96, 83},
	} {
		m, err := FromHFConfig([]byte(c.json))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var audio, embed int64
		for _, x := range m.Tensors() {
			switch {
			case strings.HasPrefix(x.Name, "model.audio_tower."):
				audio += x.Numel()
			case strings.HasPrefix(x.Name, "model.embed_audio."):
				embed += x.Numel()
			}
		}
		ab := 0
		for _, x := range m.Buffers() {
			if strings.HasPrefix(x.Name, "model.audio_tower.") {
				ab++
			}
		}
		if m.ParamCount() != c.params || audio != c.audio || embed != c.embed || len(m.Buffers()) != c.buffers || ab != c.audioBuffers {
			t.Errorf("%s: %d parameters (audio tower %d, embed_audio %d), %d buffers (%d the tower's); transformers 5.23 builds %d (%d, %d), %d (%d)",
				c.name, m.ParamCount(), audio, embed, len(m.Buffers()), ab, c.params, c.audio, c.embed, c.buffers, c.audioBuffers)
		}
		if m.Audio.Tower.ParamCount() != audio {
			t.Errorf("%s: the tower alone has %d parameters, listed %d", c.name, m.Audio.Tower.ParamCount(), audio)
		}
		raw, _ := json.Marshal(m.HFConfig())
		back, err := FromHFConfig(raw)
		if err != nil || back.ParamCount() != m.ParamCount() || len(back.Buffers()) != len(m.Buffers()) || back.Audio == nil || *back.Audio.Tower.Conformer != *m.Audio.Tower.Conformer {
			t.Errorf("%s: the engine's config read back: %v", c.name, err)
		}
	}
}

// TestGemma4AudioConfigDefaults: an audio_config's missing keys take
// Gemma4AudioConfig's defaults (configuration_gemma4.py l.55-76), which
// build 304,824,608 parameters and 493 buffers alone (transformers 5.23.0:
// AutoModel.from_config(Gemma4AudioConfig()) under torch.device("meta")).
func TestGemma4AudioConfigDefaults(t *testing.T) {
	m, err := FromHFConfig([]byte(`{"model_type": "gemma4", "vision_config": {}, "audio_config": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	a := m.Audio.Tower
	want := Conformer{SubsampleChannels: [2]int{128, 32}, ConvKernel: 5, OutputDim: 1536, ClippedLinears: true}
	if a.Family != "gemma4_audio" || a.Layers != 12 || a.Hidden != 1024 || a.Heads != 8 || a.KVHeads != 8 || a.FFN != 4096 || *a.Conformer != want {
		t.Errorf("audio defaults: %+v %+v", a, *a.Conformer)
	}
	if a.ParamCount() != 304824608 || len(a.Buffers()) != 493 {
		t.Errorf("the tower of the class's defaults: %d parameters, %d buffers; transformers builds 304824608, 493", a.ParamCount(), len(a.Buffers()))
	}
	if err := a.Validate(); err == nil || !strings.Contains(err.Error(), "is an audio tower only") {
		t.Errorf("the tower alone: %v", err)
	}
}

// TestGemma4AudioErrors: each config transformers would refuse or the
// engine does not model, and each model that breaks the audio side's
// rules, is an error naming the key or field.
func TestGemma4AudioErrors(t *testing.T) {
	small := `{"model_type": "gemma4", "text_config": {` + gemma4SmallText + `}, ` + gemma4SmallVision
	for _, c := range []struct{ name, json, want string }{
		{"no vision_config", `{"model_type": "gemma4", "audio_config": {}}`, "audio_config without vision_config"},
		{"activation", small + `, "audio_config": {"hidden_act": "gelu"}}`, "hidden_act"},
		{"three channel counts", small + `, "audio_config": {"subsampling_conv_channels": [128, 32, 8]}}`, "subsampling_conv_channels"},
		{"a fractional channel count", small + `, "audio_config": {"subsampling_conv_channels": [128, 3.5]}}`, "subsampling_conv_channels[1]"},
		{"a front end too narrow", small + `, "audio_config": {"subsampling_conv_channels": [2, 8]}}`, "subsample_channels"},
		{"heads that do not divide", small + `, "audio_config": {"hidden_size": 50, "num_attention_heads": 4}}`, "num_attention_heads = 4 must divide hidden_size = 50"},
		{"no output", small + `, "audio_config": {"output_proj_dims": 0}}`, "output_dim"},
	} {
		if _, err := FromHFConfig([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.want)
		}
	}
	m, err := FromHFConfig([]byte(`{"model_type": "gemma4", "text_config": {` + gemma4SmallText + `}, ` + gemma4SmallVision + `, ` + gemma4SmallAudio + `}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*Model)
		want string
	}{
		{"without the vision side", func(m *Model) { m.Vision = nil }, "model.audio: an audio tower goes with"},
		{"a vision tower as the audio tower", func(m *Model) { m.Audio = &Audio{Tower: m.Vision.Tower} }, "is not an audio tower"},
		{"a conformer on a vision tower", func(m *Model) { c := *m.Audio.Tower.Conformer; m.Vision.Tower.Conformer = &c }, "conformer describes"},
		{"a tower without its conformer", func(m *Model) { m.Audio.Tower.Conformer = nil }, "conformer (subsample_channels"},
		{"a narrower feed-forward", func(m *Model) { m.Audio.Tower.FFN = 100 }, "4 × hidden"},
		{"a channel count out of range", func(m *Model) { m.Audio.Tower.Conformer.SubsampleChannels[1] = 1 << 20 }, "model.audio.tower: conformer"},
	} {
		e := m.clone()
		c.edit(&e)
		if err := e.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.want)
		}
	}
}

// TestGemma4AudioServing: vLLM loads the audio tower and embed_audio
// (vLLM 0.33 model_executor/models/gemma4_mm.py l.1115-1139), so the
// carve's weights are the text-and-image model's plus theirs, in bf16;
// replicated on every rank, they weigh the same at TP 2; with
// limit_mm_per_prompt {"audio": 0} vLLM builds neither. Training stays
// refused as the family's is.
func TestGemma4AudioServing(t *testing.T) {
	base := `{"model_type": "gemma4", "text_config": {` + gemma4SmallText + `}, ` + gemma4SmallVision
	without, err := FromHFConfig([]byte(base + `}`))
	if err != nil {
		t.Fatal(err)
	}
	with, err := FromHFConfig([]byte(base + `, ` + gemma4SmallAudio + `}}`))
	if err != nil {
		t.Fatal(err)
	}
	audio := with.ParamCount() - without.ParamCount()
	if audio != 116584+2560 {
		t.Fatalf("the audio tower and embed_audio: %d parameters, want %d", audio, 116584+2560)
	}
	for _, tp := range []int{1, 2} {
		var w [2]Bytes
		for i, m := range []Model{without, with} {
			v, err := VLLM{MaxModelLen: 4096, TP: tp}.Carve(Inference{Model: m}, mustGPU("H100-80GB"))
			if err != nil {
				t.Fatalf("TP %d: %v", tp, err)
			}
			w[i] = v.Weights
			noted := false
			for _, n := range v.Notes {
				noted = noted || strings.Contains(n, "the audio tower and its projector")
			}
			if noted != (i == 1) {
				t.Errorf("TP %d, audio %v: the carve's notes %q", tp, i == 1, v.Notes)
			}
		}
		if got := w[1] - w[0]; got != BF16.Size(audio) {
			t.Errorf("TP %d: the audio side adds %v to the weights, want %v (its %d parameters in bf16, whole on every rank)", tp, got, BF16.Size(audio), audio)
		}
	}
	// With no audio allowed, vLLM 0.33 builds neither (interfaces.py
	// l.347-396, _mark_tower_model): the text-and-image model's weights.
	// A model without an audio tower has no such modality.
	off := VLLM{MaxModelLen: 4096, LimitMMPerPrompt: map[string]int{"audio": 0}}
	a, err := off.Carve(Inference{Model: with}, mustGPU("H100-80GB"))
	b, err2 := VLLM{MaxModelLen: 4096}.Carve(Inference{Model: without}, mustGPU("H100-80GB"))
	if err != nil || err2 != nil || a.Weights != b.Weights || !slices.ContainsFunc(a.Notes, func(n string) bool { return strings.Contains(n, "allows no audio") }) {
		t.Errorf("audio 0: weights %v, want %v, notes %q (%v, %v)", a.Weights, b.Weights, a.Notes, err, err2)
	}
	if _, err := off.Carve(Inference{Model: without}, mustGPU("H100-80GB")); err == nil || !strings.Contains(err.Error(), `limit_mm_per_prompt "audio"`) {
		t.Errorf("audio 0 without an audio tower: %v", err)
	}
	// Training runs the text and the images (traced at 5.23.0): the audio
	// tower's weights are loaded, never trained (audio.go).
	ew, err := (Training{Model: with, SeqLen: 1024, MicroBatch: 1}).Estimate()
	eo, err2 := (Training{Model: without, SeqLen: 1024, MicroBatch: 1}).Estimate()
	if err != nil || err2 != nil || ew.Static.Parameters <= eo.Static.Parameters || ew.Static.Gradients != eo.Static.Gradients {
		t.Errorf("training: parameters %v and %v, gradients %v and %v (%v, %v)", ew.Static.Parameters, eo.Static.Parameters, ew.Static.Gradients, eo.Static.Gradients, err, err2)
	}
}
