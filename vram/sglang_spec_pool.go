package vram

import "fmt"

// sglangDraftWeights are the draft's weights on one GPU: once loaded
// (steady), and as held when the release sizes the pool (atSizing: 0.5.23
// loads the draft first; 0.5.3 after, so 0).
type sglangDraftWeights struct{ steady, atSizing Bytes }

// draftWeights are the draft's weights on one GPU as the release loads
// them, the target's loaded as rin (Carve's; KVPool's own: the model as
// released at the launch's TP degree).
func (s SGLang) draftWeights(m Model, sp *sglangSpec) (sglangDraftWeights, error) {
	if !sp.loadsModel() {
		return sglangDraftWeights{}, nil
	}
	rin := Inference{Model: m, Batch: 1, PromptTokens: 1, TP: s.TP, runtime: runSGLang}
	if s.specIn != nil {
		rin = *s.specIn
	} else if r, _, err := rin.resolve(); err == nil {
		rin = r
	} else {
		return sglangDraftWeights{}, err
	}
	w, full, err := sp.weights(rin, m)
	if err != nil {
		return w, err
	}
	if !sp.rules.headroom {
		w.atSizing = full
	}
	return w, nil
}

// weights are the draft's weights once loaded and as built (full): an MTP
// draft's decoder layer (DeepseekModelNextN / Glm4MoeModelNextN build one,
// whatever num_nextn_predict_layers says) beside its own embedding and
// output layer, bf16 and split over TP, which set_embed_and_head swaps for
// the target's (0.5.23 eagle_worker_v2.py:336-379, models/deepseek_v2.py:
// 3442-3448; 0.5.3 eagle_worker.py:143-169); a draft model whole, an EAGLE
// head sharing the target's embedding (EAGLE-3: set_embed, models/llama.py:
// 910-924) or embedding and output layer (EAGLE: set_embed_and_head) where
// their shapes are the target's, a STANDALONE draft sharing nothing
// (standalone_worker_v2.py:131-136).
func (sp *sglangSpec) weights(rin Inference, m Model) (sglangDraftWeights, Bytes, error) {
	if sp.nextn != "" {
		layers := mtpLayerBytes(rin, m, 1) // mtp_draft.go
		dt := rin.UnquantizedDType
		if dt == DTypeUnset {
			dt = BF16
		}
		own := 2 * dt.Size(int64(m.Vocab)*int64(m.Hidden)) / Bytes(rin.TP)
		return sglangDraftWeights{steady: layers}, layers + own, nil
	}
	din := Inference{Model: *sp.draft, Batch: 1, PromptTokens: 1, TP: rin.TP, PP: 1, runtime: runSGLang, cc: rin.cc}
	rd, dm, err := din.resolve()
	if err != nil {
		return sglangDraftWeights{}, 0, fmt.Errorf("sglang: speculative.draft_model_path: %w", err)
	}
	full := rd.weightBytes(dm)
	w := full
	if sp.sharesWith(m) {
		for _, t := range dm.tensors() {
			if t.Role == "embedding" && !t.head || sp.algorithm == "EAGLE" && t.Role == "lm_head" {
				w -= rd.tensorBytes(t)
			}
		}
	}
	return sglangDraftWeights{steady: w}, full, nil
}

// sharesWith: an EAGLE or EAGLE-3 head of the target's vocabulary and width
// runs on the target's embedding (and, EAGLE, its output layer).
func (sp *sglangSpec) sharesWith(m Model) bool {
	d := sp.draft
	return (sp.algorithm == "EAGLE" || sp.algorithm == "EAGLE3") && d != nil && !d.TiedEmbeddings && d.Vocab == m.Vocab && d.Hidden == m.Hidden
}

// cellOf is one token of layers attention layers of m in dtype: the
// latents for MLA, else K and V of the key/value heads over TP (at least
// one), as profile_max_num_token counts a cell.
func cellOf(m Model, layers int, dtype DType, tp int) Bytes {
	if m.KVLoRARank > 0 {
		return dtype.Size(int64(m.KVLoRARank+m.QKRopeDim) * int64(layers))
	}
	kv := max(1, m.KVHeads/tp)
	return dtype.Size(int64(kv) * int64(m.HeadDim) * int64(layers) * 2)
}

// kvLayers are the draft pool's layers: an MTP draft's
// num_nextn_predict_layers, a draft model's own (its
// num_nextn_predict_layers where it has MTP layers; layer_setup.py:
// 202-228, spec_aux_hidden_state.py:146-183).
func (sp *sglangSpec) kvLayers(m Model) (Model, int) {
	if sp.nextn != "" {
		return m, m.MTPLayers
	}
	d := *sp.draft
	if d.MTPLayers > 0 {
		return d, d.MTPLayers
	}
	return d, d.Layers
}

// specPool sizes what speculative decoding adds to the pool p the
// target's cell and budget were worked out for: the target's tokens as
// the draft changes them, the draft's pool, its CUDA graphs' buffers.
func (s SGLang) specPool(m Model, sp *sglangSpec, w sglangDraftWeights, p *SGLangKVPool) {
	out := &SGLangSpecPool{Algorithm: sp.algorithm, NumSteps: sp.steps, EagleTopK: sp.topk, NumDraftTokens: sp.draftTokens,
		Weights: w.steady, WeightsAtSizing: w.atSizing}
	if sp.loadsModel() {
		d, n := sp.kvLayers(m)
		out.KVLayers, out.CellSize = n, cellOf(d, n, sp.kvDType, s.TP)
		if !sp.rules.headroom && p.Rest > 0 {
			// pool_configurator.py:310-314: the draft's layers at the
			// target's per-layer size.
			l := int64(m.attentionLayers(0, m.Layers))
			out.CellInBudget = Bytes(int64(p.CellSize) * int64(n) / l)
			p.Tokens = int64(p.Rest) / int64(p.CellSize+out.CellInBudget)
		}
	}
	if sp.rules.headroom && p.Tokens > 0 && sp.algorithm != "NGRAM" {
		// model_runner.py:1444-1465: draft (steps × topk) and verify
		// (draft tokens) slots for each request, and 100.
		out.HeadroomTokens = int64(sp.running)*int64(sp.steps*sp.topk+sp.draftTokens) + 100
		p.Tokens += out.HeadroomTokens
	}
	if m.KVLoRARank == 0 {
		p.KSize = Bytes(p.Tokens) * p.CellSize / 2
	}
	out.MaxRunningRequests = sp.running
	if !sp.rules.headroom {
		// resolve_max_num_reqs, kv_cache_configurator.py:3119-3134.
		out.MaxRunningRequests = int(min(int64(sp.running), p.Tokens/2))
	}
	p.RunningCap = out.MaxRunningRequests
	if sp.loadsModel() {
		out.KVTokens = p.Tokens
		out.KVBytes = Bytes(p.Tokens) * out.CellSize
	}
	if sp.algorithm == "NGRAM" {
		out.Buffers = sp.buffers(m, out.MaxRunningRequests)
	} else {
		out.GraphBS = s.specGraphBS(sp, out.MaxRunningRequests)
		out.Buffers = sp.buffers(m, out.GraphBS)
	}
	out.OutsideBudget = out.Buffers
	switch {
	case sp.rules.headroom:
		out.OutsideBudget += w.steady + out.KVBytes + Bytes(out.HeadroomTokens)*p.CellSize
	case out.KVBytes > Bytes(p.Tokens)*out.CellInBudget:
		out.OutsideBudget += out.KVBytes - Bytes(p.Tokens)*out.CellInBudget
	}
	out.Draft = sp.describe(m, out, p)
	p.Speculative = out
}

// specGraphBS is the draft CUDA graphs' largest batch: the decode capture
// sizes for speculative decoding up to cuda_graph_max_bs (0.5.3
// server_args.py:685-713; 0.5.23 arg_groups/cuda_graph_hook.py:500-532,
// which adds max_bs itself), capped at the request slots
// (get_batch_sizes_to_capture: 0.5.3 cuda_graph_runner.py:170-197, 0.5.23
// runner/base_cuda_graph_runner.py:70-104).
func (s SGLang) specGraphBS(sp *sglangSpec, slots int) int {
	maxBS := s.CUDAGraphMaxBS
	if maxBS == 0 {
		maxBS = 160 // the fallback without a GPU reading
		if rel, _, err := s.release(); err == nil && s.gpuMiB > 0 {
			_, maxBS = sglangGPUSizes(s.gpuMiB, s.TP, rel)
		}
	}
	end40 := 64 // 0.5.3: range(40, 64, 4); 0.5.23: range(40, 65, 4)
	if !sp.rules.headroom {
		end40 = 65
	}
	largest := 0
	for _, r := range [][3]int{{1, 9, 1}, {10, 33, 2}, {40, end40, 4}, {72, 257, 8}, {272, maxBS + 1, 16}} {
		for v := r[0]; v < r[1] && v <= maxBS; v += r[2] {
			largest = max(largest, v)
		}
	}
	if !sp.rules.headroom {
		largest = maxBS
	}
	return max(1, min(largest, slots))
}

// buffers are the draft's persistent GPU buffers, allocated after the
// pool: the draft decode and draft-extend CUDA graphs' static inputs for
// batches of up to bs requests (topk tokens a request over steps steps;
// the draft tokens — steps + 1 in 0.5.3 — a request to extend), hidden
// states in the model dtype; NGRAM's tables for bs requests.
func (sp *sglangSpec) buffers(m Model, bs int) Bytes {
	b, k, st, d := int64(bs), int64(sp.topk), int64(sp.steps), int64(sp.draftTokens)
	if sp.algorithm == "NGRAM" {
		// ngram_worker.py (0.5.23 l.174-203, 0.5.3 l.68-95): draft_tokens,
		// positions and three retrieve tables int64 [bs, D], tree_mask bool
		// [bs·D·D].
		return Bytes(40*b*d + b*d*d)
	}
	h, v := int64(m.Hidden), int64(m.Vocab)
	if sp.draft != nil {
		h, v = int64(sp.draft.Hidden), int64(sp.draft.Vocab)
	}
	hx := h // the target's hidden states the draft extends over
	if sp.algorithm == "EAGLE3" {
		hx = 3 * h // three auxiliary layers' states
	}
	if sp.rules.headroom {
		// 0.5.3 eagle_draft_cuda_graph_runner.py:84-102: input_ids,
		// positions int64 [bs·topk], mrope_positions int64 [3, bs·topk],
		// out_cache_loc int64 [bs·topk·steps], topk_p fp32 and topk_index
		// int64 [bs, topk], req_pool_indices and seq_lens int32 [bs],
		// hidden_states [bs, hidden].
		dec := 52*b*k + 8*b*k*st + 8*b + 2*b*h
		// eagle_draft_extend_cuda_graph_runner.py:61-148: n = bs·(steps +
		// 1) tokens: input_ids, out_cache_loc, positions int64, mrope int64
		// [3, n], hidden_states [n, hx]; four int32 [bs]; the next-token
		// logits fp32 [bs, vocab].
		n := b * (st + 1)
		return Bytes(dec + 48*n + 2*n*hx + 16*b + 4*b*v)
	}
	// 0.5.23 eagle_draft_cuda_graph_runner.py:173-230: as 0.5.3's with
	// int64 req_pool_indices and seq_lens, extend_seq_lens and top_ks int32
	// and temperatures fp32 [bs]; no hidden_states for STANDALONE.
	dec := 52*b*k + 8*b*k*st + 28*b
	// eagle_draft_extend_cuda_graph_runner.py:153-212: n = bs·draft tokens;
	// req_pool_indices, seq_lens and select_index int64, three int32 [bs];
	// the logits buffer is the runner's shared one.
	n := b * d
	ext := 48*n + 36*b
	if sp.algorithm != "STANDALONE" {
		dec += 2 * b * h
		ext += 2 * n * hx
	}
	return Bytes(dec + ext)
}

// describe says what the draft is, and the rules that sized it, in the
// pool's notes.
func (sp *sglangSpec) describe(m Model, out *SGLangSpecPool, p *SGLangKVPool) string {
	var draft string
	switch {
	case sp.nextn != "":
		draft = fmt.Sprintf("the checkpoint's own MTP layer (%s)", sp.nextn)
		out.Notes = append(out.Notes, fmt.Sprintf("%s: SGLang loads the served checkpoint as %s: one decoder layer with enorm, hnorm and eh_proj, and an embedding and output layer of its own that it swaps for the model's once the draft's pool is made; the draft's pool keeps %d layer(s) (num_nextn_predict_layers) for each of the model's token slots",
			sp.given, sp.nextn, out.KVLayers))
	case sp.draft != nil:
		draft = orDefault(sp.draft.Name, sp.draft.Family+" draft")
		share := "loaded whole, sharing nothing with the model (standalone_worker_v2.py:131-136)"
		switch {
		case sp.sharesWith(m) && sp.algorithm == "EAGLE3":
			share = "on the model's embedding (set_embed), its output layer its own (an EAGLE-3 checkpoint's draft vocabulary is smaller than counted here); EAGLE-3's fc over three hidden states is not in a plain model's layout"
		case sp.sharesWith(m):
			share = "on the model's embedding and output layer (set_embed_and_head)"
		case sp.algorithm != "STANDALONE":
			share = "its embedding counted (its shape is not the model's, so the model's is not shared)"
		}
		out.Notes = append(out.Notes, fmt.Sprintf("%s: the draft (%d layer(s)) runs %s; its pool keeps its own %d layer(s) for each of the model's token slots", sp.given, sp.draft.Layers, share, out.KVLayers))
	default:
		draft = "none: NGRAM proposes from a trie of the tokens already seen, on the CPU"
	}
	if sp.rules.headroom {
		out.Notes = append(out.Notes, "0.5.3 sizes the model's pool before the draft loads: the draft's weights, its pool, the headroom slots and the draft's CUDA graphs come out of what mem_fraction_static keeps free (model_runner.py:1444-1465)")
	} else if sp.loadsModel() {
		out.Notes = append(out.Notes, fmt.Sprintf("0.5.23 loads the draft before sizing the pool (%v held then, its own embedding and output layer included) and prices its %d layer(s) into each token at the model's per-layer size, %v: max_total_num_tokens = budget // (%v + %v) (pool_configurator.py:259-314)",
			out.WeightsAtSizing, out.KVLayers, out.CellInBudget, p.CellSize, out.CellInBudget))
	}
	if out.OutsideBudget > p.Reserved {
		out.Notes = append(out.Notes, fmt.Sprintf("what the draft takes beyond the pool's budget, %v, is more than mem_fraction_static keeps free, %v: SGLang runs out of memory loading the draft or capturing its graphs; lower --mem-fraction-static", out.OutsideBudget, p.Reserved))
	}
	return draft
}

// specCarve finishes the speculative part of a carve on g: the draft's
// share of the default fraction (derived: the fraction was SGLang's own),
// and what nvidia-smi shows once started — the context, both models'
// weights, both pools and a hybrid's state (the target's pool its tokens'
// cells, no longer its whole budget).
func (s SGLang) specCarve(p *SGLangKVPool, derived bool, g GPU) {
	sp := p.Speculative
	if sp == nil {
		return
	}
	if rel, _, err := s.release(); err == nil && derived {
		sp.DefaultReserve = Bytes(rel.spec.reserveMiB[s.Speculative.Algorithm] * float64(MiB))
	}
	p.DeviceUsed = g.Context + p.NCCL + p.CustomAllReduce + p.Weights + sp.Weights + Bytes(p.Tokens)*p.CellSize + sp.KVBytes + p.State
}
