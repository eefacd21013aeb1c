package vram

import "fmt"

// refuseRecurrent refuses what the engine does not model of a model's
// recurrent layers (state-space mixers, short convolutions, Gated
// DeltaNet; what names them, modelled the transformers class whose torch
// path it follows): another framework's code, tensor, sequence, context
// or pipeline parallelism over them, checkpointing other than none or
// full, torch.compile and float8. A serving engine's forward (vLLM's
// profile run) takes vLLM's profile path of them (recurrent_profile.go),
// sharded over tensor parallelism as vLLM's layers are: heads (and
// Mamba-2's groups) split across the ranks, in_proj column- and out_proj
// row-parallel (recurrentShard).
func (r *resolved) refuseRecurrent(what, modelled string) error {
	switch {
	case !r.runsTransformers():
		return fmt.Errorf("framework %q: %s layers are modelled as transformers' %s runs them (plain_pytorch or hf_trainer), not in this framework's code", r.Framework, what, modelled)
	case r.servingEngine && r.cp == 1 && r.Parallel.PP <= 1:
		return nil // Inference.stateNotes says so
	case r.tp > 1 || r.cp > 1 || r.Parallel.PP > 1 || r.Parallel.SP:
		return fmt.Errorf("parallel: tensor, sequence, context and pipeline parallelism of %s layers are not modelled (tp %d, cp %d, pp %d)", what, r.tp, r.cp, r.Parallel.PP)
	case r.Checkpointing != CheckpointNone && r.Checkpointing != CheckpointFull:
		return fmt.Errorf("grad_checkpointing %q: only none and full are modelled for %s layers", r.Checkpointing, what)
	case r.Compile || r.Float8 != "":
		return fmt.Errorf("compile and float8: not modelled for %s layers (their saved set under Inductor or torchao is not traced)", what)
	}
	return nil
}

// recurrentShard is a recurrent layer's width on one tensor-parallel rank
// (1 outside a serving engine's forward, which refuseRecurrent ensures).
func (r *resolved) recurrentShard(n int64) int64 { return n / int64(max(1, r.tp)) }
