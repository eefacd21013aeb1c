package answer

import (
	"fmt"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/importer"
)

// lcWhy predicts a llama.cpp log's figures from the load and says what
// explains a difference.
type lcWhy struct {
	l  importer.EngineLog
	lc vram.LlamaCpp
	m  vram.Model
	ld vram.LlamaCppLoad
	lcTaken
}

// use is device d's buffers in the load (-1: the host's); false where the
// load has no such device.
func (w lcWhy) use(d int, projected bool) (vram.LlamaCppUse, bool) {
	devs, host := w.ld.Fit.Devices, w.ld.Fit.Host
	if projected {
		host = w.ld.Fit.ProjectedHost
		if d >= 0 {
			if d >= len(w.ld.Fit.Projected) {
				return vram.LlamaCppUse{}, false
			}
			return w.ld.Fit.Projected[d], true
		}
		return host, true
	}
	if d < 0 {
		return host, true
	}
	if d >= len(devs) {
		return vram.LlamaCppUse{}, false
	}
	return devs[d].LlamaCppUse, true
}

// predict is figure f's prediction, whether there is one, and what
// explains a difference (or, with none, why it is not compared).
func (w lcWhy) predict(f importer.LogFigure) (float64, bool, string) {
	d := lcDevice(f.Device)
	switch f.What {
	case importer.LogModelBuffer, importer.LogBreakdownModel, importer.LogFitPrintModel:
		u, ok := w.use(d, f.What == importer.LogFitPrintModel)
		return float64(u.Model), ok, w.weights(d)
	case importer.LogKVBuffer, importer.LogBreakdownContext, importer.LogFitPrintContext:
		u, ok := w.use(d, f.What == importer.LogFitPrintContext)
		v := u.Context
		if f.What == importer.LogKVBuffer {
			v -= u.State
		}
		return float64(v), ok, w.cache()
	case importer.LogRSBuffer:
		u, ok := w.use(d, false)
		return float64(u.State), ok, "the recurrent state: max(1, n_seq_max) cells of each mixer layer on its device (llamacpp.go)"
	case importer.LogComputeBuffer, importer.LogBreakdownCompute, importer.LogFitPrintCompute:
		return w.computeBuffer(d, f.What == importer.LogFitPrintCompute)
	case importer.LogFreeAtStart:
		if d < 0 || d >= len(w.ld.Fit.Devices) || w.free {
			return 0, false, ""
		}
		return float64(w.ld.Fit.Devices[d].Free), true, "the plan's device_free, or the GPU's CUDA total less its CUDA context (GPU.FreeAtStart): other processes and the driver's share differ"
	}
	return w.count(f, d)
}

// count predicts the counts and the fit's figures.
func (w lcWhy) count(f importer.LogFigure, d int) (float64, bool, string) {
	ld, fit := w.ld, w.ld.Fit
	ran := fit.Status != "off"
	switch f.What {
	case importer.LogKVSize:
		return float64(ld.KV), true, w.cache()
	case importer.LogKVCells:
		return float64(ld.Cells), true, w.context()
	case importer.LogSWACells:
		return float64(ld.SWACells), true, "a sliding-window layer keeps its window for each sequence of a stream and a micro-batch (ubatch_size), padded"
	case importer.LogNCtx, importer.LogNCtxSeq, importer.LogCtxSlot:
		v := ld.NCtx
		if f.What != importer.LogNCtx {
			v = ld.NCtxSeq
		}
		if f.What == importer.LogCtxSlot && w.m.MaxPosition > 0 {
			v = min(v, w.m.MaxPosition) // server-context.cpp:1213-1217
		}
		return float64(v), true, w.context()
	case importer.LogNSeqMax, importer.LogSlots:
		return float64(ld.NSeqMax), true, "the plan's parallel (-np; unset: 1 before b10573, llama-server's 4 unified slots from it)"
	case importer.LogOffloaded:
		return float64(ld.Offloaded), true, w.layers()
	case importer.LogOffloadable:
		return float64(ld.Offloadable), true, fmt.Sprintf("the plan's model has %d layers (+1 output layer): is the log's model the plan's?", w.m.Layers)
	}
	if !ran {
		return 0, false, "a figure of llama.cpp's fit, which the modelled build (" + fit.Release.Release + ") or the plan's fit off does not run"
	}
	return w.fitFigure(f, d)
}

// fitFigure predicts the fit's own figures.
func (w lcWhy) fitFigure(f importer.LogFigure, d int) (float64, bool, string) {
	fit := w.ld.Fit
	why := w.fitWhy()
	switch f.What {
	case importer.LogFitCtx:
		return float64(fit.CtxArg), true, why
	case importer.LogFitCtxReduced:
		return float64(fit.CtxSize), true, why
	case importer.LogFitNGL:
		return float64(fit.GPULayers), true, why
	case importer.LogFitOverrides:
		return float64(len(fit.Overrides)), true, why
	case importer.LogFitSplit:
		if d < 0 {
			return 0, false, ""
		}
		if d >= len(fit.TensorSplit) {
			return 0, true, why // no -ts (one GPU), or none of the layers
		}
		return float64(fit.TensorSplit[d]), true, why
	case importer.LogFitLayers, importer.LogFitUsed:
		if d < 0 || d >= len(fit.Devices) {
			return 0, false, ""
		}
		if f.What == importer.LogFitLayers {
			return float64(fit.Devices[d].Layers), true, why
		}
		return float64(fit.Devices[d].Used), true, why + "; " + w.weights(d)
	case importer.LogFitProjected:
		var sum vram.Bytes
		for i, u := range fit.Projected {
			if d < 0 || i == d {
				sum += u.Total()
			}
		}
		return float64(sum), true, "step 1's projection with the settings as given: " + w.weights(d) + "; " + w.computeWhy()
	}
	return 0, false, "not predicted for this plan"
}

func (w lcWhy) weights(d int) string {
	wt := w.lc.WeightType
	if wt == "" {
		wt = "F16 (weight_type unset)"
	}
	s := "weights: the model's tensors at " + wt + "; a GGUF stores each tensor's own type (a Q4_K_M keeps some in Q6_K): name weight_type or read its header (plan -gguf)"
	if d < 0 {
		s += "; the host holds the token embedding and the layers left on the CPU, and a mapped buffer spans its tensors' range of the file"
	}
	return s
}

func (w lcWhy) cache() string {
	return "the cache follows n_ctx and n_seq_max (" + w.context() + "), cache_type_k/v and the layers on each device"
}

func (w lcWhy) context() string {
	if w.ld.Fit.Status == "fitted" {
		return "the fit chose context " + fmt.Sprint(w.ld.Fit.CtxSize) + " from each device's free memory: " + w.fitWhy()
	}
	return "the plan's ctx_size (unset: 4096 before b10573, the model's trained context from it) and parallel, padded as the build pads them"
}

func (w lcWhy) layers() string {
	if w.lc.GPULayers <= 0 && w.ld.Fit.Status == "off" {
		return "VRAM Lab takes n_gpu_layers unset as every layer; llama.cpp before b6325 (e81b8e4b7) offloaded none unless -ngl was given (Metal builds all): set n_gpu_layers"
	}
	if w.ld.Fit.Status != "off" {
		return "the fit's -ngl: " + w.fitWhy()
	}
	return "the plan's n_gpu_layers"
}

func (w lcWhy) fitWhy() string {
	return "the fit compares each candidate with the free memory (device_free) less fit_target, and counts the compute buffers: " + w.computeWhy()
}

func (w lcWhy) computeWhy() string {
	switch {
	case w.compute:
		return "the log's, at the loaded context (llama.cpp's dry runs size them at each context tried)"
	case len(w.lc.ComputeBuffers) > 0:
		return "the plan's compute_buffers"
	}
	return "none counted (compute_buffers unset, and the log prints none for each GPU)"
}

// compute is a compute buffer: not modelled; compared only with what the
// plan gives.
func (w lcWhy) computeBuffer(d int, projected bool) (float64, bool, string) {
	switch {
	case d < 0:
		return 0, false, "the host's compute buffer is not modelled (ggml's graph allocator sizes it); not compared"
	case w.compute:
		return 0, false, ""
	case len(w.lc.ComputeBuffers) == 0:
		return 0, false, "not modelled (ggml's graph allocator sizes it) and the plan gives no compute_buffers; not compared"
	}
	u, ok := w.use(d, projected)
	return float64(u.Compute), ok, "the plan's compute_buffers, as given: VRAM Lab does not model the compute buffer"
}
