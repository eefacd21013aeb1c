package answer

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/importer"
)

// A llama.cpp log beside its plan: each figure against LlamaCpp.Load at
// the log's build (the plan's, where it names one), the fit run as that
// build runs it. llama.cpp prints no command line, so the plan is given;
// what the log says of the machine (each device's free memory at start)
// and what VRAM Lab does not model (the compute buffers, which ggml's
// graph allocator sizes) are taken from the log where the plan leaves
// them unset, and then not compared.

// lcDevice is the device index of a GPU buffer or device name (CUDA0,
// ROCm1, Vulkan0, MTL0: the backend's index; Metal), or -1 for a host buffer
// (CPU, CPU_Mapped, CUDA_Host, CPU_REPACK, the breakdown's Host).
func lcDevice(name string) int {
	if name == "Metal" || name == "Metal_Mapped" { // older builds' one Metal device
		return 0
	}
	m := lcDeviceName.FindStringSubmatch(name)
	if m == nil || strings.HasPrefix(name, "CPU") {
		return -1
	}
	i, err := strconv.Atoi(m[1])
	if err != nil || i > 1<<10 {
		return -1
	}
	return i
}

var lcDeviceName = regexp.MustCompile(`^[A-Za-z]+([0-9]+)$`)

// lcTaken says what was taken from the log into the plan.
type lcTaken struct{ free, compute bool }

// lcFromLog fills what the plan leaves unset and the log says: each GPU's
// free memory at start (device_free) and compute buffer
// (compute_buffers). It says what it took.
func lcFromLog(l *vram.LlamaCpp, log importer.EngineLog) (notes []string, taken lcTaken) {
	free, compute := lcPerDevice(log, importer.LogFreeAtStart), lcPerDevice(log, importer.LogComputeBuffer)
	if len(l.DeviceFree) == 0 && len(free) > 0 && (l.GPUs == 0 || l.GPUs == len(free)) {
		l.DeviceFree, taken.free = free, true
		notes = append(notes, fmt.Sprintf("device_free: the log's \"using device … MiB free\" (%s), the fit's free memory at start; free_at_start is not compared", mibList(free)))
	}
	nd := max(l.GPUs, len(l.DeviceFree), 1)
	if len(l.ComputeBuffers) == 0 && len(compute) == nd {
		l.ComputeBuffers, taken.compute = compute, true
		notes = append(notes, fmt.Sprintf("compute buffers are not modelled (ggml's graph allocator sizes them): the log's (%s) are taken as the plan's compute_buffers, "+
			"which the fit, where it runs, counts at every context it tries (llama.cpp's dry runs size them at each); they are not compared", mibList(compute)))
	}
	return notes, taken
}

// lcPerDevice is a figure's value for GPUs 0, 1, … (nil unless the log
// gives it for each of them, from 0).
func lcPerDevice(log importer.EngineLog, what string) []vram.Bytes {
	var out []vram.Bytes
	for _, f := range log.Figures {
		if f.What != what {
			continue
		}
		i := lcDevice(f.Device)
		switch {
		case i < 0:
		case i == len(out):
			out = append(out, f.Bytes)
		case i < len(out):
			out[i] += f.Bytes
		default:
			return nil
		}
	}
	return out
}

func mibList(xs []vram.Bytes) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("CUDA%d %.2f MiB", i, float64(x)/float64(vram.MiB))
	}
	return strings.Join(s, ", ")
}

// explainLlamaCpp sets a llama.cpp log beside plan p.
func explainLlamaCpp(p vram.Plan, imp *importer.Imported, l importer.EngineLog) (Explanation, error) {
	ex := Explanation{Log: l}
	if p.LlamaCpp == nil {
		return ex, errors.New(`plan: the log is llama.cpp's, which prints no command line: give the plan it ran, with its "llama_cpp" settings`)
	}
	lc := *p.LlamaCpp
	p.LlamaCpp = &lc
	ex.Notes = append(ex.Notes, lcBuild(&p, l)...)
	notes, taken := lcFromLog(&lc, l)
	ex.Notes = append(ex.Notes, notes...)
	if p.GPU == "" && len(lc.DeviceFree) == 0 {
		return ex, errors.New(`gpu: the GPU the log ran on is needed (a catalog name or a capacity), or a log with llama.cpp's "using device … MiB free" lines`)
	}
	rep, err := For(p, imp)
	if err != nil {
		return ex, err
	}
	ex.Report = rep
	var g *vram.GPU
	if p.GPU != "" {
		x, err := vram.ParseCapacity(p.GPU)
		if err != nil {
			return ex, fmt.Errorf("gpu: %w", err)
		}
		g = &x
	}
	ld, err := lc.Load(p.Model, g)
	if err != nil {
		return ex, fmt.Errorf("llama_cpp: %w", err)
	}
	ex.LlamaCppLoad = &ld
	if n := ld.Fit.Release.Note; n != "" {
		ex.Notes = append(ex.Notes, n)
	}
	w := lcWhy{l: l, lc: lc, m: p.Model, ld: ld, lcTaken: taken}
	for _, f := range lcFigures(l) {
		if d := lcDevice(f.Device); d >= len(ld.Fit.Devices) && f.What != importer.LogFitSplit {
			ex.Notes = append(ex.Notes, fmt.Sprintf("%s %s (line %d): the plan's load has %d GPU(s), the log more: set llama_cpp.gpus or device_free", f.What, f.Device, f.Line, len(ld.Fit.Devices)))
			continue
		}
		want, ok, why := w.predict(f)
		if !ok {
			if why != "" {
				ex.Notes = append(ex.Notes, fmt.Sprintf("%s %s (line %d): %s", f.What, f.Device, f.Line, why))
			}
			continue
		}
		c := lcCheck(f, want)
		if !c.Agrees {
			c.Why = why
		}
		ex.Checks = append(ex.Checks, c)
	}
	if l.FitArgs != "" && ld.Fit.Status != "off" {
		ex.FitArgs = &TextCheck{Line: l.FitArgsLine, Log: l.FitArgs, Predicted: ld.Fit.Args, Agrees: l.FitArgs == ld.Fit.Args}
	}
	ex.Notes = append(ex.Notes, l.Notes...)
	return ex, nil
}

// lcBuild takes the log's build as the plan's where the plan names none.
func lcBuild(p *vram.Plan, l importer.EngineLog) []string {
	switch {
	case l.Version == "" && p.Versions.LlamaCpp == "":
		return []string{"the log names no build (from b9161 its build line is trace level: -lv 4) and the plan none: the newest modelled build's rules are used"}
	case l.Version == "":
		return nil
	case p.Versions.LlamaCpp == "":
		if _, err := vram.ParseVersion("llama_cpp", l.Version); err != nil {
			return nil
		}
		p.Versions.LlamaCpp, p.LlamaCpp.Version = l.Version, l.Version
		return []string{"the plan names no llama.cpp build: the log's, " + l.Version + " (" + l.Commit + "), is modelled"}
	case p.Versions.LlamaCpp != l.Version:
		return []string{"the plan names build " + p.Versions.LlamaCpp + ", the log was printed by " + l.Version + ": the plan's build is modelled"}
	}
	return nil
}

// lcFigures are the log's figures with the host buffers of each kind
// summed into one (the engine models the host's weights and cache, not
// how llama.cpp splits them among CPU, CPU_Mapped and CUDA_Host).
func lcFigures(l importer.EngineLog) []importer.LogFigure {
	var out []importer.LogFigure
	host := map[string]int{}
	for _, f := range l.Figures {
		if f.Device == "" || lcDevice(f.Device) >= 0 || f.What == importer.LogFreeAtStart {
			out = append(out, f)
			continue
		}
		i, ok := host[f.What]
		if !ok {
			host[f.What] = len(out)
			out = append(out, f)
			continue
		}
		out[i].Bytes += f.Bytes
		out[i].Device += "+" + f.Device
	}
	return out
}

// TextCheck is a line of the log beside the line predicted for it.
type TextCheck struct {
	Line      int    `json:"line"`
	Log       string `json:"log"`
	Predicted string `json:"predicted"`
	Agrees    bool   `json:"agrees"`
}

// lcCheck sets a llama.cpp figure beside its prediction, to the log's
// precision: MiB to hundredths for the buffers, whole MiB (rounded down)
// for the breakdown, the fit's lines and the free memory, counts exact.
func lcCheck(f importer.LogFigure, predicted float64) LogCheck {
	log, tol := f.Count, 0.0
	if importer.IsBytes(f.What) {
		log, tol = float64(f.Bytes), 0.005*float64(vram.MiB)
		if importer.WholeMiB(f.What) {
			predicted = math.Floor(predicted/float64(vram.MiB)) * float64(vram.MiB)
			tol = 0
		}
	}
	c := LogCheck{What: f.What, Device: f.Device, Line: f.Line, Log: log, Predicted: predicted, Diff: predicted - log}
	if log != 0 {
		c.Percent = math.Round(10000*c.Diff/log) / 100
	}
	c.Agrees = math.Abs(c.Diff) <= tol
	return c
}
