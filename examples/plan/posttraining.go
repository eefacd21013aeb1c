package main

import (
	"fmt"
	"io"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/answer"
)

// printPostTraining prints each phase with its three measures and host
// memory, what holds the most in it, the bounding phase and transition,
// and the verdict.
func printPostTraining(w io.Writer, r answer.Report) {
	pt := r.PostTraining
	fmt.Fprintf(w, "post-training: %s with %s, one step on each %s\n", pt.Algorithm, pt.Framework, pt.GPU)
	for _, n := range pt.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	fmt.Fprintf(w, "\n%-34s %10s %10s %10s %10s %10s\n", "phase (→ transition)", "allocated", "reserved", "engine", "device", "host")
	for _, ph := range pt.Phases {
		name := ph.Name
		if ph.Transition {
			name = "→ " + name
		}
		fmt.Fprintf(w, "%-34s %10v %10v %10v %10v %10v\n", name, ph.Allocated, ph.Reserved, ph.Engine, ph.DeviceUsed, ph.Host)
		for i, q := range ph.Live {
			if i == 3 {
				break
			}
			fmt.Fprintf(w, "    %-48s %10v\n", q.What, q.Bytes)
		}
	}
	fmt.Fprintf(w, "\nallocated and reserved: the trainer's PyTorch allocator; engine: the rollout engine's memory; device: nvidia-smi\n")
	fmt.Fprintf(w, "bounded by: %s", pt.Bound)
	if pt.BoundTransition != "" {
		fmt.Fprintf(w, " (largest transition: %s)", pt.BoundTransition)
	}
	fmt.Fprintln(w)
	if c := pt.VLLM; c != nil {
		fmt.Fprintf(w, "vLLM's share: %v (gpu_memory_utilization × %v): weights %v, KV cache %v = %s tokens, %.2fx requests of %d tokens\n",
			c.Requested, r.Fit.Capacity, c.Weights, c.KVCache.Available, vram.Grouped(c.KVCache.Tokens), c.KVCache.MaxConcurrency, c.KVCache.MaxModelLen)
	}
	if s := pt.SGLang; s != nil {
		fmt.Fprintf(w, "SGLang's share: weights %v, KV pool %v = %s tokens (mem_fraction_static of the %v free at its start)\n", s.Weights, s.Rest, vram.Grouped(s.Tokens), s.Free)
	}
	if !pt.Starts {
		fmt.Fprintf(w, "the rollout engine would not start: %s\n", pt.Err)
	}
	fmt.Fprintf(w, "host memory: %v at most per GPU\n", pt.Host)
	if pt.MaxCompletionLen > 0 {
		fmt.Fprintf(w, "longest completion that fits: %s tokens\n", vram.Grouped(int64(pt.MaxCompletionLen)))
	} else {
		fmt.Fprintf(w, "no completion length fits\n")
	}
	if f := r.Fit; f != nil {
		fmt.Fprintf(w, "\n%s (%v), judged on device-used keeping %g %% free: %s\n", f.GPU, f.Capacity, 100*f.Margin, f.Why)
	}
	printAdvice(w, vram.Plan{PostTraining: &vram.PostTraining{Framework: pt.Framework}}, r.Import, r.Advice)
}
