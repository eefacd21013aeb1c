package vram

import (
	"strings"
	"testing"
)

// towerBlockAt is the tensors of block 0 of the plan's vision tower, by
// name, with the tower split over tp ranks as a serving engine splits it.
func towerBlockAt(t *testing.T, preset string, tp int) map[string]Bytes {
	t.Helper()
	tr := Training{Model: MustPreset(preset), SeqLen: 4096, MicroBatch: 1, Precision: "bf16", Optimizer: "none", Trainable: "frozen", Images: 1}
	tr.towerTP = tp
	r, err := tr.resolve()
	if err != nil {
		t.Fatalf("%s at tp %d: %v", preset, tp, err)
	}
	out := map[string]Bytes{}
	for _, x := range buildBlock(r.tower, 0).Tensors {
		out[x.Name] = x.Bytes
	}
	return out
}

// TestVisionTowerTP: under vLLM's default mm_encoder_tp_mode "weights" a
// rank runs every patch with its heads and its share of the MLP
// (vision_tp.go): the column-parallel outputs and what follows them are
// 1/tp of the replicated tower's, the row-parallel outputs, the norms and
// the residual stream whole; the Qwen towers gather the fused qkv to full
// width first (split_qkv), CLIP does not.
func TestVisionTowerTP(t *testing.T) {
	for _, c := range []struct {
		preset       string
		tp           int
		split, whole []string
		gathers      bool
	}{
		{"qwen2.5-vl-7b", 4, []string{"attn.qkv", "q_embed", "k_embed", "sdpa", "attn.cat", "mlp.gate_proj", "mlp.up_proj", "mlp.act*up"},
			[]string{"norm1.normed", "attn.proj", "attn_residual", "mlp.down_proj", "mlp_residual"}, true},
		{"qwen3-vl-8b", 2, []string{"attn.qkv", "q_embed", "k_embed", "sdpa", "mlp.linear_fc1", "mlp.gelu_tanh"},
			[]string{"norm1", "attn.proj", "attn_residual", "mlp.linear_fc2", "mlp_residual"}, true},
		{"llava-1.5-7b", 4, []string{"q_proj", "k_proj", "v_proj", "sdpa", "up_proj", "quick_gelu"},
			[]string{"input_layernorm", "o_proj", "attn_residual", "down_proj", "mlp_residual"}, false},
		{"gemma-3-4b", 2, []string{"q_proj", "k_proj", "v_proj", "sdpa", "up_proj"},
			[]string{"input_layernorm", "o_proj", "attn_residual", "down_proj", "mlp_residual"}, false},
		{"mistral-small-3.1-24b", 2, []string{"q_proj", "k_rope", "sdpa", "gate_proj", "up_proj", "act*up"},
			[]string{"input_layernorm.normed", "o_proj", "attn_residual", "down_proj", "mlp_residual"}, false},
	} {
		one, split := towerBlockAt(t, c.preset, 1), towerBlockAt(t, c.preset, c.tp)
		for _, n := range c.split {
			if one[n] == 0 || split[n] != one[n]/Bytes(c.tp) {
				t.Errorf("%s at tp %d: %s is %d, want 1/%d of the replicated %d", c.preset, c.tp, n, split[n], c.tp, one[n])
			}
		}
		for _, n := range c.whole {
			if one[n] == 0 || split[n] != one[n] {
				t.Errorf("%s at tp %d: %s is %d, want the replicated %d", c.preset, c.tp, n, split[n], one[n])
			}
		}
		_, gathered := split["attn.qkv.all_gather"]
		if gathered != c.gathers {
			t.Errorf("%s at tp %d: qkv all-gathered %v, want %v", c.preset, c.tp, gathered, c.gathers)
		}
		if c.gathers && (split["attn.qkv.all_gather"] != one["attn.qkv"] || split["attn.qkv.interleave"] != one["attn.qkv"]) {
			t.Errorf("%s at tp %d: gathered qkv %d and %d, want the full %d", c.preset, c.tp, split["attn.qkv.all_gather"], split["attn.qkv.interleave"], one["attn.qkv"])
		}
		if _, ok := one["attn.qkv.all_gather"]; ok {
			t.Errorf("%s: the replicated tower gathers", c.preset)
		}
	}
}

// TestVLLMTowerTPProfile: vLLM's profile runs the split tower, so its
// encoder peak falls with TP (less than 1/tp: the residual stream, the
// norms and Qwen's gathered qkv stay whole) and the KV cache grows; the
// merger's inner width is split as well.
func TestVLLMTowerTPProfile(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	in := Inference{Model: MustPreset("qwen2.5-vl-7b"), Weights: Quant{DType: BF16}}
	enc := map[int]Bytes{}
	for _, tp := range []int{1, 2, 4} {
		in.TP = tp
		c, err := VLLM{Version: "0.11.0", MaxModelLen: 32768, TP: tp}.Carve(in, g)
		if err != nil {
			t.Fatalf("tp %d: %v", tp, err)
		}
		enc[tp] = c.MMProfile.Encoder
	}
	if !(enc[4] < enc[2] && enc[2] < enc[1] && enc[2] > enc[1]/2) {
		t.Errorf("encoder peaks by tp %v: want falling, by less than half a doubling", enc)
	}
	tr := Training{Model: MustPreset("qwen2.5-vl-7b"), SeqLen: 2048, MicroBatch: 1, Precision: "bf16", Optimizer: "none", Trainable: "frozen", Images: 1}
	merger := map[int]Bytes{}
	for _, tp := range []int{1, 4} {
		tr.towerTP = tp
		r, err := tr.resolve()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range buildEdges(&r).Embed.Tensors {
			if x.Name == "merger.mlp.0" {
				merger[tp] = x.Bytes
			}
		}
	}
	if merger[1] == 0 || merger[4] != merger[1]/4 {
		t.Errorf("merger.mlp.0 by tp %v: want a quarter at tp 4", merger)
	}
}

// TestVLLMTowerTPErrors: vLLM asserts that the degree divides what it
// splits of the tower when it loads the model (skipped profile or not);
// a text-only launch builds no tower.
func TestVLLMTowerTPErrors(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	m := MustPreset("qwen3-vl-8b")
	v := *m.Vision
	v.Tower.FFN = 4300 // not a multiple of 8
	m.Vision = &v
	in := Inference{Model: m, Weights: Quant{DType: BF16}, TP: 8}
	for _, c := range []VLLM{{TP: 8, MaxModelLen: 32768}, {TP: 8, MaxModelLen: 32768, SkipMMProfiling: true}} {
		_, err := c.Carve(in, g)
		if err == nil || !strings.Contains(err.Error(), "intermediate_size = 4300") || !strings.Contains(err.Error(), "mm-encoder-tp-mode") {
			t.Errorf("%+v: %v, want the tower's intermediate_size named", c, err)
		}
	}
	if _, err := (VLLM{Version: "0.11.0", TP: 8, MaxModelLen: 32768, LimitMMPerPrompt: map[string]int{"image": 0, "video": 0}}).Carve(in, g); err != nil {
		t.Errorf("text-only: %v", err)
	}
}

// TestVLLMTowerDataMode: with --mm-encoder-tp-mode data, a Qwen-VL model
// keeps its whole tower and projector on every rank (its weights grow by
// what weights mode split off them) and the profile's busiest rank runs
// the one dummy video through the whole tower; LLaVA, which does not
// support it, falls back to weights.
func TestVLLMTowerDataMode(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	carve := func(preset, mode string) VLLMCarve {
		t.Helper()
		m := MustPreset(preset)
		c, err := VLLM{Version: "0.11.0", MaxModelLen: min(32768, m.MaxPosition), TP: 2, MMEncoderTPMode: mode}.Carve(Inference{Model: m, Weights: Quant{DType: BF16}}, g)
		if err != nil {
			t.Fatalf("%s %s: %v", preset, mode, err)
		}
		return c
	}
	w, d := carve("qwen2.5-vl-7b", ""), carve("qwen2.5-vl-7b", "data")
	var split Bytes // what weights mode takes off the tower and projector
	for _, x := range MustPreset("qwen2.5-vl-7b").tensors() {
		tower := x.part == towerPart && (x.IsLinear() || x.Stacked > 0 || x.Role == "embedding")
		if tower || x.part == projectorPart && len(x.Shape) == 2 {
			b := BF16.Size(x.Numel())
			split += b - b/2
		}
	}
	if split == 0 || d.Weights-w.Weights != split {
		t.Errorf("data mode weighs %d, weights mode %d: want %d more", d.Weights, w.Weights, split)
	}
	if d.MMProfile.Encoder <= w.MMProfile.Encoder || d.MMProfile.Held != w.MMProfile.Held {
		t.Errorf("profile, data %+v, weights %+v: want the whole tower's larger peak and the same held outputs", *d.MMProfile, *w.MMProfile)
	}
	if !strings.Contains(strings.Join(d.Notes, "\n"), "every rank holds the whole vision tower") {
		t.Errorf("data mode notes: %v", d.Notes)
	}
	lw, ld := carve("llava-1.5-7b", ""), carve("llava-1.5-7b", "data")
	if ld.Weights != lw.Weights || ld.Activation != lw.Activation || !strings.Contains(strings.Join(ld.Notes, "\n"), "falls back to weights") {
		t.Errorf("llava in data mode: %d/%d against %d/%d, notes %v", ld.Weights, ld.Activation, lw.Weights, lw.Activation, ld.Notes)
	}
	if _, err := (VLLM{Version: "0.11.0", TP: 2, MMEncoderTPMode: "tensor"}).Carve(Inference{Model: MustPreset("qwen2.5-vl-7b"), Weights: Quant{DType: BF16}}, g); err == nil || !strings.Contains(err.Error(), "mm_encoder_tp_mode") {
		t.Errorf("a bad mode: %v", err)
	}
}

// TestVLLMProjectorSplit: which projector matrices vLLM splits over its TP
// ranks in weights mode: the Qwen-VL mergers and LLaVA's linears, not
// Gemma 3's plain projection parameter; none in data mode or on one rank.
func TestVLLMProjectorSplit(t *testing.T) {
	for _, c := range []struct {
		preset string
		in     Inference
		want   bool
	}{
		{"qwen2.5-vl-7b", Inference{TP: 2, runtime: runVLLM}, true},
		{"llava-1.5-7b", Inference{TP: 2, runtime: runVLLM}, true},
		{"gemma-3-4b", Inference{TP: 2, runtime: runVLLM}, false},
		{"qwen2.5-vl-7b", Inference{TP: 2, runtime: runVLLM, towerWhole: true}, false},
		{"qwen2.5-vl-7b", Inference{TP: 1, runtime: runVLLM}, false},
		{"qwen2.5-vl-7b", Inference{TP: 2, runtime: runSGLang}, false},
	} {
		in := c.in
		in.Model = MustPreset(c.preset)
		n := 0
		for _, x := range in.Model.tensors() {
			if x.part == projectorPart && len(x.Shape) == 2 {
				n++
				if got := in.splitsProjector(x); got != c.want {
					t.Errorf("%s, %+v: %s split %v, want %v", c.preset, c.in, x.Name, got, c.want)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no projector matrices", c.preset)
		}
	}
}

// TestVLLMProjectorSplitMistral3: Mistral 3's projector is split in part:
// linear_1 and linear_2, not its patch merger's merging_layer.
func TestVLLMProjectorSplitMistral3(t *testing.T) {
	in := Inference{Model: MustPreset("mistral-small-3.1-24b"), TP: 2, runtime: runVLLM}
	want := map[string]bool{"model.multi_modal_projector.patch_merger.merging_layer.weight": false,
		"model.multi_modal_projector.linear_1.weight": true, "model.multi_modal_projector.linear_2.weight": true}
	for _, x := range in.Model.tensors() {
		if w, ok := want[x.Name]; ok {
			if got := in.splitsProjector(x); got != w {
				t.Errorf("%s split %v, want %v", x.Name, got, w)
			}
			delete(want, x.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("tensors not found: %v", want)
	}
}

// TestVLLMTowerSplitLlama4: vLLM splits Llama 4's patch embedding, vision
// adapter and projector as well as its blocks (mllama4.py l.95-157,
// 403-430); in data mode the tower is whole and the projector still split
// (l.733-750).
func TestVLLMTowerSplitLlama4(t *testing.T) {
	weights := Inference{Model: MustPreset("llama-4-scout"), TP: 8, runtime: runVLLM, UnquantizedDType: BF16}
	data := weights
	data.towerWhole = true
	for name, want := range map[string][2]bool{
		"vision_model.patch_embedding.linear.weight":          {true, false},
		"vision_model.vision_adapter.mlp.fc1.weight":          {true, false},
		"vision_model.vision_adapter.mlp.fc2.weight":          {true, false},
		"vision_model.model.layers.0.self_attn.q_proj.weight": {true, false},
		"vision_model.layernorm_pre.weight":                   {false, false},
		"multi_modal_projector.linear_1.weight":               {true, true},
	} {
		var x *Tensor
		for _, tt := range weights.Model.tensors() {
			if tt.Name == name {
				x = &tt
				break
			}
		}
		if x == nil {
			t.Errorf("%s: not found", name)
			continue
		}
		whole := BF16.Size(x.Numel())
		for i, in := range []Inference{weights, data} {
			if got := in.tensorBytes(*x); (got == whole/8) != want[i] || (got == whole) == want[i] {
				t.Errorf("%s, data mode %v: %d bytes of %d, want split %v", name, i == 1, got, whole, want[i])
			}
		}
	}
	if err := checkTowerTP(MustPreset("llama-4-scout"), 3); err == nil || !strings.Contains(err.Error(), "num_attention_heads = 16") {
		t.Errorf("TP 3: %v, want the heads named", err)
	}
	if err := checkTowerTP(MustPreset("llama-4-scout"), 8); err != nil {
		t.Errorf("TP 8: %v", err)
	}
}
