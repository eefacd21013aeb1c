package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpExitsZero: -h prints the usage and is not an error (the command
// exits 0); a stray argument is one.
func TestHelpExitsZero(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-h"}, &out); err != nil {
		t.Errorf("-h: %v", err)
	}
	if err := run([]string{"stray"}, &out); err == nil || !strings.Contains(err.Error(), "stray") {
		t.Errorf("a stray argument: %v", err)
	}
}
