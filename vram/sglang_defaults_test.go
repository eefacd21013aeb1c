package vram

import (
	"math"
	"strings"
	"testing"
)

// TestSGLangDefaultFraction: SGLang 0.5.3's --mem-fraction-static when none
// is given, worked by hand from server_args.py's rules (l.542-684,
// 3105-3142): 512 MiB + 1.5 MiB × max(chunk, 2048) + 2 MiB × graph batch +
// TP/8 GiB (at least 10 GiB over 60 GiB), off nvidia-smi's total, three
// decimals; then × 0.95 × (1 − 0.1 × (layers × width² / (24 × 1024²) − 1))
// for a vision tower.
func TestSGLangDefaultFraction(t *testing.T) {
	for _, c := range []struct {
		name, gpu, preset string
		s                 SGLang
		want              float64
	}{
		{"T4: 2k chunk, 8 graphs", "T4", "llama-3.1-8b", SGLang{Version: "0.5.3", TP: 1}, 0.757},                            // (15360 − 3728) / 15360
		{"RTX 4090: 2k, 16", "RTX-4090", "llama-3.1-8b", SGLang{Version: "0.5.3", TP: 1}, 0.848},                            // (24564 − 3744) / 24564
		{"A100 40GB: 4k, 32", "A100-40GB", "llama-3.1-8b", SGLang{Version: "0.5.3", TP: 1}, 0.833},                          // (40960 − 6848) / 40960
		{"H100: 8k, 256", "H100-80GB", "llama-3.1-8b", SGLang{Version: "0.5.3", TP: 1}, 0.835},                              // (81559 − 13440) / 81559
		{"H100 TP 8: 8k, 512", "H100-80GB", "llama-3.1-8b", SGLang{Version: "0.5.3", TP: 8}, 0.818},                         // (81559 − 14848) / 81559
		{"H200: 8k, 256", "H200", "llama-3.1-8b", SGLang{Version: "0.5.3", TP: 1}, 0.907},                                   // (143771 − 13440) / 143771
		{"B200 TP 8: 16k, 512", "B200", "llama-3.1-8b", SGLang{Version: "0.5.3", TP: 8}, 0.852},                             // (183359 − 27136) / 183359
		{"H100, chunking off", "H100-80GB", "llama-3.1-8b", SGLang{Version: "0.5.3", TP: 1, ChunkedPrefillSize: -1}, 0.685}, // max_prefill_tokens 16384: 25728 MiB
		// 512 + 4096 × 1.5 + 256 × 2 + 128 = 7296 MiB, raised to the 10 GiB floor
		{"H100, chunking off, 4k prefill", "H100-80GB", "llama-3.1-8b", SGLang{Version: "0.5.3", TP: 1, ChunkedPrefillSize: -1, MaxPrefillTokens: 4096}, 0.874},
		{"H100, 4k prefill with chunking", "H100-80GB", "llama-3.1-8b", SGLang{Version: "0.5.3", TP: 1, MaxPrefillTokens: 4096}, 0.835}, // the chunk counts
		{"H100, 64 graphs", "H100-80GB", "llama-3.1-8b", SGLang{Version: "0.5.3", TP: 1, CUDAGraphMaxBS: 64}, 0.840},                    // 13056 MiB
		// LLaVA's CLIP is ViT-L/14 itself: 0.95.
		{"LLaVA", "H100-80GB", "llava-1.5-7b", SGLang{Version: "0.5.3", TP: 1}, 0.835 * 0.95},
		// Qwen2.5-VL's vision_config says depth, not num_hidden_layers:
		// SGLang's getattr takes 24 layers of 1280.
		{"Qwen2.5-VL", "H100-80GB", "qwen2.5-vl-7b", SGLang{Version: "0.5.3", TP: 1}, 0.835 * 0.95 * (1 - 0.1*(1280.0*1280/(1024*1024)-1))},
		// Llama 4 and Gemma 3 run text-only by default.
		{"Llama 4", "H100-80GB", "llama-4-scout", SGLang{Version: "0.5.3", TP: 8}, 0.818},
		{"Llama 4, multimodal", "H100-80GB", "llama-4-scout", SGLang{Version: "0.5.3", TP: 8, EnableMultimodal: true}, 0.818 * 0.95 * (1 - 0.1*(34*1408.0*1408/(24*1024*1024)-1))},
		{"Gemma 3", "H100-80GB", "gemma-3-4b", SGLang{Version: "0.5.3", TP: 1}, 0.835},
	} {
		g, err := LookupGPU(c.gpu)
		if err != nil {
			t.Fatal(err)
		}
		got, why := c.s.memFraction(MustPreset(c.preset), float64(g.Memory)/float64(MiB), sglangRow("0.5.3", t))
		if math.Abs(got-c.want) > 1e-9 || !strings.Contains(why, "SGLang 0.5.3") {
			t.Errorf("%s: %v (%s), want %v", c.name, got, why, c.want)
		}
		if c.name == "Qwen2.5-VL" && !strings.Contains(why, "SGLang counts 24") {
			t.Errorf("%s: %q: want the 24 layers SGLang assumes explained", c.name, why)
		}
	}
	// Without a GPU: SGLang's own fallback, 0.88 (and the tower's factor).
	if got, _ := (SGLang{Version: "0.5.3"}).memFraction(MustPreset("llama-3.1-8b"), 0, sglangRow("0.5.3", t)); got != 0.88 {
		t.Errorf("no GPU: %v, want 0.88", got)
	}
}

// TestSGLangCarveDefaults: a launch without --mem-fraction-static is
// carved at SGLang's default for the GPU and says so; Llama 4 without
// --enable-multimodal loads no vision tower.
func TestSGLangCarveDefaults(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	in := Inference{Model: MustPreset("llama-3.1-8b"), Weights: Quant{DType: BF16}}
	def, err := SGLang{Version: "0.5.3"}.Carve(in, g)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := SGLang{Version: "0.5.3", MemFractionStatic: 0.835}.Carve(in, g)
	if def.Reserved != set.Reserved || def.Tokens != set.Tokens || !strings.Contains(strings.Join(def.Notes, "\n"), "mem_fraction_static 0.835") {
		t.Errorf("default: reserved %v, %d tokens, notes %v; want 0.835's %v, %d and a note", def.Reserved, def.Tokens, def.Notes, set.Reserved, set.Tokens)
	}
	scout := Inference{Model: MustPreset("llama-4-scout"), Weights: Quant{DType: BF16}}
	text, err := SGLang{Version: "0.5.3", TP: 8}.Carve(scout, g)
	if err != nil {
		t.Fatal(err)
	}
	mm, _ := SGLang{Version: "0.5.3", TP: 8, EnableMultimodal: true}.Carve(scout, g)
	var tower Bytes
	for _, x := range scout.Model.tensors() {
		if x.part == towerPart || x.part == projectorPart {
			tb := BF16.Size(x.Numel())
			if x.IsLinear() {
				tb /= 8
			}
			tower += tb
		}
	}
	if mm.Weights-text.Weights != tower || tower == 0 {
		t.Errorf("Llama 4: weights %v text-only, %v multimodal; want the tower's %v between", text.Weights, mm.Weights, tower)
	}
	if !strings.Contains(strings.Join(text.Notes, "\n"), "--enable-multimodal") {
		t.Errorf("notes %v: want the text-only mode named", text.Notes)
	}
	if _, err := (SGLang{Version: "0.5.3", ChunkedPrefillSize: -2}).Carve(in, g); err == nil || !strings.Contains(err.Error(), "chunked_prefill_size") {
		t.Errorf("chunked_prefill_size -2: %v", err)
	}
}
