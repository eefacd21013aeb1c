package charts

import (
	"fmt"
	"math"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/snapshot"
)

// RunOverlay draws a real run (a PyTorch memory snapshot, rebuilt) over the
// prediction for its plan t: allocated and reserved memory on one x-axis of
// phases — each iteration's forward (with the loss), backward and optimizer
// step as equal spans, each side's events spread evenly in its span — so the
// two line up phase by phase whatever their event counts. The real run's
// iterations past the prediction's two are drawn too, without a prediction
// beside them. A run on the GPU is set against the allocator replay (with
// cuBLAS's workspace, and reserved memory); a run recorded off the GPU (no
// segments) against the step timeline, which has neither.
func RunOverlay(run *snapshot.Run, t vram.Training, gpu *vram.GPU, title string) (Chart, error) {
	rep, err := t.Replay(vram.ReplayOptions{GPU: gpu, Points: true})
	if err != nil {
		return Chart{}, err
	}
	if !run.OnGPU() {
		tl, err := t.Timeline()
		if err != nil {
			return Chart{}, err
		}
		rep.Points = rep.Points[:0]
		for _, e := range tl.Events {
			rep.Points = append(rep.Points, vram.ReplayPoint{Iteration: e.Iteration, Phase: e.Phase, Layer: e.Layer, Allocated: e.Live.Total()})
		}
		rep.PeakAllocated, rep.PeakReserved = tl.PeakEvent().Live.Total(), 0
	}
	return runOverlay(run, rep, title), nil
}

func runOverlay(run *snapshot.Run, rep vram.Replay, title string) Chart {
	c := Chart{Title: user(title), Height: 440}
	if c.Title == "" {
		c.Title = "Your run beside the prediction"
	}
	// A unit that suits the run: MiB for small runs, GiB otherwise.
	top := rep.PeakReserved
	if run.PeakReserved >= 0 {
		top = max(top, run.Points[run.PeakReserved].Reserved)
	}
	top = max(top, run.Peak().Allocated)
	unit, uname := vram.GiB, "GiB"
	if top < vram.GiB {
		unit, uname = vram.MiB, "MiB"
	}
	val := func(b vram.Bytes) float64 { return math.Round(float64(b)/float64(unit)*1e3) / 1e3 }

	real := realSpans(run)
	pred := predSpans(rep)
	var ra, rr, pa, pr [][2]float64
	for _, s := range real {
		for i, p := range s.pts {
			x := s.x + float64(i)/float64(len(s.pts))
			ra = append(ra, [2]float64{x, val(p.Allocated)})
			rr = append(rr, [2]float64{x, val(p.Reserved)})
		}
	}
	for _, s := range pred {
		for i, p := range s.rp {
			x := s.x + float64(i)/float64(len(s.rp))
			pa = append(pa, [2]float64{x, val(p.Allocated)})
			pr = append(pr, [2]float64{x, val(p.Reserved)})
		}
	}
	ra, rr = thin(ra, maxPoints), thin(rr, maxPoints)
	hasReserved := run.PeakReserved >= 0 && run.Points[run.PeakReserved].Reserved > 0

	real0 := run.Peak()
	sub := fmt.Sprintf("real allocated peak %s at %s; predicted %s", real0.Allocated.Format(unit, 1), clean(real0.Where()), rep.PeakAllocated.Format(unit, 1))
	if !run.OnGPU() {
		sub += "\nrecorded off the GPU: no reserved memory, no cuBLAS workspace" // its own line: fits an A4 page
	}
	c.Option.Title = &opts.Title{Title: c.Title, Subtitle: sub}
	c.Option.Tooltip = lineTip("axis", `function(ps){var out=[];ps.forEach(function(p){out.push([p.color,p.seriesName+': '+p.value[1]+' `+uname+`']);});return out;}`)
	c.Option.Legend = &opts.Legend{Bottom: "0"}
	c.Option.Grid = []map[string]any{{"left": "3%", "right": "4%", "top": "108", "bottom": "60", "containLabel": true}}
	c.Option.XAxis = []map[string]any{{"type": "value", "min": spanMin(real, pred), "max": spanMax(real, pred),
		"axisLabel": map[string]any{"show": false}, "splitLine": map[string]any{"show": false}}}
	c.Option.YAxis = []map[string]any{{"type": "value", "name": uname, "axisLabel": map[string]any{"formatter": "{value} " + uname}}}
	line := func(name string, data [][2]float64, color string, dashed bool, width float64) charts.SingleSeries {
		ls := &opts.LineStyle{Color: color, Width: float32(width)}
		if dashed {
			ls.Type = "dashed"
		}
		return charts.SingleSeries{Name: name, Type: "line", Data: data, ShowSymbol: opts.Bool(false), Step: "end",
			LineStyle: ls, ItemStyle: &opts.ItemStyle{Color: color}}
	}
	first := line("real allocated", ra, Colors["activations"], false, 2)
	first.MarkAreas = spanAreas(real, pred)
	c.Option.Series = append(c.Option.Series, first, line("predicted allocated", pa, Colors["parameters"], true, 2))
	if hasReserved {
		c.Option.Series = append(c.Option.Series, line("real reserved", rr, Colors["optimizer_states"], false, 1.5))
	}
	if rep.PeakReserved > 0 {
		c.Option.Series = append(c.Option.Series, line("predicted reserved", pr, Colors["other"], true, 1.5))
	}

	c.Table.Columns = []string{"iteration", "phase", "real allocated (max)", "predicted allocated (max)", "real reserved (max)", "predicted reserved (max)"}
	type key struct {
		it    int
		phase string
	}
	predMax := map[key][2]vram.Bytes{}
	for _, s := range pred {
		m := predMax[key{s.it, s.phase}]
		for _, p := range s.rp {
			m[0], m[1] = max(m[0], p.Allocated), max(m[1], p.Reserved)
		}
		predMax[key{s.it, s.phase}] = m
	}
	for _, s := range real {
		var a, r vram.Bytes
		for _, p := range s.pts {
			a, r = max(a, p.Allocated), max(r, p.Reserved)
		}
		row := []string{fmt.Sprint(s.it), s.phase, a.Format(unit, 1), "", "", ""}
		if hasReserved {
			row[4] = r.Format(unit, 1)
		}
		if m, ok := predMax[key{min(s.it, 2), s.phase}]; ok && s.it > 0 {
			row[3] = m[0].Format(unit, 1)
			if rep.PeakReserved > 0 {
				row[5] = m[1].Format(unit, 1)
			}
		}
		c.Table.Rows = append(c.Table.Rows, row)
	}
	return c
}

// maxPoints caps a drawn series; thinning keeps each bucket's largest value.
const maxPoints = 4000

func thin(pts [][2]float64, n int) [][2]float64 {
	if len(pts) <= n {
		return pts
	}
	per := (len(pts) + n - 1) / n
	out := make([][2]float64, 0, n)
	for i := 0; i < len(pts); i += per {
		best := pts[i]
		for _, p := range pts[i:min(i+per, len(pts))] {
			if p[1] > best[1] {
				best[1] = p[1]
			}
		}
		out = append(out, best)
	}
	return out
}

// span is one phase of one iteration on the shared x-axis: [x, x+1).
type span struct {
	x     float64
	it    int
	phase string
	pts   []snapshot.Point
	rp    []vram.ReplayPoint
}

// slot is a phase's place in an iteration.
func slot(phase string) (float64, bool) {
	switch phase {
	case "forward", "loss":
		return 0, true
	case "backward":
		return 1, true
	case "optimizer":
		return 2, true
	}
	return 0, false
}

// realSpans groups a run's points by iteration and phase; setup sits
// before iteration 1, and entries whose phase the stack does not tell stay
// in the span they follow.
func realSpans(run *snapshot.Run) []span {
	var out []span
	for _, p := range run.Points {
		x, ok := slot(p.Phase)
		ph := p.Phase
		switch {
		case p.Iteration == 0:
			x, ok, ph = -1, true, snapshot.Setup
		case !ok && len(out) > 0:
			out[len(out)-1].pts = append(out[len(out)-1].pts, p)
			continue
		case !ok:
			x, ph = -1, snapshot.Setup
		}
		x += 3 * float64(max(p.Iteration, 1)-1)
		if n := len(out); n > 0 && out[n-1].x == x {
			out[n-1].pts = append(out[n-1].pts, p)
			continue
		}
		out = append(out, span{x: x, it: p.Iteration, phase: ph, pts: []snapshot.Point{p}})
	}
	return out
}

// predSpans groups the replay's points the same way (the loss with the
// forward).
func predSpans(rep vram.Replay) []span {
	var out []span
	for _, p := range rep.Points {
		x, ok := slot(p.Phase)
		if !ok {
			continue
		}
		ph := p.Phase
		if ph == "loss" {
			ph = "forward"
		}
		x += 3 * float64(max(p.Iteration, 1)-1)
		if n := len(out); n > 0 && out[n-1].x == x {
			out[n-1].rp = append(out[n-1].rp, p)
			continue
		}
		out = append(out, span{x: x, it: p.Iteration, phase: ph, rp: []vram.ReplayPoint{p}})
	}
	return out
}

func spanMin(a, b []span) float64 {
	m := 0.0
	for _, s := range append(append([]span(nil), a...), b...) {
		m = math.Min(m, s.x)
	}
	return m
}

func spanMax(a, b []span) float64 {
	m := 1.0
	for _, s := range append(append([]span(nil), a...), b...) {
		m = math.Max(m, s.x+1)
	}
	return m
}

// spanAreas shades and names each span ("forward 1", "backward 1", …).
func spanAreas(real, pred []span) *opts.MarkAreas {
	shade := map[string]string{"setup": "rgba(128,128,128,0.06)", "forward": "rgba(84,112,198,0.08)", "backward": "rgba(238,102,102,0.08)", "optimizer": "rgba(250,200,88,0.15)"}
	seen := map[float64]bool{}
	var data []any
	for _, s := range append(append([]span(nil), real...), pred...) {
		if seen[s.x] {
			continue
		}
		seen[s.x] = true
		name := s.phase
		if s.it > 0 {
			name = fmt.Sprintf("%s %d", s.phase, s.it)
		}
		data = append(data, []any{
			map[string]any{"name": name, "xAxis": s.x, "itemStyle": map[string]any{"color": shade[s.phase]}},
			map[string]any{"xAxis": s.x + 1},
		})
	}
	return &opts.MarkAreas{Data: data, MarkAreaStyle: opts.MarkAreaStyle{Label: &opts.Label{Show: opts.Bool(true), Position: "insideTop", Color: "#888"}}}
}
