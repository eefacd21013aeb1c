package vram

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math"
	"reflect"
	"slices"
	"sync"
)

// Answers kept per plan. A plan a program asks about again — the plan
// CLI's report and then its verdict, a what-if's base beside each change,
// a comparison or a device list judging one plan on GPUs whose allocator
// sees the same step — gets its estimate and its replay from a cache
// instead of computing them anew. (The cache lives as long as the program:
// a notebook runs each cell as a program of its own.)
//
// The key is the plan's whole value written out field by field (planKey:
// every field, exported or not, pointers followed, maps in key order), so
// two plans share an answer only when every field agrees, and a plan
// changed after it was asked about — in place, through a pointer it
// shares — is a new key. A replay, milliseconds of work for an answer of a
// few hundred bytes, is kept the first time; an estimate, tens of
// microseconds for a few KiB, the second time it is asked for (a sweep of
// plans seen once stores nothing). The cache holds at most
// 2 × answersPerGeneration answers: when the newer half fills, the older
// is dropped. What a caller gets is a copy: changing it changes no answer.
// ForgetAnswers empties the caches.

// answersPerGeneration and bytesPerGeneration bound one cache generation:
// an estimate keeps its block's tensor list (~40 tensors, a few KiB; a
// plan at validation's bounds, 200,000), a replay its points when
// recorded.
const (
	answersPerGeneration = 1024
	bytesPerGeneration   = 32 * MiB
)

// maxKeyDepth bounds planKey's nesting (pointers and containers); deeper
// values, which no plan has, are not cached.
const maxKeyDepth = 16

// answers is a cache of values of type V by plan key.
type answers[V any] struct {
	// keepFirst: an answer is kept the first time it is computed, not
	// the second (answers.worthKeeping).
	keepFirst bool
	mu        sync.Mutex
	cur, old  map[string]kept[V]
	curBytes  Bytes               // what cur holds, roughly
	seen      map[uint64]struct{} // keys asked for once, by hash
}

// kept is an answer and about what it holds, its key included.
type kept[V any] struct {
	v    V
	size Bytes
}

// keySeed hashes keys for answers.seen.
var keySeed = maphash.MakeSeed()

// get is the answer under key, if kept; it moves to the newer generation.
func (c *answers[V]) get(key []byte) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cur[string(key)]; ok {
		return e.v, true
	}
	e, ok := c.old[string(key)]
	if ok {
		c.store(key, e)
	}
	return e.v, ok
}

// worthKeeping reports whether the answer under key, just computed, is
// worth keeping: always where c keeps first answers, else when key was
// asked for before (which it notes).
func (c *answers[V]) worthKeeping(key []byte) bool {
	if c.keepFirst {
		return true
	}
	h := maphash.Bytes(keySeed, key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[h]; ok {
		return true
	}
	if c.seen == nil || len(c.seen) >= 4*answersPerGeneration {
		c.seen = make(map[uint64]struct{})
	}
	c.seen[h] = struct{}{}
	return false
}

// put keeps v, of about size bytes, under key; an answer larger than a
// generation is not kept.
func (c *answers[V]) put(key []byte, v V, size Bytes) {
	size += Bytes(len(key))
	if size > bytesPerGeneration {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.store(key, kept[V]{v, size})
}

// store keeps e under key in the newer generation (c.mu held).
func (c *answers[V]) store(key []byte, e kept[V]) {
	if c.cur == nil || len(c.cur) >= answersPerGeneration || c.curBytes+e.size > bytesPerGeneration {
		c.old, c.cur, c.curBytes = c.cur, make(map[string]kept[V]), 0
	}
	c.cur[string(key)] = e
	c.curBytes += e.size
}

// forget empties c.
func (c *answers[V]) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.cur)
	clear(c.seen)
	c.old, c.curBytes = nil, 0
}

var (
	estimates answers[TrainingEstimate]
	replays   = answers[Replay]{keepFirst: true}
)

// keyScratch holds a request and its key.
type keyScratch struct {
	buf    []byte
	replay replayRequest
}

// replayRequest is what a replay's answer depends on: the plan, the
// allocator settings asked for, the cuBLAS workspace (the GPU's), whether
// points are recorded. The context is added to the answer afterwards.
type replayRequest struct {
	t         Training
	alloc     AllocatorConfig
	workspace Bytes
	points    bool
}

// done gives ks back to the pool, holding nothing of the caller's.
func (ks *keyScratch) done() {
	ks.replay = replayRequest{}
	keyScratches.Put(ks)
}

// key writes the key of *v (a pointer into ks) to ks's buffer.
func (ks *keyScratch) key(v any) ([]byte, bool) {
	key, ok := planKey(ks.buf[:0], v)
	ks.buf = key
	return key, ok
}

// ForgetAnswers empties the caches of training estimates and replays: the
// next request for each plan computes it anew. Benchmarks of the
// computation call it, and so may a long-lived process short of memory.
func ForgetAnswers() {
	estimates.forget()
	replays.forget()
}

// planKey appends v's value to buf, field by field; false when a value
// cannot be written (a kind no plan has, or nesting past maxKeyDepth).
func planKey(buf []byte, v any) ([]byte, bool) {
	return appendKey(buf, reflect.ValueOf(v), 0)
}

// appendKey writes v: numbers as varints or bits, strings and containers
// with their lengths, pointers and slices with whether they are nil, so
// that no two values of one type write the same bytes.
func appendKey(buf []byte, v reflect.Value, depth int) ([]byte, bool) {
	if depth > maxKeyDepth {
		return buf, false
	}
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			return append(buf, 1), true
		}
		return append(buf, 0), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return binary.AppendVarint(buf, v.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return binary.AppendUvarint(buf, v.Uint()), true
	case reflect.Float32, reflect.Float64:
		return binary.LittleEndian.AppendUint64(buf, math.Float64bits(v.Float())), true
	case reflect.String:
		return append(binary.AppendUvarint(buf, uint64(v.Len())), v.String()...), true
	case reflect.Pointer:
		if v.IsNil() {
			return append(buf, 0), true
		}
		return appendKey(append(buf, 1), v.Elem(), depth+1)
	case reflect.Struct:
		ok := true
		for i := 0; i < v.NumField() && ok; i++ {
			buf, ok = appendKey(buf, v.Field(i), depth)
		}
		return buf, ok
	case reflect.Slice, reflect.Array:
		return appendElems(buf, v, depth)
	case reflect.Map:
		return appendMap(buf, v, depth)
	}
	return buf, false // interfaces, functions, channels: no plan field
}

// appendElems writes a slice or an array: nil or not, its length, its
// elements.
func appendElems(buf []byte, v reflect.Value, depth int) ([]byte, bool) {
	if v.Kind() == reflect.Slice && v.IsNil() {
		return append(buf, 0), true
	}
	buf = binary.AppendUvarint(append(buf, 1), uint64(v.Len()))
	ok := true
	for i := 0; i < v.Len() && ok; i++ {
		buf, ok = appendKey(buf, v.Index(i), depth+1)
	}
	return buf, ok
}

// appendMap writes a map: nil or not, its length, its entries in the order
// of their keys' bytes.
func appendMap(buf []byte, v reflect.Value, depth int) ([]byte, bool) {
	if v.IsNil() {
		return append(buf, 0), true
	}
	type entry struct{ k, v []byte }
	entries := make([]entry, 0, v.Len())
	for it := v.MapRange(); it.Next(); {
		k, ok := appendKey(nil, it.Key(), depth+1)
		if !ok {
			return buf, false
		}
		e, ok := appendKey(nil, it.Value(), depth+1)
		if !ok {
			return buf, false
		}
		entries = append(entries, entry{k, e})
	}
	slices.SortFunc(entries, func(a, b entry) int { return bytes.Compare(a.k, b.k) })
	buf = binary.AppendUvarint(append(buf, 1), uint64(len(entries)))
	for _, e := range entries {
		buf = append(append(buf, e.k...), e.v...)
	}
	return buf, true
}

// size is about what est's lists hold.
func (est TrainingEstimate) size() Bytes {
	return Bytes(len(est.Block.Tensors))*Bytes(reflect.TypeFor[ActTensor]().Size()) + Bytes(len(est.Timeline.Events))*Bytes(reflect.TypeFor[Event]().Size()) +
		Bytes(len(est.Notes))*128
}

// size is about what rep's points hold.
func (rep Replay) size() Bytes {
	return Bytes(len(rep.Points)) * Bytes(reflect.TypeFor[ReplayPoint]().Size())
}

// clone is est with lists of its own: what the cache keeps, and what it
// hands out, share nothing a caller could change.
func (est TrainingEstimate) clone() TrainingEstimate {
	est.Notes = slices.Clone(est.Notes)
	est.Block.Tensors = slices.Clone(est.Block.Tensors)
	est.Timeline.Events = slices.Clone(est.Timeline.Events)
	est.Timeline.block.Tensors = est.Block.Tensors
	return est
}

// clone is rep with a points list of its own.
func (rep Replay) clone() Replay {
	rep.Points = slices.Clone(rep.Points)
	rep.comms = slices.Clone(rep.comms)
	return rep
}
