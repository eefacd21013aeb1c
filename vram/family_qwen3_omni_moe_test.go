package vram

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// Small Qwen3-Omni configs: a thinker (a 2-layer language model 64 wide,
// 4 heads of 16 over 2 KV heads, a dense layer of 96 then 8 experts of 32,
// 2 a token; a 3-block vision tower 32 wide with deepstack taps 0 and 1;
// a 2-block audio tower 48 wide over 40 mel bins, 30 positions, a 16
// channel front end; tied) and a speech generator (a 2-layer talker 32
// wide, 4 experts of 16, 2 a token, a shared expert of 24, 100 codes,
// tied; a 1-layer code predictor of 4 code groups over 50 codes; a 1-layer
// code2wav of 3 × 20 codes, a decoder 24 wide, ratios [2], rates [2, 3]).
const (
	qwen3OmniSmallThinker = `"thinker_config": {"text_config": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96, "vocab_size": 1000, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "decoder_sparse_step": 2},
		"vision_config": {"depth": 3, "hidden_size": 32, "num_heads": 4, "intermediate_size": 48, "out_hidden_size": 64, "deepstack_visual_indexes": [0, 1], "num_position_embeddings": 64},
		"audio_config": {"encoder_layers": 2, "d_model": 48, "encoder_attention_heads": 4, "encoder_ffn_dim": 80, "num_mel_bins": 40, "max_source_positions": 30, "downsample_hidden_size": 16, "output_dim": 64},
		"tie_word_embeddings": true}`
	qwen3OmniSmallSpeech = `"talker_config": {"thinker_hidden_size": 64, "spatial_merge_size": 2, "tie_word_embeddings": true,
		"text_config": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 40, "vocab_size": 100, "num_local_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16, "shared_expert_intermediate_size": 24},
		"code_predictor_config": {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 48, "vocab_size": 50, "num_code_groups": 4}},
		"code2wav_config": {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 48, "codebook_size": 20, "num_quantizers": 3, "decoder_dim": 24, "upsample_rates": [2, 3], "upsampling_ratios": [2]}`
	// qwen3OmniDefaults is the classes' defaults but for what
	// transformers cannot build or run without: the towers' output widths
	// (3,584 by default) set to the text class's 2,048, the talker's
	// spatial_merge_size and shared_expert_intermediate_size (no default).
	qwen3OmniDefaults    = `"thinker_config": {"vision_config": {"out_hidden_size": 2048}, "audio_config": {"output_dim": 2048}}`
	qwen3OmniTalkerNeeds = `"talker_config": {"spatial_merge_size": 2, "text_config": {"shared_expert_intermediate_size": 768}}`
)

// qwen3OmniConfig is a config.json of the given top-level parts.
func qwen3OmniConfig(parts ...string) []byte {
	return []byte(`{` + strings.Join(append([]string{`"model_type": "qwen3_omni_moe"`}, parts...), ", ") + `}`)
}

// words writes vs separated by spaces.
func words(vs ...any) string { return strings.TrimSpace(fmt.Sprintln(vs...)) }

// TestQwen3OmniMoeCounts: configs read as transformers 5.23 builds them.
// Each count is sum(p.numel() for p in model.parameters()) of
// AutoModelForMultimodalLM.from_config(AutoConfig.for_model(
// "qwen3_omni_moe", **config)) under torch.device("meta"), with
// transformers 5.23.0 and torch 2.15.0, and the number of named_buffers().
func TestQwen3OmniMoeCounts(t *testing.T) {
	for _, c := range []struct {
		name    string
		json    []byte
		params  int64
		buffers int
	}{
		{"small", qwen3OmniConfig(qwen3OmniSmallThinker, qwen3OmniSmallSpeech), 440029, 12},
		{"small thinker only", qwen3OmniConfig(`"enable_audio_output": false`, qwen3OmniSmallThinker), 354720, 5},
		{"the classes' defaults", qwen3OmniConfig(qwen3OmniDefaults, qwen3OmniTalkerNeeds), 21948577833, 12},
		{"the classes' defaults, code2wav ratios [2] and rates [8, 5]", qwen3OmniConfig(qwen3OmniDefaults, qwen3OmniTalkerNeeds, `"code2wav_config": {"upsample_rates": [8, 5], "upsampling_ratios": [2]}`), 21936264297, 12},
		{"the thinker classes' defaults", qwen3OmniConfig(`"enable_audio_output": false`, qwen3OmniDefaults), 18388044392, 5},
	} {
		m, err := FromHFConfig(c.json)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := m.ParamCount(); got != c.params || len(m.Buffers()) != c.buffers {
			t.Errorf("%s: %d parameters, %d buffers; transformers 5.23 builds %d, %d", c.name, got, len(m.Buffers()), c.params, c.buffers)
		}
	}
}

// TestQwen3OmniMoeBuffers: the small config's buffers as named_buffers()
// lists them on the meta device (as TestQwen3OmniMoeCounts builds it):
// names, shapes, dtypes.
func TestQwen3OmniMoeBuffers(t *testing.T) {
	m, err := FromHFConfig(qwen3OmniConfig(qwen3OmniSmallThinker, qwen3OmniSmallSpeech))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"thinker.model.audio_tower.positional_embedding.positional_embedding [30 48] fp32",
		"thinker.model.visual.rotary_pos_emb.inv_freq [2] fp32", "thinker.model.visual.rotary_pos_emb.original_inv_freq [2] fp32",
		"thinker.model.language_model.rotary_emb.inv_freq [8] fp32", "thinker.model.language_model.rotary_emb.original_inv_freq [8] fp32",
		"talker.model.rotary_emb.inv_freq [4] fp32", "talker.model.rotary_emb.original_inv_freq [4] fp32",
		"talker.code_predictor.model.rotary_emb.inv_freq [4] fp32", "talker.code_predictor.model.rotary_emb.original_inv_freq [4] fp32",
		"code2wav.code_offset [1 3 1] int64",
		"code2wav.pre_transformer.rotary_emb.inv_freq [4] fp32", "code2wav.pre_transformer.rotary_emb.original_inv_freq [4] fp32",
	}
	var got []string
	for _, b := range m.Buffers() {
		got = append(got, fmt.Sprintf("%s %v %s", b.Name, b.Shape, b.DType))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("buffers:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestQwen3OmniMoeReleased: Qwen3-Omni-30B-A3B-Instruct's config.json
// (testdata/qwen3_omni_moe/instruct_config.json: the keys that shape the
// model, as transformers 5.7 loads the release, transcribed from a public
// model report whose checkpoint stores 35,259,818,545 parameters) reads as
// the preset, 35,259,818,545 parameters as transformers 5.23 builds it on
// the meta device; with enable_audio_output false it is the thinker alone,
// 31,719,205,488 (the Thinking and Captioner presets).
func TestQwen3OmniMoeReleased(t *testing.T) {
	b, err := os.ReadFile("testdata/qwen3_omni_moe/instruct_config.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := FromHFConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	preset := MustPreset("qwen3-omni-30b-a3b-instruct")
	if m.ParamCount() != 35259818545 || preset.ParamCount() != 35259818545 || !slices.Equal(names(m), names(preset)) {
		t.Errorf("the released config: %d parameters, the preset %d; transformers 5.23 builds 35259818545", m.ParamCount(), preset.ParamCount())
	}
	off := strings.Replace(string(b), `"enable_audio_output": true`, `"enable_audio_output": false`, 1)
	thinker, err := FromHFConfig([]byte(off))
	if err != nil || thinker.Speech != nil || thinker.ParamCount() != 31719205488 {
		t.Fatalf("enable_audio_output false: %d parameters, speech %v, %v; transformers 5.23 builds 31719205488", thinker.ParamCount(), thinker.Speech != nil, err)
	}
	for _, n := range []string{"qwen3-omni-30b-a3b-thinking", "qwen3-omni-30b-a3b-captioner"} {
		if p := MustPreset(n); !slices.Equal(names(p), names(thinker)) || p.ParamCount() != 31719205488 {
			t.Errorf("%s: %d parameters, not the Instruct's thinker", n, p.ParamCount())
		}
	}
}

// names lists m's tensor names and shapes.
func names(m Model) []string {
	var out []string
	for _, x := range m.Tensors() {
		out = append(out, fmt.Sprint(x.Name, x.Shape))
	}
	return out
}

// TestQwen3OmniMoeConfigDefaults: a key config.json leaves out takes its
// config class's value (configuration_qwen3_omni_moe.py: the text class
// l.160-185, the vision encoder's l.91-104, the audio encoder's l.54-71,
// the talker's text l.368-394 and the talker's l.461-478, the code
// predictor's l.271-293, code2wav's l.509-527, enable_audio_output
// l.597).
func TestQwen3OmniMoeConfigDefaults(t *testing.T) {
	m, err := FromHFConfig(qwen3OmniConfig(qwen3OmniDefaults, qwen3OmniTalkerNeeds))
	if err != nil {
		t.Fatal(err)
	}
	text := words(m.Layers, m.Hidden, m.Heads, m.KVHeads, m.HeadDim, m.FFN, m.Vocab, m.MaxPosition, m.Experts, m.ExpertsPerToken, m.ExpertFFN, m.Router, m.TiedEmbeddings)
	tw := m.Vision.Tower
	vision := words(tw.Layers, tw.Hidden, tw.Heads, tw.FFN, tw.Image.Patch, tw.Image.TemporalPatch, tw.Image.Merge, tw.Image.PositionTable, tw.Image.Deepstack)
	a := m.Audio.Tower
	audio := words(a.Layers, a.Hidden, a.Heads, a.FFN, a.MelBins, a.SourcePositions, a.DownsampleChannels)
	if m.Speech == nil {
		t.Fatal("enable_audio_output defaults to true: the speech generator is built")
	}
	tk, pr, vo := m.Speech.Talker, m.Speech.Predictor, m.Speech.Vocoder
	talker := words(tk.Layers, tk.Hidden, tk.Heads, tk.KVHeads, tk.HeadDim, tk.FFN, tk.Vocab, tk.Experts, tk.ExpertsPerToken, tk.ExpertFFN, tk.SharedExpertFFN, tk.Router, tk.TiedEmbeddings)
	predictor := words(pr.Layers, pr.Hidden, pr.Heads, pr.KVHeads, pr.HeadDim, pr.FFN, pr.Vocab, pr.Codec.Groups)
	vocoder := words(vo.Layers, vo.Hidden, vo.Heads, vo.KVHeads, vo.HeadDim, vo.FFN, vo.Vocab, vo.SlidingWindow, *vo.Codec)
	for _, c := range [][2]string{
		{text, "28 2048 28 4 73 18944 3584 32768 128 8 768 softmax_topk_norm false"},
		{vision, "27 1152 16 4304 16 2 2 2304 8,16,24"},
		{audio, "32 1280 20 5120 128 1500 480"},
		{talker, "20 1024 16 2 64 2048 3072 128 8 384 768 softmax_topk false"},
		{predictor, "5 1024 16 8 128 3072 2048 32"},
		{vocoder, "8 1024 16 16 64 3072 2048 72 {16 1536 2,2 8,5,4,3}"},
	} {
		if c[0] != c[1] {
			t.Errorf("read %q, the classes' defaults are %q", c[0], c[1])
		}
	}
}

// TestQwen3OmniMoeErrors: configs transformers cannot build or the engine
// does not model are refused naming the field; the parts are planned only
// inside their wrapper; the new fields belong to their families.
func TestQwen3OmniMoeErrors(t *testing.T) {
	thinkerOnly := `"enable_audio_output": false`
	for _, c := range []struct {
		name string
		json []byte
		want string
	}{
		// transformers 5.23 builds it, but neither tower's features fit
		// the 2,048-wide embeddings; with the talker it fails to build
		// (AttributeError: shared_expert_intermediate_size).
		{"all defaults", qwen3OmniConfig(), "out_hidden_size = 3584 must equal text_config.hidden_size = 2048"},
		{"audio output_dim", qwen3OmniConfig(thinkerOnly, `"thinker_config": {"vision_config": {"out_hidden_size": 2048}}`), "audio_config.output_dim = 3584"},
		{"talker without shared_expert_intermediate_size", qwen3OmniConfig(qwen3OmniDefaults, `"talker_config": {"spatial_merge_size": 2}`), "shared_expert_intermediate_size is required"},
		{"talker without spatial_merge_size", qwen3OmniConfig(qwen3OmniDefaults, `"talker_config": {"text_config": {"shared_expert_intermediate_size": 768}}`), "spatial_merge_size is required"},
		{"thinker_hidden_size", qwen3OmniConfig(qwen3OmniDefaults, `"talker_config": {"thinker_hidden_size": 1024, "spatial_merge_size": 2, "text_config": {"shared_expert_intermediate_size": 768}}`), "thinker_hidden_size = 1024 must equal"},
		// AttributeError: ... has no attribute `embed_tokens`.
		{"tied code predictor", qwen3OmniConfig(qwen3OmniDefaults, `"talker_config": {"spatial_merge_size": 2, "text_config": {"shared_expert_intermediate_size": 768}, "code_predictor_config": {"tie_word_embeddings": true}}`), "cannot be tied"},
		{"talker without experts", qwen3OmniConfig(qwen3OmniDefaults, `"talker_config": {"spatial_merge_size": 2, "text_config": {"shared_expert_intermediate_size": 768, "num_local_experts": 0}}`), "num_local_experts = 0: every talker layer is a mixture of experts"},
		{"mlp_only_layers", qwen3OmniConfig(thinkerOnly, `"thinker_config": {"text_config": {"mlp_only_layers": [0]}, "vision_config": {"out_hidden_size": 2048}, "audio_config": {"output_dim": 2048}}`), "mlp_only_layers"},
		{"odd audio width", qwen3OmniConfig(thinkerOnly, `"thinker_config": {"vision_config": {"out_hidden_size": 2048}, "audio_config": {"output_dim": 2048, "d_model": 1275, "encoder_attention_heads": 15}}`), "must be even"},
		// TypeError: can only concatenate list (not "tuple") to list.
		{"code2wav rates alone", qwen3OmniConfig(qwen3OmniDefaults, qwen3OmniTalkerNeeds, `"code2wav_config": {"upsample_rates": [8, 5]}`), "give both or neither"},
		{"code2wav rates", qwen3OmniConfig(qwen3OmniDefaults, qwen3OmniTalkerNeeds, `"code2wav_config": {"upsample_rates": [8, 0], "upsampling_ratios": [2]}`), "upsample_rates[1] = 0"},
		{"code2wav decoder width", qwen3OmniConfig(qwen3OmniDefaults, qwen3OmniTalkerNeeds, `"code2wav_config": {"decoder_dim": 8}`), "decoder_dim = 8"},
	} {
		_, err := FromHFConfig(c.json)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	instruct := MustPreset("qwen3-omni-30b-a3b-instruct")
	vl := MustPreset("qwen3-vl-30b-a3b")
	vl.Speech = instruct.Speech
	wrong := instruct
	wrong.Speech = &Speech{Talker: instruct.Speech.Vocoder, Predictor: instruct.Speech.Predictor, Vocoder: instruct.Speech.Vocoder}
	llama := MustPreset("llama-3.2-1b")
	down, codec := llama, llama
	down.DownsampleChannels, codec.Codec = 480, &Codec{Groups: 4}
	for _, c := range []struct {
		name string
		m    Model
		want string
	}{
		{"speech on a wrapper without one", vl, "model.speech: a speech generator goes with a multimodal wrapper that builds one"},
		{"a stage of the wrong family", wrong, `model.speech.talker.family "qwen3_omni_moe_code2wav"`},
		{"a talker alone", instruct.Speech.Talker, "is a stage of a speech generator only"},
		{"the audio tower alone", instruct.Audio.Tower, "is an audio tower only"},
		{"the language model alone", Model{Family: "qwen3_omni_moe_text", Layers: 2, Hidden: 64, Heads: 4, FFN: 96, Vocab: 100}, "language model only"},
		{"downsample_channels on llama", down, "model.downsample_channels describes an audio tower's convolutional front end"},
		{"codec on llama", codec, "model.codec describes the stages of a speech generator"},
	} {
		if err := c.m.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// TestQwen3OmniMoeServing: vLLM 0.33 serves the thinker and maps the
// checkpoint's talker. and code2wav. weights to nothing
// (qwen3_omni_moe_thinker.py l.1623-1633), so the Instruct's carve loads
// what the Thinking's does: the thinker's 31,719,205,488 parameters in
// bf16 at TP 1, and notes the speech generator stored; its KV cache pages
// hold 16 tokens × 2 × 4 KV heads × 128 × 2 bytes a layer (8 KiB less a
// rank at TP 2: 2 KV heads). SGLang 0.5.23 skips them too. vLLM 0.11.0's
// registry has no Qwen3OmniMoeForConditionalGeneration. Training plans
// at 5.23 and is refused at 4.57.6; transformers' generate is refused.
func TestQwen3OmniMoeServing(t *testing.T) {
	instruct, thinking := MustPreset("qwen3-omni-30b-a3b-instruct"), MustPreset("qwen3-omni-30b-a3b-thinking")
	if instruct.ActiveParamCount() != thinking.ActiveParamCount() {
		t.Errorf("active parameters %d and %d: no text token passes through the speech generator", instruct.ActiveParamCount(), thinking.ActiveParamCount())
	}
	for _, tp := range []int{1, 2} {
		var w [2]Bytes
		for i, m := range []Model{instruct, thinking} {
			c, err := VLLM{Version: "0.33.0", TP: tp, MaxModelLen: 32768}.Carve(Inference{Model: m}, mustGPU("H100-80GB"))
			if err != nil || !c.Starts {
				t.Fatalf("TP %d, %s: starts %v (%s), %v", tp, m.Name, c.Starts, c.Err, err)
			}
			w[i] = c.Weights
			noted := slices.ContainsFunc(c.Notes, func(n string) bool {
				return strings.Contains(n, "speech generator (model.speech, 3540613057 parameters), which the serving engine does not load")
			})
			if noted != (i == 0) || c.KVCache.PageBytes != Bytes(32768/tp) {
				t.Errorf("TP %d, %s: notes %q, page %v", tp, m.Name, c.Notes, c.KVCache.PageBytes)
			}
		}
		if w[0] != w[1] || tp == 1 && w[0] != BF16.Size(31719205488) {
			t.Errorf("TP %d: weights %v and %v; the thinker's %v", tp, w[0], w[1], BF16.Size(31719205488))
		}
	}
	s, err := SGLang{}.Carve(Inference{Model: instruct}, mustGPU("H100-80GB"))
	if err != nil || s.Weights != BF16.Size(31719205488) {
		t.Errorf("SGLang: weights %v, %v", s.Weights, err)
	}
	if _, err := (VLLM{Version: "0.11.0"}).Carve(Inference{Model: instruct}, mustGPU("H100-80GB")); err == nil || !strings.Contains(err.Error(), "has no Qwen3OmniMoeForConditionalGeneration") {
		t.Errorf("vLLM 0.11.0: %v", err)
	}
	// The thinker's training step is modelled at 5.23, where its traces
	// hold (testdata/trace5); 4.57's Qwen3-Omni (a ModuleList of
	// experts) is not, nor transformers' generate.
	est, err := (Training{Model: instruct, SeqLen: 1024, MicroBatch: 1}).Estimate()
	if err != nil || !strings.Contains(strings.Join(est.Notes, "\n"), "modelled as transformers 5 builds and trains it") {
		t.Errorf("training: %v", err)
	}
	if _, err := (Training{Model: instruct, SeqLen: 1024, MicroBatch: 1, Transformers: "4.57.6"}).Estimate(); err == nil || !strings.Contains(err.Error(), "ModuleList of experts") {
		t.Errorf("training at 4.57.6: %v", err)
	}
	if _, err := (Inference{Model: instruct, PromptTokens: 512, NewTokens: 16, Batch: 1}).Estimate(); err == nil || !strings.Contains(err.Error(), "not modelled yet") {
		t.Errorf("generate: %v", err)
	}
}

// TestQwen3OmniMoeSpeechInPlace: a speech stage changed in place, behind
// the pointers the model shares (Model.Speech, a stage's Model.Codec), is
// counted anew: the tensor cache keys the stages by value.
func TestQwen3OmniMoeSpeechInPlace(t *testing.T) {
	m := MustPreset("qwen3-omni-30b-a3b-instruct")
	for _, change := range []func(){
		func() { m.Speech.Talker.Layers-- },
		func() { m.Speech.Predictor.Codec.Groups++ },
		func() { m.Speech.Vocoder.Codec.DecoderUpsample = Blocks(8, 5, 4) },
	} {
		before := m.ParamCount()
		change()
		cached := m.ParamCount()
		clearTensorCache()
		if fresh := m.ParamCount(); cached == before || cached != fresh {
			t.Errorf("before %d, after the change %d from the cache, %d counted anew", before, cached, fresh)
		}
	}
	if MustPreset("qwen3-omni-30b-a3b-instruct").ParamCount() != 35259818545 {
		t.Error("the change reached the catalog's model")
	}
}
