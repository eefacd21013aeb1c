package importer

import (
	"fmt"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// LLaMA-Factory's YAML (hiyouga/LLaMA-Factory @ ff6d4d1, src/llamafactory/
// hparams/): ModelArguments, DataArguments, FinetuningArguments and HF's
// Seq2SeqTrainingArguments in one namespace. finetuning_type defaults to
// lora (finetuning_args.py:464) with lora_rank 8 on every linear but the
// head (lora_target "all", :77, :81); cutoff_len 2048 (data_args.py:46);
// per_device_train_batch_size HF's 8; gradient checkpointing on unless
// disable_gradient_checkpointing (model_args.py:145); the weights loaded in
// the checkpoint's dtype and the trainable ones cast to fp32 unless
// pure_bf16 or ZeRO-3 (model/adapter.py:337-349); QLoRA by quantization_bit
// with nf4 and double quantization (model_args.py:283-291); flash_attn
// auto: FlashAttention-2 if installed, else SDPA (model_args.py:117).

var llamaFactoryIrrelevant = prefixes("dataset", "eval_dataset", "dataset_dir", "template", "train_on_prompt", "mask_history",
	"overwrite_cache", "preprocessing_num_workers", "dataloader_", "val_size", "tokenized_path", "output_dir", "logging_",
	"save_", "plot_loss", "overwrite_output_dir", "report_to", "run_name", "include_effective_tokens_per_second", "eval_",
	"do_", "predict_with_generate", "push_to_hub", "hub_", "hf_hub_token", "ms_hub_token", "learning_rate", "lr_scheduler_type",
	"warmup_", "weight_decay", "max_grad_norm", "ddp_timeout", "resume_from_checkpoint", "seed", "num_train_epochs",
	"max_steps", "max_samples", "infer_", "vllm_", "export_", "trust_remote_code", "lora_alpha", "stage", "use_reentrant_gc",
	"per_device_eval_batch_size", "adapter_name_or_path", "quantization_method", "new_special_tokens")

func importLLaMAFactory(r *configReader, opt Options) (trainerImport, error) {
	ti := trainerImport{t: vram.Training{Framework: vram.FrameworkHFTrainer, Optimizer: "adamw", OptimizerImpl: "fused", MicroBatch: 8, SeqLen: 2048, Checkpointing: vram.CheckpointFull}}
	t := &ti.t
	if !r.has("model_name_or_path") && r.has("model") {
		return importLLaMAFactoryV1(r, opt)
	}
	id, _, err := r.str("model_name_or_path")
	if err != nil {
		return ti, err
	}
	ti.modelID = id
	if st, _, _ := r.str("stage"); st == "dpo" || st == "kto" || st == "ppo" || st == "rm" {
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("stage = %s: the reference (and reward/value) models beside the policy are not modelled; estimated as SFT", st))
	}
	if err := lfBatch(r, t); err != nil {
		return ti, err
	}
	if err := readDeepSpeed(r, "deepspeed", t, opt); err != nil {
		return ti, err
	}
	if err := lfPrecision(r, t); err != nil {
		return ti, err
	}
	if err := lfTuning(r, t); err != nil {
		return ti, err
	}
	for key, why := range map[string]string{
		"use_unsloth_gc":       "Unsloth's offloaded checkpoints are not modelled (kept on the GPU)",
		"use_galore":           "GaLore's low-rank optimizer states are not modelled",
		"use_apollo":           "APOLLO's optimizer states are not modelled",
		"use_badam":            "BAdam's block-wise updates are not modelled",
		"use_adam_mini":        "Adam-mini's states are not modelled",
		"additional_target":    "modules trained in full beside the adapters are not modelled",
		"use_dora":             "DoRA is not modelled",
		"upcast_lmhead_output": "fp32 output-layer logits are not modelled beside the loss's upcast",
		"shift_attn":           "LongLoRA's shifted attention is not modelled",
		"fsdp":                 "FSDP from the training YAML is not read (accelerate's config carries it)",
		"use_unsloth":          "Unsloth's kernels are not modelled",
		"fp8":                  "FP8 training through accelerate is not read",
	} {
		r.notModelled(key, why)
	}
	r.finish(llamaFactoryIrrelevant)
	return ti, nil
}

func lfBatch(r *configReader, t *vram.Training) error {
	if err := r.intInto(&t.MicroBatch, "per_device_train_batch_size", 1, vram.MaxTokens); err != nil {
		return err
	}
	if err := r.intInto(&t.GradAccum, "gradient_accumulation_steps", 1, 1<<20); err != nil {
		return err
	}
	if err := r.intInto(&t.SeqLen, "cutoff_len", 1, vram.MaxTokens); err != nil {
		return err
	}
	packing, _, _ := r.bool("packing")
	neat, _, _ := r.bool("neat_packing")
	r.mapped("per_device_train_batch_size %d, cutoff_len %d → micro_batch %d, seq_len %d", t.MicroBatch, t.SeqLen, t.MicroBatch, t.SeqLen)
	if !packing && !neat {
		r.imp.Assumed = append(r.imp.Assumed, fmt.Sprintf("rows of cutoff_len %d tokens, the longest a batch is padded to", t.SeqLen))
	}
	if off, _, err := r.bool("disable_gradient_checkpointing"); err != nil {
		return err
	} else if off {
		t.Checkpointing = ""
	}
	r.get("gradient_checkpointing")
	r.mapped("gradient checkpointing → %s (LLaMA-Factory turns it on unless disable_gradient_checkpointing)", orDefault(t.Checkpointing, "none"))
	fa, _, err := r.str("flash_attn")
	if err != nil {
		return err
	}
	switch fa {
	case "", "auto":
		r.imp.Assumed = append(r.imp.Assumed, "flash_attn auto: SDPA (FlashAttention-2 where installed keeps the same O(s) memory)")
	case "disabled":
		t.Attention = "eager"
	case "sdpa":
		t.Attention = "sdpa"
	case "fa2":
		t.Attention = "flash2"
	case "fa3":
		t.Attention = "flash3"
	default:
		return fmt.Errorf("flash_attn %q: want auto, disabled, sdpa, fa2 or fa3", fa)
	}
	return nil
}

// lfPrecision: bf16/fp16 autocast over the checkpoint's dtype with the
// trainable parameters in fp32, pure_bf16 bf16 throughout.
func lfPrecision(r *configReader, t *vram.Training) error {
	bf16, _, err := r.bool("bf16")
	if err != nil {
		return err
	}
	fp16, _, err := r.bool("fp16")
	if err != nil {
		return err
	}
	pure, _, err := r.bool("pure_bf16")
	if err != nil {
		return err
	}
	switch {
	case pure:
		t.Precision = "bf16"
	case (bf16 || fp16) && t.Parallel.ZeRO == 3:
		t.Precision = map[bool]string{true: "mixed_bf16", false: "mixed_fp16"}[bf16]
	case bf16:
		t.Precision = "amp_bf16"
	case fp16:
		t.Precision = "amp_fp16"
	default:
		t.Precision = "fp32"
	}
	if name, ok, err := r.str("optim"); err != nil {
		return err
	} else if ok {
		o, impl, known := hfOptimizer(name)
		if !known {
			r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("optim = %s: not modelled, estimated with AdamW's states", name))
		}
		t.Optimizer, t.OptimizerImpl = o, impl
	}
	liger, _, _ := r.bool("enable_liger_kernel")
	hfLiger, _, _ := r.bool("use_liger_kernel")
	if liger || hfLiger {
		t.Loss = "fused"
	}
	r.mapped("bf16 %v, pure_bf16 %v → precision %s (trainable parameters fp32 unless pure_bf16 or ZeRO-3)", bf16, pure, t.Precision)
	return nil
}

func lfTuning(r *configReader, t *vram.Training) error {
	ft, _, err := r.str("finetuning_type")
	if err != nil {
		return err
	}
	switch ft {
	case "full":
		r.mapped("finetuning_type full → every parameter trains")
		return nil
	case "", "lora":
	default:
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("finetuning_type = %s: not modelled; estimated as LoRA", ft))
	}
	rank := 8
	if err := r.intInto(&rank, "lora_rank", 1, 1<<16); err != nil {
		return err
	}
	drop := 0.0
	if v, ok := r.get("lora_dropout"); ok {
		fmt.Sscanf(fmt.Sprint(v), "%g", &drop)
	}
	targets := []string{"all_linear"}
	if s, ok, err := r.str("lora_target"); err != nil {
		return err
	} else if ok && s != "all" {
		targets = loraTargets(strings.Split(strings.ReplaceAll(s, " ", ""), ","))
	}
	t.Trainable, t.LoRA = "lora", peftAdapters(rank, 0, drop, targets)
	r.mapped("finetuning_type lora → rank %d on %s", rank, strings.Join(targets, ", "))
	bits, ok, err := r.int("quantization_bit", 2, 8)
	if err != nil || !ok {
		return err
	}
	qt, _, _ := r.str("quantization_type")
	dq := true
	if v, ok, err := r.bool("double_quantization"); err != nil {
		return err
	} else if ok {
		dq = v
	}
	switch {
	case bits == 4 && qt == "fp4":
		t.QuantizedBase = vram.Quant{DType: vram.FP4, DoubleQuant: dq}
	case bits == 4:
		t.QuantizedBase = vram.Quant{DType: vram.NF4, DoubleQuant: dq}
	case bits == 8:
		t.QuantizedBase = vram.Quant{DType: vram.INT8}
	default:
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("quantization_bit = %d: only 4 and 8 are modelled; the base stays unquantized", bits))
		return nil
	}
	r.mapped("quantization_bit %d → base %s", bits, t.QuantizedBase.DType)
	return nil
}

// importLLaMAFactoryV1 reads the v1 schema (src/llamafactory/v1/config):
// model, micro_batch_size (1), cutoff_len (2048), bf16 (true),
// enable_activation_checkpointing (true), flash_attn (sdpa), peft_config,
// quant_config, dist_config.
func importLLaMAFactoryV1(r *configReader, opt Options) (trainerImport, error) {
	ti := trainerImport{t: vram.Training{Framework: vram.FrameworkHFTrainer, Optimizer: "adamw", OptimizerImpl: "fused", MicroBatch: 1, SeqLen: 2048,
		Checkpointing: vram.CheckpointFull, Precision: "amp_bf16", Attention: "sdpa"}}
	t := &ti.t
	var err error
	if ti.modelID, _, err = r.str("model"); err != nil {
		return ti, err
	}
	if err := r.intInto(&t.MicroBatch, "micro_batch_size", 1, vram.MaxTokens); err != nil {
		return ti, err
	}
	if err := r.intInto(&t.SeqLen, "cutoff_len", 1, vram.MaxTokens); err != nil {
		return ti, err
	}
	if ac, ok, err := r.bool("enable_activation_checkpointing"); err != nil {
		return ti, err
	} else if ok && !ac {
		t.Checkpointing = ""
	}
	if bf, ok, err := r.bool("bf16"); err != nil {
		return ti, err
	} else if ok && !bf {
		t.Precision = "fp32"
	}
	r.imp.Assumed = append(r.imp.Assumed, "the v1 trainer's precision as HF bf16 autocast over fp32 trainable parameters")
	r.mapped("v1: micro_batch_size %d, cutoff_len %d, checkpointing %s", t.MicroBatch, t.SeqLen, orDefault(t.Checkpointing, "none"))
	if name, _, _ := r.str("peft_config.name"); name == "lora" {
		rank := 8
		if err := r.intInto(&rank, "peft_config.r", 1, 1<<16); err != nil {
			return ti, err
		}
		targets := []string{"all_linear"}
		if ts, ok, err := r.list("peft_config.target_modules"); err != nil {
			return ti, err
		} else if ok {
			targets = loraTargets(ts)
		}
		drop := 0.0
		if v, ok := r.get("peft_config.lora_dropout"); ok {
			fmt.Sscanf(fmt.Sprint(v), "%g", &drop)
		}
		t.Trainable, t.LoRA = "lora", peftAdapters(rank, 0, drop, targets)
		r.mapped("peft_config lora → rank %d on %s", rank, strings.Join(targets, ", "))
	}
	if bits, ok, err := r.int("quant_config.quantization_bit", 2, 8); err != nil {
		return ti, err
	} else if ok && bits == 4 {
		t.QuantizedBase = vram.Quant{DType: vram.NF4, DoubleQuant: true}
		r.mapped("quant_config 4 bits → base nf4")
	}
	if d, _, _ := r.str("dist_config.name"); d == "fsdp2" && opt.GPUs > 1 {
		t.Parallel.FSDP, t.Parallel.ZeRO, t.Parallel.FSDPVersion = "full_shard", 3, 2
		r.mapped("dist_config fsdp2 over %d GPUs → FSDP2 full sharding", opt.GPUs)
	}
	r.finish(prefixes("train_dataset", "eval_dataset", "output_dir", "learning_rate", "max_steps", "sample_", "max_new_tokens",
		"model_class", "kernel_config", "dist_config", "quant_config.name", "peft_config.name", "peft_config.lora_alpha", "template"))
	return ti, nil
}
