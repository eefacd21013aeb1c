package importer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// torchtitan's TOML job configs (pytorch/torchtitan @ 238fa99,
// torchtitan/config/job_config.py, "JC"): [model] name and flavor pick the
// architecture (llama3 8B/70B/405B are Llama 3.1's); [training]
// local_batch_size (8, JC:253) and seq_len (2048, JC:261, always packed),
// dtype (float32, JC:275) with mixed_precision_param bfloat16 (JC:282: FSDP2's
// param_dtype, autocast without sharding); [activation_checkpoint] mode
// (selective, JC:652), selective_ac_option ("2", JC:655) and early_stop
// (0.2.x's option: titanEarlyStop);
// [parallelism] data_parallel_shard_degree (-1: the GPUs left, JC:324),
// tensor/pipeline/context degrees; [compile] enable (JC:722) and
// components (titanCompile); converters
// ["float8"] with enable_fsdp_float8_all_gather (JC:731-752);
// [optimizer] implementation (fused, JC:151); enable_cpu_offload (JC:270).
// The configs after the 2026 refactor are Python functions:
// torchtitan_py.go.

var torchtitanIrrelevant = prefixes("job", "profiling", "metrics", "checkpoint", "comm", "lr_scheduler", "optimizer.lr",
	"optimizer.eps", "optimizer.beta", "optimizer.weight_decay", "training.steps", "training.max_norm", "training.dataset",
	"training.warmup_steps", "training.gc_freq", "training.seed", "training.deterministic", "model.hf_assets_path",
	"model.tokenizer_path", "validation", "experimental", "fault_tolerance", "memory_estimation", "float8.filter_fqns",
	"training.mixed_precision_reduce", "parallelism.disable_loss_parallel", "activation_checkpoint.memory_budget",
	"training.global_batch_size", "model.print_after_conversion", "quantize.linear.float8.emulate")

// torchtitanNGPU is run_train.sh's world when NGPU is not set
// (run_train.sh:28, NGPU=${NGPU:-"8"}).
const torchtitanNGPU = 8

// torchtitanModels maps [model] name and flavor to the catalog.
var torchtitanModels = map[string]string{
	"llama3/8B": "meta-llama/Llama-3.1-8B", "llama3/70B": "meta-llama/Llama-3.1-70B", "llama3/405B": "meta-llama/Llama-3.1-405B",
	"llama3/8B_flex": "meta-llama/Llama-3.1-8B", "llama3/8B_varlen": "meta-llama/Llama-3.1-8B",
	"qwen3/0.6B": "Qwen/Qwen3-0.6B", "qwen3/1.7B": "Qwen/Qwen3-1.7B", "qwen3/4B": "Qwen/Qwen3-4B", "qwen3/8B": "Qwen/Qwen3-8B",
	"qwen3/14B": "Qwen/Qwen3-14B", "qwen3/32B": "Qwen/Qwen3-32B", "qwen3/30B-A3B": "Qwen/Qwen3-30B-A3B",
	"qwen3/235B-A22B": "Qwen/Qwen3-235B-A22B", "deepseek_v3/671B": "deepseek-ai/DeepSeek-V3",
}

func importTorchtitan(r *configReader, opt Options) (trainerImport, error) {
	if r.has("_class") { // a Trainer.Config from a config_registry.py
		return importTorchtitanPy(r, opt)
	}
	if opt.Entry != "" {
		return trainerImport{}, fmt.Errorf("-config %s names a function of a torchtitan Python config (config_registry.py); this is a TOML job config", opt.Entry)
	}
	ti := trainerImport{t: vram.Training{Framework: vram.FrameworkTorchtitan, Optimizer: "adamw", OptimizerImpl: "fused", MicroBatch: 8, SeqLen: 2048, Checkpointing: vram.CheckpointSelective}}
	t := &ti.t
	name, _, _ := r.str("model.name")
	flavor, _, _ := r.str("model.flavor")
	key := orDefault(name, "llama3") + "/" + flavor
	ti.modelID = torchtitanModels[key]
	if ti.modelID == "" && opt.Model == "" {
		return ti, fmt.Errorf("[model] %s flavor %q is not in the importer's table; give -model (a catalog name or config.json)", orDefault(name, "llama3"), flavor)
	}
	if strings.Contains(flavor, "flex") || strings.Contains(flavor, "varlen") {
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("model.flavor = %s: flex / varlen attention is estimated as SDPA", flavor))
	}
	r.mapped("[model] %s %s → %s", orDefault(name, "llama3"), flavor, orDefault(ti.modelID, "(from -model)"))
	for _, step := range []func(*configReader, *vram.Training) error{titanTraining, titanCheckpointing} {
		if err := step(r, t); err != nil {
			return ti, err
		}
	}
	if err := titanParallel(r, t, opt); err != nil {
		return ti, err
	}
	if err := titanLowPrecision(r, t); err != nil {
		return ti, err
	}
	r.finish(torchtitanIrrelevant)
	return ti, nil
}

func titanTraining(r *configReader, t *vram.Training) error {
	for _, key := range []string{"training.local_batch_size", "training.batch_size"} {
		if n, ok, err := r.int(key, 1, vram.MaxTokens); err != nil {
			return err
		} else if ok {
			t.MicroBatch = n
		}
	}
	if err := r.intInto(&t.SeqLen, "training.seq_len", 1, vram.MaxTokens); err != nil {
		return err
	}
	r.mapped("local_batch_size %d × seq_len %d (packed) → micro_batch %d, seq_len %d", t.MicroBatch, t.SeqLen, t.MicroBatch, t.SeqLen)
	if err := titanDTypes(r, t); err != nil {
		return err
	}
	if _, err := titanOptimizerImpl(r, t); err != nil {
		return err
	}
	if o, _, _ := r.str("optimizer.name"); o != "" && o != "AdamW" && o != "Adam" {
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("optimizer.name = %s: estimated with AdamW's states", o))
	}
	if e, _, err := r.bool("optimizer.early_step_in_backward"); err != nil {
		return err
	} else if e {
		t.OptimizerInBackward = true
	}
	return titanCompile(r, t)
}

// titanDTypes reads training.dtype (float32: JC:275, CFG:87) and
// mixed_precision_param (bfloat16: JC:282, CFG:94), in the TOML and the
// Python configs alike: storage and compute.
func titanDTypes(r *configReader, t *vram.Training) error {
	dtype, _, err := r.str("training.dtype")
	if err != nil {
		return err
	}
	param, _, err := r.str("training.mixed_precision_param")
	if err != nil {
		return err
	}
	switch {
	case dtype == "bfloat16":
		t.Precision = "bf16"
	case param == "float32":
		t.Precision = "fp32"
	default:
		t.Precision, t.ComputeDType = "fp32", vram.BF16
	}
	r.mapped("dtype %s, mixed_precision_param %s → %s storage, %s compute", orDefault(dtype, "float32"), orDefault(param, "bfloat16"),
		map[bool]string{true: "bf16", false: "fp32"}[t.Precision == "bf16"], map[bool]string{true: "fp32", false: "bf16"}[param == "float32" && dtype != "bfloat16"])
	return nil
}

// titanOptimizerImpl reads optimizer.implementation (fused by default,
// JC:151; b5bcd76c's optimizer.py:109-125 adds fused_opt_states_bf16, whose
// exp_avg and exp_avg_sq are made in bf16, :241-242), in the TOML and the
// Python configs alike.
func titanOptimizerImpl(r *configReader, t *vram.Training) (string, error) {
	impl, _, err := r.str("optimizer.implementation")
	if err != nil {
		return "", err
	}
	switch impl {
	case "", "fused":
	case "fused_opt_states_bf16":
		t.OptimizerStateDType = vram.BF16
	case "foreach":
		t.OptimizerImpl = "foreach"
	case "for-loop":
		t.OptimizerImpl = "for_loop"
	default:
		return "", fmt.Errorf("optimizer.implementation %q: want for-loop, foreach, fused or fused_opt_states_bf16", impl)
	}
	return orDefault(impl, "fused"), nil
}

// titanCompile reads [compile] enable and components (["model", "loss"]
// by default, since 08b8b244f, 2025-08-20) or the older training.compile,
// which compiled the blocks and, except from e8977b007 (2024-12-18) to
// bbb1b616e (2025-04-02), the loss.
func titanCompile(r *configReader, t *vram.Training) error {
	if c, _, err := r.bool("training.compile"); err != nil {
		return err
	} else if c {
		t.Compile = true
		r.mapped("training.compile → the blocks and the loss compiled (torchtitan ran its loss eager from 2024-12-18 to 2025-04-02: for such a run set compile_loss false)")
	}
	on, _, err := r.bool("compile.enable")
	if err != nil || !on {
		r.ignore("compile.components")
		return err
	}
	parts, given, err := r.list("compile.components")
	if err != nil {
		return err
	}
	if !given {
		parts = []string{"model", "loss"}
	}
	model, loss := false, false
	for _, p := range parts {
		switch p {
		case "model":
			model = true
		case "loss":
			loss = true
		default:
			return fmt.Errorf("compile.components: unknown component %q; torchtitan compiles \"model\" and \"loss\"", p)
		}
	}
	t.Compile = model
	if loss != model {
		t.CompileLoss = &loss
	}
	r.mapped("compile.components %v → blocks compiled %v, loss compiled %v", parts, model, loss)
	return nil
}

func titanCheckpointing(r *configReader, t *vram.Training) error {
	mode, _, err := r.str("activation_checkpoint.mode")
	if err != nil {
		return err
	}
	switch mode {
	case "", "selective":
		t.Checkpointing = vram.CheckpointSelective
		opt, _, err := r.str("activation_checkpoint.selective_ac_option")
		if err != nil {
			return err
		}
		t.SelectiveACOption = opt
	case "full", "none":
		t.Checkpointing = vram.Checkpointing(mode)
		r.ignore("activation_checkpoint.selective_ac_option") // read only by selective (JC:655)
	default:
		return fmt.Errorf("activation_checkpoint.mode %q is not modelled (full, selective and none are)", mode)
	}
	r.mapped("activation_checkpoint %s%s", orDefault(mode, "selective (default)"), map[bool]string{true: " " + t.SelectiveACOption}[t.SelectiveACOption != ""])
	return titanEarlyStop(r, t)
}

// titanEarlyStop reads activation_checkpoint.early_stop, an option of
// torchtitan 0.2.x only (v0.2.0 job_config.py:611, default false; 0.3.0
// hard-codes it off and has no TOML configs): a config that sets it runs
// 0.2.x, modelled as 0.2.2, its last release (vram/torchtitan_releases.go).
func titanEarlyStop(r *configReader, t *vram.Training) error {
	v, ok, err := r.bool("activation_checkpoint.early_stop")
	if err != nil || !ok {
		return err
	}
	t.CheckpointEarlyStop, t.Torchtitan = &v, "0.2.2"
	r.mapped("activation_checkpoint.early_stop %v → checkpoint_early_stop %v, torchtitan 0.2.2 (the option is 0.2.x's)", v, v)
	return nil
}

func titanLowPrecision(r *configReader, t *vram.Training) error {
	conv, _, err := r.list("model.converters")
	if err != nil {
		return err
	}
	float8 := false
	for _, c := range conv {
		switch c {
		case "float8":
			float8 = true
		default:
			r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("model.converters %s: not modelled", c))
		}
	}
	// The Float8Linear section is [quantize.linear.float8] at 238fa99
	// (JC:731) and [float8] before it; read only with the converter.
	sec := "quantize.linear.float8."
	if !r.hasPrefix(sec) && r.hasPrefix("float8.") {
		sec = "float8."
	}
	if !float8 {
		r.ignorePrefix(sec)
		return nil
	}
	t.Float8 = "tensorwise"
	rec, _, err := r.str(sec + "recipe_name")
	if err != nil {
		return err
	}
	switch rec {
	case "", "tensorwise":
	case "rowwise":
		t.Float8 = "rowwise"
	default:
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("%srecipe_name = %s: estimated as rowwise", sec, rec))
		t.Float8 = "rowwise"
	}
	ag, _, err := r.bool(sec + "enable_fsdp_float8_all_gather")
	if err != nil {
		return err
	}
	t.Float8AllGather = ag && t.Float8 == "tensorwise" && t.Parallel.ShardDegree > 1
	r.get(sec + "precompute_float8_dynamic_scale_for_fsdp") // scales only: no memory
	filter, _, err := r.list(sec + "filter_fqns")
	if err != nil {
		return err
	}
	// float8.go keeps the output projection in bf16, as filter_fqns
	// ["output"] does; torchao's module_filter_fn converts it otherwise.
	if !slices.Contains(filter, "output") {
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("%sfilter_fqns = %v: the output projection is estimated in bf16, as [\"output\"] keeps it", sec, filter))
	}
	r.mapped("converters float8 → float8 %s%s", t.Float8, map[bool]string{true: ", all-gathered in float8"}[t.Float8AllGather])
	return nil
}

// titanParallel: the degrees, the shard degree from the launch's GPUs
// where it is -1, and FSDP2 whenever it shards.
func titanParallel(r *configReader, t *vram.Training, opt Options) error {
	p := &t.Parallel
	var err error
	for key, dst := range map[string]*int{"parallelism.tensor_parallel_degree": &p.TP, "parallelism.pipeline_parallel_degree": &p.PP,
		"parallelism.context_parallel_degree": &p.CP, "parallelism.expert_parallel_degree": &p.EP} {
		if *dst, _, err = r.int(key, 1, 1<<16); err != nil {
			return err
		}
	}
	rep := 1
	if err := r.intInto(&rep, "parallelism.data_parallel_replicate_degree", 1, 1<<16); err != nil {
		return err
	}
	shard, ok, err := r.int("parallelism.data_parallel_shard_degree", -1, 1<<16)
	if err != nil {
		return err
	}
	if !ok || shard == -1 {
		world := opt.GPUs
		if world == 0 {
			world = torchtitanNGPU
			r.imp.Assumed = append(r.imp.Assumed, fmt.Sprintf("%d GPUs, run_train.sh's NGPU (give -gpus for the launch's world)", world))
		}
		rest := max(1, p.TP) * max(1, p.PP) * max(1, p.CP) * rep
		if world%rest != 0 {
			return fmt.Errorf("data_parallel_shard_degree -1 on %d GPUs: the world is not a multiple of replicate %d × TP %d × PP %d × CP %d", world, rep, max(1, p.TP), max(1, p.PP), max(1, p.CP))
		}
		shard = world / rest
	}
	p.DP = shard * rep
	if shard > 1 {
		p.FSDP, p.ZeRO, p.FSDPVersion, p.ShardDegree = "full_shard", 3, 2, shard
		if rep > 1 {
			p.FSDP = "hybrid"
		}
	}
	if ra, ok, _ := r.str("parallelism.fsdp_reshard_after_forward"); ok && ra != "default" && shard > 1 {
		b := ra == "always"
		p.ReshardAfterForward = &b
	}
	if a, _, err := r.bool("parallelism.enable_async_tensor_parallel"); err != nil {
		return err
	} else if a {
		p.AsyncTP = true
	}
	if mb, ok, err := r.int("parallelism.pipeline_parallel_microbatch_size", 1, vram.MaxTokens); err != nil {
		return err
	} else if ok && p.PP > 1 {
		p.PPMicrobatches = max(1, t.MicroBatch/mb)
	}
	if s, ok, _ := r.str("parallelism.pipeline_parallel_schedule"); ok && p.PP > 1 {
		// torchtitan names the torch.distributed.pipelining classes.
		sched, known := map[string]vram.Schedule{"1F1B": vram.Schedule1F1B, "Interleaved1F1B": vram.ScheduleInterleaved1F1B, "GPipe": vram.ScheduleGPipe,
			"ZBVZeroBubble": vram.ScheduleZBV, "InterleavedZeroBubble": vram.ScheduleInterleavedZB, "DualPipeV": vram.ScheduleDualPipeV}[s]
		if !known {
			return fmt.Errorf("parallelism.pipeline_parallel_schedule %q is not modelled", s)
		}
		p.PPSchedule = sched
	}
	if off, _, err := r.bool("training.enable_cpu_offload"); err != nil {
		return err
	} else if off {
		p.CPUOffload = "optimizer+params"
	}
	r.mapped("parallelism: shard %d × replicate %d, TP %d, PP %d, CP %d", shard, rep, max(1, p.TP), max(1, p.PP), max(1, p.CP))
	return nil
}
