package vram

import "fmt"

// Early stop in a checkpointed block's recomputation. Non-reentrant
// torch.utils.checkpoint recomputes a block's forward when its backward
// first unpacks a saved tensor; with early_stop (torch's default,
// torch/utils/checkpoint.py 1854 in torch 2.15.0) it raises
// _StopRecomputationError once the last saved tensor is rebuilt
// (1313-1316), so the ops after it never run again. Without it the whole
// forward runs: the ops after the last saved tensor (a block's output
// projection and residual add, say) allocate their outputs once more,
// beside every rebuilt saved tensor, and the outputs die when the
// recomputation returns. torchtitan turned it off in 0.2.0 (#1580: with
// expert parallelism, a stopped recomputation left an all-to-all's
// outputs behind) and 0.3.0 hard-codes it (torchtitan_releases.go). The
// rule is one bound: actBuilder.recomputeEnd, the last op recomputed.

// resolveRecompute settles how checkpointed blocks recompute: refused
// where the framework fails under reentrant checkpoints
// (checkpoint_reentrant.go), and whether recomputation stops early.
func (r *resolved) resolveRecompute() error {
	if err := r.checkReentrant(); err != nil {
		return err
	}
	return r.resolveEarlyStop()
}

// resolveEarlyStop settles r.earlyStop: the plan's checkpoint_early_stop,
// else torchtitan's release, else torch's default.
func (r *resolved) resolveEarlyStop() error {
	r.earlyStop = true
	rel, _, err := torchtitanReleaseOf(r.Torchtitan)
	if err != nil {
		return err
	}
	if r.Framework == FrameworkTorchtitan {
		r.earlyStop = rel.earlyStop
	}
	set := r.CheckpointEarlyStop
	switch {
	case set == nil:
		return nil
	case r.Framework == FrameworkMegatron:
		return fmt.Errorf("checkpoint_early_stop: Megatron-LM recomputes with its own CheckpointFunction (megatron/core/tensor_parallel/random.py), which has no early stop; leave it unset")
	case r.Framework == FrameworkTorchtitan && !rel.earlyStopOption && *set != rel.earlyStop:
		return fmt.Errorf("checkpoint_early_stop %t: torchtitan %s wraps its blocks with early_stop=%t and reads no option for it (%s); activation_checkpoint.early_stop is an option of torchtitan 0.2.x only",
			*set, rel.Version, rel.earlyStop, rel.Source)
	}
	r.earlyStop = *set
	return nil
}
