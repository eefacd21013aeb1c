package vram

// towerRecords reports whether a frozen tower's forward records its
// graph: from transformers 5.0, activation_checkpointing_enable calls
// enable_input_require_grads for any model whose main input is input_ids
// (5.23.0 modeling_utils.py:3181-3189), which hooks the input embeddings
// of every PreTrainedModel inside it (l.2137-2170), the tower's patch
// embedding among them: its output requires a gradient, so the tower's
// ops save what their input's gradient needs, and the backward runs
// through the tower, though its weights get none. 4.57.6 called it only
// with PEFT, on the language model's embeddings alone (l.3714, 2849-2858).
//
// A tower whose class finds no input embeddings is passed by
// (family.unhookedTower): EmbeddingAccessMixin.get_input_embeddings
// looks for the class's _input_embed_layer ("embed_tokens" unless the
// class names another) on the module, on its embeddings, model or
// language_model, or its base model, and raises NotImplementedError
// where none has it (l.969-1006), which enable_input_require_grads
// catches and skips (l.2152-2156). Qwen3-VL's and Qwen3.5's vision
// models name none and hold patch_embed, pos_embed and blocks
// (models/qwen3_vl/modeling_qwen3_vl.py:616-651,
// models/qwen3_5/modeling_qwen3_5.py:1117-1150), nor does Gemma 4's
// (models/gemma4/modeling_gemma4.py:2055-2071): their frozen blocks run
// without a graph, as in 4.57.
func (r *resolved) towerRecords() bool {
	if f := lookupFamily(r.m.Vision.Tower.Family); f != nil && f.unhookedTower {
		return false
	}
	return !r.lib.before(5, 0) && r.runsTransformers() && r.Checkpointing == CheckpointFull
}
