package vram

import "fmt"

// refuseRecurrent refuses what the engine does not model of a model's
// recurrent layers (state-space mixers, short convolutions, Gated
// DeltaNet; what names them, modelled the transformers class whose torch
// path it follows): another framework's code, tensor, sequence, context
// or pipeline parallelism over them, checkpointing other than none or
// full, torch.compile and float8.
func (r *resolved) refuseRecurrent(what, modelled string) error {
	switch {
	case !r.runsTransformers():
		return fmt.Errorf("framework %q: %s layers are modelled as transformers' %s runs them (plain_pytorch or hf_trainer), not in this framework's code", r.Framework, what, modelled)
	case r.tp > 1 || r.cp > 1 || r.Parallel.PP > 1 || r.Parallel.SP:
		return fmt.Errorf("parallel: tensor, sequence, context and pipeline parallelism of %s layers are not modelled (tp %d, cp %d, pp %d)", what, r.tp, r.cp, r.Parallel.PP)
	case r.Checkpointing != "none" && r.Checkpointing != "full":
		return fmt.Errorf("grad_checkpointing %q: only none and full are modelled for %s layers", r.Checkpointing, what)
	case r.Compile || r.Float8 != "":
		return fmt.Errorf("compile and float8: not modelled for %s layers (their saved set under Inductor or torchao is not traced)", what)
	}
	return nil
}
