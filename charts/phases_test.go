package charts

import (
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

// TestPhasesChart: one bar per phase in the framework's order, stacked by
// holder to what nvidia-smi shows, zero holders left out, the capacity on
// the scale.
func TestPhasesChart(t *testing.T) {
	e := postTraining(t)
	g, _ := vram.LookupGPU("T4")
	c := Phases(e, g.Total())
	names := c.Option.XAxis[0]["data"].([]string)
	if len(names) != len(e.Phases) || names[0] != "→ weight sync" || names[len(names)-1] != "training step" {
		t.Fatalf("x axis %q", names)
	}
	for i, p := range e.Phases {
		var sum float64
		for _, s := range c.Option.Series {
			sum += s.Data.([]float64)[i]
		}
		if d := sum - gv(p.DeviceUsed); d > 0.001 || d < -0.001 {
			t.Errorf("%s: stacked %.4f GiB, device %.4f GiB", p.Name, sum, gv(p.DeviceUsed))
		}
	}
	for _, s := range c.Option.Series {
		nonzero := false
		for _, v := range s.Data.([]float64) {
			nonzero = nonzero || v != 0
		}
		if !nonzero {
			t.Errorf("series %q is zero in every phase", s.Name)
		}
	}
	if len(c.Table.Rows) != len(e.Phases) || c.Table.Columns[len(c.Table.Columns)-1] != "host" {
		t.Errorf("table %v", c.Table)
	}
	if top := e.Peak().DeviceUsed; g.Total() <= 2*top {
		if max, ok := c.Option.YAxis[0]["max"].(float64); !ok || max < gv(g.Total()) {
			t.Errorf("axis max %v below the capacity", c.Option.YAxis[0]["max"])
		}
	} else if !strings.Contains(c.Option.Title.Subtitle, "off the scale") {
		t.Errorf("a capacity far above the phases: subtitle %q", c.Option.Title.Subtitle)
	}
}
