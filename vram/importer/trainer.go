package importer

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/internal/strictjson"
	"github.com/vramlab/vramlab/vram/internal/yaml"
)

// The trainer configs: what each kind shares. Every importer fills a
// trainerImport; finishTraining turns it into the plan.

type trainerImport struct {
	modelID string
	model   *vram.Model // a model the config gives by its shape (Megatron-LM's)
	t       vram.Training
	// post is the post-training plan around t when the config runs
	// one of TRL's post-training trainers (trl.go).
	post *vram.PostTraining
}

// importTrainer dispatches on the config's kind.
func importTrainer(r *configReader, opt Options) error {
	var ti trainerImport
	var err error
	switch r.kind {
	case KindAxolotl:
		ti, err = importAxolotl(r, opt)
	case KindLLaMAFactory:
		ti, err = importLLaMAFactory(r, opt)
	case KindTorchtune:
		ti, err = importTorchtune(r, opt)
	case KindTorchtitan, KindTorchtitanPy:
		ti, err = importTorchtitan(r, opt)
	case KindHFArgs:
		ti, err = importHFArgs(r, opt)
	case KindMegatron:
		ti, err = importMegatron(r, opt)
	case KindDeepSpeed, KindAccelerate:
		ti, err = importLauncherOnly(r, opt)
	case KindVerl:
		return importVerl(r, opt) // a post-training plan
	default:
		return fmt.Errorf("no importer for %q", r.kind)
	}
	if err != nil {
		return err
	}
	return finishTraining(r, ti, opt)
}

// finishTraining resolves the model, the world size and the GPU, and
// checks the plan.
func finishTraining(r *configReader, ti trainerImport, opt Options) error {
	var m vram.Model
	var ref string
	var err error
	if ti.model != nil {
		m, ref = *ti.model, ti.model.Name
	} else if m, ref, _, err = importModel(ti.modelID, opt); err != nil {
		return err
	}
	if to := orDefault(ref, m.Name); to != ti.modelID && ti.model == nil {
		r.mapped("model %s → %s", orDefault(ti.modelID, "(from -model)"), to)
	}
	t := ti.t
	t.Model = m
	if q, ok := repoQuant(ti.modelID); ok && opt.Model == "" && ref != ti.modelID {
		// A pre-quantized checkpoint trains as QLoRA with no key set
		// (peft's prepare_model_for_kbit_training; LLaMA-Factory's
		// model/model_utils/quantization.py reads its quantization_config).
		if t.Trainable == "lora" && t.QuantizedBase.DType == vram.DTypeUnset {
			t.QuantizedBase = q
			r.mapped("%s: a pre-quantized checkpoint → base %s, as its name says (give its folder with -model for its quantization_config)", ti.modelID, q.DType)
		} else if t.Trainable != "lora" {
			return fmt.Errorf("%s is a pre-quantized checkpoint (%s): full training cannot update its weights; train adapters on it (LoRA) or start from the base model", ti.modelID, q.DType)
		}
	}
	if opt.GPUs > 0 && t.Parallel.DP == 0 {
		t.Parallel.DP = opt.GPUs / max(1, t.Parallel.TP*max(1, t.Parallel.PP)*max(1, t.Parallel.CP))
		r.mapped("world size %d (-gpus) → data parallel %d", opt.GPUs, t.Parallel.DP)
	}
	if t.Parallel.DP <= 1 && (t.Parallel.ZeRO > 0 || t.Parallel.FSDP != "") && opt.GPUs == 0 {
		r.imp.Assumed = append(r.imp.Assumed, "one GPU: the config shards over the launch's GPUs, which it does not name (give -gpus)")
	}
	if pt := ti.post; pt != nil {
		pt.Policy = t
		if err := pt.Validate(); err != nil {
			return err
		}
		r.imp.Plan = vram.Plan{Model: m, ModelRef: ref, PostTraining: pt, GPU: opt.GPU}
		return nil
	}
	if err := t.Validate(); err != nil {
		return err
	}
	r.imp.Plan = vram.Plan{Model: m, ModelRef: ref, Training: &t, GPU: opt.GPU}
	return nil
}

// hfOptimizer maps a TrainingArguments optim name (transformers 4.57.6
// training_args.py OptimizerNames) to the engine's optimizer.
func hfOptimizer(name string) (opt, impl string, ok bool) {
	switch strings.ToLower(name) {
	case "adamw_torch", "adamw_hf", "adamw", "adamw_apex_fused":
		return "adamw", "", true
	case "adamw_torch_fused":
		return "adamw", "fused", true
	case "adamw_bnb_8bit", "adamw_8bit", "ao_adamw_8bit", "adamw_torch_8bit":
		return "adamw_8bit", "", true
	case "paged_adamw_8bit":
		return "paged_adamw_8bit", "", true
	case "paged_adamw_32bit", "paged_adamw":
		return "paged_adamw", "", true
	case "adamw_torch_4bit", "ao_adamw_4bit":
		return "adamw_4bit", "", true
	case "adafactor":
		return "adafactor", "", true
	case "sgd":
		return "sgd", "", true
	case "lion_32bit", "paged_lion_32bit":
		return "lion", "", true
	}
	return "adamw", "", false
}

// hfAttention maps an attn_implementation to the engine's attention.
func hfAttention(name string) (string, bool) {
	switch strings.ToLower(name) {
	case "eager":
		return "eager", true
	case "sdpa", "sdp":
		return "sdpa", true
	case "flash_attention_2", "fa2", "flash_attn":
		return "flash2", true
	case "flash_attention_3", "fa3":
		return "flash3", true
	}
	return "sdpa", false
}

// peftAdapters is LoRA as PEFT builds it beside a transformers model: the
// adapters kept in fp32 whatever the base (peft/tuners/tuners_utils.py
// _cast_adapter_dtype, autocast_adapter_dtype=True by default).
func peftAdapters(rank int, alpha, dropout float64, targets []string) *vram.LoRA {
	return &vram.LoRA{Rank: rank, Alpha: alpha, Dropout: dropout, Targets: targets, DType: vram.FP32}
}

// loraTargets maps module names as PEFT takes them (all-linear, a
// model's own names) to the engine's Llama-style roles.
func loraTargets(names []string) []string {
	var out []string
	for _, n := range names {
		if n == "all-linear" || n == "all_linear" || n == "all" {
			return []string{"all_linear"}
		}
		if role, ok := loraAliases[n]; ok {
			n = role
		}
		out = append(out, n)
	}
	return out
}

// loraAliases are module names other models (and torchtune, torchtitan)
// give the Llama roles.
var loraAliases = map[string]string{"wq": "q_proj", "wk": "k_proj", "wv": "v_proj", "wo": "o_proj", "out_proj": "o_proj",
	"output_proj": "o_proj", "dense": "o_proj", "w1": "gate_proj", "w3": "up_proj", "w2": "down_proj",
	"query_key_value": "qkv_proj", "c_attn": "qkv_proj", "output": "lm_head"}

// importLauncherOnly plans a DeepSpeed or accelerate config on its own:
// it says how the trainer shards, not what it trains, so the model comes
// from -model and the rest is TrainingArguments' defaults (batch 8) over
// rows of 1024 tokens unless key=value overrides say
// per_device_train_batch_size, max_length, gradient_checkpointing.
func importLauncherOnly(r *configReader, opt Options) (trainerImport, error) {
	ti := trainerImport{t: vram.Training{Framework: vram.FrameworkHFTrainer, Optimizer: "adamw", OptimizerImpl: "fused", MicroBatch: 8, SeqLen: 1024, Precision: "fp32"}}
	if opt.Model == "" {
		return ti, fmt.Errorf("a %s config says how a trainer shards, not what it trains: import the trainer's config (it names this file), or give -model and the batch as per_device_train_batch_size=N max_length=N", r.kind)
	}
	t := &ti.t
	for _, o := range []struct {
		key string
		dst *int
	}{{"per_device_train_batch_size", &t.MicroBatch}, {"train_micro_batch_size_per_gpu", &t.MicroBatch}, {"max_length", &t.SeqLen},
		{"gradient_accumulation_steps", &t.GradAccum}} {
		if s, _ := r.flat[o.key].(string); s == "auto" { // DeepSpeed's: the trainer fills it in
			r.used[o.key] = true
			continue
		}
		if n, ok, err := r.int(o.key, 1, vram.MaxTokens); err != nil {
			return ti, err
		} else if ok {
			*o.dst = n
		}
	}
	if gc, _, err := r.bool("gradient_checkpointing"); err != nil {
		return ti, err
	} else if gc {
		t.Checkpointing = vram.CheckpointFull
	}
	ckpt := "no checkpointing"
	if t.Checkpointing != "" {
		ckpt = string(t.Checkpointing) + " checkpointing"
	}
	r.imp.Assumed = append(r.imp.Assumed, fmt.Sprintf("the trainer's batch: micro_batch %d, rows of %d tokens, %s (TrainingArguments' defaults unless per_device_train_batch_size=N max_length=N gradient_checkpointing=true say otherwise)", t.MicroBatch, t.SeqLen, ckpt))
	if r.kind == KindAccelerate {
		mp, err := readAccelerate(r, t, opt)
		if err != nil {
			return ti, err
		}
		if p, ok := acceleratePrecision(mp); ok {
			t.Precision = p
		}
		return ti, nil
	}
	for _, kp := range [][2]string{{"fp16.enabled", "mixed_fp16"}, {"bf16.enabled", "mixed_bf16"}} {
		key, p := kp[0], kp[1]
		// DeepSpeed keeps 16-bit parameters and fp32 master weights and
		// states in its optimizer (runtime/bf16_optimizer.py, fp16/); "auto"
		// takes TrainingArguments' bf16/fp16, off by default.
		if b, _ := r.flat[key].(bool); b {
			t.Precision = p
			r.mapped("%s true → precision %s", key, p)
		}
	}
	r.flat = map[string]any{"deepspeed": unflatten(r.flat)}
	if err := readDeepSpeed(r, "deepspeed", t, opt); err != nil {
		return ti, err
	}
	if opt.GPUs > 0 {
		t.Parallel.DP = opt.GPUs
	}
	return ti, nil
}

// readDeepSpeed reads the DeepSpeed config a trainer names (a path beside
// the config, or the config inline) into the plan's parallel settings:
// zero_optimization.stage, offload_optimizer / offload_param to the CPU
// (DeepSpeedZeroConfig, deepspeed/runtime/zero/config.py).
func readDeepSpeed(r *configReader, key string, t *vram.Training, opt Options) error {
	v, ok := r.get(key)
	if !ok {
		return nil
	}
	var ds map[string]any
	switch x := v.(type) {
	case map[string]any:
		ds = x
	case string:
		data, err := opt.readFile(x)
		if err != nil {
			r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("%s = %s: the DeepSpeed config could not be read (%v); give it beside the config", key, x, err))
			return nil
		}
		if err := json.Unmarshal(data, &ds); err != nil {
			return namedFileErr(key, x, err)
		}
	default:
		return fmt.Errorf("%s: want a path to a DeepSpeed JSON or the config itself, got %s", key, strictjson.Kind(v))
	}
	sub := &configReader{kind: KindDeepSpeed, flat: map[string]any{}, used: map[string]bool{}, imp: r.imp}
	flatten("", ds, sub.flat)
	stage, _, err := sub.int("zero_optimization.stage", 0, 3)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	t.Parallel.ZeRO = stage
	offOpt, _, _ := sub.str("zero_optimization.offload_optimizer.device")
	offParam, _, _ := sub.str("zero_optimization.offload_param.device")
	t.Parallel.CPUOffload = deepSpeedOffload(offOpt, offParam)
	if err := deepSpeedBuckets(sub, ds, t); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	r.mapped("%s → ZeRO stage %d%s", key, stage, map[bool]string{true: ", offload " + t.Parallel.CPUOffload}[t.Parallel.CPUOffload != ""])
	sub.finish(deepSpeedIrrelevant)
	return nil
}

// deepSpeedIrrelevant are DeepSpeed config keys that leave GPU memory
// alone, or that the trainer fills in from its own arguments.
var deepSpeedIrrelevant = prefixes("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
	"steps_per_print", "wall_clock_breakdown", "gradient_clipping", "optimizer", "scheduler", "bf16", "fp16", "amp",
	"zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer", "prescale_gradients", "communication_data_type",
	"zero_optimization.stage3_gather_16bit_weights_on_model_save", "zero_optimization.gather_16bit_weights_on_model_save",
	"zero_optimization.round_robin_gradients", "zero_optimization.reduce_scatter",
	"zero_optimization.stage3_max_reuse_distance", "zero_optimization.max_reuse_distance", "zero_optimization.allgather_partitions",
	"zero_optimization.gather_16bit_weights_on_model_save", "zero_optimization.stage3_gather_fp16_weights_on_model_save",
	"zero_optimization.offload_optimizer.pin_memory", "zero_optimization.offload_param.pin_memory",
	"zero_optimization.offload_optimizer.nvme_path", "zero_optimization.offload_param.nvme_path")

// deepSpeedBuckets reads zero_optimization's buffer sizes into the plan's
// DeepSpeed section (deepspeed.go models each).
func deepSpeedBuckets(sub *configReader, ds map[string]any, t *vram.Training) error {
	zero, ok := ds["zero_optimization"].(map[string]any)
	if !ok {
		return nil
	}
	if t.Parallel.ZeRO == 0 { // stage 0: DeepSpeed's data parallelism, no ZeRO buffers
		sub.ignorePrefix("zero_optimization.")
		return nil
	}
	// DeepSpeedZeroConfig takes each stage3_ setting by its field name
	// too (runtime/zero/config.py:215-250, alias=…).
	named := map[string]any{}
	for k, v := range zero {
		named[k] = v
	}
	for _, k := range []string{"prefetch_bucket_size", "param_persistence_threshold", "max_live_parameters", "max_reuse_distance",
		"gather_16bit_weights_on_model_save"} {
		if v, ok := zero[k]; ok {
			if _, both := zero["stage3_"+k]; !both {
				named["stage3_"+k] = v
			}
			sub.get("zero_optimization." + k)
		}
	}
	raw, err := json.Marshal(named)
	if err != nil {
		return err
	}
	var d vram.DeepSpeed
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("zero_optimization: %v", err)
	}
	for _, k := range []string{"reduce_bucket_size", "allgather_bucket_size", "overlap_comm", "contiguous_gradients",
		"stage3_prefetch_bucket_size", "stage3_max_live_parameters", "stage3_param_persistence_threshold", "sub_group_size"} {
		sub.get("zero_optimization." + k)
	}
	// ZeRO-Infinity: where the offloaded part lives, and how much of the
	// parameters stays in host memory (nvme.go).
	d.OffloadOptimizerDevice, d.OffloadParamDevice = nvmeOnly(sub, "zero_optimization.offload_optimizer.device"), nvmeOnly(sub, "zero_optimization.offload_param.device")
	if v, ok := sub.get("zero_optimization.offload_param.max_in_cpu"); ok {
		n, isNum := v.(float64)
		if !isNum || n < 0 || n > 1e15 || n != math.Trunc(n) {
			return fmt.Errorf("zero_optimization.offload_param.max_in_cpu: a whole number of elements, got %v", v)
		}
		d.MaxInCPU = vram.DSSize(n)
	}
	if d != (vram.DeepSpeed{}) {
		t.Parallel.DeepSpeed = &d
	}
	return nil
}

// nvmeOnly is "nvme" when an offload device key says so (cpu is the
// plan's default, and none turns offload off).
func nvmeOnly(r *configReader, key string) string {
	if v, _, _ := r.str(key); v == "nvme" {
		return "nvme"
	}
	return ""
}

// isTrainerCommand tells a trainer's command line (accelerate launch,
// torchrun, python train.py, trl sft) carrying TrainingArguments flags.
func isTrainerCommand(words []string) bool {
	_, w := command(words)
	if len(w) == 0 {
		return false
	}
	switch {
	case w[0] == "accelerate" || w[0] == "torchrun" || w[0] == "deepspeed" || w[0] == "trl":
		return true
	case strings.HasPrefix(w[0], "python"):
		for _, x := range w {
			if strings.HasPrefix(x, "--per_device_train_batch_size") || strings.HasPrefix(x, "--model_name_or_path") {
				return true
			}
		}
	}
	return false
}

// entryPoint is where the trainer's own arguments start: after the module
// a launcher runs (accelerate launch … -m trl.scripts.grpo, python -m …,
// deepspeed --module …), the script (train.py), or the TRL CLI's command
// (trl sft); the launcher's flags come before it.
func entryPoint(w []string) int {
	for i, x := range w {
		switch {
		case (x == "-m" || x == "--module") && i+1 < len(w):
			return i + 2
		case strings.HasSuffix(x, ".py"):
			return i + 1
		case i > 0 && w[i-1] == "trl" && !strings.HasPrefix(x, "-"):
			return i + 1
		}
	}
	return 0
}

// argsTree reads a trainer's command line into its TrainingArguments
// (--key value): the launcher's own flags (accelerate's --num_processes,
// --config_file; torchrun's --nproc_per_node) are kept under "launch.".
func argsTree(words []string) (map[string]any, error) {
	_, w := command(words)
	start := entryPoint(w)
	flat := map[string]any{"launch.program": strings.Join(w[:start], " ")}
	launch, _ := flags(w[:start], normFlagKey)
	for k, v := range launch.vals {
		if k != "m" && k != "module" { // the module: in launch.program
			flat["launch."+k] = yaml.Scalar(v)
		}
	}
	args, _ := flags(w[start:], normFlagKey)
	for k, v := range args.vals {
		flat[k] = yaml.Scalar(v)
	}
	return unflatten(flat), nil
}

func normFlagKey(s string) string { return strings.ReplaceAll(s, "-", "_") }
