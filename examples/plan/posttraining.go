package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/vramlab/vramlab/vram"
)

// PostTrainingReport is a post-training plan's estimate on its GPU.
type PostTrainingReport struct {
	vram.PostTrainingEstimate
	Algorithm string `json:"algorithm"`
	Framework string `json:"framework"`
	// MaxCompletionLen is the longest completion whose every phase fits
	// (the plan's other settings unchanged).
	MaxCompletionLen int `json:"max_completion_len"`
	// Host is the most host memory a phase holds for one GPU.
	Host vram.Bytes `json:"host"`
}

// estimatePostTraining estimates every phase of a post-training step on
// the plan's GPU, and the verdict.
func estimatePostTraining(p vram.Plan, rep Report) (Report, error) {
	if p.GPU == "" {
		return rep, errors.New(`gpu: a post-training plan needs the GPU it runs on ("gpu"): the rollout engine's share is a share of that card`)
	}
	g, err := vram.ParseCapacity(p.GPU)
	if err != nil {
		return rep, fmt.Errorf("gpu: %w", err)
	}
	pt := *p.PostTraining
	e, err := pt.Estimate(g)
	if err != nil {
		return rep, err
	}
	b := vram.Budget{GPU: g, Headroom: margin}
	n, err := pt.MaxCompletionLen(b)
	if err != nil {
		return rep, err
	}
	rep.PostTraining = &PostTrainingReport{PostTrainingEstimate: e, Algorithm: pt.Algorithm, Framework: pt.Framework, MaxCompletionLen: n, Host: e.Host()}
	rep.Phases = e.Phases
	peak := e.Peak()
	rep.Peak = peak.Allocated
	rep.Measures = Measures{Allocated: peak.Allocated, Reserved: peak.Reserved, DeviceUsed: peak.DeviceUsed, Context: g.Context}
	v, err := b.JudgePostTraining(pt)
	if err != nil {
		return rep, err
	}
	rep.Fit = &Fit{GPU: g.Name, Capacity: g.Total(), Margin: margin, Verdict: v}
	if !v.Fits {
		as, err := vram.AdvisePostTraining(pt, b)
		if err != nil {
			return rep, err
		}
		for _, a := range as[:min(len(as), maxAdvice)] {
			rep.Advice = append(rep.Advice, AdviceLine{Change: a.Change, Flags: a.Flags, Fits: a.Fits, Need: a.Need, Over: a.Over})
		}
	}
	return rep, nil
}

// printPostTraining prints each phase with its three measures and host
// memory, what holds the most in it, the bounding phase and transition,
// and the verdict.
func printPostTraining(w io.Writer, r Report) {
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
