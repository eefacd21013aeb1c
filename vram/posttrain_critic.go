package vram

// PPO's critic, the value model trained beside the policy: verl's critic
// worker (fsdp_workers.py) and OpenRLHF's critic actor (ppo_critic.py)
// both load the policy's architecture with a one-output value head. A
// framework's phases size it with prepareCritic and add its passes with
// criticPhases.

import "fmt"

// criticRun is PPO's critic on this GPU: its training step, its no-grad
// value pass, and what it keeps between its uses.
type criticRun struct {
	kept   []PhasePart // its parameters and optimizer states on the GPU between uses
	params PhasePart   // its parameters
	host   Bytes       // what its offload keeps in host memory
	step   TrainingEstimate
	replay Replay
	values Bytes // one no-grad value pass
}

// criticStep is the critic's training step: the policy's architecture
// loaded as AutoModelForTokenClassification with one label (verl/utils/
// model.py load_valuehead_model l.621-630, fsdp_workers.py l.1307): the
// backbone's last hidden states into a value head of one output, in fp32
// (model_dtype, l.1289-1290) under mixed precision, FSDP over the same
// GPUs, without removing the padding (critic use_remove_padding false).
// The value head (hidden + 1 parameters) is left out of the count.
func (pt PostTraining) criticStep(batch int) Training {
	t := pt.Policy
	t.Model.Head = "none"
	t.Model.Params = 0 // the checkpoint's stated count includes the lm_head the critic drops
	t.SeqLen, t.MicroBatch = pt.PromptLen+pt.CompletionLen, batch
	t.Trainable, t.LoRA, t.LogProbs = "", nil, nil
	return t
}

// prepareCritic sizes the critic's training step, its value pass and
// what it keeps on the GPU between its uses (its offload moves its
// parameters and optimizer states to host memory then).
func prepareCritic(run *rlRun) error {
	c := run.pt.Critic
	t := run.pt.criticStep(c.MicroBatch)
	var err error
	if run.critic.step, err = t.Estimate(); err != nil {
		return fmt.Errorf("critic: %w", err)
	}
	if run.critic.replay, err = t.Replay(ReplayOptions{GPU: &run.g, Torch: run.pt.Torch}); err != nil {
		return fmt.Errorf("critic: %w", err)
	}
	ms, err := t.ModelStates()
	if err != nil {
		return fmt.Errorf("critic: %w", err)
	}
	run.critic.params = PhasePart{"critic parameters", ms.Parameters, HolderTrainer}
	states := PhasePart{"critic optimizer states", ms.OptimizerStates, HolderTrainer}
	for _, k := range []struct {
		off  bool
		part PhasePart
	}{{c.ParamOffload, run.critic.params}, {c.OptimizerOffload, states}} {
		if k.off {
			run.critic.host = addBytes(run.critic.host, k.part.Bytes)
		} else {
			run.critic.kept = append(run.critic.kept, k.part)
		}
	}
	fwd := c.ForwardMicroBatch
	if fwd == 0 {
		fwd = c.MicroBatch // forward_micro_batch_size_per_gpu: ${.ppo_micro_batch_size_per_gpu}
	}
	vt := run.pt.criticStep(fwd)
	vt.Trainable, vt.Optimizer, vt.OptimizerImpl, vt.Checkpointing = "frozen", "none", "", ""
	r, err := vt.resolve()
	if err != nil {
		return fmt.Errorf("critic values: %w", err)
	}
	r.frozen = true
	run.critic.values = addBytes(buildBlockInference(&r), r.ComputeDType.Size(mulI64(int64(fwd)*int64(vt.SeqLen), int64(r.m.Hidden))))
	return nil
}

// criticPhases adds the critic's value pass (compute_values loads its
// parameters, fsdp_workers.py l.1541-1560) and its update (update_critic
// loads its states too, l.1562-1586).
func criticPhases(run *rlRun, actor []PhasePart, host, asleep Bytes, aparts []PhasePart) {
	c := run.pt.Critic
	values := append(append([]PhasePart(nil), actor...), run.critic.params)
	if !c.OptimizerOffload {
		values = append(values, run.critic.kept[len(run.critic.kept)-1])
	}
	values = append(values, PhasePart{"critic no-grad pass: activations", run.critic.values, HolderPass})
	run.phase("critic values", false, values, 0, asleep, host, aparts)
	update := append(append([]PhasePart(nil), actor...), PhasePart{"critic training step (allocated peak)", run.critic.step.Peak.Total(), HolderTrainer},
		PhasePart{"cuBLAS workspace", run.critic.replay.Workspace, HolderPass})
	run.phase("critic update", false, update, addBytes(run.critic.replay.PeakReserved, sumParts(actor)), asleep, host-run.critic.host, aparts)
}
