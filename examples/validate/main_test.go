package main

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/fileio/budget"
	"github.com/vramlab/vramlab/vram/snapshot"
)

var summaryRE = regexp.MustCompile(`(?m)^summary kind=(\S+) cases=(\d+) predicted=(\d+) skipped=(\d+) median_abs_err=([\d.]+)% p90_abs_err=([\d.]+)%$`)

// TestValidateReference runs the published measured cases and holds the
// engine to the accuracy the README publishes (a regression guard: the
// numbers come from this run, with a small margin).
func TestValidateReference(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"testdata/cases.jsonl"}, &out); err != nil {
		t.Fatal(err)
	}
	got := map[string][]float64{}
	for _, m := range summaryRE.FindAllStringSubmatch(out.String(), -1) {
		var v []float64
		for _, s := range m[2:] {
			f, _ := strconv.ParseFloat(s, 64)
			v = append(v, f)
		}
		got[m[1]] = v
	}
	for _, k := range []string{"allocated_peak", "reserved_peak", "nvidia_smi", "other", "all"} {
		if _, ok := got[k]; !ok {
			t.Fatalf("no summary line for kind %s in:\n%s", k, out.String())
		}
	}
	if all := got["all"]; all[0] != 74 || all[1]+all[2] != all[0] {
		t.Errorf("summary all = %v: want 74 cases, predicted + skipped = cases", all)
	}
	alloc := got["allocated_peak"]
	if alloc[1] < 38 {
		t.Errorf("allocated_peak: only %v of %v cases predicted", alloc[1], alloc[0])
	}
	if alloc[3] > 6.0 || alloc[4] > 13.0 {
		t.Errorf("allocated_peak accuracy regressed: median %.1f%%, p90 %.1f%%", alloc[3], alloc[4])
	}
	for _, k := range []string{"reserved_peak", "nvidia_smi"} {
		if v := got[k]; v[1] < v[0]-1 || v[3] > 12 {
			t.Errorf("%s: %v of %v predicted, median %.1f%%", k, v[1], v[0], v[3])
		}
	}
	if o := got["other"]; o[3] > 6 || o[4] > 28 {
		t.Errorf("other: accuracy regressed: median %.1f%%, p90 %.1f%%", o[3], o[4])
	}
	if all := got["all"]; all[3] > 6.5 || all[4] > 15.5 {
		t.Errorf("overall accuracy regressed: median %.1f%%, p90 %.1f%%", all[3], all[4])
	}
	// Every skipped case says why.
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "skipped:") && strings.TrimSpace(line[strings.Index(line, "skipped:")+8:]) == "" {
			t.Errorf("skip without a reason: %q", line)
		}
	}
}

func TestValidateErrors(t *testing.T) {
	// A device or a FIFO is refused before it is read.
	for _, args := range [][]string{nil, {"missing.jsonl"}, {"a", "b"}, {"/dev/zero"}, {"."}} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 3, 2, 4}
	if q := quantile(xs, 0.5); q != 3 {
		t.Errorf("median = %v", q)
	}
	if q := quantile(xs, 0.9); q < 4.5 || q > 4.7 {
		t.Errorf("p90 = %v", q)
	}
	if q := quantile(nil, 0.5); q != 0 {
		t.Errorf("empty = %v", q)
	}
}

// TestCalibrationCase: a snapshot plus its plan becomes a measured case
// (vram/snapshot.CalibrationCase) that this command reads and predicts —
// the example snapshot's run within 2 % of its allocated peak.
func TestCalibrationCase(t *testing.T) {
	s, err := snapshot.ReadFile("../snapshot/tiny-llama.snapshot.pickle")
	if err != nil {
		t.Fatal(err)
	}
	run, err := s.Rebuild(0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := vram.ReadPlan("../snapshot/tiny-llama.json")
	if err != nil {
		t.Fatal(err)
	}
	line, err := snapshot.CalibrationCase("../snapshot/tiny-llama.json", *p.Training, run, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "mine.jsonl")
	if err := os.WriteFile(file, append(line, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	cases, err := readCases(file)
	if err != nil || len(cases) != 1 {
		t.Fatalf("%d cases: %v", len(cases), err)
	}
	r := predict(cases[0], 0)
	if r.Skip != "" {
		t.Fatalf("skipped: %s", r.Skip)
	}
	if math.Abs(r.Err) > 0.02 || cases[0].ID != "snapshot_tiny-llama" {
		t.Errorf("%s: predicted %v, error %+.1f %% (measured %.4f GiB)", cases[0].ID, r.Predicted, 100*r.Err, cases[0].Measured.GiB)
	}
	var out bytes.Buffer
	if err := run2(file, &out); err != nil || !strings.Contains(out.String(), "snapshot_tiny-llama") {
		t.Errorf("validate %s: %v\n%s", file, err, out.String())
	}
}

func run2(file string, w io.Writer) error { return run([]string{file}, w) }

// TestCasesMeasuredChecked: a measured value of 0, a negative, NaN-like or
// an overflowing one (a context measurement too) is an error naming the
// case and the field, never a +Inf% row or a NaN% summary.
func TestCasesMeasuredChecked(t *testing.T) {
	for _, gib := range []string{"0", "-1", "1e300", "2e6"} {
		line := `{"id": "x_00", "kind": "context_only", "trust": "A", "gpu": "H100", "measured": {"what": "nvidia_smi", "gib": ` + gib + `}}`
		_, err := parseCases("c.jsonl", []byte(line+"\n"))
		if err == nil || !strings.Contains(err.Error(), `c.jsonl:1: case "x_00": measured.gib = `) {
			t.Errorf("gib %s: %v", gib, err)
		}
	}
	p := filepath.Join(t.TempDir(), "c.jsonl")
	os.WriteFile(p, []byte(`{"id": "x_00", "kind": "train", "trust": "A", "measured": {"what": "allocated_peak", "gib": 0}}`+"\n"), 0o644)
	var out bytes.Buffer
	if err := run([]string{p}, &out); err == nil || strings.Contains(out.String(), "Inf") || strings.Contains(out.String(), "NaN") {
		t.Errorf("a measured 0 ran: %v\n%s", err, out.String())
	}
}

// FuzzParseCases: any bytes read to cases or an error within the readers'
// budget; every case read has a measured value a prediction can divide by.
func FuzzParseCases(f *testing.F) {
	b, err := os.ReadFile("testdata/cases.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	f.Add(bytes.Join(lines[:3], nil))
	f.Add([]byte(`{"id": "x", "measured": {"gib": 0}}`))
	f.Add([]byte(`{"id": "x", "measured": {"gib": 1e400}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var cs []Case
		var err error
		budget.Check(t, len(data), func() { cs, err = parseCases("f", data) })
		if err != nil {
			return
		}
		for _, c := range cs {
			if g := c.Measured.GiB; !(g > 0) || math.IsInf(g, 0) {
				t.Fatalf("case %q read with measured %v", c.ID, g)
			}
		}
	})
}
