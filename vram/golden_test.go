package vram

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/estimates.golden and the docs' generated tables")

// TestEstimatesGolden pins the engine's answers for every catalog model
// under a set of training and inference plans (peak, where, each category's
// maximum, the allocator replay; weights, KV cache and peak for inference)
// in testdata/estimates.golden. A change to any number is deliberate: rerun
// with -update and say why in the commit.
func TestEstimatesGolden(t *testing.T) {
	oneGoroutineTable(t)
	var b strings.Builder
	replayed := map[string]string{}
	for _, name := range Presets() {
		m := MustPreset(name)
		seq, image := 512, 0
		if m.Image != nil {
			seq = m.Image.Tokens()
		}
		if m.Vision != nil {
			// One image's tokens in every sequence and prompt.
			image = m.Vision.ImageTokens()
			seq += image
		}
		half := (seq-image)/2 + image
		if m.MelBins > 0 {
			// An audio encoder reads exactly its frames, in training and
			// as the prompt.
			seq, half = 2*m.SourcePositions, 2*m.SourcePositions
		}
		tp := 2
		if m.Heads%2 != 0 || m.KVHeads%2 != 0 && 2%m.KVHeads != 0 {
			tp = 1
		}
		for _, v := range []struct {
			label string
			t     Training
		}{
			{"bf16 adamw sdpa", Training{SeqLen: seq, MicroBatch: 2, Precision: "bf16"}},
			// Non-reentrant checkpoints, which the traces measured (and
			// without which the HF Trainer's Whisper step fails).
			{"amp eager full sgd hf", Training{SeqLen: half, MicroBatch: 1, Precision: "amp_bf16", Attention: "eager", Checkpointing: "full", Optimizer: "sgd", Framework: "hf_trainer", UseReentrant: new(false)}},
			{"fp32 lora selective", Training{SeqLen: seq, MicroBatch: 1, Precision: "fp32", Checkpointing: "selective", LoRA: &LoRA{Rank: 8, Targets: []string{"q_proj", "v_proj"}}}},
			{"qlora litgpt chunked", Training{SeqLen: seq, MicroBatch: 2, Precision: "bf16", QuantizedBase: Quant{DType: NF4}, Loss: "chunked_cross_entropy", Framework: "litgpt",
				LoRA: &LoRA{Rank: 16, Targets: []string{"all_linear"}}}},
			{"zero3 tp", Training{SeqLen: seq, MicroBatch: 1, Precision: "mixed_bf16", Checkpointing: "full", Parallel: Parallel{DP: 8, FSDP: "full_shard", TP: tp}}},
		} {
			tr := v.t
			tr.Model = m
			fmt.Fprintf(&b, "%s | %s | ", name, v.label)
			est, err := tr.Estimate()
			if err != nil {
				fmt.Fprintf(&b, "error: %v\n", err)
				continue
			}
			fmt.Fprintf(&b, "peak %d at %s | static %v", est.Peak.Total(), est.PeakAt.Where(), est.Static.values())
			if v.label == "bf16 adamw sdpa" || v.label == "zero3 tp" {
				// The allocator replay of two plans per model (it is the
				// slow part), once per architecture: presets that differ
				// only in name and context (DeepSeek-V3 and R1, GLM-4.5 and
				// 4.6) train alike.
				key := fmt.Sprintf("%s %+v", v.label, architecture(m))
				if _, ok := replayed[key]; !ok {
					rep, err := tr.Replay(ReplayOptions{})
					replayed[key] = fmt.Sprintf(" | reserved %d", rep.PeakReserved)
					if err != nil {
						replayed[key] = fmt.Sprintf(" | replay error: %v", err)
					} else if want := est.Peak.Total() + rep.Workspace; rep.requested != want {
						// One step program, two evaluators (TestReplayMatchesTimeline).
						t.Errorf("%s %s: the replay's most requested %d, the timeline's peak and the workspace %d", name, v.label, rep.requested, want)
					}
				}
				b.WriteString(replayed[key])
			}
			b.WriteString("\n")
		}
		if m.Encoder() {
			continue
		}
		for _, v := range []struct {
			label string
			in    Inference
		}{
			{"as released, dynamic", Inference{Batch: 4, PromptTokens: 512, NewTokens: 128}},
			{"int4 paged", Inference{Batch: 16, PromptTokens: 1000, NewTokens: 500, Weights: Quant{DType: INT4}, Cache: "paged"}},
			{"fp16 eager legacy logits", Inference{Batch: 1, PromptTokens: 300, NewTokens: 20, Weights: Quant{DType: FP16}, Attention: "eager", Cache: "legacy", LogitsAll: true, LogitsFP32: true}},
		} {
			in := v.in
			in.Model = m
			in.PromptTokens += image
			if m.MelBins > 0 {
				in.PromptTokens = seq
			}
			fmt.Fprintf(&b, "%s | %s | ", name, v.label)
			est, err := in.Estimate()
			if err != nil {
				fmt.Fprintf(&b, "error: %v\n", err)
				continue
			}
			fmt.Fprintf(&b, "peak %d at %s | weights %d | kv %d per token %d\n", est.Peak.Total(), est.PeakAt, est.Weights, est.KVCache, est.KVPerToken)
		}
	}
	path := filepath.Join("testdata", "estimates.golden")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./vram -run EstimatesGolden -update)", err)
	}
	got := strings.Split(b.String(), "\n")
	wl := strings.Split(string(want), "\n")
	diffs := 0
	for i := 0; i < max(len(got), len(wl)); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			if diffs < 20 {
				t.Errorf("line %d:\n got  %s\n want %s", i+1, g, w)
			}
			diffs++
		}
	}
	if diffs > 0 {
		t.Errorf("%d lines differ from %s (-update rewrites it)", diffs, path)
	}
}

// architecture is m without what does not change a training step: its
// name, its stated total and, without learned positions, its context.
func architecture(m Model) Model {
	m.Name, m.Params = "", 0
	if m.Normalize().Position != "learned" {
		m.MaxPosition = 0
	}
	return m
}
