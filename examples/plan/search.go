package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/vramlab/vramlab/vram"
)

// runSearch searches plan p's layouts on gpus GPUs of the -gpu (else the
// plan's) and prints the fastest top that fit.
func runSearch(w io.Writer, p vram.Plan, gpuName string, gpus, globalBatch, top int, asJSON bool) error {
	if p.Training == nil {
		return errors.New("-search: the plan must be a training plan (train)")
	}
	sp := vram.SearchSpace{Plan: *p.Training, GPUs: gpus, GlobalBatch: globalBatch}
	if ss := p.Search; ss != nil {
		sp.GPUs, sp.GlobalBatch, sp.NetworkBandwidth = orInt(gpus, ss.GPUs), orInt(globalBatch, ss.GlobalBatch), ss.NetworkBandwidth
	}
	if sp.GPUs < 1 {
		return errors.New("-search: give the GPUs to lay the run out on with -gpus N (or the plan's search.gpus)")
	}
	name := gpuName
	if name == "" {
		name = p.GPU
	}
	if name == "" {
		return errors.New("-search: name the GPU with -gpu (or the plan's gpu)")
	}
	g, err := vram.ParseCapacity(name)
	if err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	sp.GPU = g
	res, err := vram.Search(sp)
	if err != nil {
		return err
	}
	if top > 0 && len(res.Layouts) > top {
		res.Layouts = res.Layouts[:top]
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(w, "%d layouts of %s on %d × %s: %d fit by their allocated peak; the fastest replayed, judged on device-used within %v\n",
		res.Candidates, p.Training.Model.Name, sp.GPUs, g.Name, res.Feasible, res.Limit)
	for reason, n := range res.Refused {
		fmt.Fprintf(w, "  %d refused: %s\n", n, reason)
	}
	if len(res.Layouts) == 0 {
		fmt.Fprintln(w, "no layout fits: more GPUs, a shorter sequence or a smaller global batch")
		return nil
	}
	fmt.Fprintf(w, "\n%-4s %5s %3s %3s %3s %5s %4s %-9s %11s %10s %14s %7s\n", "rank", "dp", "tp", "pp", "cp", "mb", "ga", "recompute", "device used", "headroom", "tokens/s bound", "bubble")
	for i, l := range res.Layouts {
		t, q := l.Training, l.Training.Parallel
		mb, ga := t.MicroBatch, max(1, t.GradAccum)
		if q.PP > 1 {
			mb, ga = t.MicroBatch/max(1, q.PPMicrobatches), q.PPMicrobatches
		}
		fmt.Fprintf(w, "%-4d %5d %3d %3d %3d %5d %4d %-9s %11v %10v %14s %6.1f%%\n", i+1, max(1, q.DP), max(1, q.TP), max(1, q.PP), max(1, q.CP), mb, ga, t.Checkpointing, l.DeviceUsed, l.Headroom, vram.Grouped(int64(l.Step.TokensPerSecond)), 100*l.Step.Bubble)
	}
	best := res.Layouts[0]
	fmt.Fprintf(w, "\nthe fastest, as launched: %s\n", best.Training.LaunchFlags())
	fmt.Fprintf(w, "its step bound: compute %.2f s, data-parallel collectives %.2f s (overlapped), tensor %.2f s, context %.2f s, pipeline sends %.2f s, bubble %.1f %% (vram/comm.go: a bound to rank layouts, not a forecast)\n",
		best.Step.Compute, best.Step.DataComm, best.Step.TPComm, best.Step.CPComm, best.Step.PPComm, 100*best.Step.Bubble)
	return nil
}

// orInt is a flag's value when set, else the plan's.
func orInt(flag, plan int) int {
	if flag > 0 {
		return flag
	}
	return plan
}
