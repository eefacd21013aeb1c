package importer

import (
	"fmt"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// torchtune's recipe configs (pytorch/torchtune @ bd2a0fc): OmegaConf YAML
// whose model, loss and optimizer are _component_ objects. The model
// builder names the architecture and the tuning (llama3_1_8b, lora_…,
// qlora_…: lora with quantize_base, models/llama3_1/_model_builders.py
// :250); dtype bf16 puts weights, gradients and optimizer states in bf16,
// a missing dtype fp32 (training/precision.py); batch_size is the
// per-device batch (recipes/full_finetune_single_device.py:290);
// tokenizer.max_seq_len caps the rows (null keeps each sample's length);
// enable_activation_checkpointing, compile, optimizer_in_bwd,
// fsdp_cpu_offload, fsdp_reshard_after_forward as the recipes read them.

var torchtuneIrrelevant = prefixes("output_dir", "checkpointer", "resume_from_checkpoint", "save_adapter_weights_only",
	"enable_async_checkpointing", "seed", "shuffle", "dataset", "dataset_val", "metric_logger", "log_", "profiler", "device",
	"low_cpu_ram", "cudnn_deterministic_mode", "collate_fn", "tokenizer._component_", "tokenizer.path", "tokenizer.prompt_template",
	"tokenizer.merges_file", "epochs", "max_steps_per_epoch", "run_val_every_n_steps", "save_every_n_steps", "lr_scheduler",
	"optimizer.lr", "optimizer.weight_decay", "optimizer.betas", "optimizer.eps", "clip_grad_norm", "batch_size_val",
	"loss.num_output_chunks", "model.lora_alpha", "recipe_checkpoint", "lora_alpha", "model_type", "base_model_path")

// torchtuneModels maps a builder's name to the catalog model of its
// architecture.
var torchtuneModels = map[string]string{
	"llama3_1_8b": "meta-llama/Llama-3.1-8B", "llama3_1_70b": "meta-llama/Llama-3.1-70B", "llama3_1_405b": "meta-llama/Llama-3.1-405B",
	"llama3_8b": "meta-llama/Meta-Llama-3-8B", "llama3_70b": "meta-llama/Meta-Llama-3-70B",
	"llama3_2_1b": "meta-llama/Llama-3.2-1B", "llama3_2_3b": "meta-llama/Llama-3.2-3B",
	"llama2_7b": "meta-llama/Llama-2-7b-hf", "llama2_13b": "meta-llama/Llama-2-13b-hf", "llama2_70b": "meta-llama/Llama-2-70b-hf",
	"mistral_7b": "mistralai/Mistral-7B-v0.1", "qwen2_5_0_5b": "Qwen/Qwen2.5-0.5B", "qwen2_5_7b": "Qwen/Qwen2.5-7B",
	"qwen2_5_72b": "Qwen/Qwen2.5-72B", "qwen3_0_6b": "Qwen/Qwen3-0.6B", "qwen3_8b": "Qwen/Qwen3-8B", "qwen3_32b": "Qwen/Qwen3-32B",
	"gemma_2b": "google/gemma-2b", "gemma_7b": "google/gemma-7b", "gemma2_9b": "google/gemma-2-9b", "gemma2_27b": "google/gemma-2-27b",
	"phi3_mini": "microsoft/Phi-3-mini-4k-instruct", "phi4_14b": "microsoft/phi-4",
}

func importTorchtune(r *configReader, opt Options) (trainerImport, error) {
	ti := trainerImport{t: vram.Training{Framework: vram.FrameworkTorchtune, Precision: "fp32", Optimizer: "adamw"}}
	t := &ti.t
	builder, _, err := r.str("model._component_")
	if err != nil {
		return ti, err
	}
	base := builder[strings.LastIndex(builder, ".")+1:]
	var lora, qlora bool
	switch {
	case strings.HasPrefix(base, "qlora_"):
		base, qlora = strings.TrimPrefix(base, "qlora_"), true
	case strings.HasPrefix(base, "lora_"):
		base, lora = strings.TrimPrefix(base, "lora_"), true
	}
	if !lora && !qlora {
		// A plain builder takes no adapter's arguments: torchtune's config
		// instantiation calls it with them and Python refuses
		// (config/_instantiate.py _instantiate_node).
		for _, k := range []string{"lora_rank", "lora_attn_modules", "apply_lora_to_mlp", "apply_lora_to_output", "lora_alpha", "lora_dropout", "quantize_base"} {
			if r.has("model." + k) {
				return ti, fmt.Errorf("model._component_ %s: TypeError: %s() got an unexpected keyword argument '%s' (torchtune instantiates the builder with the model's keys; the adapter's keys need the lora_%s builder, or qlora_%s for quantize_base)",
					builder, base, k, base, base)
			}
		}
	}
	base = strings.TrimSuffix(strings.TrimSuffix(base, "_instruct"), "_base")
	ti.modelID = torchtuneModels[base]
	if ti.modelID == "" && opt.Model == "" {
		return ti, fmt.Errorf("model._component_ %s: the builder %s is not in the importer's table; give -model (a catalog name, a config.json or a checkpoint folder)", builder, base)
	}
	r.mapped("model._component_ %s → %s%s", builder, orDefault(ti.modelID, "(from -model)"), map[bool]string{true: ", LoRA"}[lora || qlora])
	if err := ttBatch(r, t); err != nil {
		return ti, err
	}
	if err := ttLoRA(r, t, lora || qlora, qlora); err != nil {
		return ti, err
	}
	if err := ttOptimizer(r, t); err != nil {
		return ti, err
	}
	if err := ttDistributed(r, t, opt); err != nil {
		return ti, err
	}
	if off, set, err := r.bool("enable_activation_offloading"); err != nil {
		return ti, err
	} else if off {
		t.ActivationOffloading = true
		r.mapped("enable_activation_offloading → activation_offloading (checkpointed inputs in pinned host memory)")
	} else if set {
		r.ignore("enable_activation_offloading") // off changes nothing
	}
	r.notModelled("model.use_dora", "DoRA is not modelled")
	r.notModelled("enable_fp8_training", "torchtune's FP8 training is not read")
	r.notModelled("custom_sharded_layers", "torchtune's extra FSDP groups are not modelled")
	r.finish(torchtuneIrrelevant)
	return ti, nil
}

func ttBatch(r *configReader, t *vram.Training) error {
	n, ok, err := r.int("batch_size", 1, vram.MaxTokens)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("batch_size: the recipes require it (cfg.batch_size)")
	}
	t.MicroBatch = n
	if err := r.intInto(&t.GradAccum, "gradient_accumulation_steps", 1, 1<<20); err != nil {
		return err
	}
	seq, ok, err := r.int("tokenizer.max_seq_len", 1, vram.MaxTokens)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("tokenizer.max_seq_len is null: each sample keeps its own length; give the longest with tokenizer.max_seq_len=N after the config, as tune run takes it")
	}
	t.SeqLen = seq
	packed, _, _ := r.bool("dataset.packed")
	r.mapped("batch_size %d, tokenizer.max_seq_len %d → micro_batch %d, seq_len %d%s", n, seq, n, seq, map[bool]string{true: " (packed: every row full)"}[packed])
	if d, ok, err := r.str("dtype"); err != nil {
		return err
	} else if ok {
		switch d {
		case "bf16":
			t.Precision = "bf16"
		case "fp32":
		default:
			return fmt.Errorf("dtype %q: the recipes take bf16 or fp32", d)
		}
	}
	r.mapped("dtype → %s weights, gradients and optimizer states", t.Precision)
	if ac, _, err := r.bool("enable_activation_checkpointing"); err != nil {
		return err
	} else if ac {
		t.Checkpointing = vram.CheckpointFull
	}
	if c, _, err := r.bool("compile"); err != nil {
		return err
	} else if c {
		t.Compile = true
	}
	loss, _, err := r.str("loss._component_")
	if err != nil {
		return err
	}
	switch {
	case strings.Contains(loss, "LinearCrossEntropyLoss") || strings.Contains(loss, "CEWithChunkedOutputLoss"):
		t.Loss = "chunked_cross_entropy"
	case strings.Contains(loss, "CrossEntropyLoss"), loss == "":
	default:
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("loss._component_ = %s: estimated as cross-entropy", loss))
	}
	r.mapped("checkpointing %s, compile %v, loss %s", orDefault(t.Checkpointing, "none"), t.Compile, orDefault(t.Loss, "cross_entropy"))
	return nil
}

// ttLoRA reads a LoRA builder's arguments: lora_attn_modules (q_proj,
// k_proj, v_proj, output_proj), apply_lora_to_mlp, apply_lora_to_output,
// lora_rank (8), lora_dropout; adapters in the recipe's dtype; QLoRA's base
// in torchao's NF4 (blocks of 64, scales quantized in blocks of 256).
func ttLoRA(r *configReader, t *vram.Training, lora, qlora bool) error {
	if !lora {
		return nil
	}
	attn, _, err := r.list("model.lora_attn_modules")
	if err != nil {
		return err
	}
	targets := loraTargets(attn)
	if mlp, _, err := r.bool("model.apply_lora_to_mlp"); err != nil {
		return err
	} else if mlp {
		targets = append(targets, "gate_proj", "up_proj", "down_proj")
	}
	if out, _, err := r.bool("model.apply_lora_to_output"); err != nil {
		return err
	} else if out {
		targets = append(targets, "lm_head")
	}
	rank := 8
	if err := r.intInto(&rank, "model.lora_rank", 1, 1<<16); err != nil {
		return err
	}
	drop := 0.0
	if v, ok := r.get("model.lora_dropout"); ok {
		fmt.Sscanf(fmt.Sprint(v), "%g", &drop)
	}
	t.Trainable, t.LoRA = "lora", &vram.LoRA{Rank: rank, Dropout: drop, Targets: targets}
	r.mapped("LoRA rank %d on %s", rank, strings.Join(targets, ", "))
	if q, ok, err := r.bool("model.quantize_base"); err != nil {
		return err
	} else if ok {
		qlora = q
	}
	if qlora {
		t.QuantizedBase = vram.Quant{DType: vram.NF4, DoubleQuant: true, GroupSize: 64}
		r.mapped("qlora → base NF4 (torchao, blocks of 64)")
	}
	return nil
}

func ttOptimizer(r *configReader, t *vram.Training) error {
	c, _, err := r.str("optimizer._component_")
	if err != nil {
		return err
	}
	name := c[strings.LastIndex(c, ".")+1:]
	switch {
	case name == "AdamW" || name == "Adam":
		t.Optimizer = strings.ToLower(name)
	case name == "PagedAdamW" || name == "PagedAdamW32bit":
		t.Optimizer = "paged_adamw"
	case name == "PagedAdamW8bit":
		t.Optimizer = "paged_adamw_8bit"
	case name == "AdamW8bit" || name == "Adam8bit":
		t.Optimizer = "adamw_8bit"
	case name == "AdamW4bit":
		t.Optimizer = "adamw_4bit"
	case name == "SGD":
		t.Optimizer = "sgd"
	case c == "":
	default:
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("optimizer._component_ = %s: estimated with AdamW's states", c))
	}
	if f, _, err := r.bool("optimizer.fused"); err != nil {
		return err
	} else if f {
		t.OptimizerImpl = "fused"
	}
	if b, _, err := r.bool("optimizer_in_bwd"); err != nil {
		return err
	} else if b {
		t.OptimizerInBackward = true
	}
	r.mapped("optimizer %s → %s%s", orDefault(c, "(none)"), t.Optimizer, map[bool]string{true: ", stepped in backward"}[t.OptimizerInBackward])
	return nil
}

// ttDistributed: the distributed recipes shard with FSDP2 over the
// launch's GPUs (-gpus), with fsdp_cpu_offload and
// fsdp_reshard_after_forward; tensor and context parallel dims.
func ttDistributed(r *configReader, t *vram.Training, opt Options) error {
	var err error
	if t.Parallel.TP, _, err = r.int("tensor_parallel_dim", 1, 1024); err != nil {
		return err
	}
	if t.Parallel.CP, _, err = r.int("context_parallel_dim", 1, 1024); err != nil {
		return err
	}
	r.get("tensor_parallel_plan._component_")
	off, _, err := r.bool("fsdp_cpu_offload")
	if err != nil {
		return err
	}
	rs, rsSet, err := r.bool("fsdp_reshard_after_forward")
	if err != nil {
		return err
	}
	if opt.GPUs <= 1 {
		return nil
	}
	t.Parallel.FSDP, t.Parallel.ZeRO, t.Parallel.FSDPVersion = "full_shard", 3, 2
	if off {
		t.Parallel.CPUOffload = "optimizer+params"
	}
	if rsSet {
		t.Parallel.ReshardAfterForward = &rs
	}
	r.mapped("%d GPUs → FSDP2 full sharding%s", opt.GPUs, map[bool]string{true: ", offloaded to the CPU"}[off])
	return nil
}
