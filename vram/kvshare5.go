package vram

import (
	"fmt"
	"slices"
)

// KV-shared layers (Model.KVSharedLayers: Gemma 3n's and Gemma 4's
// num_kv_shared_layers) as transformers 5.23.0 builds and trains them
// (models/gemma3n/modeling_gemma3n.py and configuration_gemma3n.py
// kv_sharing_modes l.206-232; models/gemma4/modeling_gemma4.py and
// configuration_gemma4.py kv_sharing_modes l.226-252, the same rule). The
// last num_kv_shared_layers layers ("reuse") build no k_proj, v_proj or
// k_norm (gemma3n l.1175-1193; gemma4 l.1169-1194) and attend with the
// keys and values of the last earlier layer of their kind ("store"). The
// model's forward makes one dict (KVSharingDict, cache_utils.py
// l.2391-2405; gemma3n l.1711, gemma4 l.1669-1672) and passes it to every
// layer; the store layer puts its keys and values in it after its cache
// update (gemma3n l.1232-1235, gemma4 l.1235-1239), and each shared layer
// attends with those of its kind (gemma3n l.1220-1221, gemma4 l.1221-1222)
// and projects none of its own. With no cache and no checkpoint that
// changes only who reads the tensors; what it adds to memory:
//   - the store layer's keys and values live as long as their last
//     holder: its own attention's saved tensors (SDPA saves k and v), the
//     shared layers' (the same storages), the cache's (use_cache), else the
//     dict, until the model's forward returns; under checkpointing each
//     layer's checkpoint captures the dict among its keyword arguments
//     (transformers' GradientCheckpointingLayer passes
//     partial(forward, **kwargs), modeling_layers.py l.120; torch's
//     non-reentrant checkpoint keeps its function until the layer's
//     backward), so they live until the first layer's backward
//     (kvDictPart);
//   - their gradients: made by the shared layers' backward, they wait
//     until the store layer's backward consumes them (kvSharingGrads).
// Gemma 4's forward slices its inputs to logits_to_keep before the first
// shared layer (_maybe_slice_kv_shared_inputs, gemma4 l.1679-1689,
// 1794-1848): in training logits_to_keep is 0, a slice of every token,
// which torch's indexing returns as the tensor itself.

// kvSharingCheck is kv_sharing_modes' rule (configuration_gemma3n.py
// l.216-222, configuration_gemma4.py l.236-241 at 5.23.0): a shared layer
// reuses an earlier layer's keys and values, and the layers before the
// shared ones hold every kind of layer.
func kvSharingCheck(m Model) error {
	if m.KVSharedLayers < 0 || m.KVSharedLayers >= m.Layers {
		return fmt.Errorf("model.kv_shared_layers = %d must be in [0, layers = %d): a shared layer reuses an earlier layer's keys and values", m.KVSharedLayers, m.Layers)
	}
	if m.KVSharedLayers == 0 {
		return nil
	}
	first := m.Layers - m.KVSharedLayers
	var all, producers []bool
	for i := 0; i < m.Layers; i++ {
		if k := m.LocalLayer(i); !slices.Contains(all, k) {
			all = append(all, k)
		}
		if k := m.LocalLayer(i); i < first && !slices.Contains(producers, k) {
			producers = append(producers, k)
		}
	}
	if len(all) != len(producers) {
		return fmt.Errorf("model.kv_shared_layers = %d: the first %d layers must hold a layer of every kind (sliding and full attention) for the shared ones to reuse", m.KVSharedLayers, first)
	}
	if m.Layers > blockKinds {
		return fmt.Errorf("model.layers = %d: with KV-shared layers the engine builds each layer apart (Model.blockKind), at most %d", m.Layers, blockKinds)
	}
	return nil
}

// kvSource is the layer whose keys and values layer i attends with: for
// a KV-shared layer the last earlier layer of its kind before the shared
// ones; -1 for a layer with its own.
func kvSource(m Model, i int) int {
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

// kvStore reports whether layer i stores its keys and values in the
// dict: the last of its kind before the shared layers, where there are
// shared layers (kv_sharing_modes "store", whether or not a shared layer
// of its kind reads them).
func kvStore(m Model, i int) bool {
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

// kvLastReader is the last layer that attends with store layer s's keys
// and values, whose backward makes their gradient first; -1 for none.
func kvLastReader(m Model, s int) int {
	for i := m.Layers - 1; i > s; i-- {
		if kvSource(m, i) == s {
			return i
		}
	}
	return -1
}

// sharedKVShape is store layer src's keys and values as the dict hands
// them on: per-rank widths (of src's own attention shape,
// attentionShaped: r is the model's resolved plan, or one shaped for a
// layer of src's kind) and dtypes, k after the rotary embedding
// (blockPlan.ropeDType of the projection's compute dtype), v after its
// weightless norm (that dtype); under use_cache the cache's copies, both
// in k's dtype (DynamicLayer.update, attention.go).
func (r *resolved) sharedKVShape(src int) (kw, vw int64, kd, vd DType) {
	g := r.attentionShaped(src)
	p := g.blockPlan(src)
	d := g.decoderDims(p, src)
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

// kvDictPart is what the dict keeps of the store layers' keys and values
// over tokens tokens under checkpointing (the layers' checkpoints capture
// it): a mask part every layer reads, which the blocks' backward frees
// after the first checkpointed layer's (edges.go masks); none without
// checkpointing, where the layers' own holders keep them.
func kvDictPart(r *resolved, tokens int64) []maskPart {
	m := r.m
	if m.KVSharedLayers == 0 || r.Checkpointing == CheckpointNone {
		return nil
	}
	var sum Bytes
	for s := 0; s < m.Layers; s++ {
		if kvStore(m, s) {
			k, v := r.sharedKVBytes(s, tokens)
			sum = addBytes(sum, addBytes(k, v))
		}
	}
	return []maskPart{{bytes: sum, from: 0, to: m.Layers}}
}

// kvRead is what a layer's attention read: the first op of its core (a
// shared layer's keys' and values' gradients appear in its backward, a
// store layer's are consumed after it) and the keys and values.
type kvRead struct {
	at   int
	k, v *actT
}

// sharedKVAttention is a KV-shared layer's attention on q, its query
// after q_proj and q_norm, and a, the sublayer's input (gemma3n
// l.1212-1221, gemma4 l.1213-1222 at 5.23.0): the rotary embedding on q
// alone, then attention and o_proj (attendAndProject) with its source
// layer's keys and values, which that layer's block counts.
func (b *actBuilder) sharedKVAttention(p blockPlan, d blockDims, a, q *actT) *actT {
	src := kvSource(b.r.m, d.layer)
	s := qkv{kd: d.kvDim}
	dq := p.ropeDType(q.dtype)
	s.q = b.op("q_rope", b.size(d.qDim, dq), dq, list(q))
	kb, vb := b.r.sharedKVBytes(src, b.tokens)
	_, _, kd, vd := b.r.sharedKVShape(src)
	s.k, s.v = b.external("shared_k", kb, kd), b.external("shared_v", vb, vd)
	b.kv = kvRead{at: len(b.ops), k: s.k, v: s.v}
	out := b.attendAndProject(p, d, a, s)
	b.countedElsewhere(s.k, s.v)
	return out
}

// dictHolds keeps a store layer's keys and values (k and v as attention
// reads them) until the model's forward returns where nothing else
// does: no cache (which holds them itself) and no checkpoint (whose
// captured dict kvDictPart counts).
func (b *actBuilder) dictHolds(p blockPlan, layer int, k, v *actT) {
	if !p.useCache && kvStore(b.r.m, layer) && b.r.Checkpointing == CheckpointNone {
		k.forwardHeld, v.forwardHeld = true, true
	}
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

// kvSharingWaits adds to layer's ops (b) what waits through their
// backward for other layers: the shared keys' and values' gradients
// (kvSharingGrads) and what the store layers' recomputations leave alive
// (kvDictGraphs). r is the model's resolved plan (not one shaped for the
// layer: the store layers are of either kind).
func (b *actBuilder) kvSharingWaits(r *resolved, layer int) {
	if r.m.KVSharedLayers == 0 {
		return
	}
	b.kvSharingGrads(r, layer, b.kv.at)
	b.kvDictGraphs(r, layer, b.kv.k, b.kv.v)
}

// kvSharingGrads adds the shared keys' and values' gradients to the ops of
// layer l while they wait, at being its attention's first core op
// (kvRead): from the backward of the last layer that reads a store
// layer's (its ops before at) through the layers between to the store
// layer's own backward (its ops from at on), which consumes them.
func (b *actBuilder) kvSharingGrads(r *resolved, l, at int) {
	m := r.m
	for s := 0; s <= l; s++ {
		last := kvLastReader(m, s)
		if !kvStore(m, s) || last < l {
			continue
		}
		k, v := r.sharedKVBytes(s, b.tokens)
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
// saved on the keys' and values' path (the layer's input, the norms',
// the projections' inputs; Gemma 3n's AltUp prediction) lives while the
// dict does: past each one's release in the store layer's own backward
// (its ops below), then through the backward of the layers below it
// while a checkpoint keeps the dict (kvDictPart). The keys and values
// themselves are the dict part's.
func (b *actBuilder) kvDictGraphs(r *resolved, l int, k, v *actT) {
	m := r.m
	if !r.dictKept(l) {
		return
	}
	for s := l; s < m.Layers; s++ {
		if !kvStore(m, s) || !r.checkpointed(s) {
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
		g := kvGraph(r, s)
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

// kvGraph is what store layer s's recomputation leaves alive with its
// keys and values (kvDictGraphs): the tensors saved on their path, its
// input among them. Its ops are its family's layer's: Gemma 3n's
// (gemma3nLayer), else the shared decoder block's on s's attention shape.
func kvGraph(r *resolved, s int) Bytes {
	var b *actBuilder
	if r.rec.altUp {
		b, _, _ = gemma3nLayer(r, s)
	} else {
		b, _ = decoderOps(r.attentionShaped(s), s)
	}
	var sum Bytes
	for _, t := range b.graphSaves(b.kv.k, b.kv.v) {
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
