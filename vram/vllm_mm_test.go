package vram

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// TestQwenVideoFrames: the dummy video of Qwen2-VL's processing info
// (qwen2_vl.py l.974-1009): the most frames whose temporal pairs of
// 16,384-token images fit max_model_len, at most 14, at least one.
func TestQwenVideoFrames(t *testing.T) {
	for _, c := range []struct{ maxLen, frames, groups int }{
		{128000, 14, 7}, // 114,688 tokens (vLLM's log in PR #12604)
		{65536, 8, 4},
		{32768, 4, 2},
		{20000, 2, 1}, // one pair; three frames would pad to two pairs
		{8192, 1, 1},  // one frame still makes one pair
	} {
		f, g := qwenVideoFrames(c.maxLen, 16384, 2)
		if f != c.frames || g != c.groups {
			t.Errorf("max_model_len %d: %d frames in %d groups, want %d in %d", c.maxLen, f, g, c.frames, c.groups)
		}
	}
}

// TestQwen3DummyVideo: Qwen3-VL's dummy video as vLLM 0.11.0 makes it
// from the released processors' sizes (4096² images; videos within
// 4,096 … 25,165,824 pixels over all frames): the frames transformers'
// smart_resize sizes (worked by hand from video_processing_qwen3_vl.py
// l.34-64), the frame count _get_max_video_frames finds, and the tokens
// get_max_video_tokens counts (× 12.5).
func TestQwen3DummyVideo(t *testing.T) {
	for _, c := range []struct{ frames, side int }{
		{2, 3520},   // 2·4096² > max: β = √(4/3), ⌊4096/β/32⌋ = 110
		{3, 2880},   // rounds to 4 frames: β = √2, ⌊90.5⌋ = 90
		{24576, 32}, // β = 128: one factor
		{1 << 20, 32},
	} {
		if s := qwen3VideoSide(c.frames, 4096, 2, 32, 4096, 25165824); s != c.side {
			t.Errorf("%d frames: side %d, want %d", c.frames, s, c.side)
		}
	}
	if s := qwen3VideoSide(2, 64, 2, 32, 131072, 786432); s != 256 {
		t.Errorf("a 64² video below min_pixels: side %d, want 256 (β = 4, ⌈8⌉·32)", s)
	}
	im := *MustPreset("qwen3-vl-8b").Vision.Tower.Image
	for _, c := range []struct {
		maxLen, minPx, maxPx int
		want                 dummyVideo
	}{
		// Three frames' 16,200 tokens fit: frames are added up to the cap,
		// 32² each (one token), 12,288 groups, counted 153,600.
		{32768, 4096, 25165824, dummyVideo{frames: 24576, groups: 12288, side: 32, tokens: 153600}},
		{262144, 4096, 25165824, dummyVideo{frames: 24576, groups: 12288, side: 32, tokens: 153600}},
		// Three frames do not fit 8,192: two of 3520² (12,100 tokens).
		{8192, 4096, 25165824, dummyVideo{frames: 2, groups: 1, side: 3520, tokens: 151250}},
		// transformers' own defaults (128·32² … 768·32²) reach the cap too.
		{32768, 131072, 786432, dummyVideo{frames: 24576, groups: 12288, side: 32, tokens: 153600}},
	} {
		if got := qwen3DummyVideo(c.maxLen, 4096, im, c.minPx, c.maxPx); got != c.want {
			t.Errorf("max_model_len %d, video pixels %d…%d: %+v, want %+v", c.maxLen, c.minPx, c.maxPx, got, c.want)
		}
	}
}

// TestVLLMMultimodalProfile: vLLM profiles a vision-language model's
// encoder on dummy items before it sizes the KV cache: which modality, how
// many items, what the encoder call and what stays beside the language
// model's run take, and the switches that change or skip it.
func TestVLLMMultimodalProfile(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	carve := func(preset string, v VLLM) VLLMCarve {
		t.Helper()
		c, err := v.Carve(Inference{Model: MustPreset(preset), Weights: Quant{DType: BF16}}, g)
		if err != nil {
			t.Fatalf("%s: %v", preset, err)
		}
		return c
	}
	for _, c := range []struct {
		name, preset      string
		v                 VLLM
		modality          string
		tokens, items     int
		budget, imageSize int
	}{
		// LLaVA-1.5: 576-token images, as many as 8,192 tokens hold, each
		// output padded to the budget.
		{"llava", "llava-1.5-7b", VLLM{Version: "0.11.0"}, "image", 576, 14, 8192, 336},
		// Qwen2.5-VL at 32k: a video of four 3584² frames beats an image.
		{"qwen2.5-vl 32k", "qwen2.5-vl-7b", VLLM{Version: "0.11.0", MaxModelLen: 32768}, "video", 32768, 1, 32768, 3584},
		{"qwen2.5-vl 128k", "qwen2.5-vl-7b", VLLM{Version: "0.11.0"}, "video", 114688, 1, 114688, 3584},
		{"qwen2.5-vl no video", "qwen2.5-vl-7b", VLLM{Version: "0.11.0", MaxModelLen: 32768, LimitMMPerPrompt: map[string]int{"video": 0}}, "image", 16384, 1, 16384, 3584},
		// --mm-processor-kwargs '{"max_pixels": 1003520}': 980² pixels,
		// 1,225 tokens an image, six of them in the 8,192-token budget.
		{"qwen2.5-vl max_pixels", "qwen2.5-vl-7b", VLLM{Version: "0.11.0", MaxModelLen: 32768, MaxPixels: 1003520, LimitMMPerPrompt: map[string]int{"video": 0}}, "image", 1225, 6, 8192, 980},
		// Qwen3-VL: a video of 24,576 32² frames, counted 153,600 tokens
		// (its timestamps), beats a 4096² image; its outputs are padded to
		// those rows.
		{"qwen3-vl", "qwen3-vl-8b", VLLM{Version: "0.11.0", MaxModelLen: 32768}, "video", 153600, 1, 153600, 32},
		{"qwen3-vl 8k", "qwen3-vl-8b", VLLM{Version: "0.11.0", MaxModelLen: 8192}, "video", 151250, 1, 151250, 3520},
		{"qwen3-vl no video", "qwen3-vl-8b", VLLM{Version: "0.11.0", MaxModelLen: 32768, LimitMMPerPrompt: map[string]int{"video": 0}}, "image", 16384, 1, 16384, 4096},
	} {
		cv := carve(c.preset, c.v)
		p := cv.MMProfile
		if p == nil {
			t.Errorf("%s: no multimodal profile", c.name)
			continue
		}
		if p.Modality != c.modality || p.TokensPerItem != c.tokens || p.Items != c.items || p.Budget != c.budget || p.ImageSize != c.imageSize {
			t.Errorf("%s: %+v, want %s × %d of %d tokens, budget %d, %d px", c.name, *p, c.modality, c.items, c.tokens, c.budget, c.imageSize)
		}
		// The held outputs: items × max(tokens, budget) rows of the
		// language model's width (Qwen3-VL's with its deepstack levels) in
		// bf16, beside the fp32 pixels.
		m := MustPreset(c.preset)
		im := *m.Vision.Tower.Image
		im.Size = p.ImageSize
		dummy := *m.Vision
		tower := dummy.Tower
		tower.Image = &im
		dummy.Tower = tower
		groups := 1
		if p.Modality == "video" {
			groups = (p.Frames + p.Frames%2) / 2 // temporal pairs of frames
		}
		// Pixels, not patches: a class token has none.
		pixels := FP32.Size(int64(p.Items*groups) * int64(im.Channels*max(1, im.TemporalPatch)) * int64(im.Size*im.Size))
		outputs := BF16.Size(int64(p.Items) * int64(max(p.TokensPerItem, p.Budget)) * int64(m.Hidden) * int64(1+im.Deepstack.Len()))
		if p.Held != pixels+outputs {
			t.Errorf("%s: held %d, want pixels %d + outputs %d", c.name, p.Held, pixels, outputs)
		}
		plain := c.v
		plain.SkipMMProfiling = true
		base := carve(c.preset, plain)
		if cv.Activation != max(p.Encoder, base.Activation+p.Held) || p.Encoder <= 0 {
			t.Errorf("%s: activation %d, want max(encoder %d, held %d + the language model's %d)", c.name, cv.Activation, p.Encoder, p.Held, base.Activation)
		}
		if cv.KVCache.Available >= base.KVCache.Available {
			t.Errorf("%s: the profile leaves the cache %d, skipped %d", c.name, cv.KVCache.Available, base.KVCache.Available)
		}
		if !strings.Contains(strings.Join(cv.Notes, "\n"), "profiles the vision encoder") {
			t.Errorf("%s: no note of the profile: %v", c.name, cv.Notes)
		}
	}
	// Text-only (every modality at 0), skipped, or a text model: no profile.
	for name, c := range map[string]VLLMCarve{
		"text-only":  carve("qwen2.5-vl-7b", VLLM{Version: "0.11.0", LimitMMPerPrompt: map[string]int{"image": 0, "video": 0}}),
		"skipped":    carve("qwen2.5-vl-7b", VLLM{Version: "0.11.0", SkipMMProfiling: true}),
		"text model": carve("llama-3.1-8b", VLLM{Version: "0.11.0"}),
	} {
		if c.MMProfile != nil {
			t.Errorf("%s: profiled %+v", name, *c.MMProfile)
		}
	}
}

// TestVLLMMultimodalSettingsErrors: bad multimodal settings name the flag
// and the rule.
func TestVLLMMultimodalSettingsErrors(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	in := Inference{Model: MustPreset("qwen2.5-vl-7b"), Weights: Quant{DType: BF16}}
	for _, c := range []struct {
		v    VLLM
		want string
	}{
		{VLLM{Version: "0.11.0", LimitMMPerPrompt: map[string]int{"audio": 1}}, "limit_mm_per_prompt \"audio\""},
		{VLLM{Version: "0.11.0", LimitMMPerPrompt: map[string]int{"image": -1}}, "limit_mm_per_prompt \"image\""},
		{VLLM{Version: "0.11.0", MaxPixels: -5}, "max_pixels must be in"},
	} {
		if _, err := c.v.Carve(in, g); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.v, err, c.want)
		}
	}
}

// TestVLLMMultimodalTiles: Llama 4's profile runs a dummy image cut
// into 16 × 1 tiles and a global one (mllama4.py l.561-566, 605-628),
// counted by its placeholder's length and held as bf16 pixels and outputs
// padded to the budget; data mode shares the tiles out.
func TestVLLMMultimodalTiles(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	in := Inference{Model: MustPreset("llama-4-scout"), Weights: Quant{DType: BF16}, TP: 8}
	weights, err := VLLM{Version: "0.11.0", MaxModelLen: 8192, TP: 8}.Carve(in, g)
	if err != nil {
		t.Fatal(err)
	}
	p := weights.MMProfile
	if p == nil {
		t.Fatal("no profile")
	}
	// <|image_start|>, 16 × (144 patches, <|tile_y_separator|>),
	// <|image|>, 144 patches, <|image_end|> (processing_llama4.py
	// l.111-136); the budget is max_num_batched_tokens' 8,192 at 8k.
	tokens := 1 + 16*(144+1) + 1 + 144 + 1
	if p.Tiles != 17 || p.TokensPerItem != tokens || p.Budget != 8192 || p.Items != 8192/tokens || p.ImageSize != 336 {
		t.Errorf("profile %+v: want %d items of 17 tiles, %d tokens, budget 8192", *p, 8192/tokens, tokens)
	}
	pixels := BF16.Size(int64(p.Items) * 17 * 3 * 336 * 336)
	outputs := BF16.Size(int64(p.Items) * 8192 * 5120)
	if p.Held != pixels+outputs {
		t.Errorf("held %d, want bf16 pixels %d + outputs padded to the budget %d", p.Held, pixels, outputs)
	}
	if note := strings.Join(weights.Notes, "\n"); !strings.Contains(note, "17 tiles of 336×336") {
		t.Errorf("notes %q: want the tiles named", note)
	}
	skipped, err := VLLM{Version: "0.11.0", MaxModelLen: 8192, TP: 8, SkipMMProfiling: true}.Carve(in, g)
	if err != nil {
		t.Fatal(err)
	}
	if weights.Activation != max(p.Encoder, skipped.Activation+p.Held) || weights.KVCache.Available >= skipped.KVCache.Available {
		t.Errorf("activation %v, KV %v; skipped: %v, %v: want the profile's held memory on top", weights.Activation, weights.KVCache.Available, skipped.Activation, skipped.KVCache.Available)
	}
	data, err := VLLM{Version: "0.11.0", MaxModelLen: 8192, TP: 8, MMEncoderTPMode: "data"}.Carve(in, g)
	if err != nil {
		t.Fatal(err)
	}
	// Every rank runs ⌈51 / 8⌉ = 7 tiles through the whole tower rather
	// than 51 through an eighth of its heads and MLP: less at the peak,
	// more in weights.
	if d := data.MMProfile; d == nil || d.Encoder >= p.Encoder || data.Weights <= weights.Weights {
		t.Errorf("data mode: profile %+v, weights %v (weights mode: encoder %v, weights %v)", d, data.Weights, p.Encoder, weights.Weights)
	}
	if note := strings.Join(data.Notes, "\n"); !strings.Contains(note, "⌈tiles / 8⌉") || strings.Contains(note, "does not support") {
		t.Errorf("data mode notes %q: want the tiles shared out", note)
	}
}

// TestVLLMMultimodalTable writes vram/README.md's table of vLLM's
// multimodal profile on an H100 80GB (make docs): what the profile's dummy
// items are, what it holds, the encoder's peak and the KV cache left, for
// the launches the README's prose describes.
func TestVLLMMultimodalTable(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	novideo := map[string]int{"video": 0}
	rows := []struct {
		preset, launch string
		v              VLLM
	}{
		{"llava-1.5-7b", "defaults", VLLM{Version: "0.11.0"}},
		{"qwen2.5-vl-7b", "defaults (128k context)", VLLM{Version: "0.11.0"}},
		{"qwen2.5-vl-7b", "`--max-model-len 32768`", VLLM{Version: "0.11.0", MaxModelLen: 32768}},
		{"qwen2.5-vl-7b", "32k, `--limit-mm-per-prompt video=0`", VLLM{Version: "0.11.0", MaxModelLen: 32768, LimitMMPerPrompt: novideo}},
		{"qwen2.5-vl-7b", "32k, `--skip-mm-profiling`", VLLM{Version: "0.11.0", MaxModelLen: 32768, SkipMMProfiling: true}},
		{"qwen2.5-vl-7b", "32k, `-tp 2`", VLLM{Version: "0.11.0", MaxModelLen: 32768, TP: 2}},
		{"qwen2.5-vl-7b", "32k, `-tp 4`", VLLM{Version: "0.11.0", MaxModelLen: 32768, TP: 4}},
		{"qwen2.5-vl-7b", "32k, `-tp 2 --mm-encoder-tp-mode data`", VLLM{Version: "0.11.0", MaxModelLen: 32768, TP: 2, MMEncoderTPMode: "data"}},
		{"qwen3-vl-8b", "`--max-model-len 32768`", VLLM{Version: "0.11.0", MaxModelLen: 32768}},
		{"qwen3-vl-8b", "32k, `--limit-mm-per-prompt video=0`", VLLM{Version: "0.11.0", MaxModelLen: 32768, LimitMMPerPrompt: novideo}},
		{"llama-4-scout", "`-tp 8 --max-model-len 8192`", VLLM{Version: "0.11.0", MaxModelLen: 8192, TP: 8}},
		{"llama-4-scout", "8k, `-tp 8 --mm-encoder-tp-mode data`", VLLM{Version: "0.11.0", MaxModelLen: 8192, TP: 8, MMEncoderTPMode: "data"}},
	}
	var b strings.Builder
	b.WriteString("| model | launch | dummy items | tokens an item | encoder budget | held | encoder peak | KV cache |\n|---|---|---|---:|---:|---:|---:|---:|\n")
	kv := map[string]Bytes{}
	for _, row := range rows {
		in := Inference{Model: MustPreset(row.preset), Weights: Quant{DType: BF16}, TP: max(1, row.v.TP)}
		c, err := row.v.Carve(in, g)
		if err != nil {
			t.Fatalf("%s, %s: %v", row.preset, row.launch, err)
		}
		kv[row.preset+" "+row.launch] = c.KVCache.Available
		items, tokens, budget, held, enc := "not profiled", "", "", "", ""
		if p := c.MMProfile; p != nil {
			items = fmt.Sprintf("%d %s of %d²", p.Items, plural(p.Items, "image"), p.ImageSize)
			if p.Modality == "video" {
				items = fmt.Sprintf("%d %s of %s frames of %d²", p.Items, plural(p.Items, "video"), commaInt(p.Frames), p.ImageSize)
			}
			if p.Tiles > 0 {
				items = fmt.Sprintf("%d %s of %d tiles of %d²", p.Items, plural(p.Items, "image"), p.Tiles, p.ImageSize)
			}
			tokens, budget = commaInt(p.TokensPerItem), commaInt(p.Budget)
			held, enc = fmt.Sprintf("%.1f GiB", p.Held.GiB()), fmt.Sprintf("%.1f GiB", p.Encoder.GiB())
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %.1f GiB |\n", row.preset, row.launch, items, tokens, budget, held, enc, c.KVCache.Available.GiB())
	}
	// The profile only takes memory from the KV cache.
	for _, m := range []string{"qwen2.5-vl-7b", "qwen3-vl-8b"} {
		if full, off := kv[m+" `--max-model-len 32768`"], kv[m+" 32k, `--limit-mm-per-prompt video=0`"]; !(full < off) {
			t.Errorf("%s at 32k: KV %v with videos, %v without: the video profile should take more", m, full, off)
		}
	}
	docSection(t, "README.md", "go test ./vram -run TestVLLMMultimodalTable -update", b.String())
}

// plural is noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// commaInt writes n with thousands separators.
func commaInt(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestVLLMTextOnly: with limit_mm_per_prompt at 0 for every modality, the
// model classes that skip their vision tower load the language model
// alone (the same weights as the model without its Vision), profile no
// encoder and say so; Gemma 3's builds its tower regardless, and a Qwen
// launch that still takes videos keeps it.
func TestVLLMTextOnly(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	none := map[string]int{"image": 0, "video": 0}
	for _, c := range []struct {
		preset string
		tp     int
		limits map[string]int
		skips  bool
	}{
		{"llava-1.5-7b", 1, map[string]int{"image": 0}, true},
		{"mistral-small-3.1-24b", 1, none, true},
		{"qwen2.5-vl-7b", 1, none, true},
		{"qwen3-vl-8b", 1, none, true},
		{"llama-4-scout", 8, map[string]int{"image": 0}, true},
		{"qwen2.5-vl-7b", 1, map[string]int{"image": 0}, false}, // videos still come
		{"gemma-3-4b", 1, none, false},
	} {
		name := fmt.Sprintf("%s %v", c.preset, c.limits)
		m := MustPreset(c.preset)
		in := Inference{Model: m, Weights: Quant{DType: BF16}}
		full, err := VLLM{Version: "0.11.0", MaxModelLen: 4096, TP: c.tp}.Carve(in, g)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		text, err := VLLM{Version: "0.11.0", MaxModelLen: 4096, TP: c.tp, LimitMMPerPrompt: c.limits}.Carve(in, g)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lm := m
		lm.Vision = nil
		alone, err := VLLM{Version: "0.11.0", MaxModelLen: 4096, TP: c.tp}.Carve(Inference{Model: lm, Weights: Quant{DType: BF16}}, g)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		said := strings.Contains(strings.Join(text.Notes, "\n"), "without the vision tower")
		switch {
		case c.skips && (text.Weights != alone.Weights || text.Weights >= full.Weights || !said):
			t.Errorf("%s: weights %d, want the language model's %d (with the tower %d); noted %v", name, text.Weights, alone.Weights, full.Weights, said)
		case !c.skips && (text.Weights != full.Weights || said):
			t.Errorf("%s: weights %v, want the tower kept (%v); noted %v", name, text.Weights, full.Weights, said)
		}
		if c.skips && text.MMProfile != nil {
			t.Errorf("%s: profile %+v on a text-only launch", name, *text.MMProfile)
		}
		if c.preset != "llava-1.5-7b" {
			continue
		}
		// vLLM builds CLIP's blocks up to the feature layer (-2: 23 of
		// 24) without the post-norm; the full launch loads those, the
		// projector and the language model.
		var tower, unused int64
		for _, x := range m.tensors() {
			switch x.part {
			case towerPart, projectorPart:
				tower += x.Numel()
			case unusedPart:
				unused += x.Numel()
			}
		}
		if want := alone.Weights + BF16.Size(tower); full.Weights != want || unused < 12_000_000 {
			t.Errorf("%s: full launch's weights %d, want the language model's and the used tower's %d (%d unused parameters)", name, full.Weights, want, unused)
		}
	}
}
