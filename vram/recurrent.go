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

// stateElems is what one recurrent layer keeps for one sequence on one of
// tp tensor-parallel ranks, as the serving engines shard it (vLLM's and
// SGLang's MambaStateShapeCalculator alike): the conv state's elements
// and the temporal state's (none for a short convolution). Mamba-2: conv
// (d_conv − 1) × (inner + 2 · n_groups · state) / tp, n_groups raised to
// tp when tp does not divide it (extra_groups_for_head_shards); temporal
// heads / tp × head_dim × state. Gated DeltaNet: conv (kernel − 1) × (2 ·
// key heads · key dim + value heads · value dim) / tp; temporal value
// heads / tp × key dim × value dim. Mamba-1: conv (d_conv − 1) × inner /
// tp, temporal inner / tp × state. Short convolution: (L_cache − 1) ×
// hidden / tp. KDA: conv (kernel − 1) × 3 · heads · head_dim / tp, temporal
// heads / tp × head_dim². An error says which width tp must divide.
func (m Model) stateElems(tp int64) (conv, temporal int64, err error) {
	div := func(what string, n int64) int64 {
		if n%tp != 0 && err == nil {
			err = fmt.Errorf("must divide the %s (%d): the engine shards the recurrent state evenly", what, n)
		}
		return n / tp
	}
	switch {
	case m.ShortConv != nil:
		conv = int64(m.ShortConv.Kernel-1) * div("short convolution's width", int64(m.Hidden))
	case m.Mamba != nil:
		// mamba1_state_shape: conv (inner / tp, d_conv − 1), temporal
		// (inner / tp, state).
		s := m.Mamba
		w := div("Mamba-1 inner width", int64(s.Inner))
		conv, temporal = int64(s.ConvKernel-1)*w, w*int64(s.State)
	case m.DeltaNet != nil:
		d := m.DeltaNet
		conv = int64(d.ConvKernel-1) * div("DeltaNet convolution's width", d.convDim())
		temporal = div("DeltaNet value heads", int64(d.ValueHeads)) * int64(d.KeyDim) * int64(d.ValueDim)
	case m.Lightning != nil:
		// vLLM's linear_attention_state_shape (0.14.1 mamba_utils.py:95-102;
		// 0.11.0 l.86-94): one (heads // tp, head_dim, head_dim) tensor, the
		// heads divided with //, unchecked.
		temporal = int64(m.Heads) / tp * int64(m.HeadDim) * int64(m.HeadDim)
	case m.KDA != nil:
		// Kimi Delta Attention (vLLM 0.33 mamba_utils.py:296-321, one
		// q|k|v conv state; 0.14.1 l.196-222, three of the same total;
		// SGLang 0.5.23 configs/mamba_utils.py:299-369): conv (kernel − 1)
		// × 3 · heads · head_dim / tp, temporal heads / tp × head_dim ×
		// head_dim.
		d := m.KDA
		conv = int64(d.ConvKernel-1) * div("KDA convolution's width", 3*d.width())
		temporal = div("KDA heads", int64(d.Heads)) * int64(d.HeadDim) * int64(d.HeadDim)
	case m.SSM != nil:
		s := m.SSM.Normalize()
		groups := int64(s.Groups)
		if groups%tp != 0 {
			groups = tp
		}
		conv = int64(s.ConvKernel-1) * div("Mamba-2 convolution's width", s.inner()+2*groups*int64(s.State))
		temporal = div("Mamba-2 heads", int64(s.Heads)) * int64(s.HeadDim) * int64(s.State)
	}
	return conv, temporal, err
}

// boundRecurrent rejects, naming the fields, a plan whose recurrent
// layers' largest tensors would not be representable: Mamba-1's
// discretized tensors and saved states (tokens × inner × state), Mamba-2's
// chunked products (tokens × chunk × heads × state, tokens × chunk ×
// inner).
func (r *resolved) boundRecurrent(tokens int64) error {
	limit := int64(maxPlanBytes) / 256
	if s := r.m.Mamba; s != nil {
		if _, err := boundedProduct(limit, "micro_batch × seq_len × mamba.inner × mamba.state (the discretized tensors)", tokens, int64(s.Inner), int64(s.State)); err != nil {
			return err
		}
	}
	if r.m.SSM != nil {
		s := r.m.SSM.Normalize()
		if _, err := boundedProduct(limit, "micro_batch × seq_len × ssm.chunk × ssm.heads × ssm.state (the chunked scan's products)", tokens, int64(s.Chunk), int64(s.Heads), int64(s.State)); err != nil {
			return err
		}
		if _, err := boundedProduct(limit, "micro_batch × seq_len × ssm.chunk × the inner width (the chunked scan's products)", tokens, int64(s.Chunk), s.inner()); err != nil {
			return err
		}
	}
	return nil
}
