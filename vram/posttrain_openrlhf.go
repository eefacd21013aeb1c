package vram

import (
	"errors"
	"fmt"
)

// OpenRLHF's PPO trainer as its HEAD of 2026-08-13 (3c3be623,
// openrlhf/cli/train_ppo_ray.py) runs it. Every model is a Ray actor of its
// own — actor, critic, reference, reward model and each vLLM engine are
// processes with their own CUDA context — trained with DeepSpeed (ZeRO-2 by
// default, bf16). With --train.colocate_all they share the same GPUs (the
// hybrid engine: vLLM sleeps at level 1, weights kept in host memory,
// vllm_engine.py l.138-139; --ds.enable_sleep offloads each model's
// optimizer states, gradients and fp32 master between its uses but keeps
// its bf16 weights, deepspeed_utils.py l.167-189); without it the plan's
// GPUs are the actor's and the engines run on GPUs of their own.
func init() {
	registerRLFramework(rlFramework{name: "openrlhf", release: "3c3be623", resolve: openrlhfResolve, lossOf: openrlhfLoss, phases: openrlhfPhases})
}

func openrlhfResolve(pt *PostTraining) error {
	t := &pt.Policy
	if t.MicroBatch == 0 {
		t.MicroBatch = 1 // --train.micro_batch_size (train_ppo_ray.py l.393)
	}
	if t.Checkpointing == "" {
		t.Checkpointing = CheckpointNone // --actor.gradient_checkpointing_enable off (l.309)
	}
	if t.Precision == "" && t.WeightsDType == DTypeUnset {
		t.Precision = "mixed_bf16" // --ds.param_dtype bf16 (l.311-317): bf16 weights, fp32 master in the optimizer
	}
	if t.Framework == "" {
		t.Framework = FrameworkDeepSpeed
	}
	if t.Parallel.ZeRO == 0 && t.Parallel.FSDP == "" {
		t.Parallel.ZeRO = 2 // --ds.zero_stage (l.308)
	}
	if t.Parallel.FSDP != "" {
		return errors.New("policy.parallel.fsdp: OpenRLHF trains with DeepSpeed (ds.zero_stage)")
	}
	if t.Attention == "" {
		t.Attention = "flash2" // --ds.attn_implementation flash_attention_2 (l.323-328)
	}
	if pt.Algorithm == "dpo" {
		return errors.New("algorithm dpo: OpenRLHF's train_dpo is not modelled; plan DPO with TRL")
	}
	if pt.Generations == 0 {
		pt.Generations = 1 // --rollout.n_samples_per_prompt (l.413-415)
	}
	if pt.Algorithm != "ppo" && pt.Generations < 2 {
		return fmt.Errorf("generations_per_prompt (rollout.n_samples_per_prompt) must be above 1 for a group estimator (%s), got %d (train_ppo_ray.py l.612-615)", pt.Algorithm, pt.Generations)
	}
	if pt.Algorithm == "ppo" && pt.Critic == nil {
		pt.Critic = &Critic{MicroBatch: t.MicroBatch} // gae creates a critic (l.600-606), trained with --train.micro_batch_size
	}
	if pt.Critic != nil && pt.OptimizerOffload {
		c := *pt.Critic
		c.OptimizerOffload = true // --ds.enable_sleep puts every DeepSpeed model to sleep (ppo_trainer.py l.274-286)
		pt.Critic = &c
	}
	if pt.Algorithm != "ppo" && pt.Critic != nil {
		return fmt.Errorf("critic: only GAE (ppo) trains a critic in OpenRLHF (train_ppo_ray.py l.600-606); %s has none", pt.Algorithm)
	}
	if pt.Reference == "" {
		pt.Reference = "model" // --algo.kl.init_coef 0.01 > 0 creates one (l.93-103, l.419)
	}
	if pt.RewardModel == "" {
		pt.RewardModel = "none"
	}
	if pt.ParamOffload || (pt.Critic != nil && pt.Critic.ParamOffload) {
		return errors.New("param_offload: OpenRLHF's DeepSpeed sleep keeps the bf16 weights on the GPU (deepspeed_utils.py l.167-189); only optimizer_offload (--ds.enable_sleep) applies")
	}
	if pt.OptimizerOffload && t.Parallel.ZeRO != 3 {
		return errors.New("optimizer_offload (--ds.enable_sleep) needs ZeRO-3: DeepSpeed's offload_states raises NotImplementedError for other stages (deepspeed_utils.py l.159-162)")
	}
	if pt.LogProbMicroBatch == 0 {
		pt.LogProbMicroBatch = 1 // --rollout.micro_batch_size (l.377)
	}
	return openrlhfRollout(pt)
}

func openrlhfRollout(pt *PostTraining) error {
	ro := pt.Rollout
	if ro.Engine != "vllm" {
		return fmt.Errorf("rollout.engine %s: OpenRLHF generates with vLLM engines (--vllm.num_engines)", ro.Engine)
	}
	if ro.Placement == "" {
		ro.Placement = "separate" // --train.colocate_all off (l.223-228)
	}
	if ro.GPUMemoryUtilization == 0 {
		ro.GPUMemoryUtilization = 0.95 // --vllm.gpu_memory_utilization (l.250-255)
	}
	if ro.TP == 0 {
		ro.TP = 1 // --vllm.tensor_parallel_size (l.234-239)
	}
	switch {
	case ro.Sleep == "":
		ro.Sleep = SleepNone // --vllm.enable_sleep off (l.244-249)
	case ro.Sleep == SleepLevel2:
		return errors.New("rollout.sleep level2: OpenRLHF's engines sleep at level 1 (vllm_engine.py l.138-139)")
	case ro.Sleep == SleepLevel1 && ro.Placement == "separate":
		ro.Sleep = SleepNone // --vllm.enable_sleep without colocate_all is turned off (train_ppo_ray.py l.663-665)
	}
	if ro.Placement == "colocate" && pt.Policy.Parallel.GPUs()%ro.TP != 0 {
		return fmt.Errorf("colocate_all: the actor's GPUs (%d) must be vllm.num_engines × vllm.tensor_parallel_size (%d) (train_ppo_ray.py l.56-64)", pt.Policy.Parallel.GPUs(), ro.TP)
	}
	return nil
}

// openrlhfLoss: the actor computes every position's logits (packed or
// padded) and takes the action tokens' log-probabilities with a per-token
// logsumexp (openrlhf/models/utils.py log_probs_from_logits), bf16 under
// DeepSpeed (no output upcast).
func openrlhfLoss(PostTraining) LogProbLoss { return LogProbLoss{Fused: true} }

// openrlhfPhases is one step: the engines wake and generate, sleep; the
// reward model, the actor (old log-probs), the critic and the reference
// score the samples; the critic and the actor train; the actor's weights
// go to the engines (ppo_trainer.py train_step l.213-264).
func openrlhfPhases(run *rlRun) {
	pt := run.pt
	colocated := pt.Rollout.Placement == "colocate"
	run.reference = 0 // a model of its own, sized by openrlhfFrozen
	if pt.Critic != nil {
		if err := prepareCritic(run); err != nil {
			run.est.Starts, run.est.Err = false, err.Error()
			return
		}
	}
	resident, host := run.residentParts(false, pt.OptimizerOffload)
	roles := 1 // the actor's process
	if colocated {
		resident = append(resident, run.critic.kept...)
		resident = append(resident, openrlhfFrozen(run)...)
		host = addBytes(host, run.critic.host)
		roles += openrlhfRoles(pt)
		run.engineCtx = run.g.Context
	} else {
		run.est.Notes = append(run.est.Notes, "the plan's GPUs are the actor's: without --train.colocate_all the critic, the reference, the reward model and the vLLM engines run on GPUs of their own")
	}
	run.otherCtx = run.g.Context * Bytes(roles-1) // a CUDA context per model's process
	if colocated {
		if err := run.engineAt(sumParts(resident), pt.Rollout.Sleep); err != nil {
			run.est.Starts, run.est.Err = false, err.Error()
			return
		}
	}
	openrlhfSteps(run, resident, host, colocated)
}

// openrlhfSteps walks the phases once the pieces are sized.
func openrlhfSteps(run *rlRun, resident []PhasePart, host Bytes, colocated bool) {
	pt := run.pt
	eng, eparts := run.engineWith(engineGenerating)
	if !colocated {
		eng, eparts = 0, nil
	}
	run.phase("generation", false, resident, 0, eng, host, eparts)
	asleep, aparts := Bytes(0), []PhasePart(nil)
	if colocated {
		asleep, aparts = run.engineWith(engineAsleep)
		host = addBytes(host, run.engineHost)
	}
	pass, err := run.logProbPass(pt.LogProbMicroBatch)
	if err != nil {
		run.est.Starts, run.est.Err = false, err.Error()
		return
	}
	// make_experience empties the cache after each model's pass when
	// colocated (experience_maker.py l.100-106).
	lp := append(append([]PhasePart(nil), resident...), PhasePart{"no-grad pass: activations and logits", pass, HolderPass})
	run.phase("old log-probs", false, lp, 0, asleep, host, aparts)
	if colocated && pt.Reference == "model" {
		run.phase("reference log-probs", false, lp, 0, asleep, host, aparts)
	}
	if colocated && pt.Critic != nil {
		actorOnly, _ := run.residentParts(false, pt.OptimizerOffload)
		criticPhases(run, append(actorOnly, openrlhfFrozen(run)...), host, asleep, aparts)
	}
	update := []PhasePart{{"training step (allocated peak)", run.step.Peak.Total(), HolderTrainer}, {"cuBLAS workspace", run.replay.Workspace, HolderPass}}
	others := append(append([]PhasePart(nil), run.critic.kept...), openrlhfFrozen(run)...)
	if !colocated {
		others = nil
	}
	run.phase("actor update", false, append(update, others...), addBytes(run.replay.PeakReserved, sumParts(others)), asleep, host, aparts)
	// broadcast_to_vllm: one parameter at a time, gathered under ZeRO-3
	// and cloned for CUDA IPC when colocated (ppo_actor.py l.408-489).
	part := PhasePart{"weight sync: one gathered parameter, broadcast", run.largestParam, HolderPass}
	if colocated {
		part = PhasePart{"weight sync: one gathered parameter and its IPC clone", 2 * run.largestParam, HolderPass}
	}
	sync := append(append([]PhasePart(nil), resident...), part)
	weng, wparts := Bytes(0), []PhasePart(nil)
	if colocated {
		weng, wparts = run.engineWith(engineWeightsOnly)
	}
	run.phase("weight sync", true, sync, 0, weng, host, wparts)
}

// openrlhfFrozen are the frozen models beside the actor when colocated:
// the reference and the reward model, each a ZeRO-3 shard under ZeRO-3
// and a whole bf16 replica otherwise (their eval config is stage 0,
// deepspeed.py l.489-497).
func openrlhfFrozen(run *rlRun) []PhasePart {
	pt := run.pt
	m := pt.Policy.Model
	w := BF16.Size(m.ParamCount())
	if pt.Policy.Parallel.ZeRO == 3 {
		w /= Bytes(max(1, pt.Policy.Parallel.GPUs()))
	}
	var out []PhasePart
	if pt.Reference == "model" {
		out = append(out, PhasePart{"reference model", w, HolderReference})
	}
	if pt.RewardModel == "model" {
		out = append(out, PhasePart{"reward model", w, HolderReference})
	}
	return out
}

// openrlhfRoles counts the colocated models' processes beside the actor's.
func openrlhfRoles(pt PostTraining) int {
	n := 0
	if pt.Critic != nil {
		n++
	}
	if pt.Reference == "model" {
		n++
	}
	if pt.RewardModel == "model" {
		n++
	}
	return n
}
