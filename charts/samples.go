package charts

import (
	"fmt"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/gpu"
)

// MemoryOverTime draws NVML readings (gpu.Record's samples: device used and
// the followed process's) against the predicted device-used figure and the
// GPU's capacity (0: none), seconds on the x-axis.
func MemoryOverTime(ss []gpu.Sample, predicted, capacity vram.Bytes, title string) Chart {
	c := Chart{Title: user(title), Height: 380}
	if c.Title == "" {
		c.Title = "Device memory over time (NVML)"
	}
	dev, proc := gpu.Peak(ss)
	c.Option.Title = &opts.Title{Title: c.Title, Subtitle: fmt.Sprintf("device-used peak %s; predicted %s", gib(dev), gib(predicted))}
	c.Option.Tooltip = lineTip("axis", `function(ps){var f=`+jsBytes+`;var out=[ps[0].value[0]+' s'];ps.forEach(function(p){out.push([p.color,p.seriesName+': '+f(p.value[1])]);});return out;}`)
	c.Option.Legend = &opts.Legend{Bottom: "0"}
	c.Option.Grid = []map[string]any{{"left": "3%", "right": "8%", "top": "70", "bottom": "60", "containLabel": true}}
	c.Option.XAxis = []map[string]any{{"type": "value", "name": "s", "min": 0}}
	c.Option.YAxis = []map[string]any{bytesAxis(nil)}
	var dv, pv [][2]float64
	for _, s := range ss {
		x := s.At.Seconds()
		dv = append(dv, [2]float64{x, gv(s.Device)})
		pv = append(pv, [2]float64{x, gv(s.Process)})
	}
	dv, pv = thin(dv, maxPoints), thin(pv, maxPoints)
	device := charts.SingleSeries{Name: "device used", Type: "line", Data: dv, ShowSymbol: opts.Bool(false), Step: "end",
		ItemStyle: itemColor("activations"), LineStyle: &opts.LineStyle{Width: 2}}
	var lines []any
	if predicted > 0 {
		lines = append(lines, map[string]any{"name": "predicted device-used", "yAxis": gv(predicted),
			"lineStyle": map[string]any{"color": Colors["parameters"], "type": "dashed", "width": 2},
			"label":     map[string]any{"formatter": "predicted " + gib(predicted), "position": "insideEndTop"}})
	}
	if capacity > 0 {
		lines = append(lines, map[string]any{"name": "capacity", "yAxis": gv(capacity),
			"lineStyle": map[string]any{"color": "#c23531", "type": "solid", "width": 1},
			"label":     map[string]any{"formatter": "capacity " + gib(capacity), "position": "insideEndTop"}})
	}
	if len(lines) > 0 {
		device.MarkLines = &opts.MarkLines{Data: lines}
	}
	c.Option.Series = append(c.Option.Series, device)
	if proc > 0 {
		c.Option.Series = append(c.Option.Series, charts.SingleSeries{Name: "process used", Type: "line", Data: pv, ShowSymbol: opts.Bool(false),
			Step: "end", ItemStyle: itemColor("optimizer_states"), LineStyle: &opts.LineStyle{Width: 1.5}})
	}
	top := max(dev, predicted, capacity)
	c.Option.YAxis[0]["max"] = niceCeil(gv(top) * 1.05)
	c.Table.Columns = []string{"time", "device used", "process used"}
	step := max(1, len(ss)/20) // a readable table: about 20 rows
	for i := 0; i < len(ss); i += step {
		s := ss[i]
		c.Table.Rows = append(c.Table.Rows, []string{fmt.Sprintf("%.1f s", s.At.Seconds()), gib(s.Device), gib(s.Process)})
	}
	c.Table.Rows = append(c.Table.Rows, []string{"peak", gib(dev), gib(proc)}, []string{"predicted", gib(predicted), ""})
	return c
}
