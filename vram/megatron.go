package vram

import "fmt"

// Megatron-LM's defaults and recompute options (megatron/training/
// arguments.py, megatron/core/transformer/transformer_block.py).

// resolveMegatron checks the recompute options; they belong to full
// recomputation (--recompute-granularity full).
func (r *resolved) resolveMegatron() error {
	if r.RecomputeMethod == "" {
		if r.RecomputeNumLayers != 0 {
			return fmt.Errorf("recompute_num_layers goes with recompute_method (uniform or block)")
		}
		return nil
	}
	if err := oneOf("recompute_method", r.RecomputeMethod, "uniform", "block"); err != nil {
		return err
	}
	if r.Checkpointing != "full" {
		return fmt.Errorf("recompute_method %q applies to grad_checkpointing \"full\", not %q", r.RecomputeMethod, r.Checkpointing)
	}
	if r.CheckpointEvery > 1 {
		return fmt.Errorf("recompute_method and checkpoint_every choose the checkpointed blocks two ways; set one")
	}
	if r.RecomputeNumLayers < 0 || r.RecomputeNumLayers > r.m.Layers {
		return fmt.Errorf("recompute_num_layers must be in [1, layers = %d], got %d", r.m.Layers, r.RecomputeNumLayers)
	}
	if r.RecomputeNumLayers == 0 {
		r.RecomputeNumLayers = 1 // Megatron's default
	}
	return nil
}

// chunk is the model chunk block l belongs to, [first, last): the blocks
// of one virtual pipeline stage, which Megatron's TransformerBlock numbers
// from 0 (a rank's blocks in the engine are its chunks in order).
func (r *resolved) chunk(l int) (first, last int) {
	for _, st := range r.stages() {
		if l >= st.first && l < st.last {
			per := max(1, (st.last-st.first)/r.virtualStages())
			first = st.first + (l-st.first)/per*per
			return first, min(first+per, st.last)
		}
	}
	return l, l + 1
}

// chunkIndex is block l's index within its model chunk.
func (r *resolved) chunkIndex(l int) int {
	first, _ := r.chunk(l)
	return l - first
}

// recomputeGroup is, under recompute_method "uniform", the group of
// RecomputeNumLayers consecutive blocks of a chunk that block l belongs
// to, [start, end]: Megatron checkpoints each group as one unit, keeping
// only its input and recomputing the whole group when its backward begins
// (_checkpointed_forward: "uniformly divide the total number of Transformer
// layers and checkpoint the input activation of each divided chunk").
// Under other methods each block is its own group.
func (r *resolved) recomputeGroup(l int) (start, end int) {
	if r.RecomputeMethod != "uniform" || r.RecomputeNumLayers <= 1 {
		return l, l
	}
	first, last := r.chunk(l)
	n := r.RecomputeNumLayers
	start = first + (l-first)/n*n
	return start, min(start+n, last) - 1
}
