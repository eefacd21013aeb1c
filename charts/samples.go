package charts

import (
	"fmt"
	"math"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/gpu/sample"
)

// MemoryOverTime draws NVML readings (sample.Record's samples: device used and
// the followed process's) against the predicted device-used figure and the
// GPU's capacity (0: none), seconds on the x-axis. The chart speaks one
// unit, GiB, or MiB when the readings stay below 1 GiB; a capacity more
// than twice the readings is named in the subtitle, not drawn (it would
// squash the readings into the axis's bottom).
func MemoryOverTime(ss []sample.Sample, predicted, capacity vram.Bytes, title string) Chart {
	c := Chart{Title: user(title), Height: 380}
	if c.Title == "" {
		c.Title = "Device memory over time (NVML)"
	}
	dev, proc := sample.Peak(ss)
	top := max(dev, predicted)
	drawCap := capacity > 0 && capacity <= 2*top
	if drawCap {
		top = max(top, capacity)
	}
	unit, name := vram.GiB, "GiB"
	if top < vram.GiB {
		unit, name = vram.MiB, "MiB"
	}
	in := func(b vram.Bytes) float64 { return math.Round(float64(b)/float64(unit)*1e4) / 1e4 }
	str := func(b vram.Bytes) string { return b.Format(unit, 2) }
	sub := fmt.Sprintf("device-used peak %s; predicted %s", str(dev), str(predicted))
	if capacity > 0 && !drawCap {
		sub += fmt.Sprintf("; capacity %s, off the scale", str(capacity))
	}
	c.Option.Title = &opts.Title{Title: c.Title, Subtitle: sub}
	js := `function(g){g=Number(g)||0;return g.toFixed(2)+' ` + name + `';}`
	c.Option.Tooltip = lineTip("axis", `function(ps){var f=`+js+`;var out=[ps[0].value[0]+' s'];ps.forEach(function(p){out.push([p.color,p.seriesName+': '+f(p.value[1])]);});return out;}`)
	c.Option.Legend = &opts.Legend{Bottom: "0"}
	c.Option.Grid = []map[string]any{{"left": "3%", "right": "8%", "top": "70", "bottom": "60", "containLabel": true}}
	c.Option.XAxis = []map[string]any{{"type": "value", "name": "s", "min": 0}}
	c.Option.YAxis = []map[string]any{{"type": "value", "axisLabel": map[string]any{"formatter": "{value} " + name}, "max": niceCeil(in(top) * 1.05)}}
	var dv, pv [][2]float64
	for _, s := range ss {
		x := s.At.Seconds()
		dv = append(dv, [2]float64{x, in(s.Device)})
		pv = append(pv, [2]float64{x, in(s.Process)})
	}
	dv, pv = thin(dv, maxPoints), thin(pv, maxPoints)
	device := charts.SingleSeries{Name: "device used", Type: "line", Data: dv, ShowSymbol: opts.Bool(false), Step: "end",
		ItemStyle: itemColor("activations"), LineStyle: &opts.LineStyle{Width: 2}}
	var lines []any
	if predicted > 0 {
		lines = append(lines, map[string]any{"name": "predicted device-used", "yAxis": in(predicted),
			"lineStyle": map[string]any{"color": Colors["parameters"], "type": "dashed", "width": 2},
			"label":     map[string]any{"formatter": "predicted " + str(predicted), "position": "insideEndTop"}})
	}
	if drawCap {
		lines = append(lines, map[string]any{"name": "capacity", "yAxis": in(capacity),
			"lineStyle": map[string]any{"color": "#c23531", "type": "solid", "width": 1},
			"label":     map[string]any{"formatter": "capacity " + str(capacity), "position": "insideEndTop"}})
	}
	if len(lines) > 0 {
		device.MarkLines = &opts.MarkLines{Data: lines}
	}
	c.Option.Series = append(c.Option.Series, device)
	if proc > 0 {
		c.Option.Series = append(c.Option.Series, charts.SingleSeries{Name: "process used", Type: "line", Data: pv, ShowSymbol: opts.Bool(false),
			Step: "end", ItemStyle: itemColor("optimizer_states"), LineStyle: &opts.LineStyle{Width: 1.5}})
	}
	c.Table.Columns = []string{"time", "device used", "process used"}
	step := max(1, len(ss)/20) // a readable table: about 20 rows
	for i := 0; i < len(ss); i += step {
		s := ss[i]
		c.Table.Rows = append(c.Table.Rows, []string{fmt.Sprintf("%.1f s", s.At.Seconds()), str(s.Device), str(s.Process)})
	}
	c.Table.Rows = append(c.Table.Rows, []string{"peak", str(dev), str(proc)}, []string{"predicted", str(predicted), "—"})
	return c
}
