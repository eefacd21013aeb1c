package vram

import "slices"

// Gemma 3n's KV-shared layers in training, as transformers 5.23.0 runs
// them (models/gemma3n/modeling_gemma3n.py; configuration_gemma3n.py
// kv_sharing_modes l.206-232). The model's forward makes one dict
// (KVSharingDict, l.1690) and passes it to every layer; the last layer of
// each kind before the shared ones ("store") puts its keys and values in
// it after its cache update (l.1227-1231), and each shared layer
// ("reuse") attends with those of its kind (l.1214-1215) and projects
// none of its own. With no cache and no checkpoint that changes only who
// reads the tensors; what it adds to memory:
//   - the store layer's keys and values live as long as their last
//     holder: its own attention's saved tensors (SDPA saves k and v), the
//     shared layers' (the same storages), the cache's (use_cache), else the
//     dict, until the model's forward returns; under checkpointing each
//     layer's checkpoint captures the dict among its keyword arguments
//     (transformers' GradientCheckpointingLayer passes
//     partial(forward, **kwargs), modeling_layers.py l.120; torch's
//     non-reentrant checkpoint keeps its function until the layer's
//     backward), so they live until the first layer's backward
//     (gemma3nKVDictPart);
//   - their gradients: made by the shared layers' backward, they wait
//     until the store layer's backward consumes them (kvSharingGrads).

// gemma3nKVSource is the layer whose keys and values layer i attends
// with: for a KV-shared layer the last earlier layer of its kind before
// the shared ones; -1 for a layer with its own.
func gemma3nKVSource(m Model, i int) int {
	if !m.KVSharedLayer(i) {
		return -1
	}
	for s := m.Layers - m.KVSharedLayers - 1; s >= 0; s-- {
		if m.LocalLayer(s) == m.LocalLayer(i) {
			return s
		}
	}
	return -1
}

// gemma3nKVStore reports whether layer i stores its keys and values in
// the dict: the last of its kind before the shared layers, where there
// are shared layers (kv_sharing_modes "store", whether or not a shared
// layer of its kind reads them).
func gemma3nKVStore(m Model, i int) bool {
	first := m.Layers - m.KVSharedLayers
	if m.KVSharedLayers == 0 || i >= first {
		return false
	}
	for s := i + 1; s < first; s++ {
		if m.LocalLayer(s) == m.LocalLayer(i) {
			return false
		}
	}
	return true
}

// gemma3nLastReader is the last layer that attends with store layer s's
// keys and values, whose backward makes their gradient first; -1 for none.
func gemma3nLastReader(m Model, s int) int {
	for i := m.Layers - 1; i > s; i-- {
		if gemma3nKVSource(m, i) == s {
			return i
		}
	}
	return -1
}

// sharedKVShape is store layer src's keys and values as the dict hands
// them on: per-rank widths and dtypes, k after the rotary embedding
// (blockPlan.ropeDType of the projection's compute dtype), v after its
// weightless norm (that dtype); under use_cache the cache's copies, both
// in k's dtype (DynamicLayer.update, attention.go).
func (r *resolved) sharedKVShape(src int) (kw, vw int64, kd, vd DType) {
	p := r.blockPlan(src)
	d := r.decoderDims(p, src)
	kd, vd = p.ropeDType(p.e), p.e
	if p.useCache && !p.rec.cacheKeepsKV {
		vd = kd
	}
	return d.kvDim, d.vWidth(), kd, vd
}

// sharedKVBytes is the size of store layer src's keys and of its values
// over tokens tokens.
func (r *resolved) sharedKVBytes(src int, tokens int64) (k, v Bytes) {
	kw, vw, kd, vd := r.sharedKVShape(src)
	return kd.Size(mulI64(tokens, kw)), vd.Size(mulI64(tokens, vw))
}

// gemma3nKVDictPart is what the dict keeps of the store layers' keys and
// values over tokens tokens under checkpointing (the layers' checkpoints
// capture it): a mask part every layer reads, which the blocks' backward
// frees after the first checkpointed layer's (edges.go masks); none
// without checkpointing, where the layers' own holders keep them.
func gemma3nKVDictPart(r *resolved, tokens int64) []maskPart {
	m := r.m
	if !r.rec.altUp || m.KVSharedLayers == 0 || r.Checkpointing == CheckpointNone {
		return nil
	}
	var sum Bytes
	for s := 0; s < m.Layers; s++ {
		if gemma3nKVStore(m, s) {
			k, v := r.sharedKVBytes(s, tokens)
			sum = addBytes(sum, addBytes(k, v))
		}
	}
	return []maskPart{{bytes: sum, from: 0, to: m.Layers}}
}

// gemma3nAttention is Gemma3nTextAttention.forward on a, the normed active
// copy (modeling_gemma3n.py l.1199-1255 at 5.23.0): q_proj, q_norm, the
// rotary embedding; a layer of its own keys and values projects them,
// normalizes them (k_norm; v_norm without a weight) and rotates k, the
// cache copying both under use_cache, a store layer's staying in the dict;
// a shared layer attends with its source layer's, which that layer's
// block counts; then attention and o_proj (attendAndProject). It returns
// o_proj's output, the first op of attention's core (a shared layer's
// keys' and values' gradients appear in its backward, a store layer's are
// consumed after it) and the keys and values attention reads.
func (b *actBuilder) gemma3nAttention(p blockPlan, d blockDims, a *actT) (out *actT, at int, k, v *actT) {
	m := b.r.m
	s := qkv{kd: d.kvDim}
	s.q = b.linear(p, "q_proj", "q_proj", a, d.h, d.qDim)
	s.q = b.headNorm(p, "q_norm", m.Norm, s.q, d.qDim, d.heads)
	if src := gemma3nKVSource(m, d.layer); src >= 0 {
		dq := p.ropeDType(s.q.dtype)
		s.q = b.op("q_rope", b.size(d.qDim, dq), dq, list(s.q))
		kb, vb := b.r.sharedKVBytes(src, b.tokens)
		_, _, kd, vd := b.r.sharedKVShape(src)
		s.k, s.v = b.external("shared_k", kb, kd), b.external("shared_v", vb, vd)
		at = len(b.ops)
		out = b.attendAndProject(p, d, a, s)
		b.countedElsewhere(s.k, s.v)
		return out, at, s.k, s.v
	}
	s.k = b.linear(p, "k_proj", "k_proj", a, d.h, d.kvDim)
	s.v = b.linear(p, "v_proj", "v_proj", a, d.h, d.vWidth())
	s.k = b.headNorm(p, "k_norm", m.Norm, s.k, d.kvDim, d.kvHeads)
	b.rope(p, d, &s)
	s.v = b.headNorm(p, "v_norm", "l2", s.v, d.vWidth(), d.kvHeads)
	if p.useCache && !p.rec.cacheKeepsKV {
		s.k = b.op("cache.k", b.size(s.kd, s.k.dtype), s.k.dtype, list(s.k))
		s.v = b.op("cache.v", b.size(d.vWidth(), s.k.dtype), s.k.dtype, list(s.v))
	}
	if p.useCache {
		p.holdOutput(s.k, s.v)
	} else if gemma3nKVStore(m, d.layer) && b.r.Checkpointing == CheckpointNone {
		s.k.forwardHeld, s.v.forwardHeld = true, true // the dict's, until the forward returns
	}
	at = len(b.ops)
	return b.attendAndProject(p, d, a, s), at, s.k, s.v
}

// countedElsewhere drops the saving of external tensors another block
// counts (a shared layer's keys and values, the store layer's storages).
func (b *actBuilder) countedElsewhere(ts ...*actT) {
	for _, t := range ts {
		t.saved, t.release = false, -1
	}
	kept := b.saves[:0]
	for _, sr := range b.saves {
		if !slices.Contains(ts, sr.t) {
			kept = append(kept, sr)
		}
	}
	b.saves = kept
}

// kvSharingGrads adds the shared keys' and values' gradients to the ops of
// layer l while they wait, at being its attention's first core op
// (gemma3nAttention): from the backward of the last layer that reads a
// store layer's (its ops before at) through the layers between to the
// store layer's own backward (its ops from at on), which consumes them.
func (b *actBuilder) kvSharingGrads(l, at int) {
	m := b.r.m
	for s := 0; s <= l; s++ {
		last := gemma3nLastReader(m, s)
		if !gemma3nKVStore(m, s) || last < l {
			continue
		}
		k, v := b.r.sharedKVBytes(s, b.tokens)
		g := addBytes(k, v) // float tensors' gradients, their size
		from, to := 0, len(b.ops)
		switch l {
		case s:
			from = at
			b.persistGrad = addBytes(b.persistGrad, g)
		case last:
			to = at
		default:
			b.persistGrad = addBytes(b.persistGrad, g)
		}
		for i := from; i < to; i++ {
			b.ops[i].heldGrad = addBytes(b.ops[i].heldGrad, g)
		}
	}
}

// kvDictGraphs adds what the store layers' recomputations leave alive to
// layer l's ops under checkpointing. A checkpointed store layer's
// recomputation puts its new keys and values in the dict, and with them
// their autograd graph: the recomputation records one, whose nodes keep
// the tensors they save (torch's _recomputation_hook.pack_hook returns
// them, torch/utils/checkpoint.py l.1279-1318 at 2.15), so every tensor
// saved on the keys' and values' path (the layer's input, AltUp's
// prediction, input_layernorm's, the projections' inputs, the norms')
// lives while the dict does: past each one's release in the store layer's
// own backward (its ops below), then through the backward of the layers
// below it while a checkpoint keeps the dict (gemma3nKVDictPart). The keys
// and values themselves are the dict part's.
func (b *actBuilder) kvDictGraphs(l int, k, v *actT) {
	r, m := b.r, b.r.m
	if !r.dictKept(l) {
		return
	}
	for s := l; s < m.Layers; s++ {
		if !gemma3nKVStore(m, s) || !r.checkpointed(s) {
			continue
		}
		if s == l {
			for _, t := range b.graphSaves(k, v) {
				for i := 0; i < t.releaseAt() && !t.external; i++ {
					b.ops[i].heldGrad = addBytes(b.ops[i].heldGrad, t.bytes)
				}
			}
			continue
		}
		g := gemma3nKVGraph(r, s)
		for i := range b.ops {
			b.ops[i].heldGrad = addBytes(b.ops[i].heldGrad, g)
		}
		b.persistGrad = addBytes(b.persistGrad, g)
	}
}

// dictKept reports whether a checkpoint keeps the KV-sharing dict through
// layer l's backward: some layer at or below l is checkpointed (its
// checkpoint, freed after its backward, captured the dict).
func (r *resolved) dictKept(l int) bool {
	for j := 0; j <= l; j++ {
		if r.checkpointed(j) {
			return true
		}
	}
	return false
}

// gemma3nKVGraph is what store layer s's recomputation leaves alive with
// its keys and values (kvDictGraphs): the tensors saved on their path,
// its input among them.
func gemma3nKVGraph(r *resolved, s int) Bytes {
	b, _, l := gemma3nLayer(r, s)
	var sum Bytes
	for _, t := range b.graphSaves(l.k, l.v) {
		sum = addBytes(sum, t.bytes)
	}
	return sum
}

// graphSaves lists the tensors saved by the ops that lead to ts (through
// their inputs, ts's own ops included): what the autograd graph of ts
// keeps, once each.
func (b *actBuilder) graphSaves(ts ...*actT) []*actT {
	reach := make([]bool, len(b.ops))
	var todo []int
	visit := func(t *actT) {
		if t != nil && t.born >= 0 && t.born < len(b.ops) && !reach[t.born] {
			reach[t.born] = true
			todo = append(todo, t.born)
		}
	}
	for _, t := range ts {
		visit(t)
	}
	for len(todo) > 0 {
		i := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, in := range b.ops[i].ins {
			visit(in)
		}
	}
	var out []*actT
	for _, sr := range b.saves {
		if reach[sr.op] && !slices.Contains(out, sr.t) {
			out = append(out, sr.t)
		}
	}
	return out
}
