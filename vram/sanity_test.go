package vram

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var sanityFlag = flag.Bool("sanity", false, "run the step program's invariant pass (sanity.go) inside every training estimate")

func TestMain(m *testing.M) {
	flag.Parse()
	sanityChecks = *sanityFlag
	os.Exit(m.Run())
}

// TestStepInvariants: the invariant pass holds on plans that reach every
// rule of the step program — runs of identical blocks, checkpointing,
// gradient accumulation, pipeline schedules, FSDP2, ZeRO, offloading,
// activation offloading, LoRA, a compiled step, an encoder-decoder and a
// vision tower.
func TestStepInvariants(t *testing.T) {
	llama := MustPreset("llama-3.2-1b")
	for name, tr := range map[string]Training{
		"bf16 adamw":              {Model: llama, SeqLen: 512, MicroBatch: 2, Precision: "bf16"},
		"accumulation":            {Model: llama, SeqLen: 256, MicroBatch: 1, GradAccum: 4, Precision: "mixed_bf16", Checkpointing: "full"},
		"selective eager":         {Model: MustPreset("gpt2"), SeqLen: 512, MicroBatch: 2, Precision: "amp_bf16", Attention: "eager", Checkpointing: "selective"},
		"lora":                    {Model: MustPreset("qwen2.5-0.5b"), SeqLen: 512, MicroBatch: 2, Precision: "bf16", LoRA: &LoRA{Rank: 8, Targets: []string{"q_proj", "v_proj"}}},
		"fsdp2 torchtitan":        {Model: llama, SeqLen: 1024, MicroBatch: 1, Precision: "fp32", ComputeDType: BF16, Framework: FrameworkTorchtitan, Checkpointing: "full", Parallel: Parallel{DP: 4, FSDP: "full_shard"}},
		"pipeline 1f1b":           {Model: llama, SeqLen: 512, MicroBatch: 1, Precision: "mixed_bf16", Framework: FrameworkTorchtitan, Parallel: Parallel{DP: 2, PP: 2, PPMicrobatches: 4, FSDP: "full_shard"}},
		"zero3 offload":           {Model: llama, SeqLen: 512, MicroBatch: 1, Precision: "mixed_bf16", Framework: FrameworkDeepSpeed, Parallel: Parallel{DP: 8, ZeRO: 3, CPUOffload: "optimizer+params"}},
		"activation offloading":   {Model: llama, SeqLen: 512, MicroBatch: 2, Precision: "bf16", Framework: FrameworkTorchtune, Checkpointing: "full", ActivationOffloading: true},
		"compiled":                {Model: llama, SeqLen: 512, MicroBatch: 1, Precision: "bf16", Compile: true},
		"encoder-decoder":         {Model: MustPreset("flan-t5-base"), SeqLen: 256, MicroBatch: 2, Precision: "fp32"},
		"tensor parallel":         {Model: llama, SeqLen: 512, MicroBatch: 1, Precision: "bf16", Parallel: Parallel{TP: 2}},
		"mixture of experts":      {Model: MustPreset("qwen1.5-moe-a2.7b"), SeqLen: 256, MicroBatch: 1, Precision: "bf16", Checkpointing: "full"},
		"vision tower, trainable": {Model: MustPreset("llava-1.5-7b"), SeqLen: 1024, MicroBatch: 1, Precision: "bf16", Checkpointing: "full", VisionTower: "trainable"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := tr.checkStep(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestSanityNamesWhatBroke: a timeline whose moments break an invariant is
// refused with the moment in words.
func TestSanityNamesWhatBroke(t *testing.T) {
	for _, c := range []struct {
		events []Event
		want   string
	}{
		{[]Event{{Iteration: 1, Micro: 1, Phase: "forward", Layer: 3, Live: Breakdown{Activations: -1}}}, "iteration 1, forward, block 3: -1 B of activations live"},
		{[]Event{{Iteration: 1, Micro: 1, Phase: "backward", Layer: 0}, {Iteration: 1, Micro: 1, Phase: "forward", Layer: 1}}, "iteration 1, forward, block 1 (micro-batch 1) after its backward"},
		{[]Event{{Iteration: 1, Micro: 1, Phase: "optimizer", Layer: -1}, {Iteration: 1, Micro: 2, Phase: "forward", Layer: 0}}, "after the iteration's optimizer step"},
		{[]Event{{Iteration: 2, Micro: 1, Phase: "forward", Layer: 0}, {Iteration: 1, Micro: 1, Phase: "forward", Layer: 0}}, "after iteration 2"},
	} {
		if err := checkEvents(c.events); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err %v, want %q", err, c.want)
		}
	}
}
