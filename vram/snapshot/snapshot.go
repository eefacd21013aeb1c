package snapshot

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/fileio"
)

// Snapshot is what torch.cuda.memory._snapshot() returns (its TypedDicts in
// torch/cuda/memory.py): the allocator's segments at the moment of the
// snapshot, and per device the trace of what it did while recording.
type Snapshot struct {
	Segments []Segment
	// Traces is device_traces: one list per device, oldest first. The
	// trace is a ring of max_entries: it may start after the process did.
	Traces [][]Event
}

// Segment is memory the allocator obtained from cudaMalloc (or mapped, for
// expandable segments); reserved memory is the sum of their sizes.
type Segment struct {
	Device        int
	Address       uint64
	TotalSize     vram.Bytes
	AllocatedSize vram.Bytes
	ActiveSize    vram.Bytes
	Stream        int64
	Type          string // "small" (≤ 1 MiB blocks) or "large"
	Expandable    bool
	Blocks        []Block
}

// Block is a piece of a segment: a live allocation or cached free space.
type Block struct {
	Address       uint64
	Size          vram.Bytes // rounded, as carved from the segment
	RequestedSize vram.Bytes // what the caller asked for
	// State: "active_allocated" (a tensor's), "active_awaiting_free"
	// (freed, waiting on another stream) or "inactive" (cached, free).
	State  string
	Frames []Frame // where it was allocated (with context recording)
}

// Frame is one stack frame: Python (file and line), C++ (stacks="all":
// file "??"), or FX-generated code (FXNode set with augment_with_fx_traces).
type Frame struct {
	Filename string
	Line     int
	Name     string
	FXNode   string // fx_node_name, for frames of torch.compile'd code
}

// Event is one trace entry (TraceEntry).
type Event struct {
	// Action: alloc, free_requested, free_completed, segment_alloc,
	// segment_free, segment_map, segment_unmap, oom, snapshot, annotate.
	Action string
	Addr   uint64
	Size   vram.Bytes
	Stream int64
	TimeUS int64
	Frames []Frame
	// UserMetadata is what the thread set with _set_memory_metadata when
	// the event happened (a phase marker, if the run sets one), or the
	// annotation of an annotate entry.
	UserMetadata string
	DeviceFree   vram.Bytes // oom: what CUDA still reported free
}

// Trace actions.
const (
	Alloc         = "alloc"
	FreeRequested = "free_requested"
	FreeCompleted = "free_completed"
	SegmentAlloc  = "segment_alloc"
	SegmentFree   = "segment_free"
	SegmentMap    = "segment_map"
	SegmentUnmap  = "segment_unmap"
	OOM           = "oom"
	SnapshotTaken = "snapshot"
	Annotate      = "annotate"
)

// MaxFileBytes is the largest snapshot file ReadFile reads. Snapshots hold a
// few KB per trace entry; a run's worth with the default max_entries is
// tens of MB.
const MaxFileBytes = 1 << 30

// ReadFile reads a snapshot pickle (what _dump_snapshot writes) of at most
// MaxFileBytes.
func ReadFile(path string) (*Snapshot, error) {
	f, _, err := fileio.Open(path, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	defer f.Close()
	s, err := Read(f, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", filepath.Base(path), err)
	}
	return s, nil
}

// Read reads a snapshot pickle of at most limit bytes from r. Anything else
// — a pickle that builds objects (torch.save files, hostile pickles), a
// truncated or corrupt one, another format, data of another shape — is an
// error saying what it found; nothing in the file is ever executed.
func Read(r io.Reader, limit int64) (*Snapshot, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("more than %d bytes", limit)
	}
	return Decode(data)
}

// Decode decodes a snapshot pickle held in memory (see decodePickle for
// what it accepts and its limits).
func Decode(data []byte) (*Snapshot, error) {
	v, err := decodePickle(data)
	if err != nil {
		return nil, err
	}
	r := reader{dicts: map[*pdict]dict{}, frames: map[*plist][]Frame{}, blocks: map[*plist][]Block{}, frame: map[*pdict]Frame{}}
	return r.snapshot(v)
}

// maxKept bounds what a snapshot holds once read: segments, blocks, trace
// entries and their frames, a shared list counted each time it is used. A
// file that shares one list of blocks or frames many times over (the memo
// lets it) is read once, and refused when its logical size passes this, so
// what comes back costs no more to walk than to read.
const maxKept = 1 << 24

// reader converts the decoded pickle, reading each shared container once.
type reader struct {
	kept   int
	dicts  map[*pdict]dict
	frames map[*plist][]Frame
	frame  map[*pdict]Frame
	blocks map[*plist][]Block
}

func (r *reader) keep(n int) error {
	if r.kept += n; r.kept > maxKept {
		return fmt.Errorf("not a memory snapshot: it holds more than %d segments, blocks, entries and frames "+
			"(its lists are shared so often that walking them would cost far more than reading the file)", maxKept)
	}
	return nil
}

// errShape is a value of the wrong shape, with its path in the snapshot.
type errShape struct {
	path, want string
	got        any
}

func (e errShape) Error() string {
	return fmt.Sprintf("not a memory snapshot: %s should be %s, is %s", e.path, e.want, kind(e.got))
}

func kind(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case string:
		return "a string"
	case pbytes:
		return "bytes"
	case bool:
		return "a boolean"
	case int64, uint64:
		return "an integer"
	case float64:
		return "a float"
	case *pdict:
		return "a dict"
	case *plist:
		return "a " + v.kind
	}
	return fmt.Sprintf("%T", v)
}

// dict is a pickled dict's string-keyed entries.
type dict struct {
	path string
	m    map[string]any
}

func (r *reader) asDict(path string, v any) (dict, error) {
	d, ok := v.(*pdict)
	if !ok {
		return dict{}, errShape{path, "a dict", v}
	}
	if out, ok := r.dicts[d]; ok {
		out.path = path
		return out, nil
	}
	out := dict{path: path, m: make(map[string]any, len(d.entries))}
	for _, e := range d.entries {
		out.m[e.key] = e.val
	}
	r.dicts[d] = out
	return out, nil
}

func asList(path string, v any) ([]any, error) {
	if l, ok := v.(*plist); ok && l.kind != "set" {
		return l.items(), nil
	}
	return nil, errShape{path, "a list", v}
}

func (d dict) has(k string) bool { _, ok := d.m[k]; return ok }

// int reads an integer field; missing is 0 unless required.
func (d dict) int(k string, required bool) (int64, error) {
	v, ok := d.m[k]
	if !ok || v == nil {
		if required {
			return 0, fmt.Errorf("not a memory snapshot: %s has no %q", d.path, k)
		}
		return 0, nil
	}
	switch n := v.(type) {
	case int64:
		return n, nil
	case uint64:
		return int64(n), nil // addresses above 2^63, kept bit for bit
	case bool:
		if n {
			return 1, nil
		}
		return 0, nil
	}
	return 0, errShape{d.path + "." + k, "an integer", v}
}

// maxSize bounds one size in a snapshot (1 TiB, past any GPU's memory).
const maxSize = 1 << 40

// size reads a byte count: an integer in [0, maxSize].
func (d dict) size(k string, required bool) (vram.Bytes, error) {
	n, err := d.int(k, required)
	if err == nil && (n < 0 || n > maxSize) {
		err = fmt.Errorf("not a memory snapshot: %s.%s is %d, a size must be in [0, %d]", d.path, k, n, int64(maxSize))
	}
	return vram.Bytes(n), err
}

func (d dict) str(k string) (string, error) {
	v, ok := d.m[k]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", errShape{d.path + "." + k, "a string", v}
	}
	return s, nil
}

// snapshot converts the decoded pickle into a Snapshot.
func (r *reader) snapshot(v any) (*Snapshot, error) {
	top, err := r.asDict("the snapshot", v)
	if err != nil {
		return nil, err
	}
	if !top.has("segments") || !top.has("device_traces") {
		return nil, errors.New("not a memory snapshot: a dict without \"segments\" and \"device_traces\" " +
			"(torch.cuda.memory._dump_snapshot writes both; record with torch.cuda.memory._record_memory_history() first)")
	}
	s := &Snapshot{}
	segs, err := asList("segments", top.m["segments"])
	if err != nil {
		return nil, err
	}
	var total vram.Bytes
	for i, x := range segs {
		seg, err := r.segment(fmt.Sprintf("segments[%d]", i), x)
		if err != nil {
			return nil, err
		}
		// Sizes are at most maxSize each; their sums stay far from overflow.
		if total += seg.TotalSize; total > maxTotal {
			return nil, fmt.Errorf("not a memory snapshot: its segments add up to more than %v", vram.Bytes(maxTotal))
		}
		s.Segments = append(s.Segments, seg)
	}
	devs, err := asList("device_traces", top.m["device_traces"])
	if err != nil {
		return nil, err
	}
	for d, x := range devs {
		entries, err := asList(fmt.Sprintf("device_traces[%d]", d), x)
		if err != nil {
			return nil, err
		}
		tr := make([]Event, 0, len(entries))
		for i, e := range entries {
			ev, err := r.event(fmt.Sprintf("device_traces[%d][%d]", d, i), e)
			if err != nil {
				return nil, err
			}
			tr = append(tr, ev)
		}
		s.Traces = append(s.Traces, tr)
	}
	return s, nil
}

func (r *reader) segment(path string, v any) (Segment, error) {
	d, err := r.asDict(path, v)
	if err != nil {
		return Segment{}, err
	}
	var seg Segment
	dev, err := d.int("device", false)
	if err != nil {
		return seg, err
	}
	if dev < 0 || dev > 1<<16 {
		return seg, fmt.Errorf("not a memory snapshot: %s.device is %d", path, dev)
	}
	seg.Device = int(dev)
	addr, err := d.int("address", true)
	if err != nil {
		return seg, err
	}
	seg.Address = uint64(addr)
	if seg.TotalSize, err = d.size("total_size", true); err != nil {
		return seg, err
	}
	if seg.AllocatedSize, err = d.size("allocated_size", false); err != nil {
		return seg, err
	}
	if seg.ActiveSize, err = d.size("active_size", false); err != nil {
		return seg, err
	}
	if seg.Stream, err = d.int("stream", false); err != nil {
		return seg, err
	}
	if seg.Type, err = d.str("segment_type"); err != nil {
		return seg, err
	}
	exp, err := d.int("is_expandable", false)
	if err != nil {
		return seg, err
	}
	seg.Expandable = exp != 0
	seg.Blocks, err = r.blockList(path+".blocks", d.m["blocks"])
	return seg, err
}

// blockList reads a segment's blocks, once per list however many segments
// share it.
func (r *reader) blockList(path string, v any) ([]Block, error) {
	l, ok := v.(*plist)
	if ok {
		if bs, done := r.blocks[l]; done {
			return bs, r.keep(len(bs) + framesOf(bs))
		}
	}
	items, err := asList(path, v)
	if err != nil {
		return nil, err
	}
	var out []Block
	for i, b := range items {
		blk, err := r.block(fmt.Sprintf("%s[%d]", path, i), b)
		if err != nil {
			return nil, err
		}
		out = append(out, blk)
	}
	r.blocks[l] = out
	return out, nil
}

func framesOf(bs []Block) int {
	n := 0
	for _, b := range bs {
		n += len(b.Frames)
	}
	return n
}

func (r *reader) block(path string, v any) (Block, error) {
	d, err := r.asDict(path, v)
	if err != nil {
		return Block{}, err
	}
	if err := r.keep(1); err != nil {
		return Block{}, err
	}
	var b Block
	addr, err := d.int("address", true)
	if err != nil {
		return b, err
	}
	b.Address = uint64(addr)
	if b.Size, err = d.size("size", true); err != nil {
		return b, err
	}
	if b.State, err = d.str("state"); err != nil {
		return b, err
	}
	switch {
	case d.has("frames"):
		if b.RequestedSize, err = d.size("requested_size", false); err != nil {
			return b, err
		}
		if b.Frames, err = r.frameList(path+".frames", d.m["frames"]); err != nil {
			return b, err
		}
	case d.has("history"):
		// PyTorch 2.0: the block's history, newest first; its first entry
		// has the real size and frames (_memory_viz._block_extra_legacy).
		h, err := asList(path+".history", d.m["history"])
		if err != nil {
			return b, err
		}
		if len(h) > 0 {
			e, err := r.asDict(path+".history[0]", h[0])
			if err != nil {
				return b, err
			}
			if b.RequestedSize, err = e.size("real_size", false); err != nil {
				return b, err
			}
			if b.Frames, err = r.frameList(path+".history[0].frames", e.m["frames"]); err != nil {
				return b, err
			}
		}
	default:
		if b.RequestedSize, err = d.size("requested_size", false); err != nil {
			return b, err
		}
	}
	if b.RequestedSize == 0 {
		b.RequestedSize = b.Size
	}
	return b, nil
}

// frameList reads a stack, once per list however many blocks and entries
// share it (PyTorch's symbolizer shares frame dicts between stacks).
func (r *reader) frameList(path string, v any) ([]Frame, error) {
	if v == nil {
		return nil, nil
	}
	items, err := asList(path, v)
	if err != nil {
		return nil, err
	}
	if err := r.keep(len(items)); err != nil {
		return nil, err
	}
	l := v.(*plist)
	if fs, done := r.frames[l]; done {
		return fs, nil
	}
	out := make([]Frame, 0, len(items))
	for i, x := range items {
		f, err := r.frameOf(fmt.Sprintf("%s[%d]", path, i), x)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	r.frames[l] = out
	return out, nil
}

func (r *reader) frameOf(path string, v any) (Frame, error) {
	if p, ok := v.(*pdict); ok {
		if f, done := r.frame[p]; done {
			return f, nil
		}
	}
	d, err := r.asDict(path, v)
	if err != nil {
		return Frame{}, err
	}
	var f Frame
	if f.Filename, err = d.str("filename"); err != nil {
		return f, err
	}
	if f.Name, err = d.str("name"); err != nil {
		return f, err
	}
	line, err := d.int("line", false)
	if err != nil {
		return f, err
	}
	if line < 0 || line > math.MaxInt32 {
		line = 0
	}
	f.Line = int(line)
	if f.FXNode, err = d.str("fx_node_name"); err != nil {
		return f, err
	}
	r.frame[v.(*pdict)] = f
	return f, nil
}

func (r *reader) event(path string, v any) (Event, error) {
	d, err := r.asDict(path, v)
	if err != nil {
		return Event{}, err
	}
	if err := r.keep(1); err != nil {
		return Event{}, err
	}
	var e Event
	if e.Action, err = d.str("action"); err != nil {
		return e, err
	}
	switch e.Action {
	case Alloc, FreeRequested, FreeCompleted, SegmentAlloc, SegmentFree, SegmentMap, SegmentUnmap, OOM, SnapshotTaken, Annotate:
	case "":
		return e, fmt.Errorf("not a memory snapshot: %s has no action", path)
	default:
		// A newer PyTorch may add actions; they are kept and not replayed.
	}
	addr, err := d.int("addr", false)
	if err != nil {
		return e, err
	}
	e.Addr = uint64(addr)
	if e.Size, err = d.size("size", false); err != nil {
		return e, err
	}
	if e.Stream, err = d.int("stream", false); err != nil {
		return e, err
	}
	if e.TimeUS, err = d.int("time_us", false); err != nil {
		return e, err
	}
	if e.DeviceFree, err = d.size("device_free", false); err != nil {
		return e, err
	}
	if e.UserMetadata, err = d.str("user_metadata"); err != nil {
		return e, err
	}
	if e.Frames, err = r.frameList(path+".frames", d.m["frames"]); err != nil {
		return e, err
	}
	return e, nil
}

// Reserved is the memory the segments hold: what
// torch.cuda.memory_reserved() reported when the snapshot was taken.
func (s *Snapshot) Reserved(device int) vram.Bytes {
	var n vram.Bytes
	for _, seg := range s.Segments {
		if seg.Device == device {
			n += seg.TotalSize
		}
	}
	return n
}

// Allocated is the memory of live allocations when the snapshot was taken
// (blocks in state active_allocated): torch.cuda.memory_allocated().
func (s *Snapshot) Allocated(device int) vram.Bytes {
	var n vram.Bytes
	for _, seg := range s.Segments {
		if seg.Device != device {
			continue
		}
		for _, b := range seg.Blocks {
			if b.State == "active_allocated" {
				n += b.Size
			}
		}
	}
	return n
}

// Devices lists the devices with a non-empty trace or a segment.
func (s *Snapshot) Devices() []int {
	seen := map[int]bool{}
	for d, tr := range s.Traces {
		if len(tr) > 0 {
			seen[d] = true
		}
	}
	for _, seg := range s.Segments {
		seen[seg.Device] = true
	}
	var out []int
	for d := range seen {
		out = append(out, d)
	}
	sort.Ints(out)
	return out
}
