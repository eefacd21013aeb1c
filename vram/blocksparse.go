package vram

import "fmt"

// MiniMax-M3's block-sparse attention as transformers 5.23.0 builds it
// (models/minimax_m3_vl/modeling_minimax_m3_vl.py): on the layers
// layer_types calls "minimax_m3_sparse", the attention (grouped-query, its
// own per-head q and k norms) gets a lightning indexer (MiniMaxM3VLIndexer
// l.480-585) that scores every earlier key with index_n_heads query heads
// against one shared key, max-pools the scores over blocks of
// index_block_size keys, keeps each query's index_topk_blocks best blocks
// and its index_local_blocks preceding ones, and restricts the attention to
// them (eager and SDPA through a dense additive mask, build_block_mask
// l.587-623). Unlike DeepSeek Sparse Attention's indexer (dsa.go) it reads
// the layer's input, not a q latent, has no per-head weights, and selects
// blocks, not tokens. The engine lists its parameters (Model.BlockSparse)
// and what its cache keeps; its forward is not modelled yet.

// blockSparseIndexerTensors adds one layer's indexer under p in
// registration order (l.535-538): q_proj to index_n_heads ×
// index_head_dim, k_proj to one index_head_dim key (no biases), then the
// q and k RMSNorms over index_head_dim (MiniMaxM3VLRMSNorm: a weight,
// applied as 1 + weight). None of them gets a gradient: the indexer's
// only output is its top-k block indices, int64 (l.584-585), through which
// autograd reaches nothing, so the optimizer keeps no state for them
// (measured: a 5.23 trace's optimizer states are the other parameters').
func blockSparseIndexerTensors(m Model, l *tensorList, p string) {
	s, h := m.BlockSparse, int64(m.Hidden)
	n, d := int64(s.Heads), int64(s.HeadDim)
	l.linear(p+"q_proj", "q_proj", h, n*d, false)
	l.linear(p+"k_proj", "k_proj", h, d, false)
	l.norm(p+"q_norm", false, d)
	l.norm(p+"k_norm", false, d)
	for i := len(l.ts) - 4; i < len(l.ts); i++ {
		l.ts[i].part = noGradPart
	}
}

// IndexKeyBytes is what a block-sparse layer caches per token beside its
// K and V: the indexer's rotated key, one head of HeadDim in the
// activations' dtype (MiniMaxM3VLSparseCacheLayer.update_index l.59-62, fed
// at l.550-556: idx_k is [batch, 1, tokens, index_head_dim]; a bf16
// forward with use_cache keeps it bf16).
func (s BlockSparse) IndexKeyBytes(dtype DType) Bytes { return dtype.Size(int64(s.HeadDim)) }

// blockSparseCache refuses a serving engine's KV sizing of a model with
// block-sparse layers (engine names it): the indexer's keys, cached beside
// K and V, are not counted yet.
func (m Model) blockSparseCache(engine string) error {
	if m.BlockSparse == nil || len(m.BlockSparse.Layers) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %q has block-sparse attention layers, whose indexer keys (index_head_dim = %d a token) are cached beside K and V; that cache is not modelled yet", engine, m.Family, m.BlockSparse.HeadDim)
}

// resolveBlockSparse refuses what reaches the activation builder of a
// model with block-sparse layers: the indexer's ops and the block mask
// are not traced, and no serving engine's cache holds its keys here yet.
func (r *resolved) resolveBlockSparse() error {
	if r.m.BlockSparse == nil || len(r.m.BlockSparse.Layers) == 0 {
		return nil
	}
	return fmt.Errorf("model: %s has block-sparse attention layers (model.block_sparse), whose indexer's forward and cached keys are not modelled yet; its parameters, buffers, stored bytes and checkpoint are", r.m.Family)
}
