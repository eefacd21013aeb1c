package importer

import (
	"fmt"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// accelerate's config YAML (`accelerate config`'s file, given to
// `accelerate launch --config_file`): distributed_type NO, MULTI_GPU
// (DDP), FSDP or DEEPSPEED over num_processes; fsdp_config as
// FullyShardedDataParallelPlugin reads it (huggingface/accelerate @
// 16cb6eb, src/accelerate/utils/dataclasses.py:1820-1880: fsdp_version 1
// unless set; FSDP1's fsdp_sharding_strategy FULL_SHARD by default, one of
// constants.py:38 FSDP_SHARDING_STRATEGY or its 1-based number; FSDP2's
// fsdp_reshard_after_forward true by default; fsdp_offload_params false);
// deepspeed_config's zero_stage, offload_*_device or a
// deepspeed_config_file; mixed_precision where the trainer's own flags do
// not set it.

var accelerateIrrelevant = prefixes("compute_environment", "debug", "machine_rank", "main_training_function", "num_machines",
	"rdzv_backend", "same_network", "tpu_", "use_cpu", "gpu_ids", "enable_cpu_affinity", "downcast_bf16", "main_process_",
	"fsdp_config.fsdp_auto_wrap_policy", "fsdp_config.fsdp_backward_prefetch", "fsdp_config.fsdp_forward_prefetch",
	"fsdp_config.fsdp_cpu_ram_efficient_loading", "fsdp_config.fsdp_state_dict_type", "fsdp_config.fsdp_sync_module_states",
	"fsdp_config.fsdp_use_orig_params", "fsdp_config.fsdp_transformer_layer_cls_to_wrap", "deepspeed_config.zero3_init_flag",
	"deepspeed_config.zero3_save_16bit_model", "deepspeed_config.deepspeed_multinode_launcher", "dynamo_config")

// accelerateShard maps FSDP1's sharding strategies to the plan's.
var accelerateShard = map[string]string{"FULL_SHARD": "full_shard", "1": "full_shard", "SHARD_GRAD_OP": "shard_grad_op",
	"2": "shard_grad_op", "NO_SHARD": "none", "3": "none", "HYBRID_SHARD": "hybrid", "4": "hybrid"}

// readAccelerate reads an accelerate config into t's parallel settings:
// the world size and the sharding. It reports the mixed_precision it
// names ("" for none).
func readAccelerate(r *configReader, t *vram.Training, opt Options) (string, error) {
	n, ok, err := r.int("num_processes", 1, 1<<16)
	if err != nil {
		return "", err
	}
	world := 1
	if ok {
		world = n
	}
	if opt.GPUs > 0 {
		world = opt.GPUs
	}
	dist, _, err := r.str("distributed_type")
	if err != nil {
		return "", err
	}
	p := &t.Parallel
	p.DP = world
	switch strings.ToUpper(dist) {
	case "", "NO":
		// accelerate launch runs one process (simple_launcher) whatever
		// num_processes says (commands/launch.py launch_command).
		p.DP = 1
		r.mapped("distributed_type NO → one process on one GPU (num_processes is not used)")
	case "MULTI_GPU":
		r.mapped("distributed_type MULTI_GPU, num_processes %d → data parallel %d (DDP)", world, world)
	case "FSDP":
		if err := accelerateFSDP(r, t); err != nil {
			return "", err
		}
		r.mapped("distributed_type FSDP (version %d, %s), num_processes %d → sharded over %d", p.FSDPVersion, p.FSDP, world, world)
	case "DEEPSPEED":
		if err := accelerateDeepSpeed(r, t, opt); err != nil {
			return "", err
		}
		r.mapped("distributed_type DEEPSPEED, num_processes %d → data parallel %d", world, world)
	default:
		return "", fmt.Errorf("distributed_type %q is not modelled (NO, MULTI_GPU, FSDP and DEEPSPEED are)", dist)
	}
	mp, _, err := r.str("mixed_precision")
	if err != nil {
		return "", err
	}
	r.finish(accelerateIrrelevant)
	return strings.ToLower(mp), nil
}

func accelerateFSDP(r *configReader, t *vram.Training) error {
	p := &t.Parallel
	v, ok, err := r.int("fsdp_config.fsdp_version", 1, 2)
	if err != nil {
		return err
	}
	p.FSDPVersion, p.FSDP, p.ZeRO = 1, "full_shard", 3
	if ok {
		p.FSDPVersion = v
	}
	strategy, _, err := r.str("fsdp_config.fsdp_sharding_strategy")
	if err != nil {
		return err
	}
	raf, hasRAF := r.flat["fsdp_config.fsdp_reshard_after_forward"]
	r.used["fsdp_config.fsdp_reshard_after_forward"] = true
	if p.FSDPVersion == 1 {
		if strategy == "" && hasRAF {
			strategy = fmt.Sprint(raf) // FSDP1 reads a strategy name here
		}
		if err := accelerateStrategy(t, strategy); err != nil {
			return err
		}
	} else if hasRAF {
		b, ok := raf.(bool)
		if !ok {
			return fmt.Errorf("fsdp_config.fsdp_reshard_after_forward = %v: FSDP2 takes true or false", raf)
		}
		p.ReshardAfterForward = &b
	}
	off, _, err := r.bool("fsdp_config.fsdp_offload_params")
	if err != nil {
		return err
	}
	if off {
		p.CPUOffload = "optimizer+params"
		r.mapped("fsdp_offload_params true → parameters, gradients and optimizer states on the CPU")
	}
	ac, _, err := r.bool("fsdp_config.fsdp_activation_checkpointing")
	if err != nil {
		return err
	}
	if ac {
		t.Checkpointing = vram.CheckpointFull
		r.mapped("fsdp_activation_checkpointing true → full checkpointing of every block")
	}
	return nil
}

func accelerateStrategy(t *vram.Training, strategy string) error {
	p := &t.Parallel
	s, ok := accelerateShard[strings.ToUpper(orDefault(strategy, "FULL_SHARD"))]
	if !ok {
		return fmt.Errorf("fsdp_config.fsdp_sharding_strategy %q: want one of FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD (or 1-4)", strategy)
	}
	switch s {
	case "none":
		p.FSDP, p.ZeRO = "", 0
	case "shard_grad_op":
		p.FSDP, p.ZeRO = s, 2
	default:
		p.FSDP = s
	}
	return nil
}

// accelerateDeepSpeed reads deepspeed_config: the JSON it names, else its
// own zero_stage and offload devices (accelerate's DeepSpeedPlugin).
func accelerateDeepSpeed(r *configReader, t *vram.Training, opt Options) error {
	if r.has("deepspeed_config.deepspeed_config_file") {
		return readDeepSpeed(r, "deepspeed_config.deepspeed_config_file", t, opt)
	}
	stage, ok, err := r.int("deepspeed_config.zero_stage", 0, 3)
	if err != nil {
		return err
	}
	if !ok {
		stage = 2 // DeepSpeedPlugin's zero_stage default (dataclasses.py)
	}
	t.Parallel.ZeRO = stage
	offOpt, _, _ := r.str("deepspeed_config.offload_optimizer_device")
	offParam, _, _ := r.str("deepspeed_config.offload_param_device")
	t.Parallel.CPUOffload = deepSpeedOffload(offOpt, offParam)
	if offParam == "nvme" || offOpt == "nvme" {
		// ZeRO-Infinity (nvme.go), with DeepSpeed's defaults for the rest.
		ds := vram.DeepSpeed{OffloadOptimizerDevice: nvmeOnly(r, "deepspeed_config.offload_optimizer_device"), OffloadParamDevice: nvmeOnly(r, "deepspeed_config.offload_param_device")}
		t.Parallel.DeepSpeed = &ds
	}
	r.mapped("deepspeed_config → ZeRO stage %d%s", stage, map[bool]string{true: ", offload " + t.Parallel.CPUOffload}[t.Parallel.CPUOffload != ""])
	return nil
}

// deepSpeedOffload is the plan's offload for DeepSpeed's devices.
func deepSpeedOffload(optimizer, param string) string {
	switch {
	case param == "cpu" || param == "nvme":
		return "optimizer+params"
	case optimizer == "cpu" || optimizer == "nvme":
		return "optimizer"
	}
	return ""
}

// acceleratePrecision is the plan's precision for accelerate's
// mixed_precision (autocast over fp32 weights).
func acceleratePrecision(mp string) (string, bool) {
	switch mp {
	case "bf16":
		return "amp_bf16", true
	case "fp16":
		return "amp_fp16", true
	case "no", "":
		return "fp32", true
	}
	return "", false
}
