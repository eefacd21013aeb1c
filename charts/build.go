package charts

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
	"github.com/vramlab/vramlab/vram"
)

// Colors are the fixed category colors every chart uses (and the kernel logo).
var Colors = map[string]string{
	"parameters":       "#5470c6",
	"gradients":        "#91cc75",
	"optimizer_states": "#fac858",
	"activations":      "#ee6666",
	"kv_cache":         "#73c0de",
	"temporaries":      "#3ba272",
	"other":            "#9a60b4",
}

// label is a category's display name.
func label(cat string) string { return strings.ReplaceAll(cat, "_", " ") }

// Chart data is in GiB (so axes get round ticks); jsBytes formats a GiB
// value for tooltips, in MiB below 1 GiB.
const jsBytes = `function(g){g=Number(g)||0;return Math.abs(g)<1?(g*1024).toFixed(1)+' MiB':g.toFixed(2)+' GiB';}`

// stackTip lists the categories of a stacked axis tooltip and their total.
const stackTip = `function(ps){var f=` + jsBytes + `;var out=[ps[0].name],t=0;ps.forEach(function(p){t+=p.value;if(p.value)out.push([p.color,p.seriesName+': '+f(p.value)]);});out.push('total: '+f(t));return out;}`

// gv is a size in GiB for chart data.
func gv(b vram.Bytes) float64 { return math.Round(b.GiB()*1e4) / 1e4 }

// lineTip is a tooltip whose formatter, a JavaScript function of ECharts'
// params, returns lines: each a string, or [color, text] for a line with a
// colored marker. HTML wraps every formatter so that what it returns becomes
// text nodes (see tipJS): a tooltip never parses markup, whatever a label
// holds.
func lineTip(trigger, fn string) *opts.Tooltip {
	return &opts.Tooltip{Trigger: trigger, Formatter: opts.FuncOpts(fn)}
}

// gib is b in GiB, or in its own unit when it would print as 0.00 GiB
// (a table never shows a category that is there as zero).
func gib(b vram.Bytes) string {
	if b != 0 && b.In(vram.GiB) < 0.005 && b.In(vram.GiB) > -0.005 {
		return b.String()
	}
	if b >= vram.TiB || b <= -vram.TiB {
		return b.Format(vram.TiB, 2) // as the memory axis says it from 1024 GiB up
	}
	return b.Format(vram.GiB, 2)
}

func share(b, total vram.Bytes) string {
	if total <= 0 {
		return "-"
	}
	p := 100 * float64(b) / float64(total)
	if b > 0 && p < 0.05 {
		return "<0.1%"
	}
	return fmt.Sprintf("%.1f%%", p)
}

// bytesAxis is a memory axis in GiB, its labels in TiB from 1024 GiB up
// (a 2 TiB plan's "2,000 GiB" labels ran into each other) and to one
// decimal from 10 TiB ("19.5 TiB", not "19.53 TiB"), any that would still
// overlap left out.
func bytesAxis(extra map[string]any) map[string]any {
	a := map[string]any{"type": "value", "axisLabel": map[string]any{"hideOverlap": true,
		"formatter": opts.FuncOpts(`function(v){if(Math.abs(v)>=1024){var t=v/1024,k=Math.abs(t)>=10?10:100;return (Math.round(t*k)/k)+' TiB';}return (Math.round(v*100)/100)+' GiB';}`)}}
	for k, v := range extra {
		a[k] = v
	}
	return a
}

func itemColor(cat string) *opts.ItemStyle { return &opts.ItemStyle{Color: Colors[cat]} }

// capacityOnScale keeps a capacity line on the chart: when the data stay
// below it, the memory axis runs up to it (ECharts would otherwise end the
// axis at the data and leave the line off-scale).
//
// A capacity more than twice the data would squeeze the data into the
// bottom of the chart (a 29 GiB plan on a 0–100 GiB axis): the axis stays
// scaled to the data, the line is left out and the subtitle gives the
// capacity instead.
func capacityOnScale(c *Chart, top, capacity vram.Bytes) {
	if capacity <= 0 || len(c.Option.YAxis) == 0 || capacity < top {
		return
	}
	if top > 0 && capacity > 2*top {
		for i := range c.Option.Series {
			c.Option.Series[i].MarkLines = nil
		}
		if c.Option.Title != nil {
			note := "capacity " + gib(capacity) + ", off the scale"
			if c.Option.Title.Subtitle != "" {
				note = c.Option.Title.Subtitle + "; " + note
			}
			c.Option.Title.Subtitle = note
		}
		return
	}
	c.Option.YAxis[0]["max"] = niceCeil(gv(capacity) * 1.05)
}

// Scaled returns c with its memory axis running from zero to top, so that
// charts shown side by side (one plan's timeline beside another's) share
// one scale.
func Scaled(c Chart, top vram.Bytes) Chart {
	if top <= 0 || len(c.Option.YAxis) == 0 {
		return c
	}
	axes := make([]map[string]any, len(c.Option.YAxis))
	for i, a := range c.Option.YAxis {
		axes[i] = map[string]any{}
		for k, v := range a {
			axes[i][k] = v
		}
	}
	axes[0]["min"], axes[0]["max"] = 0, niceCeil(top.GiB())
	c.Option.YAxis = axes
	return c
}

// niceCeil rounds x up to 1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of
// ten, so that an axis ending there ends on one of its labels.
func niceCeil(x float64) float64 {
	if x <= 0 {
		return 1
	}
	step := math.Pow(10, math.Floor(math.Log10(x)))
	for _, f := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if f*step >= x*(1-1e-12) {
			return f * step
		}
	}
	return 10 * step
}

// Breakdown charts one breakdown: a stacked bar and a donut of the same
// categories, in the category colors, with bytes and share in the tooltip.
func Breakdown(b vram.Breakdown, title string) Chart {
	title = user(title)
	total := b.Total()
	c := Chart{Title: title, Height: 320}
	c.Option.Title = &opts.Title{Title: title, Subtitle: "total " + gib(total)}
	c.Option.Tooltip = lineTip("item", `function(p){var f=`+jsBytes+`;var t=`+fmt.Sprint(gv(total))+`;var v=p.value;return p.seriesType==='pie'?[[p.color,p.name+': '+f(v)+' ('+p.percent+'%)']]:[[p.color,p.seriesName+': '+f(v)+' ('+(t?(100*v/t).toFixed(1):'0')+'%)']];}`)
	c.Option.Legend = &opts.Legend{Bottom: "0"}
	c.Option.Grid = []map[string]any{{"left": "3%", "right": "52%", "top": "70", "bottom": "60", "containLabel": true}}
	// The axis's last label would stand at the donut's labels' edge in a
	// narrow chart: it is left out (the total is in the subtitle).
	// Three or four ticks: the bar has half the chart's width, where more
	// labels run into each other ("10 GiB15 GiB") at a printed page's width.
	x := bytesAxis(map[string]any{"splitNumber": 3})
	x["axisLabel"].(map[string]any)["showMaxLabel"] = false
	c.Option.XAxis = []map[string]any{x}
	c.Option.YAxis = []map[string]any{{"type": "category", "data": []string{"per GPU"}}}
	var pie []opts.PieData
	c.Table.Columns = []string{"category", "size", "share"}
	for _, it := range b.Items() {
		c.Option.Series = append(c.Option.Series, charts.SingleSeries{Name: label(it.Category), Type: "bar", Stack: "memory",
			Data: []float64{gv(it.Bytes)}, ItemStyle: itemColor(it.Category)})
		if it.Bytes > 0 {
			d := opts.PieData{Name: label(it.Category), Value: gv(it.Bytes), ItemStyle: itemColor(it.Category)}
			if float64(it.Bytes) < 0.02*float64(total) {
				d.Label = &opts.Label{Show: opts.Bool(false)} // a sliver: no room for a name
			}
			pie = append(pie, d)
		}
		c.Table.Rows = append(c.Table.Rows, []string{label(it.Category), gib(it.Bytes), share(it.Bytes, total)})
	}
	c.Table.Rows = append(c.Table.Rows, []string{"total", gib(total), "100%"})
	// The donut names each slice with its share; a slice too thin for its
	// label drops the label (the legend and tooltip still have it).
	c.Option.Series = append(c.Option.Series, charts.SingleSeries{Name: "share", Type: "pie", Radius: []string{"20%", "34%"},
		Center: []string{"73%", "50%"}, Data: pie,
		Label:       &opts.Label{Show: opts.Bool(true), Formatter: "{b}\n{d}%", FontSize: 11, LineHeight: 14},
		LabelLine:   &opts.LabelLine{Show: opts.Bool(true), Length2: 6},
		LabelLayout: &opts.LabelLayout{HideOverlap: opts.Bool(true)}})
	return c
}

// Compare charts several breakdowns side by side (e.g. fp32 vs mixed vs
// 8-bit Adam), stacked by category. An optional capacity draws a line.
func Compare(labels []string, bs []vram.Breakdown, capacity vram.Bytes) Chart {
	c := Chart{Title: "Peak allocated memory per GPU, by plan", Height: 360}
	c.Option.Title = &opts.Title{Title: c.Title}
	c.Option.Tooltip = lineTip("axis", stackTip)
	c.Option.Legend = &opts.Legend{Bottom: "0"}
	c.Option.Grid = []map[string]any{{"left": "3%", "right": "8%", "top": "60", "bottom": "60", "containLabel": true}}
	names := make([]string, len(labels))
	for i, l := range labels {
		names[i] = user(l)
	}
	// Each plan's name broken over lines within its slot (a plot about
	// 560 px wide at A4), never inside a word.
	c.Option.XAxis = []map[string]any{{"type": "category", "data": names, "axisLabel": map[string]any{"interval": 0, "overflow": "break",
		"width": max(wordWidth(labels, 60), 560/max(1, len(names))), "lineHeight": 14}}}
	c.Option.YAxis = []map[string]any{bytesAxis(nil)}
	c.Table.Columns = append([]string{"plan"}, catLabels()...)
	c.Table.Columns = append(c.Table.Columns, "total")
	for i, cat := range vram.Categories {
		var data []float64
		nonzero := false
		for _, b := range bs {
			v := b.Get(cat)
			data = append(data, gv(v))
			nonzero = nonzero || v != 0
		}
		if !nonzero {
			continue
		}
		s := charts.SingleSeries{Name: label(cat), Type: "bar", Stack: "memory", Data: data, ItemStyle: itemColor(cat)}
		if i == 0 && capacity > 0 {
			s.MarkLines = capacityLine(capacity)
		}
		c.Option.Series = append(c.Option.Series, s)
	}
	var top vram.Bytes
	for _, b := range bs {
		top = max(top, b.Total())
	}
	capacityOnScale(&c, top, capacity)
	for i, b := range bs {
		row := []string{names[min(i, len(names)-1)]}
		for _, cat := range vram.Categories {
			row = append(row, gib(b.Get(cat)))
		}
		c.Table.Rows = append(c.Table.Rows, append(row, gib(b.Total())))
	}
	return c
}

func catLabels() []string {
	var out []string
	for _, c := range vram.Categories {
		out = append(out, label(c))
	}
	return out
}

func capacityLine(capacity vram.Bytes) *opts.MarkLines {
	return &opts.MarkLines{
		Data: []any{map[string]any{"yAxis": gv(capacity), "name": "capacity " + gib(capacity)}},
		// The label sits inside the plot, above the line's end: at the end
		// of the line it was clipped by a narrow page's margin.
		MarkLineStyle: opts.MarkLineStyle{Symbol: []string{"none", "none"}, Label: &opts.Label{Show: opts.Bool(true), Formatter: "capacity", Position: "insideEndTop"}, LineStyle: &opts.LineStyle{Color: "#d00", Type: "dashed", Width: 2}},
	}
}

// Timeline charts memory over a training step: stacked areas by category,
// phases shaded (forward, backward, optimizer), the peak marked with where
// it happens, and an optional capacity line.
func Timeline(tl vram.Timeline, capacity vram.Bytes) Chart {
	c := Chart{Title: "Memory over the training step", Height: 420}
	peak := tl.PeakEvent()
	c.Option.Title = &opts.Title{Title: c.Title, Subtitle: "peak " + gib(peak.Live.Total()) + " at " + clean(peak.Where()) + elided(tl)}
	var xs []string
	for _, e := range tl.Events {
		xs = append(xs, clean(eventLabel(e)))
	}
	c.Option.Tooltip = lineTip("axis", stackTip)
	c.Option.Legend = &opts.Legend{Bottom: "0"}
	// vramlabPinRoom: fitTitles keeps the peak's pin (about 40 px above
	// the peak) below the title and subtitle however they wrap.
	c.Option.Grid = []map[string]any{{"left": "3%", "right": "8%", "top": "110", "bottom": "60", "containLabel": true, "vramlabPinRoom": 44}}
	// The x-axis is the step's allocations in order: the phases are the
	// labelled bands above, each point's op is in the tooltip.
	c.Option.XAxis = []map[string]any{{"type": "category", "data": xs, "boundaryGap": false, "axisLabel": map[string]any{"show": false},
		"name": "the step's allocations and frees, in order", "nameLocation": "middle", "nameGap": 12}}
	c.Option.YAxis = []map[string]any{bytesAxis(nil)}
	first := true
	for _, cat := range vram.Categories {
		var data []float64
		nonzero := false
		for _, e := range tl.Events {
			v := e.Live.Get(cat)
			data = append(data, gv(v))
			nonzero = nonzero || v != 0
		}
		if !nonzero {
			continue
		}
		s := charts.SingleSeries{Name: label(cat), Type: "line", Stack: "memory", Data: data, ShowSymbol: opts.Bool(false),
			Step: "end", ItemStyle: itemColor(cat), AreaStyle: &opts.AreaStyle{Opacity: opts.Float(0.85)}, LineStyle: &opts.LineStyle{Width: 0}}
		if first {
			s.MarkAreas = phaseAreas(tl)
			if capacity > 0 {
				s.MarkLines = capacityLine(capacity)
			}
			first = false
		}
		c.Option.Series = append(c.Option.Series, s)
	}
	capacityOnScale(&c, peak.Live.Total(), capacity)
	// The peak marker on the topmost series, at the stacked total.
	if n := len(c.Option.Series); n > 0 && tl.Peak < len(xs) {
		value := gib(peak.Live.Total())
		c.Option.Series[n-1].MarkPoints = &opts.MarkPoints{Data: []any{map[string]any{
			"coord": []any{xs[tl.Peak], gv(peak.Live.Total())}, "value": value,
			"name": "peak", "symbol": "pin", "symbolSize": pinSize(value),
			// dark on white in print as on screen, whatever the top category's color
			"itemStyle": map[string]any{"color": "#222"}, "label": map[string]any{"color": "#fff", "fontWeight": "bold"}}}}
	}
	c.Table.Columns = append([]string{"iteration", "phase", "where"}, catLabels()...)
	c.Table.Columns = append(c.Table.Columns, "total")
	for i, e := range tl.Events {
		// The table lists phase boundaries and the peak, not every event.
		if i != tl.Peak && i > 0 && e.Phase == tl.Events[i-1].Phase && e.Iteration == tl.Events[i-1].Iteration {
			continue
		}
		row := []string{fmt.Sprint(e.Iteration), e.Phase, clean(e.Where())}
		for _, cat := range vram.Categories {
			row = append(row, gib(e.Live.Get(cat)))
		}
		if i == tl.Peak {
			row[2] = "PEAK: " + row[2]
		}
		c.Table.Rows = append(c.Table.Rows, append(row, gib(e.Live.Total())))
	}
	return c
}

// pinSize is a pin wide enough for its label at 12 px (a 60 px pin held
// "29.1 GiB" but not "1234.5 GiB").
func pinSize(label string) int { return max(60, 8*len(label)+12) }

// elided says which micro-steps of gradient accumulation the timeline
// leaves out: the step walks the first and the last of each iteration, and
// those between hold what the last holds before the optimizer.
func elided(tl vram.Timeline) string {
	last := 0
	for _, e := range tl.Events {
		last = max(last, e.Micro)
	}
	switch {
	case last <= 2:
		return ""
	case last == 3:
		return "; micro-step 2 of each iteration not drawn: it holds what micro-step 3 holds before the optimizer"
	}
	return fmt.Sprintf("; micro-steps 2–%d of each iteration not drawn: each holds what micro-step %d holds before the optimizer", last-1, last)
}

// wordWidth is a category axis label's width in pixels at 12 px: room for
// its longest word (a label broken over lines never breaks inside a word:
// "embeddi/ng"), and at least least.
func wordWidth(names []string, least int) int {
	w := least
	for _, n := range names {
		for _, word := range strings.Fields(n) {
			w = max(w, 7*len([]rune(word))+6)
		}
	}
	return w
}

// eventLabel names an event of the step; with gradient accumulation the
// micro-batch too (the timeline walks the first and the last), so no two
// events read alike.
func eventLabel(e vram.Event) string {
	where := strings.TrimPrefix(e.Where(), fmt.Sprintf("iteration %d, ", e.Iteration))
	if e.Micro > 1 {
		return fmt.Sprintf("it %d · micro %d · %s", e.Iteration, e.Micro, where)
	}
	return fmt.Sprintf("it %d · %s", e.Iteration, where)
}

// phaseName names a phase band: "forward 1", or "forward 1.4" for the
// fourth micro-batch of iteration 1 when gradients accumulate.
func phaseName(e vram.Event, accumulates bool) string {
	if accumulates && e.Phase != "optimizer" {
		return fmt.Sprintf("%s %d.%d", e.Phase, e.Iteration, e.Micro)
	}
	return fmt.Sprintf("%s %d", e.Phase, e.Iteration)
}

// phaseAreas shades each contiguous phase of the timeline.
func phaseAreas(tl vram.Timeline) *opts.MarkAreas {
	shade := map[string]string{"forward": "rgba(84,112,198,0.08)", "loss": "rgba(154,96,180,0.10)", "backward": "rgba(238,102,102,0.08)", "optimizer": "rgba(250,200,88,0.15)"}
	var data []any
	accumulates := false
	for _, e := range tl.Events {
		accumulates = accumulates || e.Micro > 1
	}
	for i := 0; i < len(tl.Events); {
		j := i
		for j+1 < len(tl.Events) && tl.Events[j+1].Phase == tl.Events[i].Phase && tl.Events[j+1].Iteration == tl.Events[i].Iteration && tl.Events[j+1].Micro == tl.Events[i].Micro {
			j++
		}
		e := tl.Events[i]
		name := phaseName(e, accumulates)
		start := map[string]any{"name": name, "xAxis": clean(eventLabel(e)), "itemStyle": map[string]any{"color": shade[e.Phase]}}
		if !labelFits(name, j-i+1, len(tl.Events)) {
			// Too narrow for its name (the loss, a short optimizer step):
			// shaded, unlabelled, so names never run into each other.
			start["label"] = map[string]any{"show": false}
		}
		data = append(data, []any{start, map[string]any{"xAxis": clean(eventLabel(tl.Events[j]))}})
		i = j + 1
	}
	// The names sit at the bottom of their bands, out of the way of the
	// peak's pin (which stands on the highest point, near the top).
	return &opts.MarkAreas{Data: data, MarkAreaStyle: opts.MarkAreaStyle{Label: &opts.Label{Show: opts.Bool(true), Position: "insideBottom", Color: "#333"}}}
}

// labelFits reports whether a span of n of total category slots is wide
// enough for its name in a plot about 600 pixels wide (the narrowest a
// report's printed column, 186 mm, gives it), at about 7 pixels a
// character.
func labelFits(name string, n, total int) bool {
	if total <= 0 {
		return false
	}
	return float64(n)/float64(total)*600 >= float64(len(name))*7+8
}

// Sweep charts memory against a swept field: stacked bars by category, a
// capacity line, and the values that do not fit shaded.
func Sweep(field string, pts []vram.SweepPoint, capacity vram.Bytes) Chart {
	field = user(field)
	c := Chart{Title: "Peak allocated memory per GPU vs " + field, Height: 380}
	c.Option.Title = &opts.Title{Title: c.Title}
	var xs []string
	for _, p := range pts {
		x := user(p.Value)
		if p.Current {
			x += " (plan)" // where the plan stands
		}
		xs = append(xs, x)
	}
	c.Option.Tooltip = lineTip("axis", stackTip)
	c.Option.Legend = &opts.Legend{Bottom: "0"}
	c.Option.Grid = []map[string]any{{"left": "3%", "right": "8%", "top": "60", "bottom": "60", "containLabel": true}}
	c.Option.XAxis = []map[string]any{{"type": "category", "name": field, "nameLocation": "middle", "nameGap": 28, "data": xs}}
	c.Option.YAxis = []map[string]any{bytesAxis(nil)}
	first := true
	for _, cat := range vram.Categories {
		var data []float64
		nonzero := false
		for _, p := range pts {
			v := p.Peak.Get(cat)
			data = append(data, gv(v))
			nonzero = nonzero || v != 0
		}
		if !nonzero {
			continue
		}
		s := charts.SingleSeries{Name: label(cat), Type: "bar", Stack: "memory", Data: data, ItemStyle: itemColor(cat)}
		if first && capacity > 0 {
			s.MarkLines = capacityLine(capacity)
			var over []any
			for i, p := range pts {
				if p.Err == "" && p.Peak.Total() > capacity {
					over = append(over, []any{map[string]any{"xAxis": xs[i], "itemStyle": map[string]any{"color": "rgba(220,0,0,0.08)"}}, map[string]any{"xAxis": xs[i]}})
				}
			}
			if len(over) > 0 {
				s.MarkAreas = &opts.MarkAreas{Data: over}
			}
		}
		first = false
		c.Option.Series = append(c.Option.Series, s)
	}
	var top vram.Bytes
	for _, p := range pts {
		top = max(top, p.Peak.Total())
	}
	capacityOnScale(&c, top, capacity)
	c.Table.Columns = []string{field, "peak", "fits", "peak at"}
	for i, p := range pts {
		fit := "-"
		if capacity > 0 && p.Err == "" {
			fit = map[bool]string{true: "yes", false: "no"}[p.Peak.Total() <= capacity]
		}
		where := clean(p.Where)
		if p.Err != "" {
			where = "invalid: " + clean(p.Err)
		}
		c.Table.Rows = append(c.Table.Rows, []string{xs[i], gib(p.Peak.Total()), fit, where})
	}
	return c
}

// FitMap charts headroom over two swept fields in the budget's measure
// (device-used by default): green where the plan fits the budget (darker
// with more headroom), red where it does not.
func FitMap(t vram.Training, xField string, xs []string, yField string, ys []string, budget vram.Budget) (Chart, error) {
	for _, f := range []string{xField, yField} {
		if !slices.Contains(vram.SweepFields, f) {
			return Chart{}, fmt.Errorf("fit map: unknown field %q; known: %s", f, strings.Join(vram.SweepFields, ", "))
		}
	}
	if err := t.Validate(); err != nil {
		return Chart{}, fmt.Errorf("fit map: %w", err)
	}
	c := Chart{Title: fmt.Sprintf("Headroom on %s: %s × %s", user(budget.GPU.Name), user(xField), user(yField)), Height: 420}
	measure := budget.Measure
	if measure == "" {
		measure = vram.MeasureDeviceUsed
	}
	what := map[string]string{vram.MeasureDeviceUsed: "what nvidia-smi will show, within the GPU's memory",
		vram.MeasureReserved:  "the reserved peak, within the memory after the CUDA context",
		vram.MeasureAllocated: "the allocated peak, within the memory after the CUDA context"}[measure]
	c.Option.Title = &opts.Title{Title: c.Title, Subtitle: fmt.Sprintf("limit %s: %s, less %g %% headroom", gib(budget.Limit()), what, 100*budget.Headroom)}
	// Every cell's plan, judged at once on the machine's cores.
	plans, setErrs := make([]vram.Training, len(xs)*len(ys)), make([]error, len(xs)*len(ys))
	for j, y := range ys {
		for i, x := range xs {
			k := j*len(xs) + i
			plans[k], setErrs[k] = t.Set(xField, x)
			if setErrs[k] == nil {
				plans[k], setErrs[k] = plans[k].Set(yField, y)
			}
		}
	}
	verdicts, errs := budget.JudgeAll(plans)
	var data []any
	c.Table.Columns = append([]string{user(yField) + " \\ " + user(xField)}, userAll(xs)...)
	for j, y := range ys {
		row := []string{user(y)}
		for i := range xs {
			k := j*len(xs) + i
			tx, v, err := plans[k], verdicts[k], errors.Join(setErrs[k], errs[k])
			if err != nil {
				data = append(data, []any{i, j, "-"})
				row = append(row, "invalid")
				continue
			}
			head := float64(v.Limit-v.Need) / float64(vram.GiB)
			cell := fmt.Sprintf("%+.1f GiB", head)
			if reflect.DeepEqual(tx, t) {
				// The plan as it stands: outlined, and named in the table.
				data = append(data, map[string]any{"value": []any{i, j, float64(int64(head*10)) / 10},
					"itemStyle": map[string]any{"borderColor": "#222", "borderWidth": 3}})
				cell += " (this plan)"
			} else {
				data = append(data, []any{i, j, float64(int64(head*10)) / 10})
			}
			row = append(row, cell)
		}
		c.Table.Rows = append(c.Table.Rows, row)
	}
	c.Option.Tooltip = lineTip("item", `function(p){return [[p.color,'headroom: '+p.value[2]+' GiB'+(p.value[2]<0?' (does not fit)':'')]];}`)
	c.Option.Grid = []map[string]any{{"left": "3%", "right": "4%", "top": "84", "bottom": "70", "containLabel": true}}
	// Axis names centred under the axis: at its end they were cut off.
	c.Option.XAxis = []map[string]any{{"type": "category", "name": user(xField), "nameLocation": "middle", "nameGap": 28, "data": userAll(xs), "splitArea": map[string]any{"show": true}}}
	c.Option.YAxis = []map[string]any{{"type": "category", "name": user(yField), "data": userAll(ys), "splitArea": map[string]any{"show": true}}}
	c.Option.VisualMap = []map[string]any{{"type": "piecewise", "orient": "horizontal", "left": "center", "bottom": "0",
		"pieces": []map[string]any{{"lt": 0, "label": "does not fit", "color": "#d94e4e"}, {"gte": 0, "lt": 5, "label": "< 5 GiB free", "color": "#c7e9c0"},
			{"gte": 5, "lt": 20, "label": "5–20 GiB", "color": "#74c476"}, {"gte": 20, "label": "> 20 GiB", "color": "#238b45"}}}}
	// Cell labels carry their unit; the cell of the plan as it stands is
	// outlined (its table cell says "this plan").
	c.Option.Series = []charts.SingleSeries{{Name: "headroom", Type: "heatmap", Data: data,
		Label: &opts.Label{Show: opts.Bool(true), Formatter: opts.FuncOpts(`function(p){var v=p.value[2];return typeof v==='number'?v+' GiB':String(v);}`)}}}
	return c, nil
}

// Flow is the article's one-picture view of a training step: inputs and
// parameters feed the activations, which produce the gradients, which the
// optimizer turns (with its states) into updated parameters. Bands are sized
// by the bytes of the category they flow into.
func Flow(b vram.Breakdown, inputs vram.Bytes, title string) Chart {
	title = user(title)
	c := Chart{Title: title, Height: 380}
	c.Option.Title = &opts.Title{Title: title}
	c.Option.Tooltip = lineTip("item", `function(p){var f=`+jsBytes+`;return p.dataType==='edge'?[p.data.source+' → '+p.data.target+': '+f(p.value)]:[[p.color,p.name+': '+f(p.value)]];}`)
	type link struct {
		from, to string
		v        vram.Bytes
	}
	ls := []link{
		{"inputs", "activations", inputs},
		{"parameters", "activations", b.Activations - inputs},
		{"activations", "gradients", b.Gradients},
		{"activations", "temporaries", b.Temporaries}, // the loss's logits, workspaces: transients of the step
		{"parameters", "gradients", 0},
		{"gradients", "optimizer states", b.OptimizerStates},
		{"optimizer states", "updated parameters", b.Parameters},
	}
	nodeColor := map[string]string{"inputs": Colors["other"], "parameters": Colors["parameters"], "activations": Colors["activations"],
		"gradients": Colors["gradients"], "optimizer states": Colors["optimizer_states"], "updated parameters": Colors["parameters"], "temporaries": Colors["temporaries"]}
	used := map[string]bool{}
	for _, l := range ls {
		if l.v > 0 {
			used[l.from], used[l.to] = true, true
		}
	}
	var nodes []opts.SankeyNode
	for _, n := range []string{"inputs", "parameters", "activations", "gradients", "temporaries", "optimizer states", "updated parameters"} {
		if !used[n] {
			continue
		}
		nodes = append(nodes, opts.SankeyNode{Name: n, ItemStyle: &opts.ItemStyle{Color: nodeColor[n]}})
	}
	var links []opts.SankeyLink
	c.Table.Columns = []string{"from", "to", "bytes"}
	for _, l := range ls {
		if l.v <= 0 {
			continue
		}
		links = append(links, opts.SankeyLink{Source: l.from, Target: l.to, Value: float32(gv(l.v))})
		c.Table.Rows = append(c.Table.Rows, []string{l.from, l.to, gib(l.v)})
	}
	// Room above for the title, and on the right for the last node's name.
	c.Option.Series = []charts.SingleSeries{{Name: "flow", Type: "sankey", Data: nodes, Links: links,
		Top: "50", Bottom: "10", Left: "2%", Right: "20%",
		Label: &opts.Label{Show: opts.Bool(true)}, LineStyle: &opts.LineStyle{Color: "gradient", Curveness: 0.5, Opacity: opts.Float(0.4)}}}
	return c
}

// Layers charts per-layer memory as stacked bars, one row per part of the
// model (embedding, each block, the head) in model order: its parameters,
// gradients, optimizer states and saved activations. Rows thin their labels
// when there are more than the height shows; the tooltip names each row.
func Layers(ls []vram.LayerMemory, title string) Chart {
	title = user(title)
	var names []string
	var kept []vram.LayerMemory
	for _, l := range ls {
		if l.Live.Total() > 0 {
			names = append(names, clean(l.Name))
			kept = append(kept, l)
		}
	}
	c := Chart{Title: title, Height: min(160+16*len(kept), 1100)}
	c.Option.Title = &opts.Title{Title: title}
	c.Option.Tooltip = lineTip("axis", stackTip)
	c.Option.Legend = &opts.Legend{Bottom: "0"}
	c.Option.Grid = []map[string]any{{"left": "3%", "right": "6%", "top": "50", "bottom": "60", "containLabel": true}}
	c.Option.XAxis = []map[string]any{bytesAxis(nil)}
	c.Option.YAxis = []map[string]any{{"type": "category", "data": names, "inverse": true}}
	c.Table.Columns = append([]string{"part"}, catLabels()...)
	c.Table.Columns = append(c.Table.Columns, "total")
	for _, cat := range vram.Categories {
		var data []float64
		nonzero := false
		for _, l := range kept {
			v := l.Live.Get(cat)
			data = append(data, gv(v))
			nonzero = nonzero || v != 0
		}
		if nonzero {
			c.Option.Series = append(c.Option.Series, charts.SingleSeries{Name: label(cat), Type: "bar", Stack: "memory", Data: data, ItemStyle: itemColor(cat)})
		}
	}
	for i, l := range kept {
		row := []string{names[i]}
		for _, cat := range vram.Categories {
			row = append(row, gib(l.Live.Get(cat)))
		}
		c.Table.Rows = append(c.Table.Rows, append(row, gib(l.Live.Total())))
	}
	return c
}

// GPU is one device's memory, for the GPUs chart.
type GPU struct {
	Name  string
	Used  vram.Bytes
	Total vram.Bytes
}

// GPUs charts used and free memory per device.
func GPUs(devs []GPU, title string) Chart {
	title = user(title)
	c := Chart{Title: title, Height: 120 + 40*len(devs)}
	c.Option.Title = &opts.Title{Title: title}
	c.Option.Tooltip = lineTip("axis", `function(ps){var f=`+jsBytes+`;var out=[ps[0].name];ps.forEach(function(p){out.push([p.color,p.seriesName+': '+f(p.value)]);});return out;}`)
	c.Option.Legend = &opts.Legend{Bottom: "0"}
	c.Option.Grid = []map[string]any{{"left": "3%", "right": "4%", "top": "50", "bottom": "40", "containLabel": true}}
	var names []string
	var used, free []float64
	c.Table.Columns = []string{"GPU", "used", "free", "total"}
	for _, d := range devs {
		names = append(names, user(d.Name))
		used = append(used, gv(d.Used))
		free = append(free, gv(d.Total-d.Used))
		c.Table.Rows = append(c.Table.Rows, []string{user(d.Name), gib(d.Used), gib(d.Total - d.Used), gib(d.Total)})
	}
	c.Option.XAxis = []map[string]any{bytesAxis(nil)}
	c.Option.YAxis = []map[string]any{{"type": "category", "data": names, "inverse": true}}
	c.Option.Series = []charts.SingleSeries{
		{Name: "used", Type: "bar", Stack: "gpu", Data: used, ItemStyle: &opts.ItemStyle{Color: "#ee6666"}},
		{Name: "free", Type: "bar", Stack: "gpu", Data: free, ItemStyle: &opts.ItemStyle{Color: "#91cc75"}},
	}
	return c
}
