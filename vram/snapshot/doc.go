// Package snapshot reads PyTorch CUDA memory snapshots — the pickle that
// torch.cuda.memory._dump_snapshot() writes after
// _record_memory_history(), the file pytorch.org/memory_viz opens — and
// puts the real run beside the engine's prediction for its plan.
//
//	s, err := snapshot.ReadFile("run.pickle")      // errors on anything that is not a snapshot
//	run, err := s.Rebuild(0)                       // allocated/reserved after every entry, categories, peaks
//	c, err := snapshot.Compare(run, plan, &gpu)    // real vs predicted peaks, by category
//	fmt.Println(c.Rows(), c.Unexplained)           // and the largest allocations the prediction lacks
//	line, err := snapshot.CalibrationCase("plan.json", plan, run, "H100") // a measured case for examples/validate
//
// # Reading
//
// Decoding uses github.com/nlpodyssey/gopickle (the pickle reader ollama
// uses to convert PyTorch checkpoints). Before it runs, scan checks the
// opcode stream: only the opcodes of plain data are allowed (a snapshot has
// no objects of any class; GLOBAL, REDUCE and the like are refused, so
// nothing in a file is ever looked up or executed), every declared length
// must fit in the file, and dicts stay small, so a hostile or corrupt file
// is an error in time and memory linear in its size (FuzzDecode). Files are
// capped at MaxFileBytes. Both formats are read: today's (blocks with frames
// and requested_size) and PyTorch 2.0's (a block history).
//
// # Attribution
//
// Rebuild replays a device's trace as the caching allocator counts
// (allocated at alloc and free_requested, active until free_completed,
// reserved at segment_alloc/free and map/unmap), places what was allocated
// before the trace began (the trace is a ring), tells each entry's phase
// from the markers a run sets with torch.cuda.memory._set_memory_metadata
// ("forward", "backward", "optimizer", as examples/measure does) or else
// from its stack (the autograd engine's frames, torch/optim, a module's
// forward), and sorts every allocation into the engine's categories by
// phase and lifetime (see Rebuild). LiveAt groups what is live at any
// moment by the first frame outside PyTorch: the line that allocated it.
package snapshot
