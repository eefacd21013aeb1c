package vram

import (
	"errors"
	"fmt"
)

// verl's hybrid engine with FSDP as its HEAD of 2026-01-29 (b178a3cd) runs
// it: the rollout server is a process of its own on each GPU
// (vllm_async_server.py l.268, distributed_executor_backend "mp"), so it
// has its own CUDA context; after generating it sleeps at level 2
// (l.567-569, free_cache_engine); the trainer's FSDP shards and AdamW
// states stay on the GPU unless param_offload / optimizer_offload move them
// between uses; the reference model is always FSDP-CPU-offloaded
// (fsdp_workers.py l.524-526); and rollout_mode empties the cache, wakes the
// weights, sends them in a 2 GiB bucket, empties the cache again and wakes
// the KV cache (fsdp_workers.py l.679-752).
func init() {
	registerRLFramework(rlFramework{name: "verl", release: "b178a3cd", resolve: verlResolve, lossOf: verlLoss, phases: verlPhases})
}

// verlBucket is update_weights_bucket_megabytes (rollout.yaml l.265).
const verlBucket = 2048 * MiB

func verlResolve(pt *PostTraining) error {
	t := &pt.Policy
	if t.MicroBatch == 0 {
		return errors.New("policy.micro_batch: actor.ppo_micro_batch_size_per_gpu is null by default and verl requires it unless use_dynamic_bsz (workers/config/actor.py l.186-188)")
	}
	switch {
	case pt.Algorithm == "dpo":
		return errors.New("algorithm dpo: verl trains with rewards (main_ppo); plan DPO with TRL")
	case pt.Algorithm == "ppo" && pt.Critic == nil:
		return errors.New("critic.micro_batch: PPO's critic trains beside the policy (adv_estimator gae), and verl requires critic.ppo_micro_batch_size_per_gpu (null by default) unless use_dynamic_bsz")
	case pt.Algorithm != "ppo" && pt.Critic != nil:
		return fmt.Errorf("critic: only GAE (ppo) trains a critic (trainer/ppo/utils.py need_critic l.86-97); %s has none", pt.Algorithm)
	case pt.Critic != nil && (pt.Critic.MicroBatch < 1 || pt.Critic.MicroBatch > MaxTokens || pt.Critic.ForwardMicroBatch < 0 || pt.Critic.ForwardMicroBatch > MaxTokens):
		return fmt.Errorf("critic.micro_batch must be in [1, %d] and critic.forward_micro_batch in [0, %d]", MaxTokens, MaxTokens)
	}
	if t.Checkpointing == "" {
		t.Checkpointing = CheckpointFull // model.enable_gradient_checkpointing: True (hf_model.yaml l.34)
	}
	if t.Precision == "" && t.WeightsDType == DTypeUnset {
		// fsdp_config.model_dtype fp32 (engine/fsdp.yaml l.33) under
		// mixed precision with param_dtype bf16 (l.63).
		t.Precision = "amp_bf16"
	}
	if t.Parallel.FSDP == "" && t.Parallel.ZeRO == 0 {
		t.Parallel.FSDP = "full_shard" // actor.strategy fsdp (dp_actor.yaml l.26)
	}
	if t.Parallel.ZeRO != 0 {
		return errors.New("policy.parallel.zero_stage: verl's actor trains with FSDP (strategy fsdp or fsdp2) or Megatron, not DeepSpeed")
	}
	if t.Framework == "" {
		t.Framework = FrameworkPlainPyTorch
	}
	if pt.Generations == 0 {
		pt.Generations = 1 // rollout.n (rollout.yaml l.108)
	}
	if pt.Reference == "" {
		// Only use_kl_loss or use_kl_in_reward (both false by default,
		// actor.yaml l.95, ppo_trainer.yaml l.87) make a reference
		// (trainer/ppo/utils.py l.72-76).
		pt.Reference = "none"
	}
	if pt.Reference == "model" && t.LoRA != nil {
		pt.Reference = "adapter" // the actor with its adapter disabled (fsdp_workers.py l.1042-1044)
	}
	if pt.LogProbMicroBatch == 0 {
		return errors.New("log_prob_micro_batch: rollout.log_prob_micro_batch_size_per_gpu and ref.log_prob_micro_batch_size_per_gpu are null by default and verl requires them unless use_dynamic_bsz")
	}
	return verlRollout(pt.Rollout)
}

func verlRollout(ro *Rollout) error {
	if ro.Engine == "generate" {
		return errors.New("rollout.engine generate: verl's rollout.name is vllm or sglang")
	}
	if ro.Placement == "separate" {
		return errors.New(`rollout.placement "separate": verl's hybrid engine colocates the rollout with the actor (actor_rollout_ref.hybrid_engine); its disaggregated modes are not modelled`)
	}
	if ro.GPUMemoryUtilization == 0 {
		ro.GPUMemoryUtilization = 0.5 // rollout.yaml l.32
	}
	if ro.TP == 0 {
		ro.TP = 2 // tensor_model_parallel_size (rollout.yaml l.50)
	}
	if ro.MaxNumSeqs == 0 {
		ro.MaxNumSeqs = 256 // rollout.yaml l.68
	}
	if ro.MaxNumBatchedTokens == 0 {
		ro.MaxNumBatchedTokens = 8192 // rollout.yaml l.62
	}
	if ro.Sleep == "" {
		ro.Sleep = SleepLevel2
	}
	if ro.Sleep == SleepLevel1 {
		return errors.New("rollout.sleep level1: verl's hybrid engine sleeps the rollout at level 2 (vllm_async_server.py l.567-569); free_cache_engine=False keeps it awake (sleep none)")
	}
	return nil
}

// verlLoss: with use_remove_padding the actor computes logits for every
// token of the packed micro-batch in the compute dtype, divides them by the
// temperature in place and takes log-probabilities with flash-attn's
// cross-entropy kernel (dp_actor.py _forward_micro_batch, logprobs_from_logits).
func verlLoss(PostTraining) LogProbLoss {
	return LogProbLoss{Fused: true}
}

// verlPhases is one step in verl's order: generate, sleep, old and
// reference log-probs, the actor's update, and the weight sync that wakes
// the engine for the next step (ray_trainer.py fit l.1396-1611).
func verlPhases(run *rlRun) {
	pt := run.pt
	run.engineCtx = run.g.Context
	refHost := Bytes(0)
	if pt.Reference == "model" {
		refHost, run.reference = run.reference, 0 // forced CPUOffload: the shard waits in host memory
	}
	if pt.Critic != nil {
		if err := prepareCritic(run); err != nil {
			run.est.Starts, run.est.Err = false, err.Error()
			return
		}
	}
	resident, host := run.residentParts(pt.ParamOffload, pt.OptimizerOffload)
	resident = append(resident, run.critic.kept...)
	host = addBytes(addBytes(host, refHost), run.critic.host)
	// The actor and rollout workers are created last "so that vllm can
	// have a better estimation of kv cache memory" (ray_trainer.py l.889-891).
	if err := run.engineAt(sumParts(resident), pt.Rollout.Sleep); err != nil {
		run.est.Starts, run.est.Err = false, err.Error()
		return
	}
	eng, eparts := run.engineWith(engineGenerating)
	run.phase("generation", false, resident, 0, eng, host, eparts)
	asleep, aparts := run.engineWith(engineAsleep)
	pass, err := run.logProbPass(pt.LogProbMicroBatch)
	if err != nil {
		run.est.Starts, run.est.Err = false, err.Error()
		return
	}
	onGPU, _ := run.residentParts(false, pt.OptimizerOffload) // compute_log_prob loads the parameters (fsdp_workers.py l.993-994)
	onGPU = append(onGPU, run.critic.kept...)
	lp := append(append([]PhasePart(nil), onGPU...), PhasePart{"FSDP all-gather of one unit", run.unitGather(), HolderPass}, PhasePart{"no-grad pass: activations and logits", pass, HolderPass})
	run.phase("old log-probs", false, lp, 0, asleep, host, aparts)
	if pt.Reference != "none" {
		ref := append(append([]PhasePart(nil), lp...), PhasePart{"reference shard of one unit on the GPU", refHost / Bytes(max(1, pt.Policy.Model.Layers)), HolderReference})
		run.phase("reference log-probs", false, ref, 0, asleep, host, aparts)
	}
	if pt.Critic != nil {
		actorOnly, _ := run.residentParts(pt.ParamOffload, pt.OptimizerOffload)
		criticPhases(run, actorOnly, host, asleep, aparts)
	}
	update := []PhasePart{{"training step (allocated peak)", run.step.Peak.Total(), HolderTrainer}, {"cuBLAS workspace", run.replay.Workspace, HolderPass}}
	// The other model's tensors sit in segments of their own beside the
	// step's cache.
	run.phase("actor update", false, append(update, run.critic.kept...), addBytes(run.replay.PeakReserved, sumParts(run.critic.kept)), asleep, addBytes(refHost, run.critic.host), aparts)
	sync := append(append([]PhasePart(nil), resident...),
		PhasePart{"weight sync: the 2 GiB bucket", verlBucket, HolderPass},
		PhasePart{"weight sync: one gathered parameter and its bf16 cast", run.largestParam + run.largestParam/2, HolderPass})
	weng, wparts := run.engineWith(engineWeightsOnly)
	run.phase("weight sync", true, sync, 0, weng, host, wparts)
}

func sumParts(ps []PhasePart) Bytes {
	var b Bytes
	for _, p := range ps {
		b = addBytes(b, p.Bytes)
	}
	return b
}

// unitGather is the largest unit's parameters all-gathered for its
// forward (FSDP wraps each decoder layer).
func (run *rlRun) unitGather() Bytes {
	t, _ := run.pt.trainingStep()
	r, err := t.resolve()
	if err != nil {
		return 0
	}
	blocks, _, _ := r.units()
	var g Bytes
	for _, b := range blocks {
		g = max(g, b.gathered)
	}
	return g
}
