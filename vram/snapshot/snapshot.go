package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"sort"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"

	"github.com/vramlab/vramlab/vram"
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
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("snapshot %s: not a regular file", path)
	}
	if st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("snapshot %s: %d bytes, more than the %d this reader takes", path, st.Size(), int64(MaxFileBytes))
	}
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

// Decode decodes a snapshot pickle held in memory.
func Decode(data []byte) (_ *Snapshot, err error) {
	if err := scan(data); err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pickle: malformed: %v", r)
		}
	}()
	u := pickle.NewUnpickler(bytes.NewReader(data))
	u.FindClass = func(module, name string) (any, error) {
		return nil, fmt.Errorf("not a memory snapshot: it names %s.%s", module, name)
	}
	v, err := u.Load()
	if err != nil {
		return nil, fmt.Errorf("pickle: %w", err)
	}
	return fromValue(v)
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
	switch v.(type) {
	case nil:
		return "None"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, *big.Int:
		return "an integer"
	case float64:
		return "a float"
	case *types.Dict:
		return "a dict"
	case *types.List:
		return "a list"
	case *types.Tuple:
		return "a tuple"
	}
	return fmt.Sprintf("%T", v)
}

// dict is a pickled dict's string-keyed entries.
type dict struct {
	path string
	m    map[string]any
}

func asDict(path string, v any) (dict, error) {
	d, ok := v.(*types.Dict)
	if !ok {
		return dict{}, errShape{path, "a dict", v}
	}
	out := dict{path: path, m: make(map[string]any, len(*d))}
	for _, e := range *d {
		if k, ok := e.Key.(string); ok {
			out.m[k] = e.Value
		}
	}
	return out, nil
}

func asList(path string, v any) ([]any, error) {
	switch l := v.(type) {
	case *types.List:
		return *l, nil
	case *types.Tuple:
		return *l, nil
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
	case int:
		return int64(n), nil
	case bool:
		if n {
			return 1, nil
		}
		return 0, nil
	case *big.Int:
		if n.IsInt64() {
			return n.Int64(), nil
		}
		if n.IsUint64() {
			// Addresses above 2^63 (kept bit for bit).
			return int64(n.Uint64()), nil
		}
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

// fromValue converts the decoded pickle into a Snapshot.
func fromValue(v any) (*Snapshot, error) {
	top, err := asDict("the snapshot", v)
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
		seg, err := readSegment(fmt.Sprintf("segments[%d]", i), x)
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
			ev, err := readEvent(fmt.Sprintf("device_traces[%d][%d]", d, i), e)
			if err != nil {
				return nil, err
			}
			tr = append(tr, ev)
		}
		s.Traces = append(s.Traces, tr)
	}
	return s, nil
}

func readSegment(path string, v any) (Segment, error) {
	d, err := asDict(path, v)
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
	blocks, err := asList(path+".blocks", d.m["blocks"])
	if err != nil {
		return seg, err
	}
	for i, b := range blocks {
		blk, err := readBlock(fmt.Sprintf("%s.blocks[%d]", path, i), b)
		if err != nil {
			return seg, err
		}
		seg.Blocks = append(seg.Blocks, blk)
	}
	return seg, nil
}

func readBlock(path string, v any) (Block, error) {
	d, err := asDict(path, v)
	if err != nil {
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
		if b.Frames, err = readFrames(path+".frames", d.m["frames"]); err != nil {
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
			e, err := asDict(path+".history[0]", h[0])
			if err != nil {
				return b, err
			}
			if b.RequestedSize, err = e.size("real_size", false); err != nil {
				return b, err
			}
			if b.Frames, err = readFrames(path+".history[0].frames", e.m["frames"]); err != nil {
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

func readFrames(path string, v any) ([]Frame, error) {
	if v == nil {
		return nil, nil
	}
	l, err := asList(path, v)
	if err != nil {
		return nil, err
	}
	out := make([]Frame, 0, len(l))
	for i, x := range l {
		p := fmt.Sprintf("%s[%d]", path, i)
		d, err := asDict(p, x)
		if err != nil {
			return nil, err
		}
		var f Frame
		if f.Filename, err = d.str("filename"); err != nil {
			return nil, err
		}
		if f.Name, err = d.str("name"); err != nil {
			return nil, err
		}
		line, err := d.int("line", false)
		if err != nil {
			return nil, err
		}
		if line < 0 || line > math.MaxInt32 {
			line = 0
		}
		f.Line = int(line)
		if f.FXNode, err = d.str("fx_node_name"); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func readEvent(path string, v any) (Event, error) {
	d, err := asDict(path, v)
	if err != nil {
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
	if e.Frames, err = readFrames(path+".frames", d.m["frames"]); err != nil {
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
