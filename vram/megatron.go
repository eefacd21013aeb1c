package vram

import "fmt"

// Megatron-LM's defaults and recompute options (megatron/training/
// arguments.py, megatron/core/transformer/transformer_block.py).

// resolveMegatron checks the recompute options; they belong to full
// recomputation (--recompute-granularity full).
func (r *resolved) resolveMegatron() error {
	p := r.Parallel
	if p.PPFirstStageLayers < 0 || p.PPLastStageLayers < 0 {
		return fmt.Errorf("parallel.pp_first_stage_layers and pp_last_stage_layers must be ≥ 0")
	}
	if p.PPFirstStageLayers > 0 || p.PPLastStageLayers > 0 || p.PPAccountEmbedding || p.PPAccountLoss {
		if r.pp < 2 {
			return fmt.Errorf("parallel.pp_first_stage_layers, pp_last_stage_layers, pp_account_embedding and pp_account_loss split pipeline stages: they need pp ≥ 2")
		}
		if _, err := r.megatronStages(r.pp * r.virtualStages()); err != nil {
			return err
		}
	}
	if r.RecomputeMethod == "" {
		if r.RecomputeNumLayers != 0 {
			return fmt.Errorf("recompute_num_layers goes with recompute_method (uniform or block)")
		}
		return nil
	}
	if err := oneOf("recompute_method", r.RecomputeMethod, "uniform", "block"); err != nil {
		return err
	}
	if r.Checkpointing != CheckpointFull {
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

// megatronSplit is how many blocks each rank holds under Megatron's uneven
// pipeline options (Parallel.PPFirstStageLayers and the others), over S
// stages.
func (r *resolved) megatronSplit(S int) []int {
	size, _ := r.megatronStages(S) // resolveMegatron has checked the split
	out := make([]int, r.pp)
	for s, n := range size {
		out[r.rankOfStage(s)] += n
	}
	return out
}

// megatronStages is the blocks of each of S stages under the options, or
// an error naming the fields when they do not split the layers.
func (r *resolved) megatronStages(S int) ([]int, error) {
	p, L := r.Parallel, r.m.Layers
	size := make([]int, S)
	first, last := p.PPFirstStageLayers, p.PPLastStageLayers
	if first > 0 || last > 0 {
		if p.PPAccountEmbedding || p.PPAccountLoss {
			return nil, fmt.Errorf("parallel.pp_first_stage_layers / pp_last_stage_layers and pp_account_embedding / pp_account_loss are exclusive (Megatron-LM asserts so)")
		}
		mid, rest := S, L
		if first > 0 {
			mid, rest = mid-1, rest-first
		}
		if last > 0 {
			mid, rest = mid-1, rest-last
		}
		if rest < 0 || mid == 0 && rest != 0 || mid > 0 && rest%mid != 0 {
			return nil, fmt.Errorf("parallel.pp_first_stage_layers %d and pp_last_stage_layers %d leave %d of %d layers, which the %d other stages must share evenly", first, last, rest, L, mid)
		}
		for s := range size {
			switch {
			case s == 0 && first > 0:
				size[s] = first
			case s == S-1 && last > 0:
				size[s] = last
			default:
				size[s] = rest / max(1, mid)
			}
		}
		return size, nil
	}
	eff := L
	if p.PPAccountEmbedding {
		eff++
	}
	if p.PPAccountLoss {
		eff++
	}
	if eff%S != 0 {
		return nil, fmt.Errorf("parallel.pp_account_embedding / pp_account_loss: %d layers with the embedding and loss counted do not split evenly over %d stages", eff, S)
	}
	for s := range size {
		size[s] = eff / S
	}
	if p.PPAccountEmbedding {
		size[0]--
	}
	if p.PPAccountLoss {
		size[S-1]--
	}
	if size[0] < 1 || size[S-1] < 1 {
		return nil, fmt.Errorf("parallel.pp_account_embedding / pp_account_loss leave the first or last stage no block (%d layers over %d stages)", L, S)
	}
	return size, nil
}
