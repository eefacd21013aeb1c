package charts

import (
	"slices"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/vramlab/vramlab/vram"
)

// deviceTip is stackTip with the GPU's memory apart from the stack's total.
const deviceTip = `function(ps){var f=` + jsBytes + `;var out=[ps[0].name],t=0;ps.forEach(function(p){if(p.seriesType!=='scatter'){t+=p.value;}if(p.value)out.push([p.color,p.seriesName+': '+f(p.value)]);});out.push('total: '+f(t));return out;}`

// DeviceUsed charts what nvidia-smi would show of one plan on several GPUs
// (Replay's device-used), stacked from PyTorch's tensors up: what live
// tensors hold at the peak, the GEMM libraries' workspace inside it, the
// caching allocator's reserve beyond it, and outside PyTorch the CUDA
// context, NCCL's buffers and async TP's symmetric memory; each GPU's
// memory is marked on its bar. labels, reps and memory go together.
func DeviceUsed(labels []string, reps []vram.Replay, memory []vram.Bytes, title string) Chart {
	c := Chart{Title: "What each GPU shows in use, inside and outside PyTorch", Height: 380}
	if title != "" {
		c.Title = user(title)
	}
	c.Option.Title = &opts.Title{Title: c.Title}
	c.Option.Tooltip = lineTip("axis", deviceTip)
	c.Option.Legend = &opts.Legend{Bottom: "0"}
	c.Option.Grid = []map[string]any{{"left": "3%", "right": "4%", "top": "60", "bottom": "80", "containLabel": true}}
	n := min(len(labels), len(reps), len(memory))
	names := make([]string, n)
	for i := range n {
		names[i] = user(labels[i])
	}
	c.Option.XAxis = []map[string]any{{"type": "category", "data": names, "axisLabel": map[string]any{"interval": 0}}}
	parts := []struct {
		name  string
		color string
		of    func(r vram.Replay) vram.Bytes
	}{
		{"tensors at the peak", "#5470c6", func(r vram.Replay) vram.Bytes { return r.PeakAllocated - r.Workspace }},
		{"GEMM workspace", "#91cc75", func(r vram.Replay) vram.Bytes { return r.Workspace }},
		{"cached but free", "#c8d0e0", func(r vram.Replay) vram.Bytes { return r.PeakReserved - r.PeakAllocated }},
		{"CUDA context", "#fac858", func(r vram.Replay) vram.Bytes { return r.Context }},
		{"NCCL", "#ee6666", func(r vram.Replay) vram.Bytes { return r.NCCL }},
		{"symmetric memory", "#9a60b4", func(r vram.Replay) vram.Bytes { return r.SymmetricMemory }},
	}
	c.Table.Columns = []string{"GPU"}
	var top vram.Bytes
	for _, p := range parts {
		data := make([]float64, n)
		for i := range n {
			data[i] = gv(p.of(reps[i]))
		}
		if !slices.ContainsFunc(data, func(v float64) bool { return v != 0 }) {
			continue // no legend entry for what no GPU has
		}
		c.Table.Columns = append(c.Table.Columns, p.name)
		c.Option.Series = append(c.Option.Series, charts.SingleSeries{Name: p.name, Type: "bar", Stack: "device", Data: data, ItemStyle: &opts.ItemStyle{Color: p.color}})
	}
	mem := make([]float64, n)
	for i := range n {
		mem[i], top = gv(memory[i]), max(top, memory[i], reps[i].DeviceUsed)
	}
	c.Option.Series = append(c.Option.Series, charts.SingleSeries{Name: "GPU memory", Type: "scatter", Data: mem, Symbol: "rect", SymbolSize: []int{40, 3},
		ItemStyle: &opts.ItemStyle{Color: "#d00"}})
	c.Option.YAxis = []map[string]any{bytesAxis(map[string]any{"max": niceCeil(gv(top) * 1.05)})}
	c.Table.Columns = append(c.Table.Columns, "device used", "GPU memory")
	for i := range n {
		row := []string{names[i]}
		for _, p := range parts {
			if slices.Contains(c.Table.Columns, p.name) {
				row = append(row, gib(p.of(reps[i])))
			}
		}
		c.Table.Rows = append(c.Table.Rows, append(row, gib(reps[i].DeviceUsed), gib(memory[i])))
	}
	return c
}
