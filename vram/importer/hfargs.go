package importer

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/internal/strictjson"
	"github.com/vramlab/vramlab/vram/internal/yaml"
)

// TrainingArguments as a command line (accelerate launch / torchrun /
// python train.py … --per_device_train_batch_size 2 …, or `trl sft …`) or
// as JSON: transformers 4.57.6 training_args.py (per_device_train_batch_size
// 8, gradient_accumulation_steps 1, optim adamw_torch_fused with torch ≥
// 2.8, gradient_checkpointing and bf16 off) and, for TRL's scripts, TRL's
// SFTConfig and ModelConfig (trl/trainer/sft_config.py, base_config.py,
// model_config.py at f2cd577: max_length 1024, gradient_checkpointing and
// bf16 on; the model loaded in float32; LoRA r 16, alpha 32, dropout 0.05,
// PEFT's default targets; 4-bit nf4 without nested quantization).

var hfArgsIrrelevant = prefixes("output_dir", "logging", "save_", "eval_", "evaluation_strategy", "push_to_hub", "hub_",
	"report_to", "run_name", "learning_rate", "lr_scheduler", "warmup", "weight_decay", "adam_", "max_grad_norm",
	"num_train_epochs", "max_steps", "seed", "data_seed", "dataset_", "do_", "overwrite_output_dir", "eos_token",
	"packing_strategy", "dataloader_", "remove_unused_columns", "trust_remote_code", "model_revision", "launch.main_process",
	"launch.config_file", "launch.mixed_precision", "launch.m", "resume_from_checkpoint", "ddp_", "label_names", "chat_template")

func prefixes(ps ...string) func(string) bool {
	return func(k string) bool {
		for _, p := range ps {
			if strings.HasPrefix(k, p) {
				return true
			}
		}
		return false
	}
}

func importHFArgs(r *configReader, opt Options) (trainerImport, error) {
	trl := isTRL(r)
	ti := trainerImport{t: vram.Training{Framework: vram.FrameworkHFTrainer, Optimizer: "adamw", OptimizerImpl: "fused", MicroBatch: 8}}
	t := &ti.t
	id, _, err := r.str("model_name_or_path")
	if err != nil {
		return ti, err
	}
	ti.modelID = id
	if err := hfBatch(r, t, trl); err != nil {
		return ti, err
	}
	if err := hfPrecision(r, t, trl); err != nil {
		return ti, err
	}
	if err := hfModelArgs(r, t, trl); err != nil {
		return ti, err
	}
	if n, ok, err := r.int("launch.num_processes", 1, 1<<16); err != nil {
		return ti, err
	} else if ok && opt.GPUs == 0 {
		t.Parallel.DP = n
		r.mapped("accelerate --num_processes %d → data parallel %d", n, n)
	}
	if n, ok, err := r.int("launch.nproc_per_node", 1, 1<<16); err != nil {
		return ti, err
	} else if ok && opt.GPUs == 0 {
		t.Parallel.DP = n
		r.mapped("torchrun --nproc_per_node %d → data parallel %d", n, n)
	}
	if n, ok, err := r.int("launch.num_gpus", 1, 1<<16); err != nil {
		return ti, err
	} else if ok && opt.GPUs == 0 {
		t.Parallel.DP = n
		r.mapped("deepspeed --num_gpus %d → data parallel %d", n, n)
	}
	if err := readDeepSpeed(r, "deepspeed", t, opt); err != nil {
		return ti, err
	}
	r.notModelled("fsdp", "FSDP from the command line is not read; give the accelerate config's settings in a plan")
	if err := hfAccelerateConfig(r, t, opt); err != nil {
		return ti, err
	}
	if algo := trlPostAlgorithm(r); algo != "" {
		if ti.post, err = trlPostKeys(r, algo, t, opt.Versions.TRL); err != nil {
			return ti, err
		}
		r.finish(func(k string) bool { return hfArgsIrrelevant(k) || trlPostIrrelevant(k) })
		return ti, nil
	}
	r.finish(hfArgsIrrelevant)
	return ti, nil
}

// hfAccelerateConfig reads the accelerate config `accelerate launch
// --config_file` names, where the launch script wrote it or it lies beside
// the command; its mixed_precision counts where the trainer's flags set
// neither bf16 nor fp16 (TrainingArguments then leaves accelerate's
// ACCELERATE_MIXED_PRECISION alone).
func hfAccelerateConfig(r *configReader, t *vram.Training, opt Options) error {
	file, ok, err := r.str("launch.config_file")
	if err != nil || !ok {
		return err
	}
	data, err := opt.readFile(file)
	if err != nil {
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("launch.config_file = %s: the accelerate config could not be read (%v); give it beside the command", file, err))
		return nil
	}
	v, err := yaml.Parse(data)
	if err != nil {
		return namedFileErr("--config_file", file, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("--config_file %s: want accelerate's mapping of keys, got %s", file, strictjson.Kind(v))
	}
	sub := newConfigReader(KindAccelerate, m, r.imp)
	if r.has("launch.num_processes") {
		delete(sub.flat, "num_processes") // the command line's wins
		sub.flat["num_processes"] = int64(max(1, t.Parallel.DP))
	}
	mp, err := readAccelerate(sub, t, opt)
	if err != nil {
		return namedFileErr("--config_file", file, err)
	}
	if p, ok := acceleratePrecision(mp); ok && !r.has("bf16") && !r.has("fp16") && !isTRL(r) {
		t.Precision = p
		r.mapped("--config_file %s: mixed_precision %s → precision %s", file, orDefault(mp, "no"), p)
	}
	return nil
}

// isTRL tells TRL's scripts (trl sft, trl/scripts/sft.py), whose
// configs default otherwise.
func isTRL(r *configReader) bool {
	prog, _ := r.flat["launch.program"].(string)
	r.used["launch.program"] = true
	return strings.Contains(prog, "trl") || r.has("use_peft") || r.has("packing")
}

// hfBatch reads the batch and the sequence length.
func hfBatch(r *configReader, t *vram.Training, trl bool) error {
	if n, ok, err := r.int("per_device_train_batch_size", 1, vram.MaxTokens); err != nil {
		return err
	} else if ok {
		t.MicroBatch = n
		r.mapped("per_device_train_batch_size %d → micro_batch %d", n, n)
	} else {
		r.mapped("per_device_train_batch_size %d (TrainingArguments' default) → micro_batch %d", t.MicroBatch, t.MicroBatch)
	}
	if err := r.intInto(&t.GradAccum, "gradient_accumulation_steps", 1, 1<<20); err != nil {
		return err
	}
	if a := trlPostAlgorithm(r); a == "grpo" || a == "rloo" {
		return nil // the sequence is the prompt and the completion (trl.go)
	}
	seq, ok, err := r.int("max_length", 1, vram.MaxTokens)
	if err != nil {
		return err
	}
	if !ok {
		if seq, ok, err = r.int("max_seq_length", 1, vram.MaxTokens); err != nil {
			return err
		} else if ok {
			r.imp.NotModelled = append(r.imp.NotModelled, "max_seq_length: TRL's SFTConfig calls it max_length now (this command would fail to parse); read as max_length")
		}
	}
	switch {
	case ok:
		t.SeqLen = seq
	case trl:
		t.SeqLen = 1024
		r.imp.Assumed = append(r.imp.Assumed, "max_length 1024 (the default of TRL's SFTConfig and DPOConfig)")
	default:
		return fmt.Errorf("TrainingArguments have no sequence length (the data collator pads): give max_length=N after the config")
	}
	packing, _, err := r.bool("packing")
	if err != nil {
		return err
	}
	if packing {
		r.mapped("packing → every row %d tokens", t.SeqLen)
	} else {
		r.imp.Assumed = append(r.imp.Assumed, fmt.Sprintf("every row %d tokens long (the longest batch a collator pads to)", t.SeqLen))
	}
	return nil
}

// hfPrecision reads bf16/fp16, the model's dtype and the optimizer.
func hfPrecision(r *configReader, t *vram.Training, trl bool) error {
	bf16, bfSet, err := r.bool("bf16")
	if err != nil {
		return err
	}
	fp16, _, err := r.bool("fp16")
	if err != nil {
		return err
	}
	if !bfSet && trl && !fp16 {
		bf16 = true // base_config.py: bf16 = not fp16 when unset
	}
	dtype, _, err := r.str("dtype")
	if err != nil {
		return err
	}
	if dtype == "" {
		dtype, _, _ = r.str("torch_dtype")
	}
	switch {
	case (dtype == "bfloat16" || dtype == "auto") && bf16:
		t.Precision, t.Autocast = "bf16", true
	case dtype == "bfloat16":
		t.Precision = "bf16"
	case bf16:
		t.Precision = "amp_bf16"
	case fp16:
		t.Precision = "amp_fp16"
	default:
		t.Precision = "fp32"
	}
	r.mapped("bf16 %v, fp16 %v, model dtype %s → precision %s", bf16, fp16, orDefault(dtype, "float32"), t.Precision)
	gc, gcSet, err := r.bool("gradient_checkpointing")
	if err != nil {
		return err
	}
	if !gcSet && trl {
		gc = true
	}
	if gc {
		t.Checkpointing = vram.CheckpointFull
	}
	r.mapped("gradient_checkpointing %v → %s", gc, orDefault(t.Checkpointing, "none"))
	if err := hfReentrant(r, t); err != nil {
		return err
	}
	if off, set, err := r.bool("activation_offloading"); err != nil {
		return err
	} else if set && !off {
		r.ignore("activation_offloading") // off changes nothing
	} else if off {
		// TRL's SFTConfig/DPOConfig activation_offloading (sft_config.py).
		t.ActivationOffloading = true
		r.mapped("activation_offloading → saved activations in pinned host memory")
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
	liger, _, err := r.bool("use_liger_kernel")
	if err != nil {
		return err
	}
	if liger {
		t.Loss = "fused"
		r.mapped("use_liger_kernel → fused linear cross-entropy")
	}
	return nil
}

// hfModelArgs reads the attention and TRL's (or PEFT's) adapters.
func hfModelArgs(r *configReader, t *vram.Training, trl bool) error {
	if a, ok, err := r.str("attn_implementation"); err != nil {
		return err
	} else if ok {
		att, known := hfAttention(a)
		if !known {
			r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("attn_implementation = %s: estimated as SDPA", a))
		}
		t.Attention = att
	}
	peft, _, err := r.bool("use_peft")
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
	if !peft && !q4 && !q8 {
		return nil
	}
	rank, alpha, drop := 16, 32.0, 0.05 // TRL ModelConfig's defaults
	if err := r.intInto(&rank, "lora_r", 1, 1<<16); err != nil {
		return err
	}
	if n, ok, err := r.int("lora_alpha", 0, 1<<20); err != nil {
		return err
	} else if ok {
		alpha = float64(n)
	}
	if d, ok, err := r.str("lora_dropout"); err != nil {
		return err
	} else if ok {
		fmt.Sscanf(d, "%g", &drop)
	}
	targets := []string{"q_proj", "v_proj"} // PEFT's default for Llama-style models
	if ts, ok, err := r.list("lora_target_modules"); err != nil {
		return err
	} else if ok {
		targets = loraTargets(ts)
	}
	t.Trainable, t.LoRA = "lora", peftAdapters(rank, alpha, drop, targets)
	r.mapped("LoRA rank %d on %s", rank, strings.Join(targets, ", "))
	if q4 {
		quant, _, err := r.str("bnb_4bit_quant_type")
		if err != nil {
			return err
		}
		nested, _, err := r.bool("use_bnb_nested_quant")
		if err != nil {
			return err
		}
		d := vram.NF4
		if quant == "fp4" {
			d = vram.FP4
		}
		t.QuantizedBase = vram.Quant{DType: d, DoubleQuant: nested}
		r.mapped("load_in_4bit → base %s (double quant %v)", d, nested)
	} else if q8 {
		t.QuantizedBase = vram.Quant{DType: vram.INT8}
		r.mapped("load_in_8bit → base int8")
	}
	return nil
}

// hfReentrant reads gradient_checkpointing_kwargs' use_reentrant, as a
// nested key (YAML) or the JSON a command line passes
// (--gradient_checkpointing_kwargs '{"use_reentrant": false}').
func hfReentrant(r *configReader, t *vram.Training) error {
	const key = "gradient_checkpointing_kwargs"
	if v, set, err := r.bool(key + ".use_reentrant"); err != nil || set {
		if set {
			t.UseReentrant = &v
			r.mapped("%s.use_reentrant %v → use_reentrant %v", key, v, v)
		}
		return err
	}
	raw, set, err := r.str(key)
	if err != nil || !set {
		return err
	}
	var kw struct {
		UseReentrant *bool `json:"use_reentrant"`
	}
	if err := json.Unmarshal([]byte(raw), &kw); err != nil {
		return fmt.Errorf("%s %q: want a JSON object such as {\"use_reentrant\": false}", key, raw)
	}
	if kw.UseReentrant != nil {
		t.UseReentrant = kw.UseReentrant
		r.mapped("%s use_reentrant %v → use_reentrant %v", key, *kw.UseReentrant, *kw.UseReentrant)
	}
	return nil
}
