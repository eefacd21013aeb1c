package vram

import (
	"errors"
	"fmt"
)

// Unsloth's GRPO with fast_inference (unslothai/unsloth @ 015bdef0,
// 2026-08-22, "U"; unslothai/unsloth-zoo @ ce232d6c, "Z"): TRL's
// GRPOTrainer patched, vLLM in the trainer's process
// (VLLM_ENABLE_V1_MULTIPROCESSING=0, Z/vllm_utils.py:811), and the
// training model built on vLLM's own weight tensors
// (convert_vllm_to_huggingface, Z/vllm_utils.py:1514-1548): one copy of
// the base, no weight sync (_move_model_to_vllm is a no-op,
// U/rl_replacements.py:1447-1458); the adapters reach vLLM as tensors on
// each generate (U/rl.py:4168-4186). Unsloth asks vLLM for its
// gpu_memory_utilization of the memory free at load, less an activation
// reserve, not of the card (Z/vllm_utils.py:1610-1663). Standby
// (UNSLOTH_VLLM_STANDBY=1: a plan's rollout.sleep level1 or level2) turns
// on vLLM's sleep mode with an allocator that never releases the shared
// weights and drops the KV cache at either level (Z/vllm_utils.py:567-636),
// and sets gpu_memory_utilization to a target by the card's size
// (l.2276-2330); without it the KV cache stays through the training step.
func init() {
	registerRLFramework(rlFramework{name: "unsloth", release: "015bdef0", resolve: unslothResolve, lossOf: unslothLoss, phases: unslothPhases})
}

func unslothResolve(pt *PostTraining) error {
	if pt.Algorithm != "grpo" {
		return fmt.Errorf("post_training.algorithm %s: Unsloth's vLLM path is its GRPOTrainer; plan %s with framework trl (Unsloth's other trainers are TRL's)", pt.Algorithm, pt.Algorithm)
	}
	t := &pt.Policy
	if t.LoRA == nil {
		return errors.New("post_training.policy.lora: Unsloth's fast_inference shares the base weights with vLLM and trains LoRA adapters on them (get_peft_model); give the adapter")
	}
	if dp := max(1, t.Parallel.DP); dp > 1 || t.Parallel.TP > 1 {
		return errors.New("post_training.policy.parallel: Unsloth's GRPO with fast_inference runs on one GPU")
	}
	// GRPOConfig as Unsloth patches it (U/rl.py:3266-3327).
	if t.MicroBatch == 0 {
		t.MicroBatch = 4
	}
	if t.GradAccum == 0 {
		t.GradAccum = 2
	}
	if pt.Generations == 0 {
		pt.Generations = 8
	}
	t.Optimizer = orDefault(t.Optimizer, "adamw_8bit")
	if t.Checkpointing == "" {
		// use_gradient_checkpointing="unsloth" (U/loader.py:410-437): each
		// layer's input copied to pinned host memory but the last layer's,
		// the layer recomputed in backward from one reload buffer
		// (Z/gradient_checkpointing.py:705-934).
		t.Checkpointing, t.ActivationOffloading, t.OffloadStash = CheckpointFull, true, 1
	}
	if t.Precision == "" && t.WeightsDType == DTypeUnset {
		t.Precision = "bf16" // the 16-bit base in bfloat16 on compute capability 8+ (U/llama.py:2418-2433)
	}
	if t.LoRA.DType == DTypeUnset {
		t.LoRA.DType = FP32 // "Parameter left in float32" (Z/vllm_utils.py:1642-1643)
	}
	t.Framework = orDefault(t.Framework, FrameworkHFTrainer)
	switch pt.Reference {
	case "":
		pt.Reference = "adapter" // beta 0.001 (U/rl.py:3315-3327), the adapter disabled (U/rl.py:3935-3968)
	case "adapter", "none":
	default:
		return fmt.Errorf("post_training.reference %q: Unsloth computes the reference with the adapter disabled (adapter), or none with beta 0", pt.Reference)
	}
	if pt.ParamOffload || pt.OptimizerOffload || pt.LogProbMicroBatch != 0 {
		return errors.New("param_offload, optimizer_offload and log_prob_micro_batch are verl's settings; Unsloth's passes run the policy's micro-batch")
	}
	return unslothRollout(pt.Rollout)
}

func unslothRollout(ro *Rollout) error {
	switch {
	case ro.Engine != "vllm":
		return fmt.Errorf("rollout.engine %s: the plan is Unsloth's fast_inference (vLLM in the trainer's process); without it, plan framework trl with rollout generate", ro.Engine)
	case ro.Placement == "separate":
		return errors.New("rollout.placement separate: Unsloth's fast_inference runs vLLM in the trainer's process")
	case ro.TP > 1:
		return errors.New("rollout.tensor_parallel_size: Unsloth's fast_inference runs one vLLM on the trainer's GPU")
	case ro.MaxNumSeqs != 0 || ro.MaxNumBatchedTokens != 0:
		return errors.New("rollout.max_num_seqs, max_num_batched_tokens: Unsloth sets them from its own estimate of the KV cache (Z/vllm_utils.py:2553-2564)")
	}
	ro.TP = 1
	if ro.GPUMemoryUtilization == 0 {
		ro.GPUMemoryUtilization = 0.5 // from_pretrained's default (U/loader.py:410-437)
	}
	if ro.Sleep == "" {
		ro.Sleep = SleepNone
	}
	return nil
}

// unslothLoss: the policy returns its hidden states and the loss computes
// the completion's logits chunk by chunk, max(4, length // 4096) chunks a
// row, each cast to fp32, with a log-sum-exp (Z/rl_replacements.py:76-166,
// 349, 873, 909): a no-grad pass holds one chunk; in training the short
// path keeps the chunks for backward and the long one recomputes them all
// inside its backward (l.1449-1554), so there the fp32 logits of a
// micro-batch's completions exist at once either way.
func unslothLoss(pt PostTraining) LogProbLoss {
	return LogProbLoss{Tokens: pt.CompletionLen, LogitsFP32: true, HiddenChunks: max(4, (pt.PromptLen+pt.CompletionLen)/4096)}
}

// unslothPhases is one GRPO step: generation (vLLM awake on the shared
// weights), the old policy's and the adapter-off reference's log-probs
// (always recomputed under vLLM, U/rl_replacements.py:1159-1161), and the
// training micro-steps; no weight sync.
func unslothPhases(run *rlRun) {
	ro := *run.pt.Rollout
	standby := ro.Sleep == SleepLevel1 || ro.Sleep == SleepLevel2
	e, err := newUnslothEngine(run, standby)
	if err != nil {
		run.est.Starts, run.est.Err = false, err.Error()
		return
	}
	ro.GPUMemoryUtilization, ro.MaxNumSeqs, ro.MaxNumBatchedTokens = e.util, e.maxSeqs, e.batched
	run.pt.Rollout = &ro
	run.engineWeights = e.weights
	if err := run.engineAt(0, ro.Sleep); err != nil { // vLLM loads before the trainer's tensors exist
		run.est.Starts, run.est.Err = false, err.Error()
		return
	}
	run.engineInTorch = !standby
	run.est.Notes = append(run.est.Notes, fmt.Sprintf("Unsloth asks vLLM for %.4f of the card (gpu_memory_utilization %v of the memory free at load%s), max_num_seqs %d",
		e.util, e.asked, map[bool]string{true: ", set by standby"}[standby], e.maxSeqs))
	shared := run.engineParts[0].Bytes // the base: the engine's weight tensors
	trainer := []PhasePart{{"LoRA adapters", max(0, run.resident.Parameters-shared), HolderTrainer},
		{"optimizer states", run.resident.OptimizerStates, HolderTrainer}}
	_, host := run.residentParts(false, false)
	reserved := max(0, run.carry-shared) // PyTorch's cache keeps the training step's high-water mark
	if standby {
		// wake_up and sleep each empty PyTorch's cache (Z/vllm_utils.py:611-619, 639-641).
		reserved = 0
	}
	gen, gparts := run.engineWith(engineGenerating)
	run.phase("generation", false, trainer, reserved, gen, host, gparts)
	idle := engineAwake
	if standby {
		idle = engineWeightsOnly // the KV cache dropped, the shared weights kept
	}
	eng, eparts := run.engineWith(idle)
	pass, err := run.logProbPass(run.pt.Policy.MicroBatch)
	if err != nil {
		run.est.Starts, run.est.Err = false, err.Error()
		return
	}
	lp := append(append([]PhasePart(nil), trainer...), PhasePart{"no-grad pass: activations and logits", pass, HolderPass})
	run.phase("old log-probs", false, lp, reserved, eng, host, eparts)
	if run.pt.Reference != "none" {
		run.phase("reference log-probs (adapter off)", false, lp, reserved, eng, host, eparts)
	}
	step := []PhasePart{{"training step (allocated peak, less the shared weights)", max(0, run.step.Peak.Total()-shared), HolderTrainer},
		{"cuBLAS workspace", run.replay.Workspace, HolderPass}}
	run.phase("training step", false, step, max(0, run.replay.PeakReserved-shared), eng, host, eparts)
}
