package vram

import "fmt"

// checkReentrant refuses a plan transformers would fail: full activation
// checkpointing through the HF Trainer (gradient_checkpointing_enable) with
// reentrant checkpoints — the default before transformers 5 — for a family
// whose step fails under them (family.reentrantFails: Whisper).
func (r *resolved) checkReentrant() error {
	f := lookupFamily(r.m.Family)
	if f == nil || f.reentrantFails == "" || r.Checkpointing != CheckpointFull || r.Framework != FrameworkHFTrainer {
		return nil
	}
	reentrant := r.lib.before(5, 0)
	if r.UseReentrant != nil {
		reentrant = *r.UseReentrant
	}
	if !reentrant {
		return nil
	}
	return fmt.Errorf("grad_checkpointing %q: %s's training step fails in transformers %s under reentrant checkpointing, the HF Trainer's default (%s); "+
		"set gradient_checkpointing_kwargs {\"use_reentrant\": false} (use_reentrant: false), which runs and is what this estimate models",
		r.Checkpointing, r.m.Family, r.lib, f.reentrantFails)
}
