package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/vramlab/vramlab/vram"
)

// runSearch searches plan p's layouts on gpus GPUs of the -gpu (else the
// plan's) and prints the fastest top that fit.
func runSearch(w io.Writer, p vram.Plan, gpuName string, gpus, globalBatch, top int, asJSON bool) error {
	if p.Inference != nil && p.VLLM != nil {
		return runServingSearch(w, p, gpuName, gpus, top, asJSON)
	}
	if p.Training == nil {
		return errors.New("-search: the plan must be a training plan (train) or one vLLM serves (inference with vllm)")
	}
	sp := p.SearchSpaceOn(vram.GPU{})
	sp.GPUs, sp.GlobalBatch = orInt(gpus, sp.GPUs), orInt(globalBatch, sp.GlobalBatch)
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
	printReleases(w, res.Releases)
	for reason, n := range res.Refused {
		fmt.Fprintf(w, "  %d refused: %s\n", n, reason)
	}
	if res.Dominated > 0 {
		fmt.Fprintf(w, "  %d offloaded layouts left out: the same layout without offload fits, and offload only adds host copies and the CPU's optimizer step to its step\n", res.Dominated)
	}
	if res.HostShort > 0 {
		fmt.Fprintf(w, "  %d fit the GPU but offload more than the node's %v of host memory\n", res.HostShort, sp.HostMemory)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if len(res.Layouts) == 0 {
		fmt.Fprintln(w, "no layout fits: more GPUs, a shorter sequence or a smaller global batch")
		return nil
	}
	fmt.Fprintf(w, "\n%-4s %5s %3s %3s %2s %3s %3s %4s %5s %4s %-9s %-8s %-16s %11s %10s %11s %14s %7s\n", "rank", "dp", "tp", "pp", "v", "cp", "ep", "zero", "mb", "ga", "recompute", "float8", "offload", "device used", "headroom", "host a rank", "tokens/s bound", "bubble")
	for i, l := range res.Layouts {
		t, q := l.Training, l.Training.Parallel
		mb, ga := t.MicroBatch, max(1, t.GradAccum)
		if q.PP > 1 {
			mb, ga = t.MicroBatch/max(1, q.PPMicrobatches), q.PPMicrobatches
		}
		zero := "-" // the framework's own sharding (FSDP, Megatron's optimizer)
		if q.ZeRO > 0 {
			zero = strconv.Itoa(q.ZeRO)
		}
		host := "-"
		if l.Host > 0 {
			host = l.Host.String()
		}
		fmt.Fprintf(w, "%-4d %5d %3d %3d %2d %3d %3d %4s %5d %4d %-9s %-8s %-16s %11v %10v %11s %14s %6.1f%%\n", i+1, max(1, q.DP), max(1, q.TP), max(1, q.PP), max(1, q.VirtualStages), max(1, q.CP), max(1, q.EP), zero, mb, ga, t.Checkpointing,
			orDash(t.Float8), orDash(q.CPUOffload), l.DeviceUsed, l.Headroom, host, vram.Grouped(int64(l.Step.TokensPerSecond)), 100*l.Step.Bubble)
	}
	best := res.Layouts[0]
	fmt.Fprintf(w, "\nthe fastest, as launched: %s\n", best.Training.LaunchFlags())
	fmt.Fprintf(w, "its step bound: compute %.2f s, data-parallel collectives %.2f s (overlapped), tensor %.2f s, context %.2f s, expert all-to-alls %.2f s, pipeline sends %.2f s, host copies %.2f s, CPU optimizer step %.2f s, bubble %.1f %% (vram/comm.go: a bound to rank layouts, not a forecast)\n",
		best.Step.Compute, best.Step.DataComm, best.Step.TPComm, best.Step.CPComm, best.Step.EPComm, best.Step.PPComm, best.Step.HostComm, best.Step.HostStep, 100*best.Step.Bubble)
	return nil
}

// orDash is a setting, or "-" where it is unset or "none".
func orDash(s string) string {
	if s == "" || s == "none" {
		return "-"
	}
	return s
}

// orInt is a flag's value when set, else the plan's.
func orInt(flag, plan int) int {
	if flag > 0 {
		return flag
	}
	return plan
}

// runServingSearch searches how vLLM can serve plan p's model on up to
// gpus GPUs for requests of the plan's context (its vllm max_model_len,
// else prompt and new tokens), and prints the launches that hold the most
// requests at once.
func runServingSearch(w io.Writer, p vram.Plan, gpuName string, gpus, top int, asJSON bool) error {
	if gpus < 1 {
		return errors.New("-search: give the GPUs the model may be served on with -gpus N")
	}
	g, err := vram.ParseCapacity(orDefaultStr(gpuName, p.GPU))
	if err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	sp := p.ServingSpaceOn(g, gpus)
	res, err := vram.SearchServing(sp)
	if err != nil {
		return err
	}
	if top > 0 && len(res) > top {
		res = res[:top]
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(w, "vLLM launches of %s on up to %d × %s for requests of %d tokens, the most requests at once first:\n\n", p.Model.Name, gpus, g.Name, sp.Context)
	if len(res) == 0 {
		fmt.Fprintln(w, "none starts and holds one request: more GPUs, a shorter context or a smaller model")
		return nil
	}
	fmt.Fprintf(w, "%-4s %3s %3s %8s %10s %9s %11s %12s\n", "rank", "tp", "pp", "replicas", "weights", "kv cache", "weights/GPU", "requests")
	for i, l := range res {
		kv := "bf16"
		if l.VLLM.KVCacheDType == vram.FP8E4M3 {
			kv = "fp8"
		}
		fmt.Fprintf(w, "%-4d %3d %3d %8d %10s %9s %11v %12.1f\n", i+1, l.VLLM.TP, max(1, l.VLLM.PP), l.Replicas, l.Weights, kv, l.Carve.Weights, l.Concurrency)
	}
	fmt.Fprintf(w, "\nthe first, as launched: %s\n", res[0].Command)
	return nil
}

// orDefaultStr is s, or d when s is empty.
func orDefaultStr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
