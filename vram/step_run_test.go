package vram

import (
	"reflect"
	"testing"
)

// TestRunsChangeNothing: compiling runs of identical blocks once (the
// pipeline stages' too, with what the other micro-batches in flight hold
// joining at the next block's mark) changes no figure: the estimate, the
// recorded timeline's moments and the allocator replay equal those of the
// program compiled block by block.
func TestRunsChangeNothing(t *testing.T) {
	llama, moe := MustPreset("llama-3.2-1b"), MustPreset("qwen1.5-moe-a2.7b")
	titan := func(p Parallel, ckpt Checkpointing) Training {
		return Training{Model: llama, SeqLen: 512, MicroBatch: 1, Precision: "mixed_bf16", Framework: FrameworkTorchtitan, Checkpointing: ckpt, Parallel: p}
	}
	plans := map[string]Training{
		"1f1b full":          titan(Parallel{DP: 2, PP: 2, PPMicrobatches: 4, FSDP: "full_shard"}, "full"),
		"1f1b none":          titan(Parallel{PP: 4, PPMicrobatches: 8}, "none"),
		"1f1b selective tp":  titan(Parallel{PP: 2, TP: 2, SP: true, PPMicrobatches: 4}, "selective"),
		"interleaved":        titan(Parallel{PP: 2, PPSchedule: ScheduleInterleaved1F1B, VirtualStages: 2, PPMicrobatches: 4, DP: 2, FSDP: "full_shard"}, "full"),
		"gpipe":              titan(Parallel{PP: 2, PPSchedule: ScheduleGPipe, PPMicrobatches: 4}, "full"),
		"zbv":                titan(Parallel{PP: 2, PPSchedule: ScheduleZBV, PPMicrobatches: 4}, "full"),
		"dualpipev":          titan(Parallel{PP: 2, PPSchedule: ScheduleDualPipeV, PPMicrobatches: 4}, "none"),
		"megatron zero1":     {Model: llama, SeqLen: 512, MicroBatch: 2, Precision: "mixed_bf16", Framework: FrameworkMegatron, Checkpointing: "selective", Parallel: Parallel{PP: 4, DP: 2, ZeRO: 1, PPMicrobatches: 8}},
		"megatron uniform":   {Model: llama, SeqLen: 512, MicroBatch: 1, Precision: "mixed_bf16", Framework: FrameworkMegatron, Checkpointing: "full", RecomputeMethod: "uniform", RecomputeNumLayers: 2, Parallel: Parallel{PP: 2, PPMicrobatches: 4}},
		"accumulation pp":    {Model: llama, SeqLen: 256, MicroBatch: 1, GradAccum: 4, Precision: "mixed_bf16", Framework: FrameworkTorchtitan, Checkpointing: "full", Parallel: Parallel{PP: 2, PPMicrobatches: 2}},
		"moe pp":             {Model: moe, SeqLen: 256, MicroBatch: 1, Precision: "bf16", Framework: FrameworkMegatron, Checkpointing: "full", Parallel: Parallel{PP: 2, EP: 2, DP: 2, PPMicrobatches: 4}},
		"fsdp2 no pp":        titan(Parallel{DP: 4, FSDP: "full_shard"}, "full"),
		"activation offload": {Model: llama, SeqLen: 512, MicroBatch: 2, Precision: "bf16", Framework: FrameworkTorchtune, Checkpointing: "full", ActivationOffloading: true},
		"zero3":              {Model: llama, SeqLen: 512, MicroBatch: 1, Precision: "mixed_bf16", Framework: FrameworkDeepSpeed, Parallel: Parallel{DP: 8, ZeRO: 3}},
	}
	checkUnchanged(t, plans, &compileRuns)
}

// checkUnchanged checks that each plan's estimate, recorded moments and
// replay are the same with *on true (the engine's way) and false.
func checkUnchanged(t *testing.T, plans map[string]Training, on *bool) {
	h100 := mustGPU("H100-80GB")
	opt := ReplayOptions{GPU: &h100}
	type figures struct {
		peak, static, after Breakdown
		at                  Event
		events              []Event
		replay              Replay
	}
	for name, tr := range plans {
		t.Run(name, func(t *testing.T) {
			eval := func(v bool) figures {
				*on = v
				defer func() { *on = true }()
				ForgetAnswers()
				est, err := tr.Estimate()
				if err != nil {
					t.Fatal(err)
				}
				tl, err := tr.Timeline()
				if err != nil {
					t.Fatal(err)
				}
				rp, err := tr.Replay(opt)
				if err != nil {
					t.Fatal(err)
				}
				return figures{est.Peak, est.Static, est.AfterForward, est.PeakAt, tl.Events, rp}
			}
			with, without := eval(true), eval(false)
			if !reflect.DeepEqual(with, without) {
				t.Errorf("the engine's way:\n  peak %v at %v, replay %+v\nwithout:\n  peak %v at %v, replay %+v",
					with.peak.Total(), with.at.Where(), with.replay, without.peak.Total(), without.at.Where(), without.replay)
			}
		})
	}
}

// TestSkippedStagesChangeNothing: the pipeline stages a stage already
// evaluated covers (stage_skip.go) are skipped without changing a figure,
// over schedules, checkpointing rules, uneven and interleaved splits and a
// model whose blocks differ by kind.
func TestSkippedStagesChangeNothing(t *testing.T) {
	llama, mixed := MustPreset("llama-3.2-1b"), MustPreset("gemma-3-1b")
	titan := func(p Parallel, ckpt Checkpointing) Training {
		return Training{Model: llama, SeqLen: 512, MicroBatch: 1, Precision: "mixed_bf16", Framework: FrameworkTorchtitan, Checkpointing: ckpt, Parallel: p}
	}
	plans := map[string]Training{
		"1f1b pp8":           titan(Parallel{PP: 8, PPMicrobatches: 8}, "full"),
		"1f1b pp4 fsdp":      titan(Parallel{PP: 4, DP: 2, FSDP: "full_shard", PPMicrobatches: 8}, "none"),
		"interleaved pp4":    titan(Parallel{PP: 4, PPSchedule: ScheduleInterleaved1F1B, VirtualStages: 2, PPMicrobatches: 8}, "selective"),
		"gpipe pp4":          titan(Parallel{PP: 4, PPSchedule: ScheduleGPipe, PPMicrobatches: 4}, "full"),
		"megatron block":     {Model: llama, SeqLen: 512, MicroBatch: 1, Precision: "mixed_bf16", Framework: FrameworkMegatron, Checkpointing: "full", RecomputeMethod: "block", RecomputeNumLayers: 1, Parallel: Parallel{PP: 4, PPMicrobatches: 8}},
		"megatron uniform":   {Model: llama, SeqLen: 512, MicroBatch: 1, Precision: "mixed_bf16", Framework: FrameworkMegatron, Checkpointing: "full", RecomputeMethod: "uniform", RecomputeNumLayers: 2, Parallel: Parallel{PP: 4, PPMicrobatches: 8}},
		"megatron uneven":    {Model: llama, SeqLen: 512, MicroBatch: 1, Precision: "mixed_bf16", Framework: FrameworkMegatron, Checkpointing: "selective", Parallel: Parallel{PP: 4, PPMicrobatches: 8, PPFirstStageLayers: 3, PPLastStageLayers: 3}},
		"checkpoint every 3": {Model: MustPreset("llama-3.1-8b"), SeqLen: 512, MicroBatch: 1, Precision: "mixed_bf16", Framework: FrameworkTorchtitan, Checkpointing: "full", CheckpointEvery: 3, Parallel: Parallel{PP: 8, PPMicrobatches: 8}},
		"mixed kinds pp4":    {Model: mixed, SeqLen: 4096, MicroBatch: 1, Precision: "bf16", Framework: FrameworkTorchtitan, Checkpointing: "full", Parallel: Parallel{PP: 4, PPMicrobatches: 4}},
		"accumulation pp4":   {Model: llama, SeqLen: 256, MicroBatch: 1, GradAccum: 2, Precision: "mixed_bf16", Framework: FrameworkTorchtitan, Checkpointing: "full", Parallel: Parallel{PP: 4, PPMicrobatches: 4}},
	}
	checkUnchanged(t, plans, &skipCoveredStages)
	// Which stages cover which (every pair j < k that does):
	//   - Llama-3.2-1B's 16 blocks on 8 torchtitan stages are 2, 3, 2, 2, 2,
	//     2, 2, 1 blocks, stage 0 with the embedding and 7 with the head:
	//     stages 3 to 6 are stage 2's program with fewer in flight;
	//   - checkpointing every third of Llama-3.1-8B's blocks on 8 stages
	//     (4, 5, 4, 4, 4, 4, 4, 3) checkpoints blocks 9 and 12 of stage 2 and
	//     21 and 24 of stage 5 (the same offsets), but 15 of stage 3;
	//   - Gemma 3's global layers (every sixth) sit at other offsets in its
	//     middle stages: none covers another.
	for name, want := range map[string]map[int]int{
		"1f1b pp8":           {3: 2, 4: 2, 5: 2, 6: 2},
		"checkpoint every 3": {5: 2, 6: 3},
		"mixed kinds pp4":    {},
	} {
		tr := plans[name]
		r, err := tr.resolve()
		if err != nil {
			t.Fatal(err)
		}
		edges := buildEdges(r.pipelineMicro())
		got := map[int]int{}
		for k := range r.stages() {
			for j := range k {
				if r.coveredBy(k, j, &edges) {
					got[k] = j
					break
				}
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: stage covered by (first such stage) %v, want %v", name, got, want)
		}
	}
}
