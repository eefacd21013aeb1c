package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
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
