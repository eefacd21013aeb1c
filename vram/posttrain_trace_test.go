package vram

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// postTrainTrace is one run of TRL's trainers on the CPU
// (examples/measure/posttrain.py): each phase's peak of live tensor
// storages in the second step, parameters and buffers included.
type postTrainTrace struct {
	Plan   json.RawMessage  `json:"plan"`
	TRL    string           `json:"trl"`
	Phases map[string]int64 `json:"phases"`
}

// tracePhase maps the trace's phase names to the engine's.
var tracePhase = map[string]string{
	"generation":        "generation",
	"no-grad log-probs": "reference log-probs",
	"training step":     "training step",
	"precompute":        "precompute reference log-probs (before training)",
}

// TestPostTrainingTraces holds each phase of TRL's trainers, traced on the
// CPU, within 2 % of the engine's allocated figure (less the cuBLAS
// workspace, which the CPU has not).
func TestPostTrainingTraces(t *testing.T) {
	files, _ := filepath.Glob("testdata/posttrain/*.json")
	if len(files) < 3 {
		t.Fatalf("found %d post-training traces", len(files))
	}
	cpu := GPU{Name: "cpu", Memory: 1024 * GiB}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tr postTrainTrace
		if err := json.Unmarshal(data, &tr); err != nil {
			t.Fatal(err)
		}
		p, err := ParsePlan(tr.Plan, "")
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		e, err := p.PostTraining.Estimate(cpu)
		if err != nil || !e.Starts {
			t.Fatalf("%s: %v %s", f, err, e.Err)
		}
		for name, traced := range tr.Phases {
			want, ok := tracePhase[name]
			if !ok {
				continue
			}
			ph := phaseNamed(t, e, want)
			got := ph.Allocated
			for _, q := range ph.Live {
				if q.What == "cuBLAS workspace" {
					got -= q.Bytes
				}
			}
			d := 100 * (float64(got) - float64(traced)) / float64(traced)
			t.Logf("%s %-20s traced %v predicted %v (%+.2f %%)", filepath.Base(f), name, Bytes(traced), got, d)
			if math.Abs(d) > 2 {
				t.Errorf("%s %s: predicted %v, traced %v (%+.2f %%); parts %v", filepath.Base(f), name, got, Bytes(traced), d, strings.TrimSpace(partsString(ph.Live)))
			}
		}
	}
}

func partsString(ps []PhasePart) string {
	var b strings.Builder
	for _, q := range ps {
		b.WriteString(q.What + " " + q.Bytes.String() + "; ")
	}
	return b.String()
}
