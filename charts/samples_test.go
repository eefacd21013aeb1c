package charts

import (
	"strings"
	"testing"
	"time"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/gpu"
)

// TestMemoryOverTimeScale: half a GiB of readings on an 80 GiB card is
// drawn on its own scale in one unit (MiB), the capacity named in the
// subtitle, not drawn as a line at the top of an empty chart.
func TestMemoryOverTimeScale(t *testing.T) {
	var ss []gpu.Sample
	for i := 0; i < 10; i++ {
		ss = append(ss, gpu.Sample{At: time.Duration(i) * time.Second, Device: vram.Bytes(300+20*i) * vram.MiB, Process: vram.Bytes(200+20*i) * vram.MiB})
	}
	c := MemoryOverTime(ss, 512*vram.MiB, 80*vram.GiB, "")
	axis := c.Option.YAxis[0]
	if f := axis["axisLabel"].(map[string]any)["formatter"]; f != "{value} MiB" {
		t.Errorf("axis formatter %v", f)
	}
	if m := axis["max"].(float64); m > 1024 {
		t.Errorf("axis max %v MiB for readings under 500 MiB", m)
	}
	if !strings.Contains(c.Option.Title.Subtitle, "capacity 80.00 GiB, off the scale") && !strings.Contains(c.Option.Title.Subtitle, "capacity 81920.00 MiB, off the scale") {
		t.Errorf("subtitle %q", c.Option.Title.Subtitle)
	}
	for _, row := range c.Table.Rows {
		for _, cell := range row[1:] {
			if strings.Contains(cell, "GiB") {
				t.Errorf("a GiB figure in a MiB chart: %v", row)
			}
		}
	}
	big := MemoryOverTime(ss, 40*vram.GiB, 80*vram.GiB, "")
	if f := big.Option.YAxis[0]["axisLabel"].(map[string]any)["formatter"]; f != "{value} GiB" || strings.Contains(big.Option.Title.Subtitle, "off the scale") {
		t.Errorf("a 40 GiB prediction on an 80 GiB card: %v, %q", f, big.Option.Title.Subtitle)
	}
}
