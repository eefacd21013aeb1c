package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/gpu"
)

func TestGPUsFake(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-fake", "a100-80x2", "-plan", "../plans/llama3-8b-lora.json"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "SIMULATED") || strings.Count(s, "(simulated)") < 2 || strings.Count(s, ": fits") != 2 {
		t.Errorf("output:\n%s", s)
	}
	out.Reset()
	if err := run([]string{"-json", "-fake", "h100x1"}, &out); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Simulated bool
		Devices   []struct{ Name string }
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || !v.Simulated || len(v.Devices) != 1 {
		t.Errorf("json %s: %v", out.String(), err)
	}
}

func TestGPUsNoDriver(t *testing.T) {
	var out bytes.Buffer
	// This machine has no NVIDIA driver (CI has none): a plain message, no error.
	if err := run(nil, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "GPU") {
		t.Errorf("output %q", out.String())
	}
	if err := run([]string{"-fake", "tpu"}, &out); err == nil {
		t.Error("bad -fake accepted")
	}
	if err := run([]string{"-plan", "../plans/llama3-8b-serve.json", "-fake", "h100x1"}, &out); err == nil {
		t.Error("inference plan accepted for -plan")
	}
}

// TestGPUsNoDriverJSON: -json answers in JSON even without GPUs, and a
// build without cgo (which cannot run the mocks either) is not told to try
// -fake.
func TestGPUsNoDriverJSON(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-json"}, &out); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Available *bool
		Error     string
		Devices   []any
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Available == nil || *v.Available || v.Error == "" || v.Devices == nil {
		t.Errorf("json %q: %v", out.String(), err)
	}
	out.Reset()
	if err := noGPUs(&out, gpu.ErrUnsupported, false); err != nil || strings.Contains(out.String(), "-fake") || !strings.Contains(out.String(), "cgo") {
		t.Errorf("cgo-free build: %q", out.String())
	}
	out.Reset()
	if err := noGPUs(&out, gpu.ErrNoDriver, false); err != nil || !strings.Contains(out.String(), "-fake h100x8") {
		t.Errorf("no driver: %q", out.String())
	}
	for _, spec := range []string{"h100x+3", "h100x-1", "h100x 2", "h100x03x", "h100x0", "h100x65", "h100x1e1"} {
		if err := run([]string{"-fake", spec}, &out); err == nil {
			t.Errorf("-fake %q accepted", spec)
		}
	}
}

// TestSample: -sample writes readings of a simulated GPU that
// gpu.ReadSamples reads back.
func TestSample(t *testing.T) {
	file := filepath.Join(t.TempDir(), "used.csv")
	var out bytes.Buffer
	if err := run([]string{"-sample", file, "-fake", "h100x1", "-every", "10ms", "-for", "50ms"}, &out); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ss, err := gpu.ReadSamples(f)
	if err != nil || len(ss) < 2 || ss[0].Device != 512*vram.MiB {
		t.Fatalf("%d samples %v: %v", len(ss), ss, err)
	}
	if err := run([]string{"-sample", file, "-fake", "h100x1", "-device", "3", "-for", "10ms"}, &out); err == nil {
		t.Error("device 3 of 1 accepted")
	}
}

// TestHelpExitsZero: -h prints the usage and is not an error (the command
// exits 0).
func TestHelpExitsZero(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-h"}, &out); err != nil {
		t.Errorf("-h: %v", err)
	}
}

// TestCatalog: gpus -catalog lists every catalog GPU with its source, as
// a table and as JSON.
func TestCatalog(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-catalog"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, n := range vram.GPUs() {
		if !strings.Contains(out.String(), "\n"+n+" ") || !strings.Contains(out.String(), "  "+n+": ") {
			t.Errorf("-catalog lacks %s's row or source", n)
		}
	}
	for _, want := range []string{"DGX-Spark", "unified memory, shared with the CPU", "MI325X", "capacity only", "10.3", "a plan gets 107.5 GiB"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-catalog lacks %q", want)
		}
	}
	out.Reset()
	if err := run([]string{"-catalog", "-json"}, &out); err != nil {
		t.Fatal(err)
	}
	var got struct {
		GPUs []vram.GPU `json:"gpus"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got.GPUs) != len(vram.GPUs()) {
		t.Fatalf("-catalog -json: %d GPUs, %v", len(got.GPUs), err)
	}
	for _, g := range got.GPUs {
		if g.Source == "" || g.Memory <= 0 {
			t.Errorf("%s: no source or memory", g.Name)
		}
	}
}
