package snapshot

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// Comparison puts a real run beside the engine's prediction for its plan.
type Comparison struct {
	// Real is the run's state at its allocated peak; RealReserved its
	// reserved peak (0 when the snapshot has no segment events).
	Real         Point
	RealReserved vram.Bytes
	// Predicted is the estimate's peak by category and where it is;
	// PredictedReserved the allocator replay's reserved peak.
	Predicted         vram.Breakdown
	PredictedAt       string
	PredictedReserved vram.Bytes
	// Unexplained are the largest allocations live at the real peak in
	// categories where the run holds more than predicted (by more than 1 %
	// of the peak and 1 MiB), by where they were allocated.
	Unexplained []Group
}

// Compare rebuilds nothing: it reads the prediction for plan t (on gpu, nil
// for none) and lines it up with run.
func Compare(run *Run, t vram.Training, gpu *vram.GPU) (Comparison, error) {
	est, err := t.Estimate()
	if err != nil {
		return Comparison{}, err
	}
	rep, err := t.Replay(vram.ReplayOptions{GPU: gpu})
	if err != nil {
		return Comparison{}, err
	}
	c := Comparison{Real: run.Peak(), Predicted: est.Peak, PredictedAt: est.PeakAt.Where(), PredictedReserved: rep.PeakReserved}
	if run.PeakReserved >= 0 {
		c.RealReserved = run.Points[run.PeakReserved].Reserved
	}
	if run.OnGPU() {
		// On the GPU the first matmul allocates cuBLAS's workspace
		// through the caching allocator: part of allocated, from then on.
		c.Predicted.Other += rep.Workspace
	}
	// A category is over when the run holds more than predicted by more
	// than 1 % of its peak (and at least 1 MiB): rounding is not a finding.
	over := map[string]bool{}
	margin := max(vram.MiB, c.Real.Allocated/100)
	for _, cat := range vram.Categories {
		if c.Real.Live.Get(cat)-c.Predicted.Get(cat) > margin {
			over[cat] = true
		}
	}
	for _, g := range run.LiveAt(run.PeakAllocated) {
		if over[g.Category] && len(c.Unexplained) < 10 {
			c.Unexplained = append(c.Unexplained, g)
		}
	}
	return c, nil
}

// Diff is (real − predicted) / real, in percent; 0 when real is 0.
func Diff(real, predicted vram.Bytes) float64 {
	if real == 0 {
		return 0
	}
	return 100 * float64(predicted-real) / float64(real)
}

// Rows are the comparison as a table: the peaks, then each category at
// each side's peak.
func (c Comparison) Rows() [][]string {
	pct := func(r, p vram.Bytes) string {
		if r == 0 {
			return ""
		}
		return fmt.Sprintf("%+.1f %%", Diff(r, p))
	}
	rows := [][]string{
		{"allocated peak", c.Real.Allocated.String(), c.Predicted.Total().String(), pct(c.Real.Allocated, c.Predicted.Total())},
	}
	if c.RealReserved > 0 {
		rows = append(rows, []string{"reserved peak", c.RealReserved.String(), c.PredictedReserved.String(), pct(c.RealReserved, c.PredictedReserved)})
	}
	rows = append(rows, []string{"where", c.Real.Where(), c.PredictedAt, ""})
	for _, cat := range vram.Categories {
		r, p := c.Real.Live.Get(cat), c.Predicted.Get(cat)
		if r == 0 && p == 0 {
			continue
		}
		rows = append(rows, []string{"  " + strings.ReplaceAll(cat, "_", " "), r.String(), p.String(), ""})
	}
	return rows
}

// CalibrationCase writes the run as a measured case in the format
// examples/validate reads (one JSON line, as examples/measure gpu writes):
// the resolved plan and the real allocated peak, so a user's own runs grow
// their validation set.
func CalibrationCase(planFile string, t vram.Training, run *Run, gpu string) ([]byte, error) {
	rt, err := t.Resolved()
	if err != nil {
		return nil, err
	}
	model, err := json.Marshal(rt.Model)
	if err != nil {
		return nil, err
	}
	rt.Model = vram.Model{}
	raw, err := json.Marshal(rt)
	if err != nil {
		return nil, err
	}
	var train map[string]any
	if err := json.Unmarshal(raw, &train); err != nil {
		return nil, err
	}
	delete(train, "model")
	// The case format names the quantized base by its dtype.
	train["quantized_base"] = "none"
	if !rt.QuantizedBase.Quantized() {
		delete(train, "quantized_modules") // the default is named only with a quantized base
	}
	if q := rt.QuantizedBase; q.Quantized() {
		train["quantized_base"] = q.DType.String()
		train["group_size"] = q.GroupSize
		train["double_quant"] = q.DoubleQuant
	}
	name := strings.TrimSuffix(filepath.Base(planFile), filepath.Ext(planFile))
	if gpu == "" {
		gpu = "unknown GPU"
	}
	p := run.Peak()
	reserved := ""
	if run.OnGPU() {
		reserved = fmt.Sprintf("; reserved peak %.3f GiB", gib(run.Points[run.PeakReserved].Reserved))
	}
	c := map[string]any{
		"id": "snapshot_" + name, "source": "a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot), read by vram/snapshot",
		"trust": "A", "kind": "train", "model": json.RawMessage(model), "train": train, "gpu": gpu,
		"measured": map[string]any{"what": "allocated_peak", "gib": round6(gib(p.Allocated)), "includes_cuda_context": false, "per": "gpu"},
		"inferred": []string{},
		"notes":    fmt.Sprintf("reported=%d bytes at %s%s; plan %s", int64(p.Allocated), p.Where(), reserved, filepath.Base(planFile)),
	}
	return json.Marshal(c)
}

func gib(b vram.Bytes) float64 { return float64(b) / float64(vram.GiB) }

func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }
