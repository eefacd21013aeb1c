package vram

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vramlab/vramlab/vram/fileio/budget"
)

// writeSafetensors writes a safetensors file whose data section is a hole
// of the size the header describes (a sparse file: no disk used).
func writeSafetensors(t *testing.T, path string, header map[string]any) {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_ = binary.Write(&buf, binary.LittleEndian, uint64(len(h)))
	buf.Write(h)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var end int64
	for _, v := range header {
		if e, ok := v.(map[string]any); ok {
			if off, ok := e["data_offsets"].([]int64); ok && off[1] > end {
				end = off[1]
			}
		}
	}
	if err := os.Truncate(path, int64(buf.Len())+end); err != nil {
		t.Fatal(err)
	}
}

func TestReadCheckpoint(t *testing.T) {
	dir := t.TempDir()
	writeSafetensors(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), map[string]any{
		"__metadata__":                           map[string]string{"format": "pt"},
		"model.embed_tokens.weight":              map[string]any{"dtype": "BF16", "shape": []int{32000, 4096}, "data_offsets": []int64{0, 262144000}},
		"model.layers.0.self_attn.q_proj.weight": map[string]any{"dtype": "U8", "shape": []int{8388608, 1}, "data_offsets": []int64{262144000, 270532608}},
	})
	writeSafetensors(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), map[string]any{
		"lm_head.weight": map[string]any{"dtype": "F32", "shape": []int{32000, 4096}, "data_offsets": []int64{0, 524288000}},
	})
	idx := `{"metadata": {"total_size": 1}, "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
	  "model.layers.0.self_attn.q_proj.weight": "model-00001-of-00002.safetensors", "lm_head.weight": "model-00002-of-00002.safetensors"}}`
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(idx), 0o644); err != nil {
		t.Fatal(err)
	}
	ts, err := ReadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 3 {
		t.Fatalf("got %d tensors, want 3", len(ts))
	}
	byName := map[string]Tensor{}
	for _, x := range ts {
		byName[x.Name] = x
	}
	q := byName["model.layers.0.self_attn.q_proj.weight"]
	if q.DType != INT8 || q.Layer != 0 || q.Bytes != 8388608 {
		t.Errorf("packed 4-bit tensor read as %+v", q)
	}
	if e := byName["model.embed_tokens.weight"]; e.Role != "embedding" || e.Numel() != 32000*4096 || e.DType != BF16 {
		t.Errorf("embedding read as %+v", e)
	}
	if got, want := CheckpointBytes(ts), Bytes(262144000+8388608+524288000); got != want {
		t.Errorf("CheckpointBytes = %d, want %d", got, want)
	}
}

func TestReadSafetensorsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"short", []byte{1, 2}, "header length"},
		{"huge", func() []byte { b := make([]byte, 8); binary.LittleEndian.PutUint64(b, 1<<40); return b }(), "out of range"},
		{"truncated", func() []byte { b := make([]byte, 8); binary.LittleEndian.PutUint64(b, 100); return b }(), "reading the 100-byte header"},
		{"not json", append([]byte{3, 0, 0, 0, 0, 0, 0, 0}, "abc"...), "not a JSON object"},
		{"bad dtype", header(`{"x": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 1]}}`), `unknown dtype "Q9"`},
		{"bad offsets", header(`{"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}`), "data_offsets"},
		{"negative dim", header(`{"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}`), "negative dimension"},
	} {
		_, err := ReadSafetensors(bytes.NewReader(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func header(js string) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, uint64(len(js)))
	return append(b, js...)
}

func FuzzReadSafetensors(f *testing.F) {
	f.Add(header(`{"a": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}}`))
	f.Add(header(`{"__metadata__": {"k": "v"}}`))
	f.Add([]byte{0, 0})
	f.Add(longShapeShard(100)) // more dimensions than any tensor has
	f.Add(header(`{"a": {"dtype": "F8_E4M3", "shape": [128, 256], "data_offsets": [0, 32768]}, "a_scale_inv": {"dtype": "F32", "shape": [1, 2], "data_offsets": [32768, 32776]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ts []Tensor
		var err error
		budget.Check(t, len(data), func() { ts, err = ReadSafetensors(bytes.NewReader(data)) })
		if err != nil {
			return
		}
		for _, x := range ts {
			if x.Bytes < 0 {
				t.Fatalf("negative size %+v", x)
			}
		}
	})
}

// TestReadCheckpointHostile: indexes that name themselves, the folder, a
// loop of folders, files outside the folder or special files are errors that
// say why, never a recursion, a hang or an unbounded read.
func TestReadCheckpointHostile(t *testing.T) {
	shard := map[string]any{"w": map[string]any{"dtype": "F32", "shape": []int{2}, "data_offsets": []int64{0, 8}}}
	for _, tc := range []struct {
		name   string
		shards map[string]string // weight_map
		setup  func(t *testing.T, dir string)
		want   string
	}{
		{"index names itself", map[string]string{"w": "model.safetensors.index.json"}, nil, "must be a .safetensors file"},
		{"index names the folder", map[string]string{"w": "."}, nil, "must be a .safetensors file"},
		{"index names a parent", map[string]string{"w": "../model.safetensors"}, nil, "inside the checkpoint folder"},
		{"absolute shard", map[string]string{"w": "/etc/passwd.safetensors"}, nil, "inside the checkpoint folder"},
		{"sub/.. loop", map[string]string{"w": "sub/../sub/../model.safetensors.index.json"}, nil, "must be a .safetensors file"},
		{"shard is a folder", map[string]string{"w": "sub.safetensors"}, func(t *testing.T, dir string) {
			_ = os.Mkdir(filepath.Join(dir, "sub.safetensors"), 0o755)
		}, "is a directory"},
		{"shard links outside", map[string]string{"w": "out.safetensors"}, func(t *testing.T, dir string) {
			outside := filepath.Join(t.TempDir(), "x.safetensors")
			writeSafetensors(t, outside, shard)
			_ = os.Symlink(outside, filepath.Join(dir, "out.safetensors"))
		}, "inside"},
		{"shard links to /dev/zero", map[string]string{"w": "zero.safetensors"}, func(t *testing.T, dir string) {
			_ = os.Symlink("/dev/zero", filepath.Join(dir, "zero.safetensors"))
		}, "inside"},
		{"shard is a FIFO", map[string]string{"w": "fifo.safetensors"}, func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "fifo.safetensors"), 0o644); err != nil {
				t.Skip("no FIFOs here:", err)
			}
		}, "special file"},
		{"tensor missing from its shard", map[string]string{"w": "a.safetensors", "v": "a.safetensors"}, func(t *testing.T, dir string) {
			writeSafetensors(t, filepath.Join(dir, "a.safetensors"), shard)
		}, `places tensor "v" in a.safetensors`},
		{"tensor in two shards", map[string]string{"w": "a.safetensors", "x": "b.safetensors"}, func(t *testing.T, dir string) {
			writeSafetensors(t, filepath.Join(dir, "a.safetensors"), shard)
			writeSafetensors(t, filepath.Join(dir, "b.safetensors"), map[string]any{
				"w": shard["w"], "x": map[string]any{"dtype": "F32", "shape": []int{1}, "data_offsets": []int64{8, 12}}})
		}, "is in both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			_ = os.Mkdir(filepath.Join(dir, "sub"), 0o755)
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			idx, _ := json.Marshal(map[string]any{"weight_map": tc.shards})
			if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), idx, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadCheckpoint(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestReadCheckpointSpecialFiles: the path given may not be a device or an
// oversized index either.
func TestReadCheckpointSpecialFiles(t *testing.T) {
	if _, err := ReadCheckpoint("/dev/zero"); err == nil {
		t.Error("/dev/zero accepted")
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "model.safetensors.index.json")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Truncate(MaxIndexFile + 1)
	f.Close()
	if _, err := ReadCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("oversized index: err = %v", err)
	}
}

// TestReadSafetensorsShapes: element counts are exact (a scalar has one
// element), computed without overflow, and must match data_offsets; the
// ranges must tile the data section.
func TestReadSafetensorsShapes(t *testing.T) {
	ts, err := ReadSafetensors(bytes.NewReader(header(`{"s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]},
	  "m": {"dtype": "F4", "shape": [3, 2], "data_offsets": [4, 7]}, "e": {"dtype": "F8_E8M0", "shape": [3], "data_offsets": [7, 10]}}`)))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Tensor{}
	for _, x := range ts {
		got[x.Name] = x
	}
	if s := got["s"]; s.Numel() != 1 || s.Bytes != 4 {
		t.Errorf("scalar: numel %d, %v", s.Numel(), s.Bytes)
	}
	if m := got["m"]; m.DType != FP4 || m.Bytes != 3 {
		t.Errorf("fp4 pairs: %+v", m)
	}
	if e := got["e"]; e.DType != FP8E8M0 || e.Bytes != 3 {
		t.Errorf("e8m0 scales: %+v", e)
	}
	for _, tc := range []struct{ name, js, want string }{
		{"shape overflow", `{"x": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}}`, "63 bits"},
		{"bytes overflow", `{"x": {"dtype": "F64", "shape": [4611686018427387904], "data_offsets": [0, 0]}}`, "whole number of bytes"},
		{"zero dim", `{"x": {"dtype": "F32", "shape": [0, 5], "data_offsets": [0, 4]}}`, "is 0 bytes"},
		{"short range", `{"x": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 6]}}`, "is 12 bytes"},
		{"odd nibbles", `{"x": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}`, "whole number of bytes"},
		{"gap", `{"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}`, "gap or overlap"},
		{"overlap", `{"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "y": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}`, "gap or overlap"},
	} {
		if _, err := ReadSafetensors(bytes.NewReader(header(tc.js))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestReadCheckpointTruncated: a shard shorter than its header says is an
// error, not a silently smaller model.
func TestReadCheckpointTruncated(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "model.safetensors")
	writeSafetensors(t, p, map[string]any{"w": map[string]any{"dtype": "F32", "shape": []int{4}, "data_offsets": []int64{0, 16}}})
	st, _ := os.Stat(p)
	_ = os.Truncate(p, st.Size()-1)
	if _, err := ReadCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("err = %v", err)
	}
}
