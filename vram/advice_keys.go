package vram

import "fmt"

// KeysFor says the advice in the config a plan was imported from: an
// axolotl YAML's keys (axolotl/utils/schemas/config.py), a LLaMA-Factory
// YAML's (hparams/model_args.py, finetuning_args.py and TrainingArguments),
// Megatron-LM's arguments (megatron/training/arguments.py), else the
// framework's own flags (Flags). Empty when that config has no setting
// for the change (torchtitan trains no adapters, say).
func (a Advice) KeysFor(kind ConfigKind) string {
	t := a.Plan
	switch kind {
	case KindAxolotl:
		return a.each(func(k AdviceKind) string { return axolotlKeys(k, t) })
	case KindLLaMAFactory:
		return a.each(func(k AdviceKind) string { return llamaFactoryKeys(k, t) })
	case KindMegatron:
		return a.each(func(k AdviceKind) string { return megatronFlags(k, t) })
	case KindTorchtitanPy:
		return a.each(func(k AdviceKind) string { return torchtitanPyFlags(k, t) })
	}
	return a.Flags(t.Framework)
}

func axolotlKeys(k AdviceKind, t Training) string {
	switch k {
	case AdviceFullCheckpointing:
		return "gradient_checkpointing: true"
	case AdviceFusedAttention:
		return "flash_attention: true"
	case AdviceFusedLoss:
		return "plugins: [axolotl.integrations.liger.LigerPlugin] with liger_fused_linear_cross_entropy: true"
	case AdviceFusedOptimizer:
		return "optimizer: adamw_torch_fused"
	case Advice8BitAdamW:
		return "optimizer: adamw_bnb_8bit"
	case AdviceAdafactor:
		return "optimizer: adafactor"
	case AdviceAutocast, AdvicePureBF16:
		return "bf16: true"
	case AdviceLoRA:
		return "adapter: lora, lora_r: 16, lora_target_linear: true"
	case AdviceQLoRA:
		return "adapter: qlora, load_in_4bit: true, lora_r: 16, lora_target_linear: true"
	case AdviceZeRO:
		return fmt.Sprintf("deepspeed: deepspeed_configs/zero%d.json", t.Parallel.ZeRO)
	case AdviceMoreGPUs:
		return fmt.Sprintf("deepspeed: deepspeed_configs/zero3_bf16.json on %d GPUs (accelerate launch --num_processes %d -m axolotl.cli.train)", t.Parallel.DP, t.Parallel.DP)
	case AdviceOffloadOptimizer:
		return "deepspeed: deepspeed_configs/zero2.json (it offloads the optimizer to the CPU)"
	case AdviceSmallerMicroBatch:
		return fmt.Sprintf("micro_batch_size: %d, gradient_accumulation_steps: %d", t.MicroBatch, max(1, t.GradAccum))
	case AdviceShorterSequences:
		return fmt.Sprintf("sequence_len: %d", t.SeqLen)
	}
	return ""
}

func llamaFactoryKeys(k AdviceKind, t Training) string {
	switch k {
	case AdviceFullCheckpointing:
		return "disable_gradient_checkpointing: false"
	case AdviceFusedAttention:
		return "flash_attn: fa2"
	case AdviceFusedLoss:
		return "enable_liger_kernel: true"
	case AdviceFusedOptimizer:
		return "optim: adamw_torch_fused"
	case Advice8BitAdamW:
		return "optim: adamw_bnb_8bit"
	case AdviceAdafactor:
		return "optim: adafactor"
	case AdviceAutocast:
		return "bf16: true"
	case AdvicePureBF16:
		return "pure_bf16: true"
	case AdviceLoRA:
		return "finetuning_type: lora, lora_rank: 16, lora_target: all"
	case AdviceQLoRA:
		return "finetuning_type: lora, quantization_bit: 4, lora_rank: 16, lora_target: all"
	case AdviceZeRO:
		return fmt.Sprintf("deepspeed: examples/deepspeed/ds_z%d_config.json", t.Parallel.ZeRO)
	case AdviceMoreGPUs:
		return fmt.Sprintf("deepspeed: examples/deepspeed/ds_z3_config.json on %d GPUs (FORCE_TORCHRUN=1 NPROC_PER_NODE=%d llamafactory-cli train)", t.Parallel.DP, t.Parallel.DP)
	case AdviceOffloadOptimizer:
		return "deepspeed: examples/deepspeed/ds_z2_offload_config.json"
	case AdviceSmallerMicroBatch:
		return fmt.Sprintf("per_device_train_batch_size: %d, gradient_accumulation_steps: %d", t.MicroBatch, max(1, t.GradAccum))
	case AdviceShorterSequences:
		return fmt.Sprintf("cutoff_len: %d", t.SeqLen)
	}
	return ""
}

func megatronFlags(k AdviceKind, t Training) string {
	switch k {
	case AdviceSelective:
		return "--recompute-activations"
	case AdviceFullCheckpointing:
		return "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
	case AdviceZeRO:
		return "--use-distributed-optimizer"
	case AdviceMoreGPUs:
		return fmt.Sprintf("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params over data parallel %d", t.Parallel.DP)
	case AdviceSmallerMicroBatch:
		return fmt.Sprintf("--micro-batch-size %d (keep --global-batch-size)", t.MicroBatch)
	case AdviceShorterSequences:
		return fmt.Sprintf("--seq-length %d", t.SeqLen)
	}
	return ""
}
