package vram

import (
	"fmt"
	"math"
	"slices"
)

// What vLLM keeps on the GPU beside the weights, the profile run and the
// KV cache, release by release: the CUDA graphs' pool and, with Model
// Runner V2, the sampler's per-request vocabulary tables.

// captureSizes are the batch sizes vLLM captures CUDA graphs for (0.33
// config/vllm.py:2398-2653 _set_cudagraph_sizes): 1, 2, 4, then every 8
// below 256 and every 16 from 256, up to min(2 × max_num_seqs × q, 512 —
// 1024 on compute capability 10.x) and at most max_num_batched_tokens,
// with max_num_batched_tokens added where it is no larger; q is the
// uniform decode query length, 1 + num_speculative_tokens (l.695-713).
// Without speculation max_num_seqs is added where it fits (l.2549-2550);
// with it, the uniform decode batches of 1, 2, 4, 8, … max_num_seqs
// requests of q tokens each that fit (l.2487-2548, 2601-2603).
func (v VLLM) captureSizes(g GPU, q int) []int {
	q = max(q, 1)
	ceiling := 512
	if g.ComputeCapability >= 100 && g.ComputeCapability < 110 {
		ceiling = 1024
	}
	top := min(2*v.MaxNumSeqs*q, ceiling) // before max_num_batched_tokens
	largest := min(top, v.MaxNumBatchedTokens)
	var sizes []int
	add := func(n int) {
		if n >= 1 && n <= largest && (len(sizes) == 0 || sizes[len(sizes)-1] < n) {
			sizes = append(sizes, n)
		}
	}
	for _, n := range []int{1, 2, 4} {
		add(n)
	}
	for n := 8; n < min(largest+1, 256); n += 8 {
		add(n)
	}
	for n := 256; n <= largest; n += 16 {
		add(n)
	}
	extra := []int{v.MaxNumBatchedTokens}
	if q == 1 {
		extra = append(extra, v.MaxNumSeqs)
	} else {
		maxReqs := min(v.MaxNumSeqs, ceiling)
		counts := []int{1, 2, 4}
		for n := 8; n < min(maxReqs+1, 256); n += 8 {
			counts = append(counts, n)
		}
		for n := 256; n <= maxReqs; n += 16 {
			counts = append(counts, n)
		}
		for _, n := range append(counts, maxReqs) {
			if n <= maxReqs && n*q <= top && n*q <= v.MaxNumBatchedTokens {
				extra = append(extra, n*q)
			}
		}
	}
	for _, n := range extra {
		if n >= 1 && n <= max(largest, top) && n <= v.MaxNumBatchedTokens && !slices.Contains(sizes, n) {
			if n == v.MaxNumBatchedTokens && n > largest {
				continue
			}
			sizes = append(sizes, n)
		}
	}
	slices.Sort(sizes)
	return sizes
}

// graphSizes are the token counts the release captures graphs for on g.
func (v VLLM) graphSizes(g GPU, q int, rel vllmRelease) []int {
	if rel.wideGraphTokens > 0 && g.ComputeCapability >= 100 && g.ComputeCapability < 110 {
		return v.wideCaptureSizes(q, rel.wideGraphTokens)
	}
	return v.captureSizes(g, q)
}

// wideCaptureSizes are 0.34's CUDA-graph token counts on compute
// capability 10.x (config/vllm.py:2602-2699, _split_cudagraph_capture_sizes'
// SM100 defaults): the prefill grid up to min(limit,
// max_num_batched_tokens) tokens (config/compilation.py:89-100) and the
// uniform decode batches of q tokens a request, on the decode grid up to
// max_num_seqs requests (l.122-127), within as many tokens (l.54-67). A
// speculative method's one-token draft decodes (config/vllm.py:708-730)
// are not added.
func (v VLLM) wideCaptureSizes(q, limit int) []int {
	tokens := min(limit, v.MaxNumBatchedTokens)
	sizes := walkGrid(tokens, func(t float64) float64 { return min(t, max(8, t/4), 0.07*max(t, 4096)) })
	q = max(q, 1)
	top := min(v.MaxNumSeqs, tokens/q)
	for _, n := range walkGrid(v.MaxNumSeqs, func(n float64) float64 { return 0.65 * math.Pow(n, 2.0/3) }) {
		if top < 1 {
			break
		}
		sizes = append(sizes, min(n, top)*q)
		if n >= top {
			break
		}
	}
	slices.Sort(sizes)
	return slices.Compact(sizes)
}

// walkGrid is vLLM's _walk_grid (config/compilation.py:73-86): 1 up to
// limit, each size the next multiple of the largest power of two not above
// step(size).
func walkGrid(limit int, step func(float64) float64) []int {
	if limit <= 0 {
		return nil
	}
	var grid []int
	for size := 1; size < limit; {
		grid = append(grid, size)
		stride := 1 << max(0, int(math.Floor(math.Log2(max(1, step(float64(size)))))))
		size = (size/stride + 1) * stride
	}
	return append(grid, limit)
}

// minPerGraph is the least vLLM's estimate counts for each graph after
// the first (0.33 v1/worker/gpu/cudagraph_utils.py:918
// _MIN_PER_GRAPH_BYTES).
const minPerGraph = 1 * MiB

// graphEstimate is the CUDA graphs' pool as vLLM 0.33's profile estimates
// it before sizing the KV cache (v1/worker/gpu/cudagraph_utils.py:922-1039,
// profile_cudagraph_memory): the graphs share one pool, captured largest
// first, so the first capture takes the forward's transient peak at the
// largest size (the engine's activation peak for that many tokens) and
// each later one what it adds, which vLLM extrapolates from its second
// sample with a floor of 1 MiB a graph: first + (N − 1) × 1 MiB here.
// The graphs are the language model's (the decoder's capture,
// model_runner.py:1086-1131): a vision-language model's encoder has graphs
// only under cudagraph_mm_encoder (config/compilation.py:528, off by
// default), so the forward measured is text-only, at any capture size
// (LLaVA's 576 image tokens do not fit the largest, 512).
func (v VLLM) graphEstimate(in Inference, g GPU, q int, rel vllmRelease) (Bytes, int, error) {
	sizes := v.graphSizes(g, q, rel)
	if len(sizes) == 0 {
		return 0, 0, nil
	}
	largest := sizes[len(sizes)-1]
	in.Batch, in.PromptTokens, in.NewTokens, in.MaxBatchedTokens = 1, largest, 0, largest
	in.towerOff, in.Images = true, 0
	est, err := in.Estimate()
	if err != nil {
		return 0, 0, fmt.Errorf("vllm: the CUDA graphs' estimate: %w", err)
	}
	first := est.Peak.Total() - est.Peak.Parameters - est.Peak.KVCache
	return addBytes(first, mulBytes(int64(len(sizes)-1), minPerGraph)), len(sizes), nil
}

// runnerBuffers are Model Runner V2's sampler tables, allocated with the
// model and kept (0.33 v1/worker/gpu/sample/penalties.py:43-50,
// structured_outputs.py:63-65): output_bin_counts, int32 [max_num_seqs,
// vocab]; prompt_bin_mask and grammar_bitmask, int32 [max_num_seqs,
// cdiv(vocab, 32)] each.
func (v VLLM) runnerBuffers(m Model) Bytes {
	seqs, vocab := int64(v.MaxNumSeqs), int64(m.Vocab)
	return Bytes(4 * seqs * (vocab + 2*((vocab+31)/32)))
}

// graphNote says how the carve counted the CUDA graphs.
func (c VLLMCarve) graphNote(rel vllmRelease, given bool, n int) string {
	switch {
	case c.CUDAGraphs == 0:
		return ""
	case rel.extensibleKV:
		how := fmt.Sprintf("estimated for %d capture sizes (the forward's transient peak at the largest, then vLLM's 1 MiB a graph)", n)
		if given {
			how = "as given"
		}
		return fmt.Sprintf("CUDA graphs: %v %s, counted twice as vLLM %s does: the profile's estimate is part of the transient peak its extensible KV cache keeps free, and the pool captured before the cache is measured holds the same again (the carve takes one figure for both; give cuda_graph_memory from your log's \"CUDA graph pool memory\" to use yours)", c.CUDAGraphs, how, rel.Version)
	case rel.graphsInBudget && given:
		return fmt.Sprintf("CUDA graphs: %v as given, subtracted before the KV cache is sized (vLLM %s profiles them: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1)", c.CUDAGraphs, rel.Version)
	case rel.graphsInBudget:
		return fmt.Sprintf("CUDA graphs: %v estimated for %d capture sizes (the forward's transient peak at the largest, then vLLM's 1 MiB a graph), subtracted before the KV cache is sized; vLLM logs its own estimate and, after capture, the pool's actual size (\"CUDA graph pool memory\"), which may differ either way: the estimate decides the KV cache, the actual pool whether the GPU holds it (give cuda_graph_memory from your log to use it)", c.CUDAGraphs, n)
	}
	return fmt.Sprintf("CUDA graphs: %v as given, captured after the KV cache is sized, beside the memory gpu_memory_utilization asks for (vLLM %s)", c.CUDAGraphs, rel.Version)
}
