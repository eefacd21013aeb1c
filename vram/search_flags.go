package vram

import (
	"fmt"
	"strings"
)

// LaunchFlags is the layout of t as its framework's launch takes it, so a
// searched layout runs as printed: torchtitan's CLI overrides (the keys of
// its JobConfig: parallelism.*, training.*, activation_checkpoint.*),
// Megatron-LM's arguments (megatron/training/arguments.py), else
// torchrun's process count with the plan's parallel degrees in words.
func (t Training) LaunchFlags() string {
	p := t.Parallel
	world := max(1, p.DP) * max(1, p.TP) * max(1, p.PP) * max(1, p.CP)
	switch t.Framework {
	case FrameworkTorchtitan:
		f := []string{fmt.Sprintf("torchrun --nproc_per_node %d (%d nodes)", min(world, nodeGPUs), max(1, world/nodeGPUs)),
			fmt.Sprintf("--parallelism.data_parallel_shard_degree %d", max(1, p.DP)),
			fmt.Sprintf("--parallelism.tensor_parallel_degree %d", max(1, p.TP)),
			fmt.Sprintf("--parallelism.pipeline_parallel_degree %d", max(1, p.PP)),
			fmt.Sprintf("--parallelism.context_parallel_degree %d", max(1, p.CP)),
			fmt.Sprintf("--training.seq_len %d", t.SeqLen),
			fmt.Sprintf("--training.local_batch_size %d", t.MicroBatch*max(1, t.GradAccum)),
			fmt.Sprintf("--training.global_batch_size %d", t.MicroBatch*max(1, t.GradAccum)*max(1, p.DP)),
			"--activation_checkpoint.mode " + torchtitanAC(t.Checkpointing)}
		if p.PP > 1 {
			f = append(f, fmt.Sprintf("--parallelism.pipeline_parallel_microbatch_size %d", t.MicroBatch/max(1, p.PPMicrobatches)))
		}
		if p.PPSchedule == ScheduleInterleaved1F1B {
			// Interleaved1F1B over layers_per_stage = (layers + 2) / (pp ×
			// v): torchtitan counts the embedding and the output as a layer
			// each (pipeline_llm's num_virtual_stages).
			f = append(f, fmt.Sprintf("--parallelism.pipeline_parallel_schedule Interleaved1F1B --parallelism.pipeline_parallel_layers_per_stage %d", max(1, (t.Model.Normalize().Layers+2)/(p.PP*max(1, p.VirtualStages)))))
		}
		return strings.Join(f, " ")
	case FrameworkMegatron:
		f := []string{fmt.Sprintf("--tensor-model-parallel-size %d", max(1, p.TP)),
			fmt.Sprintf("--pipeline-model-parallel-size %d", max(1, p.PP)),
			fmt.Sprintf("--context-parallel-size %d", max(1, p.CP)),
			fmt.Sprintf("--seq-length %d", t.SeqLen)}
		if p.SP {
			f = append(f, "--sequence-parallel")
		}
		if p.PPSchedule == ScheduleInterleaved1F1B && p.VirtualStages > 1 {
			f = append(f, fmt.Sprintf("--num-layers-per-virtual-pipeline-stage %d", max(1, t.Model.Normalize().Layers/(p.PP*p.VirtualStages))))
		}
		mb, global := t.MicroBatch, t.MicroBatch*max(1, t.GradAccum)*max(1, p.DP)
		if p.PP > 1 {
			mb, global = t.MicroBatch/max(1, p.PPMicrobatches), t.MicroBatch*max(1, p.DP)
		}
		f = append(f, fmt.Sprintf("--micro-batch-size %d --global-batch-size %d", mb, global))
		switch t.Checkpointing {
		case CheckpointFull:
			f = append(f, "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1")
		case CheckpointSelective:
			f = append(f, "--recompute-granularity selective")
		}
		return strings.Join(f, " ")
	}
	return fmt.Sprintf("%d GPUs: data parallel %d (%s), tensor %d, context %d; micro-batch %d × %d accumulated; checkpointing %s",
		world, max(1, p.DP), orDefault(p.FSDP, "replicated"), max(1, p.TP), max(1, p.CP), t.MicroBatch, max(1, t.GradAccum), orDefault(string(t.Checkpointing), "none"))
}

// torchtitanAC is activation_checkpoint.mode for a recompute policy
// (torchtitan's "selective" with selective_ac_option op is op-level SAC,
// the engine's CheckpointOp).
func torchtitanAC(c Checkpointing) string {
	switch c {
	case CheckpointFull:
		return "full"
	case CheckpointOp:
		return "selective --activation_checkpoint.selective_ac_option op"
	}
	return "none"
}
