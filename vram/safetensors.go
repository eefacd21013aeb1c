package vram

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// maxSafetensorsHeader bounds the JSON header we are willing to read
// (the safetensors reference implementation rejects headers over 100 MB).
const maxSafetensorsHeader = 100 << 20

// ReadSafetensors reads the tensor table of one .safetensors file from r
// without reading the data: an 8-byte little-endian header length, then a
// JSON object of name → {dtype, shape, data_offsets}
// (https://github.com/huggingface/safetensors#format). Tensors come back in
// name order with their stored DType and Bytes.
func ReadSafetensors(r io.Reader) ([]Tensor, error) {
	var n uint64
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
		return nil, fmt.Errorf("safetensors: reading the header length: %v", err)
	}
	if n < 2 || n > maxSafetensorsHeader {
		return nil, fmt.Errorf("safetensors: header length %d is out of range [2, %d]", n, maxSafetensorsHeader)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("safetensors: reading the %d-byte header: %v", n, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(buf, &raw); err != nil {
		return nil, fmt.Errorf("safetensors: header is not a JSON object: %v", err)
	}
	var ts []Tensor
	for name, msg := range raw {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			DType   string  `json:"dtype"`
			Shape   []int64 `json:"shape"`
			Offsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: %v", name, err)
		}
		dt, err := safetensorsDType(e.DType)
		if err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: %v", name, err)
		}
		if len(e.Offsets) != 2 || e.Offsets[0] < 0 || e.Offsets[1] < e.Offsets[0] {
			return nil, fmt.Errorf("safetensors: tensor %q: data_offsets must be [begin, end] with 0 ≤ begin ≤ end", name)
		}
		for _, d := range e.Shape {
			if d < 0 {
				return nil, fmt.Errorf("safetensors: tensor %q: negative dimension in shape %v", name, e.Shape)
			}
		}
		t := Tensor{Name: name, Shape: e.Shape, DType: dt, Bytes: Bytes(e.Offsets[1] - e.Offsets[0]), Layer: layerOf(name), Expert: -1}
		t.Role = roleOf(name, len(e.Shape))
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	return ts, nil
}

func safetensorsDType(s string) (DType, error) {
	switch s {
	case "F32":
		return FP32, nil
	case "F16":
		return FP16, nil
	case "BF16":
		return BF16, nil
	case "F8_E4M3":
		return FP8E4M3, nil
	case "F8_E5M2":
		return FP8E5M2, nil
	case "I8", "U8":
		return INT8, nil
	case "I32", "U32":
		return INT32, nil
	case "I64", "U64", "F64":
		return INT64, nil
	case "BOOL":
		return Bool, nil
	case "I16", "U16":
		return FP16, nil // 2-byte storage
	}
	return DTypeUnset, fmt.Errorf("unknown dtype %q", s)
}

// ReadCheckpoint reads the tensor table of a local checkpoint: a
// .safetensors file, a model.safetensors.index.json (all its shards), or a
// directory holding either.
func ReadCheckpoint(path string) ([]Tensor, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		for _, name := range []string{"model.safetensors.index.json", "model.safetensors"} {
			if _, err := os.Stat(filepath.Join(path, name)); err == nil {
				return ReadCheckpoint(filepath.Join(path, name))
			}
		}
		return nil, fmt.Errorf("%s: no model.safetensors or model.safetensors.index.json", path)
	}
	if strings.HasSuffix(path, ".json") {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(b, &idx); err != nil || len(idx.WeightMap) == 0 {
			return nil, fmt.Errorf("%s: not a safetensors index (want a non-empty \"weight_map\")", path)
		}
		shards := map[string]bool{}
		for _, f := range idx.WeightMap {
			if strings.Contains(f, "/") || strings.Contains(f, `\`) {
				return nil, fmt.Errorf("%s: shard name %q must be a file name beside the index", path, f)
			}
			shards[f] = true
		}
		var all []Tensor
		for f := range shards {
			ts, err := ReadCheckpoint(filepath.Join(filepath.Dir(path), f))
			if err != nil {
				return nil, err
			}
			all = append(all, ts...)
		}
		sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
		return all, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ts, err := ReadSafetensors(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return ts, nil
}

// layerOf finds the block index in names such as "model.layers.12.mlp…".
func layerOf(name string) int {
	parts := strings.Split(name, ".")
	for i := 0; i+1 < len(parts); i++ {
		switch parts[i] {
		case "layers", "h", "layer", "blocks":
			n := 0
			ok := parts[i+1] != ""
			for _, c := range parts[i+1] {
				if c < '0' || c > '9' {
					ok = false
					break
				}
				n = n*10 + int(c-'0')
			}
			if ok {
				return n
			}
		}
	}
	return -1
}

// roleOf guesses a checkpoint tensor's role from its name.
func roleOf(name string, dims int) string {
	switch {
	case strings.HasSuffix(name, ".bias"):
		return "bias"
	case strings.Contains(name, "norm") || strings.Contains(name, "ln_"):
		return "norm"
	case strings.Contains(name, "embed_tokens") || strings.Contains(name, "wte") || strings.Contains(name, "word_embeddings") || strings.Contains(name, "embed_in"):
		return "embedding"
	case dims != 2:
		return "other"
	}
	for _, r := range []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head", "qkv_proj", "gate_up_proj"} {
		if strings.Contains(name, r) {
			return r
		}
	}
	return "other"
}

// CheckpointBytes sums the stored sizes of ts.
func CheckpointBytes(ts []Tensor) Bytes {
	var b Bytes
	for _, t := range ts {
		b = addBytes(b, t.Bytes)
	}
	return b
}
