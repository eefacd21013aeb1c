package charts

import (
	"fmt"
	"math"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/snapshot"
)

// Diff charts what differs between two memory states (snapshot.DiffRuns,
// snapshot.DiffPredicted) at their allocated peaks: one bar of B − A per
// category and per allocation site (the n that differ most), largest
// first, in the category's color. Rows that do not differ are left off
// the bars; the table holds both sides of every row.
func Diff(d snapshot.RunDiff, n int) Chart {
	// The chart's own frame around the two labels, translated as one
	// pattern (lang.go) that keeps the labels as they are.
	title := fmt.Sprintf("%s − %s at the allocated peak", inner(d.B), inner(d.A))
	c := Chart{Title: title}
	c.Option.Title = &opts.Title{Title: title, Subtitle: fmt.Sprintf("%s: %v (%s); %s: %v (%s)", inner(d.A), d.APeak, d.AAt, inner(d.B), d.BPeak, d.BAt)}
	rows := diffRows(d, n)
	unit, perGiB := diffUnit(rows)
	c.Option.Tooltip = lineTip("axis", fmt.Sprintf(`function(ps){var f=%s;var p=ps[0],g=p.value/%d;return p.name+': '+(g<0?'−'+f(-g):'+'+f(g));}`, jsBytes, perGiB))
	c.Option.Grid = []map[string]any{{"left": "3%", "right": "8%", "top": "70", "bottom": "30", "containLabel": true}}
	c.Table.Columns = userAll([]string{"", d.A, d.B, "difference"})
	short := siteNames(rows[len(d.Categories):])
	var names []string
	var data []opts.BarData
	for i, r := range rows {
		name, bar := label(r.Name), label(r.Name)
		if i >= len(d.Categories) {
			// a line of the user's code, from their snapshot
			name, bar = user(r.Name), user(short[i-len(d.Categories)])
		}
		c.Table.Rows = append(c.Table.Rows, []string{name, r.A.String(), r.B.String(), signedBytes(r)})
		if r.Delta() != 0 {
			names = append(names, bar)
			data = append(data, opts.BarData{Value: math.Round(float64(r.Delta())/float64(vram.GiB/vram.Bytes(perGiB))*1e4) / 1e4, ItemStyle: itemColor(r.Category)})
		}
	}
	c.Option.XAxis = []map[string]any{{"type": "value", "axisLabel": map[string]any{"formatter": "{value} " + unit}}}
	c.Height = min(170+26*len(names), 1100)
	c.Option.YAxis = []map[string]any{{"type": "category", "data": names, "inverse": true, "axisLabel": map[string]any{"width": 320, "overflow": "truncate"}}}
	c.Option.Series = []charts.SingleSeries{{Name: "difference", Type: "bar", Data: data}}
	return c
}

// inner is a caller's label inside a chart's own phrase: cleaned, and
// without marks (the phrase's pattern marks it again).
func inner(s string) string { return unmark(clean(s)) }

// diffUnit is the unit of the bars: MiB where every difference is under
// a GiB (0.04 GiB reads worse than 45 MiB), else GiB; perGiB is how many
// of it make a GiB.
func diffUnit(rows []snapshot.DiffRow) (unit string, perGiB int) {
	var top vram.Bytes
	for _, r := range rows {
		top = max(top, r.Delta(), -r.Delta())
	}
	if top >= vram.GiB {
		return "GiB", 1
	}
	return "MiB", 1024
}

// diffRows are the categories, then the n allocation sites that differ
// most.
func diffRows(d snapshot.RunDiff, n int) []snapshot.DiffRow {
	rows := append([]snapshot.DiffRow(nil), d.Categories...)
	return append(rows, d.Origins[:min(n, len(d.Origins))]...)
}

// siteNames are the allocation sites as the bars name them: the file's
// base name, line and function ("modeling_llama.py:155 forward"), or the
// whole path where two sites would share a short name, with the
// category where a site has two rows; the table keeps the paths.
func siteNames(sites []snapshot.DiffRow) []string {
	short := make([]string, len(sites))
	paths := map[string]map[string]bool{} // short name → the sites that have it
	for i, r := range sites {
		short[i] = r.Name[strings.LastIndex(r.Name[:max(strings.Index(r.Name, ":"), 0)], "/")+1:]
		if paths[short[i]] == nil {
			paths[short[i]] = map[string]bool{}
		}
		paths[short[i]][r.Name] = true
	}
	rows := map[string]int{} // a site holding memory of two categories has two rows
	for _, r := range sites {
		rows[r.Name]++
	}
	for i, r := range sites {
		if len(paths[short[i]]) > 1 {
			short[i] = r.Name
		}
		if rows[r.Name] > 1 {
			short[i] += " (" + label(r.Category) + ")"
		}
	}
	return short
}

func signedBytes(r snapshot.DiffRow) string {
	if d := r.Delta(); d < 0 {
		return "−" + (-d).String()
	}
	return "+" + r.Delta().String()
}
