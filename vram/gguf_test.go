package vram

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram/fileio/budget"
)

// TestGGUFEveryType: a file gguf-py wrote with one tensor of every ggml
// type it knows reads back as gguf-py's own reader reads it: each tensor's
// type, element count, stored bytes and data offset; and the metadata of
// every value type.
func TestGGUFEveryType(t *testing.T) {
	var want struct {
		Files map[string]struct {
			Tensors []struct {
				Name     string
				Type     uint32
				Elements int64
				Bytes    int64
				Offset   int64
			}
			Architecture string
		}
	}
	b, err := os.ReadFile(filepath.Join("testdata", "gguf", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	exp := want.Files["every-type.gguf"]
	g, err := ReadGGUF(filepath.Join("testdata", "gguf", "every-type.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Tensors) != len(exp.Tensors) || len(exp.Tensors) != len(ggmlTypes) {
		t.Fatalf("%d tensors, gguf-py reads %d; %d types known", len(g.Tensors), len(exp.Tensors), len(ggmlTypes))
	}
	var total Bytes
	for i, e := range exp.Tensors {
		got := g.Tensors[i]
		n := int64(1)
		for _, d := range got.Dims {
			n *= d
		}
		if got.Name != e.Name || uint32(got.Type) != e.Type || n != e.Elements || int64(got.Bytes) != e.Bytes || g.DataOffset+int64(got.Offset) != e.Offset {
			t.Errorf("%s: %s, %d elements, %v at %d; gguf-py: type %d, %d elements, %d bytes at %d",
				e.Name, got.Type, n, got.Bytes, g.DataOffset+int64(got.Offset), e.Type, e.Elements, e.Bytes, e.Offset)
		}
		total += got.Bytes
	}
	if g.Total() != total || g.Architecture() != exp.Architecture || g.Version != 3 {
		t.Errorf("total %v, architecture %q, version %d", g.Total(), g.Architecture(), g.Version)
	}
	for k, v := range map[string]any{"test.u32": int64(7), "test.i32": int64(-7), "test.f32": 0.5, "test.bool": true,
		"test.u64": uint64(1 << 40), "test.i64": int64(-(1 << 40)), "test.f64": 0.25, "test.u8": int64(200), "test.i8": int64(-100),
		"test.u16": int64(60000), "test.i16": int64(-30000), "llama.context_length": int64(4096)} {
		if g.Metadata[k] != v {
			t.Errorf("%s = %#v, want %#v", k, g.Metadata[k], v)
		}
	}
	if a, ok := g.Metadata["tokenizer.ggml.tokens"].(GGUFArray); !ok || a.Len != 1000 || a.Type != "string" {
		t.Errorf("long array %#v", g.Metadata["tokenizer.ggml.tokens"])
	}
	if a, ok := g.Metadata["test.short_array"].([]any); !ok || len(a) != 3 {
		t.Errorf("short array %#v", g.Metadata["test.short_array"])
	}
	if by := g.ByType(); by["Q4_K"] != 576 || by["F32"] != 16 {
		t.Errorf("by type %v", by)
	}
}

// TestGGMLSize: every type's block arithmetic, and the errors.
func TestGGMLSize(t *testing.T) {
	for _, c := range []struct {
		typ  GGMLType
		n    int64
		want Bytes
	}{{0, 10, 40}, {1, 10, 20}, {30, 10, 20}, {2, 64, 36}, {8, 4096, 4352}, {12, 4096 * 4096, 9437184}, {14, 256, 210}, {39, 64, 34}} {
		if got, err := GGMLSize(c.typ, c.n); err != nil || got != c.want {
			t.Errorf("%d × %s: %v, %v; want %v", c.n, c.typ, got, err, c.want)
		}
	}
	if _, err := GGMLSize(12, 100); err == nil || !strings.Contains(err.Error(), "256-element blocks") {
		t.Errorf("partial block: %v", err)
	}
	if _, err := GGMLSize(99, 32); err == nil || !strings.Contains(err.Error(), "unknown ggml type 99") {
		t.Errorf("unknown type: %v", err)
	}
	if names := GGMLTypes(); len(names) != len(ggmlTypes) || names[0] != "F32" {
		t.Errorf("types %v", names)
	}
}

// ggufHeader builds a version-3 header for the error cases.
func ggufHeader(version uint32, tensors, keys uint64, body ...any) []byte {
	var b bytes.Buffer
	b.WriteString("GGUF")
	binary.Write(&b, binary.LittleEndian, version)
	binary.Write(&b, binary.LittleEndian, tensors)
	binary.Write(&b, binary.LittleEndian, keys)
	for _, x := range body {
		if s, ok := x.(string); ok {
			binary.Write(&b, binary.LittleEndian, uint64(len(s)))
			b.WriteString(s)
			continue
		}
		binary.Write(&b, binary.LittleEndian, x)
	}
	return b.Bytes()
}

// TestGGUFErrors: other files and hostile headers are errors that say what
// is wrong, without reading past the header budget.
func TestGGUFErrors(t *testing.T) {
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"safetensors":    {[]byte("\x10\x00\x00\x00\x00\x00\x00\x00{}"), "not a GGUF file"},
		"empty":          {nil, "truncated"},
		"version 9":      {ggufHeader(9, 0, 0), "version 9"},
		"huge counts":    {ggufHeader(3, 1<<40, 0), "tensors"},
		"huge string":    {ggufHeader(3, 0, 1, uint64(1<<40)), "string of"},
		"truncated key":  {ggufHeader(3, 0, 1, uint64(10), uint8('a')), "truncated"},
		"bad type":       {ggufHeader(3, 0, 1, "k", uint32(77)), "unknown value type 77"},
		"huge array":     {ggufHeader(3, 0, 1, "k", uint32(9), uint32(0), uint64(1<<40)), "array of"},
		"nested arrays":  {ggufHeader(3, 0, 1, "k", uint32(9), uint32(9), uint64(1), uint32(9), uint64(1), uint32(9), uint64(1), uint32(9), uint64(1), uint32(9), uint64(1)), "nested"},
		"bad bool":       {ggufHeader(3, 0, 1, "k", uint32(7), uint8(5)), "bool"},
		"bad alignment":  {ggufHeader(3, 0, 1, "general.alignment", uint32(4), uint32(3)), "power of two"},
		"five dims":      {ggufHeader(3, 1, 0, "t", uint32(5)), "5 dimensions"},
		"zero dim":       {ggufHeader(3, 1, 0, "t", uint32(1), uint64(0)), "dimension 0 is 0"},
		"huge dims":      {ggufHeader(3, 1, 0, "t", uint32(2), uint64(1<<40), uint64(1<<40)), "2^50"},
		"partial block":  {ggufHeader(3, 1, 0, "t", uint32(1), uint64(100), uint32(12), uint64(0)), "256-element blocks"},
		"unknown tensor": {ggufHeader(3, 1, 0, "t", uint32(1), uint64(32), uint32(4), uint64(0)), "unknown ggml type 4"},
		"misaligned":     {ggufHeader(3, 1, 0, "t", uint32(1), uint64(32), uint32(0), uint64(3)), "alignment"},
	} {
		_, err := ParseGGUF(bytes.NewReader(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	// A tensor that ends past the file: ReadGGUF checks the data too.
	p := filepath.Join(t.TempDir(), "short.gguf")
	if err := os.WriteFile(p, ggufHeader(3, 1, 0, "t", uint32(1), uint64(1024), uint32(0), uint64(0)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadGGUF(p); err == nil || !strings.Contains(err.Error(), "ends past the file") {
		t.Errorf("short file: %v", err)
	}
	// Version 1 has 32-bit counts and lengths.
	var v1 bytes.Buffer
	v1.WriteString("GGUF")
	binary.Write(&v1, binary.LittleEndian, []uint32{1, 1, 0, 1})
	v1.WriteString("t")
	binary.Write(&v1, binary.LittleEndian, []uint32{1, 32, 0})
	binary.Write(&v1, binary.LittleEndian, uint64(0))
	g, err := ParseGGUF(&v1)
	if err != nil || g.Version != 1 || len(g.Tensors) != 1 || g.Tensors[0].Bytes != 128 {
		t.Errorf("version 1: %+v, %v", g, err)
	}
}

// FuzzParseGGUF: any bytes parse to a header or an error, never a panic;
// what parses has tensors whose sizes match their types and shapes.
func FuzzParseGGUF(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "gguf", "every-type.gguf"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b[:min(len(b), 16000)])
	f.Add(ggufHeader(3, 1, 1, "general.alignment", uint32(4), uint32(64), "t", uint32(2), uint64(256), uint64(2), uint32(12), uint64(0)))
	f.Add(nestedGGUF(2)) // arrays of arrays (the second audit: kept values across the file)
	f.Add(ggufHeader(3, 0, 1, "v", uint32(9), uint32(8), uint64(3), "a", "b", "c"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var g *GGUF
		var err error
		budget.Check(t, len(data), func() { g, err = ParseGGUF(bytes.NewReader(data)) })
		if err != nil {
			return
		}
		for _, tn := range g.Tensors {
			n := int64(1)
			for _, d := range tn.Dims {
				n *= d
			}
			if want, err := GGMLSize(tn.Type, n); err != nil || want != tn.Bytes {
				t.Fatalf("%s: %v bytes for %d elements of %s (%v)", tn.Name, tn.Bytes, n, tn.Type, err)
			}
		}
		if g.DataOffset%g.Alignment != 0 || g.DataOffset < 24 {
			t.Fatalf("data offset %d, alignment %d", g.DataOffset, g.Alignment)
		}
	})
}
