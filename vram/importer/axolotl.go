package importer

import (
	"fmt"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// axolotl's YAML (axolotl-ai-cloud/axolotl @ 067b021, src/axolotl/utils/
// schemas/): one flat namespace. micro_batch_size (default 1) is the
// per-GPU batch (training.py:77), sequence_len (default 512, config.py:665)
// the row length, exact under sample_packing (which forces
// pad_to_sequence_len, validation.py:230-242); bf16 "auto" (config.py:559)
// loads the model in bf16 under the Trainer's bf16 autocast (utils/config/
// __init__.py:191-196); optimizer adamw_torch_fused (training.py:122);
// gradient_checkpointing off (config.py:600); adapter lora/qlora
// (peft.py:41), 4-bit weights only for qlora, as nf4 with double
// quantization and bf16 storage (loaders/model.py:712-738);
// lora_target_linear adds every linear but the head (loaders/adapter.py
// :54-72); attention from attn_implementation or the legacy flags
// (enums.py:118-125); liger's fused cross-entropy and cut cross-entropy
// only with their plugins (integrations/*/args.py); deepspeed a JSON path;
// fsdp_config, FSDP1 unless fsdp_version says 2 (validation.py:1107-1124).

var axolotlIrrelevant = prefixes("datasets", "test_datasets", "dataset_", "val_set_size", "chat_template", "special_tokens",
	"tokens", "train_on_inputs", "shuffle_merged_datasets", "output_dir", "resume_from_checkpoint", "lora_model_dir",
	"wandb_", "mlflow_", "comet_", "use_tensorboard", "logging_steps", "loss_watchdog", "save_", "saves_per_epoch",
	"evals_per_epoch", "eval_", "hub_", "push_dataset_to_hub", "hf_use_auth_token", "learning_rate", "lr_scheduler",
	"weight_decay", "max_grad_norm", "adam_", "seed", "strict", "tf32", "max_steps", "num_epochs", "warmup_",
	"tokenizer_type", "tokenizer_config", "trust_remote_code", "model_type", "lora_alpha", "is_llama_derived_model",
	"group_by_length", "early_stopping_patience", "local_rank", "logging_first_step", "debug", "xformers_attention_",
	"bnb_config_kwargs", "lora_fan_in_fan_out", "sample_packing_", "pad_to_sequence_len", "flash_attn_rms_norm",
	"flash_attn_cross_entropy", "plugins", "lora_mlp_kernel", "lora_qkv_kernel", "lora_o_kernel", "fused_attn_kernel",
	"special_tokens", "dataset_prepared_path", "eval_sample_packing", "torch_compile_backend", "ddp_", "optim_args")

func importAxolotl(r *configReader, opt Options) (trainerImport, error) {
	ti := trainerImport{t: vram.Training{Framework: vram.FrameworkHFTrainer, Optimizer: "adamw", OptimizerImpl: "fused", MicroBatch: 1, SeqLen: 512}}
	t := &ti.t
	id, _, err := r.str("base_model_config")
	if err != nil {
		return ti, err
	}
	if id == "" {
		if id, _, err = r.str("base_model"); err != nil {
			return ti, err
		}
	}
	ti.modelID = id
	for _, step := range []func(*configReader, *vram.Training) error{axolotlBatch, axolotlPrecision, axolotlActivations, axolotlAdapter, axolotlOptimizer} {
		if err := step(r, t); err != nil {
			return ti, err
		}
	}
	if err := readDeepSpeed(r, "deepspeed", t, opt); err != nil {
		return ti, err
	}
	if err := axolotlFSDP(r, t); err != nil {
		return ti, err
	}
	for key, why := range map[string]string{
		"activation_offloading":         "activation offloading to the CPU is not modelled (the estimate keeps them on the GPU)",
		"layer_offloading":              "offloading layer parameters during forward is not modelled",
		"lora_modules_to_save":          "modules trained in full beside the adapters are not modelled",
		"peft_use_dora":                 "DoRA's magnitude vectors and activations are not modelled",
		"unfrozen_parameters":           "partial fine-tuning by parameter patterns is not modelled",
		"tiled_mlp":                     "tiled MLP is not modelled",
		"selective_checkpointing":       "axolotl's selective checkpointing is not modelled",
		"context_parallel_size":         "axolotl's context parallelism is not read",
		"tensor_parallel_size":          "DeepSpeed AutoTP is not read",
		"gptq":                          "training on a GPTQ checkpoint: give its checkpoint folder as -model",
		"fp8":                           "axolotl's FP8 training is not read",
		"auto_find_batch_size":          "the Trainer may halve the batch on OOM; the estimate is for the configured one",
		"gradient_checkpointing_kwargs": "use_reentrant changes little; not read",
		"torch_compile_mode":            "a compile mode's CUDA graphs (reduce-overhead, max-autotune) are not modelled",
	} {
		r.notModelled(key, why)
	}
	r.finish(axolotlIrrelevant)
	return ti, nil
}

func axolotlBatch(r *configReader, t *vram.Training) error {
	if err := r.intInto(&t.MicroBatch, "micro_batch_size", 1, vram.MaxTokens); err != nil {
		return err
	}
	if err := r.intInto(&t.GradAccum, "gradient_accumulation_steps", 1, 1<<20); err != nil {
		return err
	}
	r.get("batch_size") // global; derives gradient accumulation only
	if err := r.intInto(&t.SeqLen, "sequence_len", 1, vram.MaxTokens); err != nil {
		return err
	}
	packing, _, err := r.bool("sample_packing")
	if err != nil {
		return err
	}
	r.mapped("micro_batch_size %d × sequence_len %d → micro_batch %d, seq_len %d", t.MicroBatch, t.SeqLen, t.MicroBatch, t.SeqLen)
	if packing {
		r.mapped("sample_packing → every row exactly %d tokens (pad_to_sequence_len is forced)", t.SeqLen)
	} else {
		r.imp.Assumed = append(r.imp.Assumed, fmt.Sprintf("rows of %d tokens, the longest a batch is padded to", t.SeqLen))
	}
	return nil
}

// axolotlPrecision: bf16 (default "auto": bf16 on a GPU that has it) loads
// the model in bf16 and trains under the Trainer's bf16 autocast; fp16
// likewise; float32 keeps fp32 weights.
func axolotlPrecision(r *configReader, t *vram.Training) error {
	v, ok := r.get("bf16")
	bf16 := !ok || v == "auto" || v == true
	if s, isStr := v.(string); ok && isStr && s != "auto" && s != "true" && s != "false" {
		return fmt.Errorf(`bf16: want true, false or "auto", got %q`, s)
	}
	if v == false || v == "false" {
		bf16 = false
	}
	fp16, _, err := r.bool("fp16")
	if err != nil {
		return err
	}
	f32, _, err := r.bool("float32")
	if err != nil {
		return err
	}
	pureBF, _, err := r.bool("bfloat16")
	if err != nil {
		return err
	}
	switch {
	case f32:
		t.Precision = "fp32"
	case bf16 || pureBF:
		t.Precision, t.Autocast = "bf16", bf16
	case fp16:
		t.Precision, t.Autocast = "fp16", true
	default:
		t.Precision = "fp32"
	}
	r.mapped("bf16 %v → weights loaded in %s%s", orDefault(fmt.Sprint(v), "auto"), t.Precision, map[bool]string{true: " under bf16 autocast"}[t.Autocast])
	return nil
}

func axolotlActivations(r *configReader, t *vram.Training) error {
	switch v, _ := r.get("gradient_checkpointing"); v {
	case true, "true":
		t.Checkpointing = vram.CheckpointFull
	case "offload", "offload_disk":
		t.Checkpointing = vram.CheckpointFull
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("gradient_checkpointing = %v: the checkpoints offloaded to the CPU are not modelled (kept on the GPU)", v))
	case nil, false, "false":
	default:
		return fmt.Errorf("gradient_checkpointing: want true, false, \"offload\" or \"offload_disk\", got %v", v)
	}
	r.mapped("gradient_checkpointing → %s", orDefault(t.Checkpointing, "none"))
	att, _, err := r.str("attn_implementation")
	if err != nil {
		return err
	}
	// The legacy flags in axolotl's priority, specific before generic
	// (utils/schemas/enums.py LEGACY_ATTN_FLAG_TO_IMPL; the first set wins).
	for _, a := range [][2]string{{"xformers_attention", "xformers"}, {"sage_attention", "sage"}, {"flex_attention", "flex_attention"},
		{"flash_attention", "flash_attention_2"}, {"sdp_attention", "sdpa"}, {"eager_attention", "eager"}} {
		if on, _, err := r.bool(a[0]); err != nil {
			return err
		} else if on && att == "" {
			att = a[1]
		}
	}
	if att != "" {
		a, known := hfAttention(att)
		if !known {
			r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("attention %s: estimated as SDPA (a fused kernel)", att))
		}
		t.Attention = a
		r.mapped("attention %s → %s", att, a)
	}
	plugins, _, err := r.list("plugins")
	if err != nil {
		return err
	}
	joined := strings.Join(plugins, " ")
	liger, _, _ := r.bool("liger_fused_linear_cross_entropy")
	cce, cceSet, _ := r.bool("cut_cross_entropy")
	chunked, _, _ := r.bool("chunked_cross_entropy")
	switch {
	case liger && strings.Contains(joined, "LigerPlugin"), strings.Contains(joined, "CutCrossEntropyPlugin") && (cce || !cceSet):
		t.Loss = "fused"
		r.mapped("a fused linear cross-entropy plugin → the logits are never materialised")
	case chunked:
		t.Loss = "chunked_cross_entropy"
		r.mapped("chunked_cross_entropy → the loss in chunks")
	}
	if c, ok := r.get("torch_compile"); ok && (c == true || c == "auto" || c == "true") {
		t.Compile = true
		r.mapped("torch_compile → compiled")
	}
	return nil
}

// axolotlAdapter: adapter lora or qlora with lora_r and the targets
// (lora_target_modules, plus every linear with lora_target_linear).
func axolotlAdapter(r *configReader, t *vram.Training) error {
	adapter, _, err := r.str("adapter")
	if err != nil {
		return err
	}
	q4, _, err := r.bool("load_in_4bit")
	if err != nil {
		return err
	}
	q8, _, err := r.bool("load_in_8bit")
	if err != nil {
		return err
	}
	switch adapter {
	case "":
		r.mapped("no adapter → full fine-tuning")
		return nil
	case "lora", "qlora":
	default:
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("adapter = %s: not modelled; estimated as full fine-tuning", adapter))
		return nil
	}
	rank, _, err := r.int("lora_r", 1, 1<<16)
	if err != nil {
		return err
	}
	if rank == 0 {
		return fmt.Errorf("lora_r: an adapter needs its rank")
	}
	drop := 0.0
	if v, ok := r.get("lora_dropout"); ok {
		fmt.Sscanf(fmt.Sprint(v), "%g", &drop)
	}
	targets, _, err := r.list("lora_target_modules")
	if err != nil {
		return err
	}
	if all, _, err := r.bool("lora_target_linear"); err != nil {
		return err
	} else if all {
		targets = []string{"all_linear"}
	}
	if len(targets) == 0 {
		targets = []string{"q_proj", "v_proj"} // PEFT's default for Llama-style models
		r.imp.Assumed = append(r.imp.Assumed, "LoRA on q_proj and v_proj (PEFT's default: the config names no targets)")
	}
	t.Trainable, t.LoRA = "lora", peftAdapters(rank, 0, drop, loraTargets(targets))
	r.mapped("adapter %s rank %d on %s", adapter, rank, strings.Join(t.LoRA.Targets, ", "))
	switch {
	case adapter == "qlora":
		if !q4 {
			return fmt.Errorf("adapter qlora needs load_in_4bit: true (axolotl's own check)")
		}
		t.QuantizedBase = vram.Quant{DType: vram.NF4, DoubleQuant: true}
		r.mapped("qlora → base nf4 with double quantization, stored as bf16")
	case q8:
		t.QuantizedBase = vram.Quant{DType: vram.INT8}
		r.mapped("load_in_8bit → base int8")
	case q4:
		r.imp.NotModelled = append(r.imp.NotModelled, "load_in_4bit with adapter lora: axolotl builds 4-bit weights only for qlora; the base stays unquantized")
	}
	return nil
}

func axolotlOptimizer(r *configReader, t *vram.Training) error {
	name, ok, err := r.str("optimizer")
	if err != nil || !ok {
		return err
	}
	o, impl, known := hfOptimizer(name)
	if !known {
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("optimizer = %s: not modelled, estimated with AdamW's states", name))
	}
	t.Optimizer, t.OptimizerImpl = o, impl
	r.mapped("optimizer %s → %s", name, o)
	return nil
}

// axolotlFSDP reads fsdp_config (its keys with or without the fsdp_
// prefix): full sharding, FSDP1 unless the version says 2, parameter
// offload, reshard_after_forward, activation checkpointing.
func axolotlFSDP(r *configReader, t *vram.Training) error {
	list, hasList, err := r.list("fsdp")
	if err != nil {
		return err
	}
	on := hasList && len(list) > 0
	get := func(k string) (any, bool) {
		if v, ok := r.get("fsdp_config." + k); ok {
			return v, true
		}
		return r.get("fsdp_config.fsdp_" + k)
	}
	for k := range r.flat {
		if strings.HasPrefix(k, "fsdp_config.") {
			on = true
		}
	}
	if !on {
		return nil
	}
	t.Parallel.FSDP, t.Parallel.ZeRO, t.Parallel.FSDPVersion = "full_shard", 3, 1
	if v, ok := get("version"); ok {
		fmt.Sscanf(fmt.Sprint(v), "%d", &t.Parallel.FSDPVersion)
	}
	if v, ok := r.get("fsdp_version"); ok {
		fmt.Sscanf(fmt.Sprint(v), "%d", &t.Parallel.FSDPVersion)
	}
	if v, ok := get("offload_params"); ok && (v == true || v == "true") {
		t.Parallel.CPUOffload = "optimizer+params"
	}
	if v, ok := get("activation_checkpointing"); ok && (v == true || v == "true") {
		t.Checkpointing = vram.CheckpointFull
	}
	if v, ok := get("reshard_after_forward"); ok && t.Parallel.FSDPVersion == 2 {
		b := v == true || v == "true"
		t.Parallel.ReshardAfterForward = &b
	}
	if v, ok := get("sharding_strategy"); ok && v != "FULL_SHARD" && v != "1" && v != int64(1) {
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("fsdp_config.sharding_strategy = %v: modelled as FULL_SHARD", v))
	}
	for k := range r.flat {
		if strings.HasPrefix(k, "fsdp_config.") {
			r.used[k] = true
		}
	}
	r.mapped("fsdp_config → FSDP%d full sharding%s", t.Parallel.FSDPVersion, map[bool]string{true: ", parameters offloaded"}[t.Parallel.CPUOffload != ""])
	return nil
}
