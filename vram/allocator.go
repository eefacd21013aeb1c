package vram

import (
	"sort"
)

// A model of PyTorch's CUDA caching allocator
// (c10/cuda/CUDACachingAllocator.cpp), enough to turn a sequence of tensor
// allocations and frees into memory_allocated and memory_reserved:
//
//   - every request is rounded up to a multiple of 512 bytes (kMinBlockSize);
//   - requests ≤ 1 MiB (kSmallSize) come from the small pool, whose segments
//     are 2 MiB cudaMallocs (kSmallBuffer); larger requests use the large pool:
//     below 10 MiB (kMinLargeAlloc) a new segment is 20 MiB (kLargeBuffer),
//     above it the request rounded up to 2 MiB (kRoundLarge);
//   - a request takes the smallest cached free block of its pool that fits
//     (best fit), which is split when the remainder is ≥ 512 B (small pool) or
//     > 1 MiB (large pool); blocks of max_split_size or more are not split
//     and are only used for requests within kLargeBuffer of their size;
//   - freed blocks merge with free neighbours of the same segment and stay
//     reserved: nothing goes back to the driver without empty_cache();
//   - with expandable_segments each pool is one segment that grows by 2 MiB
//     (small) or 20 MiB (large) pages at its end;
//   - a block belongs to the stream its segment was allocated on: a request
//     made on one stream reuses only that stream's free blocks (the pools'
//     BlockComparator orders by stream first, get_free_block searches its
//     own), so memory cached by a collective's stream is not reused by the
//     compute stream.

const (
	kMinBlockSize  Bytes = 512
	kSmallSize     Bytes = 1 << 20
	kSmallBuffer   Bytes = 2 << 20
	kMinLargeAlloc Bytes = 10 << 20
	kLargeBuffer   Bytes = 20 << 20
	kRoundLarge    Bytes = 2 << 20
)

// AllocatorConfig mirrors the PYTORCH_CUDA_ALLOC_CONF options that change
// reserved memory. The zero value is PyTorch's default.
type AllocatorConfig struct {
	ExpandableSegments bool  `json:"expandable_segments,omitempty"`
	MaxSplitSize       Bytes `json:"max_split_size,omitempty"` // 0: unlimited
}

type block struct {
	seg        *segment
	off, size  Bytes
	free       bool
	prev, next *block
	idx        int32 // in Allocator.blocks
}

// less orders a pool's free blocks by size, then segment, then offset
// (PyTorch's BlockComparatorSize).
func less(x, y *block) bool {
	if x.size != y.size {
		return x.size < y.size
	}
	if x.seg != y.seg {
		return x.seg.id < y.seg.id
	}
	return x.off < y.off
}

type segment struct {
	id     int
	stream int
	size   Bytes
	small  bool
	first  *block
	last   *block
}

// Allocator replays allocations through the caching-allocator model.
type Allocator struct {
	cfg AllocatorConfig
	// free lists each pool's free blocks by their index in blocks (per
	// stream, per pool: 0 small, 1 large), sorted by less: moving indices
	// in the sorted lists moves no pointers the garbage collector tracks.
	free         [][2][]int32
	blocks       []*block      // every block record, by its idx
	grow         [][2]*segment // per stream: expandable segments
	stream       int           // the stream requests are made on (SetStream)
	reservedOn   []Bytes       // reserved by stream
	live         []*block      // by handle
	asked        []Bytes       // by handle: the size requested
	allocated    Bytes
	requested    Bytes // the sizes requested, before rounding (PyTorch's requested_bytes)
	reserved     Bytes
	PeakAlloc    Bytes // max memory_allocated
	PeakAsked    Bytes // max of the sizes requested, before rounding
	PeakReserved Bytes // max memory_reserved
	Segments     int   // cudaMalloc calls
	// strays counts frees of a handle that is not live (freed twice, or
	// never allocated): the invariant pass (sanity.go) wants none.
	strays int
	// spare are block records merged away by Free, reused by split (a
	// replay splits and merges blocks hundreds of thousands of times);
	// spareSegs are segment records a reset allocator reuses.
	spare     []*block
	segs      []*segment // every segment record, by its id
	spareSegs []*segment
}

// newBlock is a block record holding b, a spare one when there is one.
func (a *Allocator) newBlock(b block) *block {
	if n := len(a.spare); n > 0 {
		nb := a.spare[n-1]
		a.spare = a.spare[:n-1]
		b.idx = nb.idx
		*nb = b
		return nb
	}
	nb := new(block)
	b.idx = int32(len(a.blocks))
	*nb = b
	a.blocks = append(a.blocks, nb)
	return nb
}

// NewAllocator returns an empty allocator.
func NewAllocator(cfg AllocatorConfig) *Allocator {
	return &Allocator{cfg: cfg, live: make([]*block, 0, 1024), free: make([][2][]int32, 1), grow: make([][2]*segment, 1), reservedOn: make([]Bytes, 1)}
}

// reset empties a for cfg as NewAllocator would, keeping its storage: every
// block and segment record becomes spare.
func (a *Allocator) reset(cfg AllocatorConfig) {
	for st := range a.free {
		a.free[st] = [2][]int32{a.free[st][0][:0], a.free[st][1][:0]}
	}
	for _, b := range a.blocks {
		*b = block{idx: b.idx}
	}
	*a = Allocator{cfg: cfg, free: a.free[:1], blocks: a.blocks, grow: append(a.grow[:0], [2]*segment{}),
		reservedOn: append(a.reservedOn[:0], 0), live: a.live[:0], asked: a.asked[:0],
		spare: append(a.spare[:0], a.blocks...), segs: a.segs, spareSegs: append(a.spareSegs[:0], a.segs...)}
}

// SetStream makes later requests on stream s (0, the default, is the
// compute stream; collectives run on others): they reuse only s's cached
// blocks. A block freed goes back to its own stream's pool.
func (a *Allocator) SetStream(s int) {
	for len(a.free) <= s {
		a.free = append(a.free, [2][]int32{})
		a.grow = append(a.grow, [2]*segment{})
		a.reservedOn = append(a.reservedOn, 0)
	}
	a.stream = s
}

// Allocated is the current memory_allocated.
func (a *Allocator) Allocated() Bytes { return a.allocated }

// Reserved is the current memory_reserved.
func (a *Allocator) Reserved() Bytes { return a.reserved }

// ReservedOn is the part of Reserved cached in stream s's segments.
func (a *Allocator) ReservedOn(s int) Bytes {
	if s < 0 || s >= len(a.reservedOn) {
		return 0
	}
	return a.reservedOn[s]
}

func roundSize(n Bytes) Bytes {
	if n < kMinBlockSize {
		return kMinBlockSize
	}
	return (n + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize
}

func segmentSize(n Bytes) Bytes {
	switch {
	case n <= kSmallSize:
		return kSmallBuffer
	case n < kMinLargeAlloc:
		return kLargeBuffer
	}
	return (n + kRoundLarge - 1) / kRoundLarge * kRoundLarge
}

func poolOf(n Bytes) int {
	if n <= kSmallSize {
		return 0
	}
	return 1
}

func (a *Allocator) maxSplit() Bytes {
	if a.cfg.MaxSplitSize > 0 {
		return a.cfg.MaxSplitSize
	}
	return MaxBytes
}

// Malloc allocates n bytes and returns a handle for Free. A zero-size
// request allocates nothing and returns -1.
func (a *Allocator) Malloc(n Bytes) int {
	if n <= 0 {
		return -1
	}
	size := roundSize(n)
	p := poolOf(size)
	b := a.bestFit(p, size)
	if b == nil {
		b = a.newSegment(p, size)
	}
	a.removeFree(p, b)
	a.split(p, b, size)
	b.free = false
	a.live = append(a.live, b)
	a.asked = append(a.asked, n)
	a.allocated += b.size
	a.requested += n
	a.PeakAlloc = max(a.PeakAlloc, a.allocated)
	a.PeakAsked = max(a.PeakAsked, a.requested)
	return len(a.live) - 1
}

// Free releases a handle from Malloc (unknown handles are ignored).
func (a *Allocator) Free(h int) {
	if h < 0 || h >= len(a.live) || a.live[h] == nil {
		if h >= 0 {
			a.strays++ // a handle, not live
		}
		return
	}
	b := a.live[h]
	a.live[h] = nil
	a.allocated -= b.size
	a.requested -= a.asked[h]
	b.free = true
	p := 1
	if b.seg.small {
		p = 0
	}
	// Merge with free neighbours.
	if n := b.next; n != nil && n.free {
		a.removeFree(p, n)
		absorb(b, n)
		a.discard(n)
	}
	if pr := b.prev; pr != nil && pr.free {
		a.removeFree(p, pr)
		absorb(pr, b)
		a.discard(b)
		b = pr
	}
	a.insertFree(p, b)
}

// discard keeps a block record merged away for newBlock.
func (a *Allocator) discard(b *block) {
	*b = block{idx: b.idx}
	a.spare = append(a.spare, b)
}

// absorb merges block right into its left neighbour left.
func absorb(left, right *block) {
	left.size += right.size
	left.next = right.next
	if right.next != nil {
		right.next.prev = left
	} else {
		left.seg.last = left
	}
}

func (a *Allocator) bestFit(p int, size Bytes) *block {
	fl := a.free[a.stream][p]
	i := sort.Search(len(fl), func(i int) bool { return a.blocks[fl[i]].size >= size })
	for ; i < len(fl); i++ {
		b := a.blocks[fl[i]]
		ms := a.maxSplit()
		if size < ms && b.size >= ms {
			continue // oversize blocks serve only large requests
		}
		if size >= ms && b.size >= size+kLargeBuffer {
			continue
		}
		return b
	}
	if a.cfg.ExpandableSegments && a.grow[a.stream][p] != nil {
		// Grow the segment from its free tail.
		seg := a.grow[a.stream][p]
		page := kLargeBuffer
		if p == 0 {
			page = kSmallBuffer
		}
		tail := seg.last
		have := Bytes(0)
		if tail.free {
			have = tail.size
		}
		need := (size - have + page - 1) / page * page
		seg.size += need
		a.reserved += need
		a.reservedOn[a.stream] += need
		a.notePeak()
		if tail.free {
			a.removeFree(p, tail)
			tail.size += need
			a.insertFree(p, tail)
			return tail
		}
		nb := a.newBlock(block{seg: seg, off: tail.off + tail.size, size: need, free: true, prev: tail})
		tail.next = nb
		seg.last = nb
		a.insertFree(p, nb)
		return nb
	}
	return nil
}

func (a *Allocator) notePeak() {
	if a.reserved > a.PeakReserved {
		a.PeakReserved = a.reserved
	}
}

func (a *Allocator) newSegment(p int, size Bytes) *block {
	n := segmentSize(size)
	if a.cfg.ExpandableSegments {
		page := kLargeBuffer
		if p == 0 {
			page = kSmallBuffer
		}
		n = (size + page - 1) / page * page
	}
	seg := a.newSegmentRecord(segment{id: a.Segments, stream: a.stream, size: n, small: p == 0})
	b := a.newBlock(block{seg: seg, size: n, free: true})
	seg.first, seg.last = b, b
	a.reserved += n
	a.reservedOn[a.stream] += n
	a.Segments++
	a.notePeak()
	if a.cfg.ExpandableSegments {
		a.grow[a.stream][p] = seg
	}
	a.insertFree(p, b)
	return b
}

// newSegmentRecord is a segment record holding s, a spare one when there
// is one.
func (a *Allocator) newSegmentRecord(s segment) *segment {
	if n := len(a.spareSegs); n > 0 {
		rec := a.spareSegs[n-1]
		a.spareSegs = a.spareSegs[:n-1]
		*rec = s
		return rec
	}
	rec := new(segment)
	*rec = s
	a.segs = append(a.segs, rec)
	return rec
}

// split carves size bytes off the front of b when the rest is worth keeping.
func (a *Allocator) split(p int, b *block, size Bytes) {
	rest := b.size - size
	ok := false
	if p == 0 || a.cfg.ExpandableSegments {
		ok = rest >= kMinBlockSize
	} else {
		ok = size < a.maxSplit() && rest > kSmallSize
	}
	if !ok {
		return
	}
	nb := a.newBlock(block{seg: b.seg, off: b.off + size, size: rest, free: true, prev: b, next: b.next})
	if b.next != nil {
		b.next.prev = nb
	} else {
		b.seg.last = nb
	}
	b.next = nb
	b.size = size
	a.insertFree(p, nb)
}

func (a *Allocator) insertFree(p int, b *block) {
	fl := a.free[b.seg.stream][p]
	i := sort.Search(len(fl), func(i int) bool { return !less(a.blocks[fl[i]], b) })
	fl = append(fl, 0)
	copy(fl[i+1:], fl[i:])
	fl[i] = b.idx
	a.free[b.seg.stream][p] = fl
}

// removeFree takes b out of its free list (found by its size, segment and
// offset, which no other free block shares).
func (a *Allocator) removeFree(p int, b *block) {
	st := b.seg.stream
	fl := a.free[st][p]
	i := sort.Search(len(fl), func(i int) bool { return !less(a.blocks[fl[i]], b) })
	if i < len(fl) && fl[i] == b.idx {
		a.free[st][p] = append(fl[:i], fl[i+1:]...)
		return
	}
	for j := range fl { // not where its key says: by its record
		if fl[j] == b.idx {
			a.free[st][p] = append(fl[:j], fl[j+1:]...)
			return
		}
	}
}

// EmptyCache returns every fully free segment to the driver.
func (a *Allocator) EmptyCache() {
	for st := range a.free {
		for p := 0; p < 2; p++ {
			keep := a.free[st][p][:0]
			for _, e := range a.free[st][p] {
				b := a.blocks[e]
				if b.prev == nil && b.next == nil && a.grow[st][p] != b.seg {
					a.reserved -= b.size
					a.reservedOn[st] -= b.size
					continue
				}
				keep = append(keep, e)
			}
			a.free[st][p] = keep
		}
	}
}
