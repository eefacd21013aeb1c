package vram

import "fmt"

// resolveCompressed refuses what reaches the activation builder of a
// model with DeepSeek-V4's compressed attention (Model.Compressed): its
// forward — hc_mult residual streams, the compressors and the indexer,
// attention over the window and the compressed entries — is not traced,
// and its cache is not the engines' pages of every token's key and value:
// each layer keeps its last sliding_window − 1 keys (one head, K = V), and
// a CSA or HCA layer also one compressed entry per compress rate tokens
// (a CSA layer's indexer its own, index_head_dim wide) and the tokens of
// the window still open. No plan that runs it would be whole, so none is
// made. Training and transformers' generate are refused before
// (family.servingOnly).
func (r *resolved) resolveCompressed() error {
	if r.m.Compressed == nil {
		return nil
	}
	return fmt.Errorf("model: %s has DeepSeek-V4's compressed attention (model.compressed), whose forward and serving cache are not modelled yet; its parameters, buffers and stored bytes are", r.m.Family)
}

// compressedCacheRefused refuses sizing a serving engine's KV cache for a
// model with compressed attention: the engines' pages hold a key and a
// value per token per layer, which is not what such a layer keeps (see
// resolveCompressed). engine prefixes the error, as the engine's own do.
func compressedCacheRefused(m Model, engine string) error {
	if m.Compressed == nil {
		return nil
	}
	return fmt.Errorf("%s: the cache of DeepSeek-V4's compressed attention (model.compressed: a sliding window of keys in every layer, compressed entries in its CSA and HCA layers) is not modelled yet", engine)
}
