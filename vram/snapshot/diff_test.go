package snapshot

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

func exampleRun(t *testing.T, name string) *Run {
	t.Helper()
	s, err := ReadFile(filepath.Join("..", "..", "examples", "snapshot", name))
	if err != nil {
		t.Fatal(err)
	}
	run, err := s.Rebuild(s.Devices()[0])
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// TestDiffRuns: the example run against the same run with full
// checkpointing (both recorded by measure.py snapshot). The categories
// add up to the peaks' difference, activations differ most, and the
// allocation sites are ordered by how much they differ.
func TestDiffRuns(t *testing.T) {
	a, b := exampleRun(t, "tiny-llama.snapshot.pickle"), exampleRun(t, "tiny-llama-checkpointed.snapshot.pickle")
	d := DiffRuns(a, b, "as planned", "full checkpointing")
	var sum vram.Bytes
	for _, r := range d.Categories {
		sum += r.Delta()
	}
	if sum != d.BPeak-d.APeak {
		t.Errorf("categories add up to %v, the peaks differ by %v", sum, d.BPeak-d.APeak)
	}
	if len(d.Categories) == 0 || d.Categories[0].Name != "activations" || d.Categories[0].Delta() >= 0 {
		t.Errorf("checkpointing should cut activations first: %+v", d.Categories)
	}
	if len(d.Origins) == 0 {
		t.Fatal("no allocation site differs")
	}
	for i := 1; i < len(d.Origins); i++ {
		if abs(d.Origins[i].Delta()) > abs(d.Origins[i-1].Delta()) {
			t.Fatalf("sites out of order at %d: %+v", i, d.Origins[i-1:i+1])
		}
	}
	rows := d.Rows(5)
	if len(rows) != 2+len(d.Categories)+min(5, len(d.Origins)) || !strings.HasPrefix(rows[0][3], "−") {
		t.Errorf("rows: %q", rows)
	}
	if same := DiffRuns(a, a, "a", "a"); len(same.Origins) != 0 || same.BPeak != same.APeak {
		t.Errorf("a run against itself differs: %+v", same.Origins)
	}
}

// TestDiffPredicted: each example run against its plan's prediction, by
// category, as Compare counts them.
func TestDiffPredicted(t *testing.T) {
	for _, name := range []string{"tiny-llama", "tiny-llama-checkpointed"} {
		run := exampleRun(t, name+".snapshot.pickle")
		p, err := vram.ReadPlan(filepath.Join("..", "..", "examples", "snapshot", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		d, err := DiffPredicted(run, *p.Training, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := Compare(run, *p.Training, nil)
		if d.APeak != c.Real.Allocated || d.BPeak != c.Predicted.Total() || len(d.Origins) != 0 {
			t.Errorf("%s: diff %v / %v, compare %v / %v", name, d.APeak, d.BPeak, c.Real.Allocated, c.Predicted.Total())
		}
		if pct := Diff(d.APeak, d.BPeak); pct > 1 || pct < -1 {
			t.Errorf("%s: the prediction is %+.1f %% off", name, pct)
		}
	}
}
