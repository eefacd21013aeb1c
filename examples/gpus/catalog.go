package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/vramlab/vramlab/vram"
)

// printCatalog lists the catalog's GPUs: each with what nvidia-smi (or
// the vendor's tool) reports as its total, what CUDA reports, the context
// a PyTorch process takes, its architecture, its dense BF16 peak where
// published, what a plan gets of a unified part's pool, and where each
// figure comes from.
func printCatalog(w io.Writer, asJSON bool) error {
	var gs []vram.GPU
	for _, n := range vram.GPUs() {
		g, err := vram.ParseCapacity(n)
		if err != nil {
			return err
		}
		gs = append(gs, g)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			GPUs []vram.GPU `json:"gpus"`
		}{gs})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\ttotal\tCUDA total\tcontext\tarch\tCC\tBF16 TFLOPS\tnote")
	for _, g := range gs {
		cuda, cc, peak, note := "-", "-", "-", ""
		if g.CUDATotal > 0 {
			cuda = g.CUDATotal.String()
		}
		if g.ComputeCapability > 0 {
			cc = fmt.Sprintf("%d.%d", g.ComputeCapability/10, g.ComputeCapability%10)
		}
		if g.TFLOPS > 0 {
			peak = fmt.Sprintf("%g", g.TFLOPS)
		}
		switch {
		case g.Unified && g.UnifiedReserve > 0:
			// A Mac's total is its RAM; what a plan gets is Metal's cap.
			note = fmt.Sprintf("unified memory, shared with the CPU; a plan gets %v", g.Total()-g.UnifiedReserve)
		case g.Unified:
			note = "unified memory, shared with the CPU"
		case g.CapacityOnly:
			note = "capacity only"
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\t%v\t%s\t%s\t%s\t%s\n", g.Name, g.Memory, cuda, g.Context, g.Arch, cc, peak, note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nSources:")
	for _, g := range gs {
		fmt.Fprintf(w, "  %s: %s\n", g.Name, g.Source)
	}
	return nil
}
