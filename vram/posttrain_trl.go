package vram

import (
	"errors"
	"fmt"
)

// TRL's post-training trainers as release 1.10.0 runs them (GRPOTrainer,
// RLOOTrainer, DPOTrainer; trl/trainer/*, trl/generation/vllm_generation.py).
// Each rank runs its own vLLM engine in the trainer's process
// (distributed_executor_backend="external_launcher"), so the engine shares
// the trainer's CUDA context; without sleep mode it keeps its weights and
// KV cache through the training step, and PyTorch's cache keeps the
// training step's high-water mark through the generation (no
// torch.cuda.empty_cache outside the sleep-mode path).
func init() {
	registerRLFramework(rlFramework{name: "trl", release: "1.10.0", resolve: trlResolve, lossOf: trlLoss, phases: trlPhases})
}

func trlResolve(pt *PostTraining) error {
	t := &pt.Policy
	if t.MicroBatch == 0 {
		t.MicroBatch = 8 // per_device_train_batch_size (transformers training_args.py l.861)
	}
	if t.Checkpointing == "" {
		t.Checkpointing = CheckpointFull // gradient_checkpointing=True (trl/trainer/base_config.py l.61-62)
	}
	if t.Precision == "" && t.WeightsDType == DTypeUnset {
		// A model named by its id loads in float32 unless model_init_kwargs
		// gives a dtype (trainer/utils.py l.1144-1154), and bf16=True
		// (base_config.py l.67-68) runs it under autocast.
		t.Precision = "amp_bf16"
	}
	if t.Framework == "" {
		t.Framework = FrameworkHFTrainer // the trainers are transformers' Trainer
	}
	switch pt.Algorithm {
	case "ppo":
		return errors.New("TRL's PPOTrainer lives in trl.experimental.ppo and generates with transformers' generate keeping every step's scores; it is not modelled: plan PPO with verl")
	case "grpo":
		if pt.Generations == 0 {
			pt.Generations = 8 // num_generations (grpo_config.py l.474-475)
		}
	case "rloo":
		if pt.Generations == 0 {
			pt.Generations = 2 // num_generations (rloo_config.py l.297-298)
		}
	}
	if pt.Algorithm != "dpo" && pt.Generations < 2 {
		return fmt.Errorf("generations_per_prompt (num_generations) must be at least 2 for %s, got %d (grpo_config.py __post_init__)", pt.Algorithm, pt.Generations)
	}
	if pt.Reference == "" {
		pt.Reference = trlReference(*pt)
	}
	if pt.PackedLen != 0 {
		return errors.New("packed_len: TRL 1.10.0's GRPO and RLOO pad their batches, and DPO turns padding_free off (dpo_trainer.py l.706-713)")
	}
	if pt.ParamOffload || pt.OptimizerOffload || pt.LogProbMicroBatch != 0 && pt.Reference != "precomputed" {
		return errors.New("param_offload, optimizer_offload and log_prob_micro_batch are verl's settings; TRL's no-grad passes run in chunks of per_device_train_batch_size (but DPO's precompute pass: log_prob_micro_batch is its precompute_ref_batch_size), and offload is the policy's parallel.cpu_offload (DeepSpeed, FSDP)")
	}
	if ro := pt.Rollout; ro != nil {
		return trlRollout(pt, ro)
	}
	return nil
}

// trlReference is the reference TRL builds: none when beta is 0 (GRPO's
// default, grpo_config.py l.671-677), the policy with its adapter
// disabled under PEFT, else a second model (grpo_trainer.py l.953-971;
// RLOO's beta 0.05, rloo_config.py l.494-495; DPO's dpo_trainer.py
// l.892-910).
func trlReference(pt PostTraining) string {
	switch {
	case pt.Algorithm == "grpo":
		return "none"
	case pt.Policy.LoRA != nil:
		return "adapter"
	}
	return "model"
}

func trlRollout(pt *PostTraining, ro *Rollout) error {
	switch ro.Engine {
	case "sglang":
		return errors.New("rollout.engine sglang: TRL generates with vLLM (use_vllm) or transformers' generate")
	case "generate":
		return nil
	}
	if ro.GPUMemoryUtilization == 0 {
		ro.GPUMemoryUtilization = 0.3 // vllm_gpu_memory_utilization in colocate mode (grpo_config.py l.646-647)
	}
	if ro.Sleep == "" {
		ro.Sleep = SleepNone // vllm_enable_sleep_mode=False (grpo_config.py l.602-603)
	}
	if ro.Sleep == SleepLevel1 {
		return errors.New("rollout.sleep level1: TRL's vllm_enable_sleep_mode puts the engine to sleep at level 2 (vllm_generation.py l.369-370, l.701-702)")
	}
	if ro.TP == 0 {
		ro.TP = 1 // vllm_tensor_parallel_size
	}
	if dp := max(1, pt.Policy.Parallel.DP); dp%ro.TP != 0 {
		return fmt.Errorf("rollout.tensor_parallel_size %d must divide the world size %d (vllm_generation.py l.318-332)", ro.TP, dp)
	}
	steps := max(1, pt.Policy.GradAccum) // steps_per_generation = gradient_accumulation_steps
	if ro.MaxNumSeqs == 0 {
		ro.MaxNumSeqs = pt.Policy.MicroBatch * ro.TP * steps // grpo_trainer.py l.1091-1093
	}
	if ro.MaxNumBatchedTokens == 0 {
		ro.MaxNumBatchedTokens = 4096 // vllm_generation.py l.351-368
	}
	return nil
}

// trlLoss: GRPO and RLOO keep the completion's logits, divide them by the
// temperature into a copy and compute entropies in the training pass
// (grpo_trainer.py l.1499-1533, l.3001-3006); DPO computes every
// position's logits for chosen and rejected and their entropy for the
// logs (dpo_trainer.py l.1340-1348, l.1587). Accelerate converts the
// outputs of a bf16-autocast model to fp32 unless DeepSpeed runs it.
func trlLoss(pt PostTraining) LogProbLoss {
	fp32 := pt.Policy.Precision == "amp_bf16" || pt.Policy.Precision == "amp_fp16"
	fp32 = fp32 && pt.Policy.Parallel.ZeRO == 0
	if pt.Algorithm == "dpo" {
		return LogProbLoss{LogitsFP32: fp32, Entropy: true}
	}
	return LogProbLoss{Tokens: pt.CompletionLen, LogitsFP32: fp32, TemperatureCopy: true, Entropy: true}
}

// trlPhases is one GRPO/RLOO step (sync, generate, no-grad passes, the
// steps_per_generation micro-steps and the optimizer step) or one DPO
// step.
func trlPhases(run *rlRun) {
	if run.pt.Algorithm == "dpo" {
		trlDPO(run)
		return
	}
	ro := run.pt.Rollout
	resident, host := run.residentParts(false, false)
	var atStart Bytes
	for _, p := range resident {
		atStart = addBytes(atStart, p.Bytes)
	}
	if ro.Engine == "generate" {
		trlGenerate(run, resident, host)
		return
	}
	if ro.Placement == "separate" {
		trlServer(run, resident, host)
		return
	}
	if err := run.engineAt(atStart, ro.Sleep); err != nil {
		run.est.Starts, run.est.Err = false, err.Error()
		return
	}
	sleeping := ro.Sleep != SleepNone
	run.engineInTorch = !sleeping
	if !sleeping {
		run.est.Notes = append(run.est.Notes, "vLLM runs in the trainer's process without sleep mode (vllm_enable_sleep_mode=False): its weights and KV cache are PyTorch allocations, so allocated and reserved count them; the engine column shows them apart and device counts them once")
	}
	// With sleep mode, sync_weights empties the cache and wakes the
	// weights (vllm_generation.py l.452-454); generate wakes the KV cache
	// (l.655-656) and puts the engine back to sleep after (l.701-702).
	reserved := run.carry
	if sleeping {
		reserved = 0
	}
	eng, eparts := run.engineWith(engineAwake)
	if sleeping {
		eng, eparts = run.engineWith(engineWeightsOnly)
	}
	sync := append(append([]PhasePart(nil), resident...), PhasePart{"weight sync: gathered parameters", trlSyncGather(run), HolderPass})
	run.phase("weight sync", true, sync, reserved, eng, host, eparts)
	eng, eparts = run.engineWith(engineGenerating)
	run.phase("generation", false, resident, reserved, eng, host, eparts)
	asleep, aparts := run.engineWith(engineAsleep)
	pass, err := run.logProbPass(run.pt.Policy.MicroBatch)
	if err != nil {
		run.est.Starts, run.est.Err = false, err.Error()
		return
	}
	// Old log-probs: always with vLLM's importance-sampling correction on
	// (vllm_importance_sampling_correction=True, grpo_trainer.py
	// l.2561-2576).
	lp := append(append([]PhasePart(nil), resident...), PhasePart{"no-grad pass: activations and logits", pass, HolderPass})
	run.phase("old log-probs", false, lp, reserved, asleep, host, aparts)
	if run.pt.Reference != "none" {
		run.phase("reference log-probs", false, lp, reserved, asleep, host, aparts)
	}
	trlTrain(run, asleep, aparts, host)
}

// trlServer is GRPO with vLLM on GPUs of its own (vllm_mode "server",
// `trl vllm-serve`): the trainer's GPUs hold no engine; the sync pushes
// each parameter through vllm_client.update_named_param
// (vllm_generation.py l.389-390).
func trlServer(run *rlRun, resident []PhasePart, host Bytes) {
	run.est.Notes = append(run.est.Notes, "vLLM runs on GPUs of its own (vllm_mode server): plan those as a serving plan (`trl vllm-serve` takes gpu_memory_utilization 0.9 by default, scripts/vllm_serve.py)")
	sync := append(append([]PhasePart(nil), resident...), PhasePart{"weight sync: gathered parameters", trlSyncGather(run), HolderPass})
	run.phase("weight sync", true, sync, run.carry, 0, host, nil)
	run.phase("generation", false, resident, run.carry, 0, host, nil)
	pass, err := run.logProbPass(run.pt.Policy.MicroBatch)
	if err != nil {
		run.est.Starts, run.est.Err = false, err.Error()
		return
	}
	lp := append(append([]PhasePart(nil), resident...), PhasePart{"no-grad pass: activations and logits", pass, HolderPass})
	run.phase("old log-probs", false, lp, run.carry, 0, host, nil)
	if run.pt.Reference != "none" {
		run.phase("reference log-probs", false, lp, run.carry, 0, host, nil)
	}
	trlTrain(run, 0, nil, host)
}

// trlSyncGather is what the weight sync gathers on a rank beside its
// shard: under ZeRO-3 with PEFT the whole model at once (one
// gather_params over every parameter), without PEFT one parameter at a
// time (vllm_generation.py l.459-495); FSDP2 one parameter's
// full_tensor (l.417-435); unsharded weights nothing.
func trlSyncGather(run *rlRun) Bytes {
	t := run.pt.Policy
	sharded := t.Parallel.ZeRO == 3 || t.Parallel.FSDP != "" && t.Parallel.FSDP != "none"
	switch {
	case !sharded:
		return 0
	case t.LoRA != nil && t.Parallel.ZeRO == 3:
		return max(0, run.fullWeights()-run.resident.Parameters)
	}
	return run.largestParam
}

// fullWeights is the whole policy in the trainer's weights dtype.
func (run *rlRun) fullWeights() Bytes {
	t, _ := run.pt.trainingStep()
	r, err := t.resolve()
	if err != nil {
		return 0
	}
	return r.WeightsDType.Size(r.m.ParamCount())
}

// trlTrain is the training step: the replay's peaks with the reference
// model and the engine beside them.
func trlTrain(run *rlRun, engine Bytes, eparts []PhasePart, host Bytes) {
	step := []PhasePart{{"training step (allocated peak)", run.step.Peak.Total(), HolderTrainer}, {"cuBLAS workspace", run.replay.Workspace, HolderPass}}
	if run.reference > 0 {
		step = append(step, PhasePart{"reference model", run.reference, HolderReference})
	}
	run.phase("training step", false, step, addBytes(run.replay.PeakReserved, run.reference), engine, host, eparts)
}

// trlGenerate is GRPO with transformers' generate: the whole local
// generation batch (per_device_train_batch_size × steps_per_generation
// rows) in one generate call (grpo_trainer.py l.1850-1863).
func trlGenerate(run *rlRun, resident []PhasePart, host Bytes) {
	t := run.pt.Policy
	step, _ := run.pt.trainingStep()
	r, err := step.resolve()
	if err != nil {
		run.est.Starts, run.est.Err = false, err.Error()
		return
	}
	// generate runs the policy as it is stored (under autocast its matmuls
	// run in bf16: the estimate keeps the stored dtype, an upper bound).
	in := Inference{Model: t.Model, Batch: t.MicroBatch * max(1, t.GradAccum), PromptTokens: run.pt.PromptLen, NewTokens: run.pt.CompletionLen,
		Weights: Quant{DType: r.WeightsDType}, UnquantizedDType: r.WeightsDType, LogitsFP32: true}
	e, err := in.Estimate()
	if err != nil {
		run.est.Starts, run.est.Err = false, fmt.Sprintf("generation: %v", err)
		return
	}
	gen := append(append([]PhasePart(nil), resident...), PhasePart{"generate: KV cache", e.Peak.KVCache, HolderPass}, PhasePart{"generate: activations and logits", e.Peak.Temporaries, HolderPass})
	run.phase("generation", false, gen, run.carry, 0, host, nil)
	pass, err := run.logProbPass(t.MicroBatch)
	if err != nil {
		run.est.Starts, run.est.Err = false, err.Error()
		return
	}
	if run.pt.Reference != "none" {
		lp := append(append([]PhasePart(nil), resident...), PhasePart{"no-grad pass: activations and logits", pass, HolderPass})
		run.phase("reference log-probs", false, lp, run.carry, 0, host, nil)
	}
	trlTrain(run, 0, nil, host)
}

// trlDPO is a DPO step. The reference's no-grad pass over the
// concatenated chosen and rejected rows runs inside compute_loss, after the
// policy's forward and before its backward, so it stacks on what the
// policy's forward holds (dpo_trainer.py _compute_loss l.1359-1424); with
// precompute_ref_log_probs the pass runs once before training, on the
// policy with its adapter off (l.1107-1176, compute_ref_log_probs
// l.1208-1249), and the step holds no reference.
func trlDPO(run *rlRun) {
	_, host := run.residentParts(false, false)
	t, _ := run.pt.trainingStep()
	rows := t.MicroBatch
	if run.pt.Reference == "precomputed" && run.pt.LogProbMicroBatch > 0 {
		rows = 2 * run.pt.LogProbMicroBatch // precompute_ref_batch_size pairs (dpo_trainer.py l.989)
	}
	pass, err := run.logProbPass(rows)
	if err != nil {
		run.est.Starts, run.est.Err = false, err.Error()
		return
	}
	if run.pt.Reference == "precomputed" {
		// Before training: the policy's parameters, no optimizer states yet.
		lp := []PhasePart{{"policy parameters", run.resident.Parameters, HolderTrainer}, {"no-grad pass: activations and logits", pass, HolderPass}}
		run.phase("precompute reference log-probs (before training)", false, lp, 0, 0, host, nil)
		trlTrain(run, 0, nil, host)
		return
	}
	inside := []PhasePart{{"the policy's forward, held for its backward", run.step.AfterForward.Total(), HolderTrainer},
		{"reference no-grad pass: activations and logits", pass, HolderPass}}
	if run.reference > 0 {
		inside = append(inside, PhasePart{"reference model", run.reference, HolderReference})
	}
	var at Bytes
	for _, q := range inside {
		at = addBytes(at, q.Bytes)
	}
	if at <= run.step.Peak.Total()+run.reference {
		trlTrain(run, 0, nil, host)
		return
	}
	inside = append(inside, PhasePart{"cuBLAS workspace", run.replay.Workspace, HolderPass})
	run.phase("training step", false, inside, addBytes(run.replay.PeakReserved, run.reference), 0, host, nil)
}
