package vram

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func TestBytesString(t *testing.T) {
	for _, tc := range []struct {
		b    Bytes
		want string
	}{
		{0, "0 B"},
		{512, "512 B"},
		{1023, "1023 B"},
		{KiB, "1.0 KiB"},
		{1536 * KiB, "1.5 MiB"},
		{14 * GiB, "14.0 GiB"},
		{80 * GB, "74.5 GiB"},
		{-2 * KiB, "-2.0 KiB"},
		{3 * PiB, "3.0 PiB"},
		{MaxBytes, "8192.0 PiB"},
	} {
		if got := tc.b.String(); got != tc.want {
			t.Errorf("Bytes(%d).String() = %q, want %q", int64(tc.b), got, tc.want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Bytes
	}{
		{"80GB", 80 * GB},
		{"80 GiB", 80 * GiB},
		{"80gb", 80 * GB},
		{"1.5 TiB", 1536 * GiB},
		{"512 MiB", 512 * MiB},
		{"4096", 4096},
		{"4096B", 4096},
		{" 0.5 KB ", 500},
	} {
		got, err := ParseBytes(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "GB", "80 XB", "-1 GB", "1e400 GB", "NaN GB", "9999999999999 PiB"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) succeeded; want an error", bad)
		}
	}
}

func TestBytesJSON(t *testing.T) {
	var v struct {
		A Bytes `json:"a"`
		B Bytes `json:"b"`
	}
	if err := json.Unmarshal([]byte(`{"a": 1024, "b": "80 GiB"}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.A != KiB || v.B != 80*GiB {
		t.Errorf("decoded %d, %d", v.A, v.B)
	}
	out, _ := json.Marshal(v)
	if string(out) != `{"a":1024,"b":85899345920}` {
		t.Errorf("encoded %s", out)
	}
	if err := json.Unmarshal([]byte(`{"a": "lots"}`), &v); err == nil {
		t.Error("decoding \"lots\" should fail")
	}
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"80GB", "1.5 TiB", "4096", "-1", "1e18 PB", "0.0000001 KiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBytes(s)
		if err != nil {
			return
		}
		if b < 0 {
			t.Fatalf("ParseBytes(%q) = %d < 0", s, b)
		}
		_ = b.String()
		// A plain byte count round-trips exactly.
		if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
			if back, _ := ParseBytes(strconv.FormatInt(n, 10) + "B"); back != b {
				t.Fatalf("round trip of %q: %d != %d", s, back, b)
			}
		}
	})
}

// TestCheckedArithmetic: counts are exact up to int64 and panic with an
// overflowError past it (never wrap, never saturate); recoverOverflow turns
// that panic into an error and lets any other panic through.
func TestCheckedArithmetic(t *testing.T) {
	if got := mulBytes(1e12, 4e6); got != 4e18 {
		t.Errorf("mulBytes(1e12, 4e6) = %d, want exactly 4e18", got)
	}
	if got := FP32.Size(1e12); got != 4e12 {
		t.Errorf("FP32.Size(1e12) = %d", got)
	}
	if got := addBytes(-5, 3); got != -2 {
		t.Errorf("addBytes(-5, 3) = %d", got)
	}
	for name, f := range map[string]func(){
		"mul":       func() { mulBytes(1e13, 1e6) },
		"add":       func() { addBytes(MaxBytes, 1) },
		"add neg":   func() { addBytes(-MaxBytes, -2) },
		"scale":     func() { scale(MaxBytes/2, 3) },
		"size":      func() { FP64.Size(1 << 61) },
		"quant int": func() { Quant{DType: INT4}.Size(1<<40, 1<<40) },
	} {
		err := func() (err error) {
			defer recoverOverflow(&err)
			f()
			return nil
		}()
		if _, ok := err.(overflowError); !ok {
			t.Errorf("%s: err = %v, want an overflowError", name, err)
		}
	}
	defer func() {
		if r := recover(); r != "other" {
			t.Errorf("recoverOverflow swallowed another panic: %v", r)
		}
	}()
	func() {
		var err error
		defer recoverOverflow(&err)
		panic("other")
	}()
}
