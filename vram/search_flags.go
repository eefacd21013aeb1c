package vram

import (
	"cmp"
	"fmt"
	"strings"
)

// LaunchFlags is the layout of t as its framework's launch takes it, so a
// searched layout runs as printed: torchtitan's CLI overrides (the keys of
// its JobConfig: parallelism.*, training.*, activation_checkpoint.*),
// Megatron-LM's arguments (megatron/training/arguments.py), DeepSpeed's
// launcher and config (deepspeed.go), accelerate's launch flags and the HF
// Trainer's arguments (accelerate 1.15.0 commands/launch.py: --use_fsdp
// l.260, --fsdp_version l.514, --fsdp_reshard_after_forward l.540,
// --fsdp_activation_checkpointing l.600, --parallelism_config_* l.905-930),
// else torchrun's process count with the plan's parallel degrees in words.
func (t Training) LaunchFlags() string {
	p := t.Parallel
	world := max(1, p.DP) * max(1, p.TP) * max(1, p.PP) * max(1, p.CP)
	switch t.Framework {
	case FrameworkDeepSpeed:
		return t.deepSpeedLaunch(world)
	case FrameworkAccelerate, FrameworkHFTrainer:
		return t.accelerateLaunch(world)
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
		if p.EP > 1 {
			f = append(f, fmt.Sprintf("--parallelism.expert_parallel_degree %d", p.EP))
		}
		if p.PPSchedule == ScheduleInterleaved1F1B {
			// Interleaved1F1B over layers_per_stage = (layers + 2) / (pp ×
			// v): torchtitan counts the embedding and the output as a layer
			// each (pipeline_llm's num_virtual_stages).
			f = append(f, fmt.Sprintf("--parallelism.pipeline_parallel_schedule Interleaved1F1B --parallelism.pipeline_parallel_layers_per_stage %d", max(1, (t.Model.Normalize().Layers+2)/(p.PP*max(1, p.VirtualStages)))))
		}
		return strings.Join(append(f, t.torchtitanFloat8AndOffload()...), " ")
	case FrameworkMegatron:
		f := []string{fmt.Sprintf("--tensor-model-parallel-size %d", max(1, p.TP)),
			fmt.Sprintf("--pipeline-model-parallel-size %d", max(1, p.PP)),
			fmt.Sprintf("--context-parallel-size %d", max(1, p.CP)),
			fmt.Sprintf("--seq-length %d", t.SeqLen)}
		if p.SP {
			f = append(f, "--sequence-parallel")
		}
		if p.EP > 1 {
			f = append(f, fmt.Sprintf("--expert-model-parallel-size %d", p.EP))
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

// torchtitanFloat8AndOffload are a layout's float8 and CPU offload as
// torchtitan 0.3.0 takes them: the offload on the command line
// (TrainingConfig.enable_cpu_offload, config/configs.py:61: FSDP2's
// CPUOffloadPolicy for parameters, gradients and optimizer states), float8
// in the --config function of the model's config_registry.py, whose
// model_registry takes the converters (Trainer.Config.model_spec is
// tyro.conf.Suppress, trainer.py:77, so no flag sets them): a
// Float8LinearConverter.Config of the recipe, the output layer filtered
// out as llama3_405b does (models/llama3/config_registry.py:302-304), which
// the engine keeps in bf16 (float8Linear).
func (t Training) torchtitanFloat8AndOffload() []string {
	var f []string
	if t.Parallel.CPUOffload == "optimizer+params" {
		f = append(f, "--training.enable_cpu_offload")
	}
	if t.Float8 != "" && t.Float8 != "none" {
		f = append(f, fmt.Sprintf(`(float8: the --config function's model_registry(…, converters=[Float8LinearConverter.Config(recipe_name=%q, filter_fqns=["lm_head"])]), in the model's config_registry.py)`, t.Float8))
	}
	return f
}

// deepSpeedLaunch is DeepSpeed's launcher line and the config it reads
// (the batch keys of runtime/constants.py: train_micro_batch_size_per_gpu,
// gradient_accumulation_steps; zero_optimization.stage; bf16/fp16.enabled).
func (t Training) deepSpeedLaunch(world int) string {
	prec := ""
	switch t.Precision {
	case "fp16", "mixed_fp16", "amp_fp16":
		prec = `, "fp16": {"enabled": true}`
	case "bf16", "mixed_bf16", "amp_bf16":
		prec = `, "bf16": {"enabled": true}`
	}
	ckpt := ""
	if t.Checkpointing == CheckpointFull {
		ckpt = " (the script checkpoints every block: model.gradient_checkpointing_enable())"
	}
	// DeepSpeedZeroConfig's offload_optimizer and offload_param, each a
	// device ("cpu"; runtime/zero/offload_config.py).
	opt, par := "cpu", "cpu"
	if d := t.Parallel.DeepSpeed; d != nil {
		opt, par = orDefault(d.OffloadOptimizerDevice, "cpu"), orDefault(d.OffloadParamDevice, "cpu")
	}
	offload := ""
	switch t.Parallel.CPUOffload {
	case "optimizer", "optimizer+grads":
		offload = fmt.Sprintf(`, "offload_optimizer": {"device": %q}`, opt)
	case "optimizer+params":
		offload = fmt.Sprintf(`, "offload_optimizer": {"device": %q}, "offload_param": {"device": %q}`, opt, par)
	}
	return fmt.Sprintf(`deepspeed --num_nodes %d --num_gpus %d train.py --deepspeed ds_config.json with {"train_micro_batch_size_per_gpu": %d, "gradient_accumulation_steps": %d, "zero_optimization": {"stage": %d%s}%s}%s`,
		max(1, world/nodeGPUs), min(world, nodeGPUs), t.MicroBatch, max(1, t.GradAccum), t.Parallel.ZeRO, offload, prec, ckpt)
}

// accelerateLaunch is accelerate's launch line (and, for the HF Trainer,
// its TrainingArguments) for the layout.
func (t Training) accelerateLaunch(world int) string {
	p := t.Parallel
	if r, err := t.resolve(); err == nil {
		p = r.Parallel // with the framework's defaults (FSDP1 under accelerate)
	}
	f := []string{fmt.Sprintf("accelerate launch --num_processes %d --num_machines %d", world, max(1, world/nodeGPUs))}
	switch t.Precision {
	case "bf16", "mixed_bf16", "amp_bf16":
		f = append(f, "--mixed_precision bf16")
	case "fp16", "mixed_fp16", "amp_fp16":
		f = append(f, "--mixed_precision fp16")
	}
	if p.FSDP != "" && p.FSDP != "none" {
		f = append(f, fmt.Sprintf("--use_fsdp --fsdp_version %d", cmp.Or(p.FSDPVersion, 2)))
		f = append(f, "--fsdp_reshard_after_forward "+map[bool]string{true: "true", false: "false"}[p.FSDP != "shard_grad_op"])
		if t.Checkpointing == CheckpointFull && t.Framework == FrameworkAccelerate {
			f = append(f, "--fsdp_activation_checkpointing true")
		}
	}
	if p.TP > 1 || p.CP > 1 {
		f = append(f, fmt.Sprintf("--parallelism_config_dp_shard_size %d --parallelism_config_tp_size %d --parallelism_config_cp_size %d", max(1, p.DP), max(1, p.TP), max(1, p.CP)))
	}
	if t.Framework == FrameworkHFTrainer {
		f = append(f, fmt.Sprintf("train.py --per_device_train_batch_size %d --gradient_accumulation_steps %d", t.MicroBatch, max(1, t.GradAccum)))
		if t.Checkpointing == CheckpointFull {
			f = append(f, "--gradient_checkpointing")
		}
	} else {
		f = append(f, fmt.Sprintf("train.py (micro-batches of %d, Accelerator(gradient_accumulation_steps=%d))", t.MicroBatch, max(1, t.GradAccum)))
	}
	return strings.Join(f, " ")
}
