package charts

import (
	"fmt"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/vramlab/vramlab/vram"
)

// Search charts a layout search's layouts that fit (vram.Search): each a
// point of device-used memory against its tokens-a-second bound, the
// fastest pinned, the limit the search judged against drawn; the table
// lists them, the fastest first, each with its layout.
func Search(res vram.SearchResult, title string) Chart {
	if title == "" {
		title = "Layouts that fit: memory against speed"
	} else {
		title = user(title)
	}
	c := Chart{Title: title, Height: 400}
	c.Option.Title = &opts.Title{Title: title, Subtitle: fmt.Sprintf("%d layouts tried, %d fit by their allocated peak, %d replayed and fit", res.Candidates, res.Feasible, len(res.Layouts))}
	c.Option.Tooltip = lineTip("item", `function(p){var f=`+jsBytes+`;return [p.data[2],'device used: '+f(p.data[0]),'tokens/s bound: '+Math.round(p.data[1]).toLocaleString()];}`)
	c.Option.Legend = &opts.Legend{Bottom: "0"}
	c.Option.Grid = []map[string]any{{"left": "3%", "right": "8%", "top": "70", "bottom": "60", "containLabel": true}}
	c.Option.XAxis = []map[string]any{bytesAxis(map[string]any{"name": "device used", "nameLocation": "middle", "nameGap": 28, "scale": true})}
	c.Option.YAxis = []map[string]any{{"type": "value", "name": "tokens/s bound", "scale": true}}
	var rest, best []opts.ScatterData
	c.Table.Columns = []string{"rank", "layout", "device used", "tokens/s bound"}
	for i, l := range res.Layouts {
		name := layoutName(l)
		d := opts.ScatterData{Value: []any{gv(l.DeviceUsed), l.Step.TokensPerSecond, name}}
		if i == 0 {
			best = append(best, d)
		} else {
			rest = append(rest, d)
		}
		c.Table.Rows = append(c.Table.Rows, []string{fmt.Sprint(i + 1), name, gib(l.DeviceUsed), vram.Grouped(int64(l.Step.TokensPerSecond))})
	}
	s := charts.SingleSeries{Name: "fits", Type: "scatter", Data: rest, ItemStyle: &opts.ItemStyle{Color: "#5470c6"}}
	if res.Limit > 0 {
		s.MarkLines = &opts.MarkLines{Data: []any{map[string]any{"xAxis": gv(res.Limit), "name": "limit " + gib(res.Limit)}},
			MarkLineStyle: opts.MarkLineStyle{Symbol: []string{"none", "none"}, Label: &opts.Label{Show: opts.Bool(true), Formatter: "limit", Position: "insideEndTop"}, LineStyle: &opts.LineStyle{Color: "#d00", Type: "dashed", Width: 2}}}
	}
	c.Option.Series = append(c.Option.Series, s, charts.SingleSeries{Name: "fastest", Type: "scatter", Data: best, SymbolSize: 16, ItemStyle: &opts.ItemStyle{Color: "#d4a017"}})
	return c
}

// layoutName says a layout in its degrees: "dp 16 · tp 2 · cp 2 · mb 4 ×
// 1 · full".
func layoutName(l vram.Layout) string {
	t, p := l.Training, l.Training.Parallel
	mb, ga := t.MicroBatch, max(1, t.GradAccum)
	if p.PP > 1 {
		mb, ga = t.MicroBatch/max(1, p.PPMicrobatches), p.PPMicrobatches
	}
	pp := fmt.Sprint(max(1, p.PP))
	if p.VirtualStages > 1 {
		pp += fmt.Sprintf(" (%d virtual)", p.VirtualStages)
	}
	return fmt.Sprintf("dp %d · tp %d · pp %s · cp %d · mb %d × %d · %s", max(1, p.DP), max(1, p.TP), pp, max(1, p.CP), mb, ga, orNone(string(t.Checkpointing)))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
