package charts

import (
	"fmt"
	"slices"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/vramlab/vramlab/vram"
)

// Allocator charts PyTorch's caching allocator over a replayed step
// (Replay with Points): at the end of each phase, what live tensors hold
// (allocated) and what the cache keeps reserved but free, stacked to the
// reserved total; every phase end has a label of its own.
func Allocator(points []vram.ReplayPoint, title string) Chart {
	c := Chart{Title: title, Height: 380}
	if title == "" {
		c.Title = "Allocated and reserved memory at the end of each phase"
	} else {
		c.Title = user(title)
	}
	c.Option.Title = &opts.Title{Title: c.Title}
	c.Option.Tooltip = lineTip("axis", stackTip)
	c.Option.Legend = &opts.Legend{Bottom: "0"}
	c.Option.Grid = []map[string]any{{"left": "3%", "right": "4%", "top": "60", "bottom": "70", "containLabel": true}}
	var names []string
	var alloc, free []float64
	var top vram.Bytes
	c.Table.Columns = []string{"phase end", "allocated", "reserved", "cached but free"}
	for _, p := range points {
		if p.Layer >= 0 {
			continue // inside the blocks: the chart shows phase ends
		}
		name := clean(p.Phase)
		if p.Iteration > 0 {
			name = fmt.Sprintf("%s %d", clean(p.Phase), p.Iteration)
		}
		if p.Name != "" {
			name += " (" + clean(p.Name) + ")"
		}
		names = append(names, name)
		alloc, free = append(alloc, gv(p.Allocated)), append(free, gv(p.Reserved-p.Allocated))
		top = max(top, p.Reserved)
		c.Table.Rows = append(c.Table.Rows, []string{name, gib(p.Allocated), gib(p.Reserved), gib(p.Reserved - p.Allocated)})
	}
	// Labels whole, on two lines (the phase, then where it ends): a dozen
	// phase ends leave a slot of 60 px at A4, too narrow for "(embedding)"
	// even broken over lines (broken, it read "embeddi/ng"), so where they
	// would touch ECharts shows every other one; the table below the chart
	// lists each.
	c.Option.XAxis = []map[string]any{{"type": "category", "data": names, "axisLabel": map[string]any{"interval": "auto", "hideOverlap": true, "lineHeight": 14,
		// go-echarts strips a function's newlines and escapes its
		// backslashes: the line break is made, not written.
		"formatter": opts.FuncOpts(`function(v){var i=v.indexOf(' (');return i<0?v:v.slice(0,i)+String.fromCharCode(10)+v.slice(i+1);}`)}}}
	c.Option.YAxis = []map[string]any{bytesAxis(map[string]any{"max": niceCeil(gv(top) * 1.05)})}
	c.Option.Series = []charts.SingleSeries{{Name: "allocated", Type: "bar", Stack: "reserved", Data: alloc, ItemStyle: &opts.ItemStyle{Color: "#5470c6"}}}
	if slices.ContainsFunc(free, func(v float64) bool { return v != 0 }) { // no legend entry for what is never there
		c.Option.Series = append(c.Option.Series, charts.SingleSeries{Name: "cached but free", Type: "bar", Stack: "reserved", Data: free, ItemStyle: &opts.ItemStyle{Color: "#c8d0e0"}})
	}
	return c
}
