package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram/answer"
)

var postTrainingFile = regexp.MustCompile(`(grpo|rloo|ppo|dpo)[^/]*\.json$`)

func isPostTraining(f string) bool { return postTrainingFile.MatchString(f) }

// TestPostTrainingPlans: every post-training example prints each phase
// with its measures and host memory, the bounding phase and transition
// and a verdict; -json carries the phases.
func TestPostTrainingPlans(t *testing.T) {
	files, _ := filepath.Glob("../plans/*.json")
	var n int
	for _, f := range files {
		if !isPostTraining(f) {
			continue
		}
		n++
		var out bytes.Buffer
		if err := gate([]string{f}, &out); err != nil {
			t.Errorf("%s: %v\n%s", f, err, out.String())
			continue
		}
		for _, want := range []string{"phase (→ transition)", "allocated", "reserved", "device", "host", "training step", "bounded by: ", "longest completion that fits", "judged on device-used"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s: output lacks %q:\n%s", f, want, out.String())
			}
		}
		out.Reset()
		if err := gate([]string{"-json", f}, &out); err != nil {
			t.Fatal(err)
		}
		var rep answer.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%s: -json output does not decode: %v", f, err)
		}
		var raw struct {
			Phases []map[string]any `json:"phases"`
		}
		if err := json.Unmarshal(out.Bytes(), &raw); err != nil || len(raw.Phases) < 1 {
			t.Fatalf("%s: phases %v (%v)", f, raw.Phases, err)
		}
		for _, ph := range raw.Phases {
			for _, k := range []string{"name", "allocated", "reserved", "device_used", "host"} {
				if _, ok := ph[k]; !ok {
					t.Errorf("%s: phase %v lacks %q", f, ph["name"], k)
				}
			}
		}
		pt := rep.PostTraining
		if pt == nil || rep.Fit == nil || pt.Bound == "" || !pt.Starts {
			t.Fatalf("%s: report %+v", f, rep)
		}
		peak := pt.Peak()
		if rep.Fit.Need != peak.DeviceUsed || rep.Fit.Fits != (peak.DeviceUsed <= rep.Fit.Limit) || peak.Name != pt.Bound {
			t.Errorf("%s: fit %+v, peak phase %+v", f, rep.Fit, peak)
		}
		if rep.Fit.Fits && pt.MaxCompletionLen < 1 {
			t.Errorf("%s: fits but no completion length does", f)
		}
	}
	if n < 3 {
		t.Fatalf("found %d post-training example plans", n)
	}
}

// TestPostTrainingNeedsGPU: the engine's share is a share of a card.
func TestPostTrainingNeedsGPU(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "p.json")
	writeFile(t, f, `{"model": "qwen2.5-0.5b", "post_training": {"algorithm": "dpo", "framework": "trl", "prompt_len": 64, "completion_len": 64}}`)
	var out bytes.Buffer
	err := gate([]string{f}, &out)
	if err == nil || !strings.Contains(err.Error(), "gpu: a post-training plan needs the GPU") {
		t.Fatalf("err %v", err)
	}
}

func writeFile(t *testing.T, name, text string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
