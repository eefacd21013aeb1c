package charts

import "testing"

// TestAllocatorChart: one bar per phase end, each with a label of its own,
// stacked from allocated to reserved, in the chart's own words.
func TestAllocatorChart(t *testing.T) {
	ps := replayPoints(t)
	c := Allocator(ps, "")
	names := c.Option.XAxis[0]["data"].([]string)
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("two bars read %q: %q", n, names)
		}
		seen[n] = true
	}
	if len(c.Option.Series) != 2 || c.Option.Series[0].Name != "allocated" || c.Option.Series[1].Name != "cached but free" {
		t.Fatalf("series %v", c.Option.Series)
	}
	var i int
	for _, p := range ps {
		if p.Layer >= 0 {
			continue
		}
		a, f := c.Option.Series[0].Data.([]float64)[i], c.Option.Series[1].Data.([]float64)[i]
		if d := a + f - gv(p.Reserved); d > 0.001 || d < -0.001 {
			t.Errorf("%s: stacked %.4f GiB, reserved %.4f GiB", names[i], a+f, gv(p.Reserved))
		}
		i++
	}
	if i != len(names) || len(c.Table.Rows) != i {
		t.Errorf("%d phase ends, %d labels, %d rows", i, len(names), len(c.Table.Rows))
	}
	if got := Allocator(ps, "mine").Title; got != user("mine") {
		t.Errorf("title %q", got)
	}
}
