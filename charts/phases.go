package charts

import (
	"slices"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/vramlab/vramlab/vram"
)

// holderColors and holderLabels draw a post-training step's holders:
// the trainer's own memory warm, the engine's cool, the runtime grey.
var (
	holderColors = map[vram.Holder]string{
		vram.HolderTrainer: "#5470c6", vram.HolderReference: "#91cc75", vram.HolderPass: "#ee6666",
		vram.HolderCache: "#fac858", vram.HolderEngine: "#73c0de", vram.HolderRuntime: "#9a9a9a",
	}
	holderLabels = map[vram.Holder]string{
		vram.HolderTrainer: "policy and optimizer", vram.HolderReference: "reference model", vram.HolderPass: "working memory",
		vram.HolderCache: "PyTorch's cache", vram.HolderEngine: "rollout engine", vram.HolderRuntime: "CUDA contexts and NCCL",
	}
)

// Phases charts one post-training step on one GPU, phase by phase in the
// framework's order (a transition marked →): what nvidia-smi shows,
// stacked by whose memory it is, with the card's capacity as a line.
func Phases(e vram.PostTrainingEstimate, capacity vram.Bytes) Chart {
	c := Chart{Title: "Device memory per GPU, phase by phase", Height: 380}
	sub := e.GPU
	if e.Setup != "" {
		sub = e.GPU + " · " + e.Setup
	}
	c.Option.Title = &opts.Title{Title: c.Title, Subtitle: user(sub)}
	c.Option.Tooltip = lineTip("axis", stackTip)
	c.Option.Legend = &opts.Legend{Bottom: "0"}
	c.Option.Grid = []map[string]any{{"left": "3%", "right": "10%", "top": "70", "bottom": "70", "containLabel": true}}
	names := make([]string, len(e.Phases))
	for i, p := range e.Phases {
		names[i] = clean(p.Name)
		if p.Transition {
			names[i] = "→ " + clean(p.Name)
		}
	}
	c.Option.XAxis = []map[string]any{{"type": "category", "data": names, "axisLabel": map[string]any{"interval": 0, "width": wordWidth(names, 110), "overflow": "break"}}}
	c.Option.YAxis = []map[string]any{bytesAxis(nil)}
	c.Table.Columns = []string{"phase"}
	first := true
	for _, h := range vram.Holders {
		var data []float64
		nonzero := false
		for _, p := range e.Phases {
			b := p.By(h)
			data = append(data, gv(b))
			nonzero = nonzero || b != 0
		}
		if !nonzero {
			continue
		}
		s := charts.SingleSeries{Name: holderLabels[h], Type: "bar", Stack: "memory", Data: data, ItemStyle: &opts.ItemStyle{Color: holderColors[h]}}
		if first && capacity > 0 {
			s.MarkLines = capacityLine(capacity)
		}
		first = false
		c.Option.Series = append(c.Option.Series, s)
		c.Table.Columns = append(c.Table.Columns, holderLabels[h])
	}
	c.Table.Columns = append(c.Table.Columns, "device", "host")
	var top vram.Bytes
	for i, p := range e.Phases {
		top = max(top, p.DeviceUsed)
		row := []string{names[i]}
		for _, h := range vram.Holders {
			if slices.Contains(c.Table.Columns, holderLabels[h]) {
				row = append(row, gib(p.By(h)))
			}
		}
		c.Table.Rows = append(c.Table.Rows, append(row, gib(p.DeviceUsed), gib(p.Host)))
	}
	capacityOnScale(&c, top, capacity)
	return c
}
