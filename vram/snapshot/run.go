package snapshot

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// Run is one device's trace rebuilt: the allocator's allocated, active and
// reserved memory after every entry, each allocation with its lifetime and
// the engine category it belongs to, and the peaks.
type Run struct {
	Device      int
	Points      []Point
	Allocations []Allocation
	// PeakAllocated and PeakReserved index Points (-1 for an empty trace).
	PeakAllocated, PeakReserved int
	// Before is what was allocated when the trace began (the trace is a
	// ring of max_entries, or recording started late): at the snapshot,
	// allocated minus everything the trace adds up to.
	Before, ReservedBefore vram.Bytes
	OOMs                   []Event
	// Marked: the phases came from _set_memory_metadata markers, not
	// from stack frames.
	Marked bool
}

// Point is the state after one trace entry.
type Point struct {
	Index     int // into the device's trace
	Iteration int // 0 before the first forward, then 1, 2, …
	Phase     string
	Allocated vram.Bytes // torch.cuda.memory_allocated()
	Active    vram.Bytes // allocated plus freed blocks still in use by another stream
	Reserved  vram.Bytes // torch.cuda.memory_reserved()
	// Live is Allocated by engine category ("other" holds what was
	// allocated before the trace, and what no rule places).
	Live vram.Breakdown
}

// Allocation is one alloc entry and its free_requested.
type Allocation struct {
	Addr            uint64
	Size            vram.Bytes
	Start, End      int // trace indices; End is -1 while live at the snapshot
	Iteration       int
	Phase           string // where it was allocated
	FreedPhase      string
	FreedIteration  int
	Category        string // one of vram.Categories
	Frames          []Frame
	freedInSamePass bool
	// survivesBackward: live at the snapshot although a backward ran
	// after it was made (a forward's workspace, not an activation).
	survivesBackward bool
}

// maxTotal bounds a trace's running totals (64 PiB): with every entry's
// size at most maxSize, no sum can overflow.
const maxTotal = 1 << 56

// Phases of a training step, as the engine names them.
const (
	Setup     = "setup" // before the first forward: the model, the optimizer, the data
	Forward   = "forward"
	Backward  = "backward"
	Optimizer = "optimizer"
	Other     = "other" // frames that say nothing about the phase
)

// phaseOfMarker reads a phase marker set with
// torch.cuda.memory._set_memory_metadata("forward"), …; "" if it is not one.
func phaseOfMarker(m string) string {
	m = strings.ToLower(m)
	switch {
	case m == "":
		return ""
	case strings.Contains(m, "backward"):
		return Backward
	case strings.Contains(m, "optim") || strings.Contains(m, "step") || strings.Contains(m, "zero_grad"):
		return Optimizer
	case strings.Contains(m, "forward") || strings.Contains(m, "loss"):
		return Forward
	case strings.Contains(m, "setup") || strings.Contains(m, "init") || strings.Contains(m, "load"):
		return Setup
	}
	return ""
}

// phaseOfFrames reads the phase from an entry's stack: the optimizer's
// files (torch/optim/, zero_grad included), the autograd engine (its C++
// frames, recorded with stacks="all", or torch/autograd/ Python frames), a
// module's forward (nn.Module._call_impl, a forward method, compiled code).
// "" when the stack is empty, Other when it says nothing.
func phaseOfFrames(fs []Frame) string {
	if len(fs) == 0 {
		return ""
	}
	fwd := false
	for _, f := range fs {
		file := strings.ReplaceAll(f.Filename, "\\", "/")
		switch {
		case strings.Contains(file, "torch/optim/"):
			return Optimizer
		case strings.Contains(f.Name, "autograd::Engine") || strings.Contains(f.Name, "torch::autograd::") ||
			strings.Contains(file, "torch/autograd/") && (f.Name == "backward" || f.Name == "_engine_run_backward" || f.Name == "grad"):
			return Backward
		case f.Name == "forward" || f.Name == "_call_impl" || f.Name == "_wrapped_call_impl" || f.FXNode != "" ||
			strings.Contains(file, "torchinductor"):
			fwd = true
		}
	}
	if fwd {
		return Forward
	}
	return Other
}

// setupFrames: an allocation made while building or loading the model.
func setupFrames(fs []Frame) bool {
	for _, f := range fs {
		file := strings.ReplaceAll(f.Filename, "\\", "/")
		if strings.Contains(file, "torch/nn/modules/module.py") && (f.Name == "_apply" || f.Name == "to" || f.Name == "convert" || f.Name == "cuda") ||
			strings.Contains(file, "torch/nn/init.py") || strings.Contains(file, "torch/nn/parameter.py") ||
			strings.Contains(file, "modeling_utils.py") || f.Name == "reset_parameters" || f.Name == "load_state_dict" ||
			f.Name == "from_pretrained" || f.Name == "_load_from_state_dict" {
			return true
		}
	}
	return false
}

// cacheFrames: an allocation of a KV cache (transformers' cache_utils, a
// serving engine's cache).
func cacheFrames(fs []Frame) bool {
	for _, f := range fs {
		if strings.Contains(f.Filename, "cache_utils") || strings.Contains(strings.ToLower(f.Name), "kv_cache") {
			return true
		}
	}
	return false
}

// Rebuild replays device's trace: allocated and reserved after each entry,
// each allocation's lifetime and category, the peaks.
//
// Accounting follows CUDACachingAllocator.cpp: allocated_bytes grows at
// alloc and shrinks at free_requested (DeviceCachingAllocator::free), a
// block stays active until free_completed (free_block, after its stream
// events), reserved grows at segment_alloc/segment_map and shrinks at
// segment_free/segment_unmap.
//
// Categories follow the engine's definitions by lifetime and phase: what
// the model's construction allocates is parameters; a forward allocation
// freed later (in backward, or when the next step replaces it) is an
// activation, one freed within its forward a temporary, one that outlives
// the backwards after it other (the cuBLAS workspace); a backward
// allocation still live when the backward ends is a gradient, one freed
// within it a temporary; an optimizer-step allocation that outlives the
// step is optimizer state, one freed within it a temporary; KV-cache frames
// mark kv_cache; the rest (the batch, what came before the trace) is other.
func (s *Snapshot) Rebuild(device int) (*Run, error) {
	if device < 0 || device >= len(s.Traces) {
		if device >= 0 && len(s.Segments) > 0 {
			return nil, fmt.Errorf("snapshot: device %d has segments but no trace (record with _record_memory_history(enabled=\"all\"))", device)
		}
		return nil, fmt.Errorf("snapshot: no trace for device %d (%d devices recorded)", device, len(s.Traces))
	}
	tr := s.Traces[device]
	r := &Run{Device: device, PeakAllocated: -1, PeakReserved: -1}

	// Phases and iterations.
	phases := make([]string, len(tr))
	iters := make([]int, len(tr))
	cur, it := Setup, 0
	for i, e := range tr {
		p := phaseOfMarker(e.UserMetadata)
		if p != "" {
			r.Marked = true
		} else {
			p = phaseOfFrames(e.Frames)
		}
		switch {
		case p == "" || (p == Other && e.Action != Alloc):
			p = cur // frees and frameless entries continue the phase they are in
		case p == Other && cur == Setup:
			p = Setup
		}
		if p == Forward && cur != Forward {
			it++ // a forward after setup, a backward or a step starts an iteration
		}
		if p != Other {
			cur = p
		}
		phases[i], iters[i] = p, it
	}

	// The net change the trace makes, to place the state before it.
	var net, netRes, low, lowRes, alloc, res vram.Bytes
	for i, e := range tr {
		switch e.Action {
		case Alloc:
			alloc += e.Size
		case FreeRequested:
			alloc -= e.Size
		case SegmentAlloc, SegmentMap:
			res += e.Size
		case SegmentFree, SegmentUnmap:
			res -= e.Size
		}
		low, lowRes = min(low, alloc), min(lowRes, res)
		if alloc > maxTotal || alloc < -maxTotal || res > maxTotal || res < -maxTotal {
			return nil, fmt.Errorf("snapshot: device %d's trace adds up to more than %v by entry %d: not a real run", device, vram.Bytes(maxTotal), i)
		}
	}
	net, netRes = alloc, res
	r.Before, r.ReservedBefore = -low, -lowRes
	if len(s.Segments) > 0 {
		r.Before = max(r.Before, s.Allocated(device)-net)
		r.ReservedBefore = max(r.ReservedBefore, s.Reserved(device)-netRes)
	}

	// Lifetimes.
	open := map[uint64]int{}
	for i, e := range tr {
		switch e.Action {
		case Alloc:
			open[e.Addr] = len(r.Allocations)
			r.Allocations = append(r.Allocations, Allocation{Addr: e.Addr, Size: e.Size, Start: i, End: -1,
				Iteration: iters[i], Phase: phases[i], Frames: e.Frames})
		case FreeRequested:
			if k, ok := open[e.Addr]; ok {
				a := &r.Allocations[k]
				a.End, a.FreedPhase, a.FreedIteration = i, phases[i], iters[i]
				delete(open, e.Addr)
			}
		case OOM:
			r.OOMs = append(r.OOMs, e)
		}
	}
	// A pass ends where the phase or iteration changes.
	passEnd := make([]int, len(tr))
	for i := len(tr) - 1; i >= 0; i-- {
		passEnd[i] = i
		if i+1 < len(tr) && phases[i+1] == phases[i] && iters[i+1] == iters[i] {
			passEnd[i] = passEnd[i+1]
		}
	}
	// backwardAfter[i]: a backward runs after entry i.
	backwardAfter := make([]bool, len(tr)+1)
	for i := len(tr) - 1; i >= 0; i-- {
		backwardAfter[i] = backwardAfter[i+1] || phases[i] == Backward
	}
	for k := range r.Allocations {
		a := &r.Allocations[k]
		a.freedInSamePass = a.End >= 0 && a.End <= passEnd[a.Start]
		a.survivesBackward = a.End < 0 && backwardAfter[a.Start]
		a.Category = categorize(*a, backwardAfter[0])
	}

	// The state after each entry. The k-th alloc entry opened allocation k.
	byAddr := map[uint64]int{}
	next := 0
	live := vram.Breakdown{Other: r.Before}
	allocated, active, reserved := r.Before, r.Before, r.ReservedBefore
	pending := map[uint64]vram.Bytes{}
	for i, e := range tr {
		switch e.Action {
		case Alloc:
			k := next
			next++
			byAddr[e.Addr] = k
			allocated += e.Size
			active += e.Size
			live = addCat(live, r.Allocations[k].Category, e.Size)
		case FreeRequested:
			allocated -= e.Size
			pending[e.Addr] += e.Size
			if k, ok := byAddr[e.Addr]; ok {
				live = addCat(live, r.Allocations[k].Category, -e.Size)
				delete(byAddr, e.Addr)
			} else {
				live.Other -= e.Size // allocated before the trace
			}
		case FreeCompleted:
			// The block stops being active by what its free_requested
			// released (a file whose entry sizes disagree cannot make
			// active drop below allocated).
			if sz, ok := pending[e.Addr]; ok {
				active -= sz
				delete(pending, e.Addr)
			} else {
				active -= min(e.Size, active-allocated)
			}
		case SegmentAlloc, SegmentMap:
			reserved += e.Size
		case SegmentFree, SegmentUnmap:
			reserved -= e.Size
		}
		p := Point{Index: i, Iteration: iters[i], Phase: phases[i], Allocated: allocated, Active: active, Reserved: reserved, Live: live}
		r.Points = append(r.Points, p)
		if r.PeakAllocated < 0 || allocated > r.Points[r.PeakAllocated].Allocated {
			r.PeakAllocated = len(r.Points) - 1
		}
		if r.PeakReserved < 0 || reserved > r.Points[r.PeakReserved].Reserved {
			r.PeakReserved = len(r.Points) - 1
		}
	}
	return r, nil
}

func addCat(b vram.Breakdown, cat string, n vram.Bytes) vram.Breakdown {
	switch cat {
	case "parameters":
		b.Parameters += n
	case "gradients":
		b.Gradients += n
	case "optimizer_states":
		b.OptimizerStates += n
	case "activations":
		b.Activations += n
	case "kv_cache":
		b.KVCache += n
	case "temporaries":
		b.Temporaries += n
	default:
		b.Other += n
	}
	return b
}

// categorize places an allocation in an engine category (see Rebuild). A
// training run's forward may fill a KV cache too (transformers builds one
// when use_cache is on); the engine counts those tensors as activations,
// and so does this.
func categorize(a Allocation, training bool) string {
	if !training && cacheFrames(a.Frames) {
		return "kv_cache"
	}
	switch a.Phase {
	case Setup:
		if setupFrames(a.Frames) {
			return "parameters"
		}
		return "other"
	case Forward:
		switch {
		case a.freedInSamePass:
			return "temporaries"
		case a.survivesBackward:
			// Never freed by the backward that followed: not a saved
			// tensor but a persistent buffer made in the forward (the
			// cuBLAS workspace of the first matmul, a cache).
			return "other"
		}
		return "activations"
	case Backward:
		if a.freedInSamePass {
			return "temporaries"
		}
		return "gradients"
	case Optimizer:
		if a.freedInSamePass {
			return "temporaries"
		}
		if a.End >= 0 && a.FreedPhase == Optimizer && a.FreedIteration == a.Iteration {
			return "temporaries"
		}
		return "optimizer_states"
	}
	return "other"
}

// OnGPU reports whether the run went through the CUDA caching allocator:
// its trace or snapshot has segments (a CPU recording has none).
func (r *Run) OnGPU() bool {
	return r.ReservedBefore > 0 || r.PeakReserved >= 0 && r.Points[r.PeakReserved].Reserved > 0
}

// Peak is the state at the allocated peak.
func (r *Run) Peak() Point {
	if r.PeakAllocated < 0 {
		return Point{Live: vram.Breakdown{Other: r.Before}, Allocated: r.Before, Reserved: r.ReservedBefore}
	}
	return r.Points[r.PeakAllocated]
}

// Where says where the peak is, as the engine says it: "iteration 2, backward".
func (p Point) Where() string {
	if p.Iteration == 0 {
		return "before the first forward (" + p.Phase + ")"
	}
	return fmt.Sprintf("iteration %d, %s", p.Iteration, p.Phase)
}

// Origin is the first frame of an allocation's stack outside PyTorch's own
// code and C++: the line of the user's program (or library) that caused it.
func Origin(fs []Frame) string {
	for _, f := range fs {
		file := strings.ReplaceAll(f.Filename, "\\", "/")
		if f.Filename == "??" || f.Filename == "" || strings.Contains(file, "/torch/") || strings.HasPrefix(file, "<") {
			continue
		}
		return fmt.Sprintf("%s:%d %s", trimPath(file), f.Line, f.Name)
	}
	// Only PyTorch's own frames: the innermost that is not a wrapper.
	for _, f := range fs {
		if f.Filename != "??" && f.Filename != "" && !wrappers[f.Name] {
			return fmt.Sprintf("%s:%d %s", trimPath(strings.ReplaceAll(f.Filename, "\\", "/")), f.Line, f.Name)
		}
	}
	for _, f := range fs {
		if f.Name != "" {
			return f.Name
		}
	}
	return "(no stack recorded)"
}

// wrappers are decorator frames that say nothing about the allocation.
var wrappers = map[string]bool{"inner": true, "wrapper": true, "_use_grad": true, "decorate_context": true,
	"_call_impl": true, "_wrapped_call_impl": true, "_fn": true}

func trimPath(f string) string {
	if i := strings.Index(f, "site-packages/"); i >= 0 {
		return f[i+len("site-packages/"):]
	}
	return f
}

// Group is live memory at a moment grouped by where it was allocated.
type Group struct {
	Origin   string
	Category string
	Bytes    vram.Bytes
	Count    int
}

// LiveAt groups the allocations live after point p by origin and
// category, largest first; what was allocated before the trace is one group.
func (r *Run) LiveAt(p int) []Group {
	if p < 0 || p >= len(r.Points) {
		return nil
	}
	idx := r.Points[p].Index
	type key struct{ o, c string }
	sums := map[key]*Group{}
	for _, a := range r.Allocations {
		if a.Start > idx || (a.End >= 0 && a.End <= idx) {
			continue
		}
		k := key{Origin(a.Frames), a.Category}
		g := sums[k]
		if g == nil {
			g = &Group{Origin: k.o, Category: k.c}
			sums[k] = g
		}
		g.Bytes += a.Size
		g.Count++
	}
	var out []Group
	for _, g := range sums {
		out = append(out, *g)
	}
	if before := r.Points[p].Live.Other - r.otherInTrace(idx); before > 0 {
		out = append(out, Group{Origin: "(allocated before the trace began)", Category: "other", Bytes: before})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Origin < out[j].Origin
	})
	return out
}

// otherInTrace is the "other" allocations of the trace live after entry idx.
func (r *Run) otherInTrace(idx int) vram.Bytes {
	var n vram.Bytes
	for _, a := range r.Allocations {
		if a.Category == "other" && a.Start <= idx && (a.End < 0 || a.End > idx) {
			n += a.Size
		}
	}
	return n
}
