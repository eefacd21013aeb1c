package vram

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVisionPlanErrors: every misuse of the image side names the field and
// the rule.
func TestVisionPlanErrors(t *testing.T) {
	llava := MustPreset("llava-1.5-7b")
	badTower := llava.clone()
	badTower.Vision.Tower.Family = "llama"
	badLayer := llava.clone()
	badLayer.Vision.FeatureLayer = 30
	badWrapper := llava.clone()
	badWrapper.Vision.Family = "llama"
	for _, tc := range []struct {
		name string
		t    Training
		want string
	}{
		{"images on a text model", Training{Model: MustPreset("llama-2-7b"), SeqLen: 1024, MicroBatch: 1, Images: 1}, "images and vision_tower apply to vision-language models"},
		{"too short", Training{Model: llava, SeqLen: 512, MicroBatch: 1}, "seq_len = 512 cannot hold images = 1 of 576 tokens"},
		{"two images", Training{Model: llava, SeqLen: 1024, MicroBatch: 1, Images: 2}, "seq_len = 1024 cannot hold images = 2"},
		{"negative images", Training{Model: llava, SeqLen: 1024, MicroBatch: 1, Images: -1}, "images must be in"},
		{"tower mode", Training{Model: llava, SeqLen: 1024, MicroBatch: 1, VisionTower: "half"}, `unknown vision_tower "half"`},
		{"trainable tower with adapters", Training{Model: llava, SeqLen: 1024, MicroBatch: 1, VisionTower: "trainable",
			LoRA: &LoRA{Rank: 8, Targets: []string{"q_proj"}}}, `vision_tower "trainable" needs trainable "full"`},
		{"pipeline", Training{Model: llava, SeqLen: 1024, MicroBatch: 1, Parallel: Parallel{PP: 2}}, "pipeline parallelism of vision-language models"},
		{"tower family", Training{Model: badTower, SeqLen: 1024, MicroBatch: 1}, "model.vision.tower"},
		{"feature layer", Training{Model: badLayer, SeqLen: 1024, MicroBatch: 1}, "model.vision.feature_layer = 30"},
		{"wrapper", Training{Model: badWrapper, SeqLen: 1024, MicroBatch: 1}, `model.vision.family "llama" is not a vision-language wrapper`},
	} {
		_, err := tc.t.Estimate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		in   Inference
		want string
	}{
		{Inference{Model: llava, Batch: 1, PromptTokens: 100, NewTokens: 10}, "prompt_tokens = 100 cannot hold images = 1 of 576 tokens"},
		{Inference{Model: MustPreset("llama-2-7b"), Batch: 1, PromptTokens: 100, Images: 1}, "images applies to vision-language models"},
	} {
		if _, err := tc.in.Estimate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
}

// TestVisionParts: LLaVA-1.5-7B's parameters split into the tower's
// (303.5M, the last CLIP block and the post-norm unused by the features),
// the projector's and the language model's; the tower trains only when the
// plan says so, adapters adapt the language model only, and a trained
// tower keeps more activations than a frozen one.
func TestVisionParts(t *testing.T) {
	llava := MustPreset("llava-1.5-7b")
	text := llava.clone()
	text.Vision = nil
	tower := llava.Vision.Tower
	if got, want := llava.ParamCount(), int64(7063427072); got != want {
		t.Fatalf("%d parameters, want %d (LlavaForConditionalGeneration)", got, want)
	}
	projector := int64(1024*4096 + 4096 + 4096*4096 + 4096)
	if got, want := llava.ParamCount()-text.ParamCount()-tower.ParamCount(), projector; got != want {
		t.Errorf("projector %d parameters, want %d", got, want)
	}
	lastBlock := int64(4*(1024*1024+1024) + 4*1024 + 2*1024*4096 + 4096 + 1024)
	postNorm := int64(2 * 1024)
	plan := func(edit func(*Training)) TrainingEstimate {
		tr := Training{Model: llava, SeqLen: 1024, MicroBatch: 2, Precision: "amp_bf16"}
		edit(&tr)
		est, err := tr.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		return est
	}
	frozen := plan(func(*Training) {})
	trained := plan(func(tr *Training) { tr.VisionTower = "trainable" })
	if got, want := frozen.TrainableParams, text.ParamCount()+projector; got != want {
		t.Errorf("frozen tower: %d trainable, want the language model and the projector, %d", got, want)
	}
	if got, want := trained.TrainableParams, llava.ParamCount()-lastBlock-postNorm; got != want {
		t.Errorf("trained tower: %d trainable, want all but the unused last block and post-norm, %d", got, want)
	}
	if trained.Peak.Total() <= frozen.Peak.Total() {
		t.Errorf("a trained tower (%v) needs no more than a frozen one (%v)", trained.Peak.Total(), frozen.Peak.Total())
	}
	lora := plan(func(tr *Training) { tr.LoRA = &LoRA{Rank: 16, Targets: []string{"all_linear"}} })
	textLoRA, err := Training{Model: text, SeqLen: 1024, MicroBatch: 2, Precision: "amp_bf16", LoRA: &LoRA{Rank: 16, Targets: []string{"all_linear"}}}.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	if lora.TrainableParams != textLoRA.TrainableParams {
		t.Errorf("LoRA on LLaVA trains %d parameters, on its language model alone %d", lora.TrainableParams, textLoRA.TrainableParams)
	}
	// The image side's activations: more images, more memory.
	two := plan(func(tr *Training) { tr.Images = 1; tr.SeqLen = 1200 })
	twoImages := plan(func(tr *Training) { tr.Images = 2; tr.SeqLen = 1200 })
	if twoImages.Peak.Total() <= two.Peak.Total() {
		t.Errorf("two images per sequence (%v) need no more than one (%v)", twoImages.Peak.Total(), two.Peak.Total())
	}
}

// TestVisionInference: the prefill runs the tower and the projector before
// the blocks; the KV cache counts the image tokens in the prompt.
func TestVisionInference(t *testing.T) {
	llava := MustPreset("llava-1.5-7b")
	text := llava.clone()
	text.Vision = nil
	in := Inference{Model: llava, Batch: 64, PromptTokens: 600, NewTokens: 1}
	est, err := in.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	in.Model = text
	plain, err := in.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	if est.KVCache != plain.KVCache {
		t.Errorf("KV cache %v, the language model's for the same prompt %v", est.KVCache, plain.KVCache)
	}
	// 64 images through CLIP-L: every hidden state (25 × 64 × 577 × 1024
	// × 2 bytes) is kept until the features are selected.
	states := Bytes(25 * 64 * 577 * 1024 * 2)
	if est.Peak.Temporaries < states {
		t.Errorf("prefill temporaries %v, below the tower's hidden states %v", est.Peak.Temporaries, states)
	}
	if est.Weights <= plain.Weights {
		t.Errorf("weights %v, no more than the language model's %v", est.Weights, plain.Weights)
	}
}

// TestVisionConfigRoundTrip: a LLaVA model writes a config transformers
// reads (text_config, vision_config) and reads it back unchanged.
func TestVisionConfigRoundTrip(t *testing.T) {
	m := MustPreset("llava-1.5-7b")
	c := m.HFConfig()
	if c["model_type"] != "llava" || c["vision_feature_layer"] != -2 {
		t.Fatalf("config %v", c)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := FromHFConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.ParamCount() != m.ParamCount() || back.Vision == nil || back.Vision.ImageTokens() != 576 {
		t.Errorf("round trip: %d parameters, vision %+v", back.ParamCount(), back.Vision)
	}
}

// TestVisionCheckpointNames: checkpoints saved before transformers 4.52
// name the parts vision_tower.…, multi_modal_projector.…,
// language_model.model.… and language_model.lm_head; they match today's
// names.
func TestVisionCheckpointNames(t *testing.T) {
	m := MustPreset("llava-1.5-7b")
	var old []Tensor
	for _, x := range m.Tensors() {
		n := x.Name
		switch {
		case strings.HasPrefix(n, "model.language_model."):
			n = "language_model.model." + strings.TrimPrefix(n, "model.language_model.")
		case strings.HasPrefix(n, "lm_head."):
			n = "language_model." + n
		default:
			n = strings.TrimPrefix(n, "model.")
		}
		x.Name, x.DType, x.Bytes = n, FP16, FP16.Size(x.Numel())
		old = append(old, x)
	}
	ck, err := matchCheckpoint(m, old)
	if err != nil {
		t.Fatal(err)
	}
	if len(ck.Unused) > 0 || ck.Total != FP16.Size(m.ParamCount()) {
		t.Errorf("unused %v, total %v", ck.Unused, ck.Total)
	}
}

// TestQwen25VL: the published parameter count, image tokens (a 448-pixel
// image: 32 × 32 patches merged 2 × 2 into 256 tokens), the windows the
// blocks attend within, the released flat config and 4.52's nested one,
// old checkpoint names, and the tower refused alone.
func TestQwen25VL(t *testing.T) {
	m := MustPreset("qwen2.5-vl-7b")
	if got, want := m.ParamCount(), int64(8292166656); got != want {
		t.Errorf("%d parameters, want %d (Qwen2.5-VL-7B-Instruct)", got, want)
	}
	if got := m.Vision.ImageTokens(); got != 256 {
		t.Errorf("%d tokens per image, want 256", got)
	}
	// 140 pixels: 10 × 10 patches, 5 × 5 merged, windows of 2 × 2 merged
	// (56 pixels): four whole windows, four cut to 2 × 1, one to 1 × 1.
	im := Image{Size: 140, Patch: 14, Merge: 2, Window: 56, TemporalPatch: 2, Channels: 3}
	got := qwenVisionWindows(im, false)
	want := [][2]int64{{16, 4}, {8, 2}, {8, 2}, {4, 1}}
	total := int64(0)
	for _, w := range got {
		total += w[0] * w[1]
	}
	if len(got) != len(want) || total != 100 {
		t.Errorf("windows %v, want %v (100 patches)", got, want)
	}
	for i := range want {
		if i < len(got) && got[i] != want[i] {
			t.Errorf("windows %v, want %v", got, want)
		}
	}
	if g := qwenVisionWindows(im, true); len(g) != 1 || g[0] != [2]int64{100, 1} {
		t.Errorf("global block chunks %v, want one image of 100 patches", g)
	}
	// The released config is flat; HFConfig writes text_config.
	b, err := os.ReadFile(filepath.Join("testdata", "hf", "qwen2.5-vl-7b-instruct.json"))
	if err != nil {
		t.Fatal(err)
	}
	flat, err := FromHFConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	nested, err := json.Marshal(m.HFConfig())
	if err != nil {
		t.Fatal(err)
	}
	back, err := FromHFConfig(nested)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []Model{flat, back} {
		if x.ParamCount() != m.ParamCount() || x.Vision == nil || x.Vision.ImageTokens() != 256 {
			t.Errorf("config read back: %d parameters, vision %+v", x.ParamCount(), x.Vision)
		}
	}
	for _, tc := range []struct{ old, now string }{
		{"visual.blocks.0.attn.qkv.weight", "model.visual.blocks.0.attn.qkv.weight"},
		{"model.layers.0.mlp.up_proj.weight", "model.language_model.layers.0.mlp.up_proj.weight"},
		{"model.language_model.norm.weight", "model.language_model.norm.weight"},
		{"lm_head.weight", "lm_head.weight"},
	} {
		if got := m.currentName(tc.old); got != tc.now {
			t.Errorf("checkpoint name %s reads as %s, want %s", tc.old, got, tc.now)
		}
	}
	tower := Training{Model: m.Vision.Tower, SeqLen: 1024, MicroBatch: 1}
	if _, err := tower.Estimate(); err == nil || !strings.Contains(err.Error(), "is a vision tower only") {
		t.Errorf("the tower alone: %v", err)
	}
	bad := strings.Replace(string(b), `"mrope_section": [
      16,`, `"mrope_section": [
      15,`, 1)
	if _, err := FromHFConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), "mrope_section") {
		t.Errorf("bad mrope sections: %v", err)
	}
}

// TestVisionBatchPixels: a vision-language step's batch holds the pixel
// values the processor hands the tower for micro_batch × images images, in
// its layout and dtype — Qwen's patches × channels × temporal_patch × patch²
// fp32 rows (a still image repeated over two frames; measure.py's batch
// builds the same), Pixtral's and Llama 4's in the weights' dtype, LLaVA's
// channels × size² fp32 — beside the token ids and labels (int64 each).
func TestVisionBatchPixels(t *testing.T) {
	for _, c := range []struct {
		preset        string
		batch, images int
		pixels        int64 // elements of one image
		dtype         DType
	}{
		{"qwen2.5-vl-3b", 2, 3, 32 * 32 * 3 * 2 * 14 * 14, FP32},
		{"qwen3-vl-8b", 1, 2, 32 * 32 * 3 * 2 * 16 * 16, FP32},
		{"llava-1.5-7b", 3, 1, 3 * 336 * 336, FP32},
		{"mistral-small-3.1-24b", 2, 1, 3 * 1540 * 1540, BF16},
	} {
		tr := Training{Model: MustPreset(c.preset), SeqLen: 8192, MicroBatch: c.batch, Images: c.images, Precision: "bf16", Checkpointing: CheckpointFull}
		r, err := tr.resolve()
		if err != nil {
			t.Fatalf("%s: %v", c.preset, err)
		}
		ids := INT64.Size(2 * int64(c.batch) * 8192)
		want := ids + c.dtype.Size(int64(c.batch*c.images)*c.pixels)
		if got := buildEdges(&r).Inputs; got != want {
			t.Errorf("%s, %d × %d images: the batch holds %d bytes, want %d (ids %d + pixels)", c.preset, c.batch, c.images, got, want, ids)
		}
	}
}

// TestTowerPlannedAtWrapperRelease: a vision tower is planned at the
// transformers release its wrapper resolved to, so a transformers 5 model
// with no release named has its tower at 5.23.0, not at the 4.x default.
func TestTowerPlannedAtWrapperRelease(t *testing.T) {
	cases := []struct {
		preset, transformers string
		want                 libVersion
	}{
		{"qwen3.5-9b", "", transformers5Release},
		{"qwen3.5-9b", "5.23.0", transformers5Release},
		{"qwen2.5-vl-3b", "", pinned},
	}
	for _, c := range cases {
		tr := Training{Model: MustPreset(c.preset), SeqLen: 1024, MicroBatch: 1, Precision: "bf16", Optimizer: "adamw",
			Images: 1, Transformers: c.transformers}
		r, err := tr.resolve()
		if err != nil {
			t.Fatalf("%s: %v", c.preset, err)
		}
		tower, err := r.towerPlan()
		if err != nil {
			t.Fatalf("%s: tower: %v", c.preset, err)
		}
		if tower.lib != c.want {
			t.Errorf("%s (transformers %q): tower planned at %v, want %v", c.preset, c.transformers, tower.lib, c.want)
		}
	}
}
