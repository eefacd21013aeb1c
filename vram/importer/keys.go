package importer

import (
	"fmt"

	"github.com/vramlab/vramlab/vram"
)

// Keys says the advice in the config a plan was imported from: an
// axolotl YAML's keys (axolotl/utils/schemas/config.py), a LLaMA-Factory
// YAML's (hparams/model_args.py, finetuning_args.py and TrainingArguments),
// Megatron-LM's arguments (megatron/training/arguments.py), else the
// framework's own flags (Flags). Empty when that config has no setting
// for the change (torchtitan trains no adapters, say).
func Keys(a vram.Advice, kind Kind) string {
	t := a.Plan
	switch kind {
	case KindAxolotl:
		return a.SayEach(func(k vram.AdviceKind) string { return axolotlKeys(k, t) })
	case KindLLaMAFactory:
		return a.SayEach(func(k vram.AdviceKind) string { return llamaFactoryKeys(k, t) })
	case KindMegatron:
		return a.SayEach(func(k vram.AdviceKind) string { return megatronFlags(k, t) })
	case KindTorchtitanPy:
		return a.SayEach(func(k vram.AdviceKind) string { return torchtitanPyFlags(k, t) })
	}
	return a.Flags(t.Framework)
}

func axolotlKeys(k vram.AdviceKind, t vram.Training) string {
	switch k {
	case vram.AdviceFullCheckpointing:
		return "gradient_checkpointing: true"
	case vram.AdviceFusedAttention:
		return "flash_attention: true"
	case vram.AdviceFusedLoss:
		return "plugins: [axolotl.integrations.liger.LigerPlugin] with liger_fused_linear_cross_entropy: true"
	case vram.AdviceFusedOptimizer:
		return "optimizer: adamw_torch_fused"
	case vram.Advice8BitAdamW:
		return "optimizer: adamw_bnb_8bit"
	case vram.AdviceAdafactor:
		return "optimizer: adafactor"
	case vram.AdviceAutocast, vram.AdvicePureBF16:
		return "bf16: true"
	case vram.AdviceLoRA:
		return "adapter: lora, lora_r: 16, lora_target_linear: true"
	case vram.AdviceQLoRA:
		return "adapter: qlora, load_in_4bit: true, lora_r: 16, lora_target_linear: true"
	case vram.AdviceZeRO:
		return fmt.Sprintf("deepspeed: deepspeed_configs/zero%d.json", t.Parallel.ZeRO)
	case vram.AdviceMoreGPUs:
		return fmt.Sprintf("deepspeed: deepspeed_configs/zero3_bf16.json on %d GPUs (accelerate launch --num_processes %d -m axolotl.cli.train)", t.Parallel.DP, t.Parallel.DP)
	case vram.AdviceOffloadOptimizer:
		return "deepspeed: deepspeed_configs/zero2.json (it offloads the optimizer to the CPU)"
	case vram.AdviceSmallerMicroBatch:
		return fmt.Sprintf("micro_batch_size: %d, gradient_accumulation_steps: %d", t.MicroBatch, max(1, t.GradAccum))
	case vram.AdviceShorterSequences:
		return fmt.Sprintf("sequence_len: %d", t.SeqLen)
	}
	return ""
}

func llamaFactoryKeys(k vram.AdviceKind, t vram.Training) string {
	switch k {
	case vram.AdviceFullCheckpointing:
		return "disable_gradient_checkpointing: false"
	case vram.AdviceFusedAttention:
		return "flash_attn: fa2"
	case vram.AdviceFusedLoss:
		return "enable_liger_kernel: true"
	case vram.AdviceFusedOptimizer:
		return "optim: adamw_torch_fused"
	case vram.Advice8BitAdamW:
		return "optim: adamw_bnb_8bit"
	case vram.AdviceAdafactor:
		return "optim: adafactor"
	case vram.AdviceAutocast:
		return "bf16: true"
	case vram.AdvicePureBF16:
		return "pure_bf16: true"
	case vram.AdviceLoRA:
		return "finetuning_type: lora, lora_rank: 16, lora_target: all"
	case vram.AdviceQLoRA:
		return "finetuning_type: lora, quantization_bit: 4, lora_rank: 16, lora_target: all"
	case vram.AdviceZeRO:
		return fmt.Sprintf("deepspeed: examples/deepspeed/ds_z%d_config.json", t.Parallel.ZeRO)
	case vram.AdviceMoreGPUs:
		return fmt.Sprintf("deepspeed: examples/deepspeed/ds_z3_config.json on %d GPUs (FORCE_TORCHRUN=1 NPROC_PER_NODE=%d llamafactory-cli train)", t.Parallel.DP, t.Parallel.DP)
	case vram.AdviceOffloadOptimizer:
		return "deepspeed: examples/deepspeed/ds_z2_offload_config.json"
	case vram.AdviceSmallerMicroBatch:
		return fmt.Sprintf("per_device_train_batch_size: %d, gradient_accumulation_steps: %d", t.MicroBatch, max(1, t.GradAccum))
	case vram.AdviceShorterSequences:
		return fmt.Sprintf("cutoff_len: %d", t.SeqLen)
	}
	return ""
}

func megatronFlags(k vram.AdviceKind, t vram.Training) string {
	switch k {
	case vram.AdviceSelective:
		return "--recompute-activations"
	case vram.AdviceFullCheckpointing:
		return "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
	case vram.AdviceZeRO:
		return "--use-distributed-optimizer"
	case vram.AdviceMoreGPUs:
		return fmt.Sprintf("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params over data parallel %d", t.Parallel.DP)
	case vram.AdviceSmallerMicroBatch:
		return fmt.Sprintf("--micro-batch-size %d (keep --global-batch-size)", t.MicroBatch)
	case vram.AdviceShorterSequences:
		return fmt.Sprintf("--seq-length %d", t.SeqLen)
	}
	return ""
}

// torchtitanPyFlags are the overrides torchtitan's CLI takes on a
// Python config (config/manager.py: tyro, --section.key value, the
// activation checkpointing class as a subcommand).
func torchtitanPyFlags(k vram.AdviceKind, t vram.Training) string {
	switch k {
	case vram.AdviceSelective:
		return "activation-checkpoint:selective"
	case vram.AdviceFullCheckpointing:
		return "activation-checkpoint:full"
	case vram.AdviceFusedOptimizer:
		return "--optimizer.implementation fused"
	case vram.AdvicePureBF16:
		return "--training.dtype bfloat16"
	case vram.AdviceMoreGPUs:
		return fmt.Sprintf("--parallelism.data_parallel_shard_degree %d (NGPU=%d ./run_train.sh)", t.Parallel.DP, t.Parallel.GPUs())
	case vram.AdviceLoRA:
		// model_spec is not a CLI field (trainer.py:77, tyro.conf.Suppress).
		return fmt.Sprintf("converters=[LoRAConverter.Config(rank=%d)] in the config function's model_registry(…) (every Linear; narrow with target_modules)", loraRank(t))
	case vram.AdviceOffloadOptimizer:
		return "--training.enable_cpu_offload (FSDP2's CPUOffloadPolicy: parameters and gradients too)"
	case vram.AdviceSmallerMicroBatch:
		return fmt.Sprintf("--training.num_tokens_per_microbatch_per_dp_rank %d (keep --training.num_tokens_per_train_step: it accumulates %d steps)", t.MicroBatch*t.SeqLen, max(1, t.GradAccum))
	case vram.AdviceShorterSequences:
		return fmt.Sprintf("--training.max_context_length %d --training.num_tokens_per_microbatch_per_dp_rank %d", t.SeqLen, t.MicroBatch*t.SeqLen)
	}
	return ""
}

// loraRank is the adapter rank the advice gives (its LoRA's, else 16).
func loraRank(t vram.Training) int {
	if t.LoRA != nil {
		return t.LoRA.Rank
	}
	return 16
}
