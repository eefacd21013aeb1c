package vram

import "fmt"

// Activation offloading: the saved tensors of the blocks go to pinned host
// memory through saved-tensor hooks while the forward runs and come back
// when backward needs them — torchtune's enable_activation_offloading and
// TRL's activation_offloading, a port of it (torchtune v0.6.1
// torchtune/training/_activation_offloading.py OffloadActivations; trl
// v0.20 trl/models/activation_offloading.py):
//
//   - every saved tensor of at least 1024 bytes that is not a parameter or
//     buffer is copied to a fresh pinned CPU tensor (pack_tensor:
//     torch.empty_like(..., pin_memory=True, device="cpu")); under
//     non-reentrant checkpointing the hook sees only each checkpointed
//     block's input (the checkpoint's own hook takes what is saved inside);
//   - with streams (the default) the forward keeps the last
//     max_fwd_stash_size = 5 packed tensors on the GPU, which backward reuses
//     without a copy; everything else comes back when autograd unpacks it,
//     kept for the current and the previous node;
//   - the output layer is exempt (NoOpManager on model.output / lm_head), and
//     torchtune refuses it without checkpointing ("enable_activation_offloading
//     should only be True when enable_activation_checkpointing is True").
//
// The engine keeps on the GPU the last five blocks' inputs when checkpointed
// (one packed tensor a block; Training.OffloadStash for another count) and the last block's saved tensors otherwise
// (its last five packed tensors are among them); an offloaded block's saved
// tensors come back whole for its backward (an upper bound without
// checkpointing, where autograd holds two nodes' at a time).

// fwdStash is OffloadActivations' max_fwd_stash_size.
const fwdStash = 5

// resolveActivationOffload checks where activation offloading runs.
func (r *resolved) resolveActivationOffload() error {
	if !r.ActivationOffloading {
		if r.OffloadStash != 0 {
			return fmt.Errorf("offload_stash %d applies to activation_offloading", r.OffloadStash)
		}
		return nil
	}
	switch {
	case r.OffloadStash < 0 || r.OffloadStash > r.m.Layers:
		return fieldRange("offload_stash", r.OffloadStash, 0, r.m.Layers)
	case r.Framework != FrameworkTorchtune && r.Framework != FrameworkHFTrainer && r.Framework != FrameworkPlainPyTorch:
		return fmt.Errorf("activation_offloading is torchtune's enable_activation_offloading and TRL's activation_offloading (frameworks torchtune, hf_trainer, plain_pytorch), not %s's", r.Framework)
	case r.Framework == FrameworkTorchtune && r.Checkpointing != CheckpointFull:
		return fmt.Errorf("activation_offloading: torchtune raises \"enable_activation_offloading should only be True when enable_activation_checkpointing is True\"; set grad_checkpointing \"full\"")
	case r.pp > 1:
		return fmt.Errorf("activation_offloading with pipeline parallelism (pp %d): torchtune and TRL run no pipeline stages", r.pp)
	}
	return nil
}

// offloaded reports whether block l of stage st keeps its saved tensors in
// host memory between its forward and its backward.
func (r *resolved) offloaded(l int, st stage) bool {
	if !r.ActivationOffloading {
		return false
	}
	stay := 1
	if r.checkpointed(l) {
		stay = fwdStash
		if r.OffloadStash > 0 {
			stay = r.OffloadStash
		}
	}
	return l < st.last-stay
}

// hostActivations is the pinned host memory activation offloading takes
// for one micro-batch on stage st.
func (r *resolved) hostActivations(acts []BlockActivations, st stage) Bytes {
	var b Bytes
	for l := st.first; l < st.last; l++ {
		if r.offloaded(l, st) {
			b = addBytes(b, r.savedFor(acts[l], l))
		}
	}
	return b
}
