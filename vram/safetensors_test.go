package vram

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeSafetensors writes a header-only safetensors file (data left zero).
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
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := ReadSafetensors(bytes.NewReader(data))
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
