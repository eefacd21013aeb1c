package vram

import (
	"strings"
	"testing"
)

// TestAdviceCombines: plans no single change makes fit get the smallest
// combination that does, in the framework's own words — a Llama-3-8B full
// fine-tune on an H100, gpt-oss-120b served in bf16 on H100s (a Qwen3-8B
// QLoRA axolotl config on an RTX 4090 is importer's TestKeysCombination) — and a change that adds nothing to
// a combination that fits is never part of one.
func TestAdviceCombines(t *testing.T) {
	h100, _ := LookupGPU("H100-80GB")
	full := Training{Model: MustPreset("llama-3-8b"), SeqLen: 4096, MicroBatch: 4, Precision: "mixed_bf16", Optimizer: "adamw"}
	for _, c := range []struct {
		name string
		t    Training
		g    GPU
		keys func(Advice) string
	}{
		{"Llama-3-8B full fine-tune on an H100", full, h100, func(a Advice) string { return a.Flags(FrameworkHFTrainer) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := Budget{GPU: c.g, Headroom: DefaultHeadroom}
			if ok, _, _ := fits(c.t, b); ok {
				t.Fatal("the plan fits as it is")
			}
			as, err := Advise(c.t, b)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range as {
				if len(a.changes()) == 1 && a.Fits {
					t.Fatalf("%q fits alone: not a case for combinations", a.Change)
				}
			}
			first := as[0]
			if !first.Fits || len(first.changes()) < 2 || first.Over != 0 {
				t.Fatalf("first advice %q (fits %v, %d changes), want a combination that fits", first.Change, first.Fits, len(first.changes()))
			}
			if ok, need, _ := fits(first.Plan, b); !ok || need != first.Need {
				t.Errorf("%q: its plan fits=%v needs %v, the advice says %v", first.Change, ok, need, first.Need)
			}
			if keys := c.keys(first); keys == "" || strings.Count(keys, "; ") != len(first.changes())-1 {
				t.Errorf("%q said as %q: want each change in the framework's words", first.Change, keys)
			}
			for _, a := range as {
				if !a.Fits && a.Over == 0 {
					t.Errorf("%q does not fit and says no excess", a.Change)
				}
				for _, b := range as {
					if b.Fits && len(b.members) < len(a.members) && strings.Contains(a.Change, b.Change) {
						t.Errorf("%q holds %q, which fits alone", a.Change, b.Change)
					}
				}
			}
		})
	}
	var gpt VLLM
	in := Inference{Model: MustPreset("gpt-oss-120b"), Weights: Quant{DType: BF16}, Batch: 1, PromptTokens: 1024}
	gpt.MaxModelLen = 32768
	as, err := gpt.Advise(in, h100)
	if err != nil {
		t.Fatal(err)
	}
	if !as[0].Starts || as[0].Flag != "--tensor-parallel-size 4" {
		t.Errorf("gpt-oss-120b in bf16 on H100s: first %q (starts %v), want --tensor-parallel-size 4", as[0].Flag, as[0].Starts)
	}
}

// TestAdviceLeavesOutTrifles: a plan that fits is offered no change that
// saves under 1 % of its peak.
func TestAdviceLeavesOutTrifles(t *testing.T) {
	tr := Training{Model: MustPreset("gpt2"), SeqLen: 512, MicroBatch: 2, Precision: "bf16", Optimizer: "adamw", Trainable: "lora",
		LoRA: &LoRA{Rank: 8, Targets: []string{"q_proj"}}}
	g, _ := LookupGPU("H100-80GB")
	as, err := Advise(tr, Budget{GPU: g})
	if err != nil {
		t.Fatal(err)
	}
	peak := tr.mustPeak(t)
	for _, a := range as {
		if a.Saves*100 < peak {
			t.Errorf("%q saves %v of a %v peak", a.Change, a.Saves, peak)
		}
		if strings.Contains(a.Change, "offload optimizer") {
			t.Errorf("offloading a LoRA's optimizer states offered: saves %v", a.Saves)
		}
	}
}

// TestAdvisePostTraining: GRPO and PPO plans that do not fit get changes
// in their framework's flags, those that fit first, each judged as the
// plan would be.
func TestAdvisePostTraining(t *testing.T) {
	for _, c := range []struct {
		name, gpu string
		pt        PostTraining
		want      string // a flag the advice must use
	}{
		{"TRL GRPO on an A100 40GB", "A100-40GB", PostTraining{Algorithm: "grpo", Framework: "trl", Policy: Training{Model: MustPreset("qwen2.5-7b"), Precision: "bf16",
			MicroBatch: 4, LoRA: &LoRA{Rank: 16, Targets: []string{"all_linear"}}, Trainable: "lora"}, PromptLen: 512, CompletionLen: 1024,
			Rollout: &Rollout{Engine: "vllm"}}, "--vllm_gpu_memory_utilization"},
		{"verl GRPO on an L40S", "L40S", PostTraining{Algorithm: "grpo", Framework: "verl", Policy: Training{Model: MustPreset("qwen2.5-7b"), MicroBatch: 16,
			Parallel: Parallel{DP: 8}}, PromptLen: 512, CompletionLen: 1024, Generations: 5, LogProbMicroBatch: 16, Rollout: &Rollout{Engine: "vllm", TP: 2}},
			"actor_rollout_ref."},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := LookupGPU(c.gpu)
			if err != nil {
				t.Fatal(err)
			}
			b := Budget{GPU: g, Headroom: DefaultHeadroom}
			v, err := b.JudgePostTraining(c.pt)
			if err != nil {
				t.Fatal(err)
			}
			if v.Fits {
				t.Fatalf("fits as it is: %s", v.Why)
			}
			as, err := AdvisePostTraining(c.pt, b)
			if err != nil {
				t.Fatal(err)
			}
			if len(as) == 0 || !as[0].Fits || !strings.Contains(as[0].Flags, c.want) {
				t.Fatalf("advice %+v: want first a change that fits, in %s's flags", as, c.pt.Framework)
			}
			for i, a := range as {
				after, err := b.JudgePostTraining(a.Plan)
				if err != nil || after.Fits != a.Fits || after.Need != a.Need && a.Starts {
					t.Errorf("%q: judged again fits=%v need %v (%v); the advice says %v, %v", a.Change, after.Fits, after.Need, err, a.Fits, a.Need)
				}
				if i > 0 && a.Fits && !as[i-1].Fits {
					t.Errorf("%q fits but comes after %q", a.Change, as[i-1].Change)
				}
			}
			if c.pt.Rollout.GPUMemoryUtilization != 0 || c.pt.Policy.MicroBatch != map[string]int{"trl": 4, "verl": 16}[c.pt.Framework] {
				t.Error("the advisor changed the caller's plan")
			}
		})
	}
}
