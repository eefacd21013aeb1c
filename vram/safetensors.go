package vram

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vramlab/vramlab/vram/fileio"
)

// safetensorsDTypes are the element types of the safetensors format
// (safetensors/src/tensor.rs, enum Dtype and Dtype::bitsize): the DType a
// tensor is read as and the bits one element takes. Unsigned types are
// stored as their signed width.
var safetensorsDTypes = map[string]struct {
	d    DType
	bits int64
}{
	"BOOL": {Bool, 8}, "U8": {INT8, 8}, "I8": {INT8, 8},
	"F8_E5M2": {FP8E5M2, 8}, "F8_E4M3": {FP8E4M3, 8}, "F8_E8M0": {FP8E8M0, 8},
	"F4": {FP4, 4}, "F6_E2M3": {FP6, 6}, "F6_E3M2": {FP6, 6},
	"I16": {INT16, 16}, "U16": {INT16, 16}, "F16": {FP16, 16}, "BF16": {BF16, 16},
	"I32": {INT32, 32}, "U32": {INT32, 32}, "F32": {FP32, 32},
	"I64": {INT64, 64}, "U64": {INT64, 64}, "F64": {FP64, 64},
}

// Limits on a checkpoint's headers, far above any released checkpoint
// (DeepSeek-V3: 163 shards, 91,991 tensors, 12 MB of headers; the most
// dimensions a tensor has is five, a Conv3d weight) and low enough that a
// hostile folder cannot make the reader hold gigabytes.
const (
	MaxSafetensorsDims = 8
	MaxShards          = 1 << 10
	MaxHeadersBytes    = 128 << 20 // all shards' headers together
)

// ReadSafetensors reads the tensor table of one .safetensors file from r
// without reading the data: an 8-byte little-endian header length, then a
// JSON object of name → {dtype, shape, data_offsets}
// (https://github.com/huggingface/safetensors#format). Every tensor is checked
// as the reference reader checks it (safetensors/src/tensor.rs,
// Metadata::validate): its element count (a scalar [] has one) times its
// element size, computed without overflow, must be exactly its data_offsets
// range, and the ranges must tile the data section from 0. Tensors come back
// in name order with their stored DType and Bytes.
func ReadSafetensors(r io.Reader) ([]Tensor, error) {
	left := int64(MaxHeadersBytes)
	ts, _, err := readSafetensors(r, &left)
	return ts, err
}

// readSafetensors also returns the bytes the file must have: 8 + header +
// data section. left is what the checkpoint's headers may still take.
func readSafetensors(r io.Reader, left *int64) ([]Tensor, int64, error) {
	var n uint64
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
		return nil, 0, fmt.Errorf("safetensors: reading the header length: %v", err)
	}
	if n < 2 || n > MaxSafetensorsHead {
		return nil, 0, fmt.Errorf("safetensors: header length %d is out of range [2, %d]", n, MaxSafetensorsHead)
	}
	if int64(n) > *left {
		return nil, 0, fmt.Errorf("safetensors: a %d-byte header passes the %d bytes all of a checkpoint's headers may take", n, int64(MaxHeadersBytes))
	}
	*left -= int64(n)
	buf, err := fileio.ReadN(r, int64(n))
	if err != nil {
		return nil, 0, fmt.Errorf("safetensors: reading the %d-byte header: %v", n, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(buf, &raw); err != nil {
		return nil, 0, fmt.Errorf("safetensors: header is not a JSON object: %v", err)
	}
	type span struct {
		name       string
		begin, end int64
	}
	var ts []Tensor
	var spans []span
	for name, msg := range raw {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			DType   string          `json:"dtype"`
			Shape   json.RawMessage `json:"shape"`
			Offsets []int64         `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, 0, fmt.Errorf("safetensors: tensor %q: %v", name, err)
		}
		shape, err := safetensorsShape(name, e.Shape)
		if err != nil {
			return nil, 0, err
		}
		dt, ok := safetensorsDTypes[e.DType]
		if !ok {
			return nil, 0, fmt.Errorf("safetensors: tensor %q: unknown dtype %q", name, e.DType)
		}
		if len(e.Offsets) != 2 || e.Offsets[0] < 0 || e.Offsets[1] < e.Offsets[0] {
			return nil, 0, fmt.Errorf("safetensors: tensor %q: data_offsets must be [begin, end] with 0 ≤ begin ≤ end", name)
		}
		numel := int64(1) // a scalar (shape []) has one element
		for _, d := range shape {
			if d < 0 {
				return nil, 0, fmt.Errorf("safetensors: tensor %q: negative dimension in shape %v", name, shape)
			}
			var ok bool
			if numel, ok = mulCount(numel, d); !ok {
				return nil, 0, fmt.Errorf("safetensors: tensor %q: shape %v has more elements than fit in 63 bits", name, shape)
			}
		}
		nbits, ok := mulCount(numel, dt.bits)
		if !ok || nbits%8 != 0 {
			return nil, 0, fmt.Errorf("safetensors: tensor %q: %d elements of %s are not a whole number of bytes below 2^63", name, numel, e.DType)
		}
		if got := e.Offsets[1] - e.Offsets[0]; got != nbits/8 {
			return nil, 0, fmt.Errorf("safetensors: tensor %q: shape %v of %s is %d bytes, but data_offsets %v span %d", name, shape, e.DType, nbits/8, e.Offsets, got)
		}
		t := Tensor{Name: name, Shape: shape, DType: dt.d, Bytes: Bytes(nbits / 8), Layer: layerOf(name), Expert: -1}
		t.Role = roleOf(name, len(shape))
		ts = append(ts, t)
		spans = append(spans, span{name, e.Offsets[0], e.Offsets[1]})
	}
	// The data section is the tensors' ranges end to end from 0, with no gap
	// or overlap.
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].begin != spans[j].begin {
			return spans[i].begin < spans[j].begin
		}
		return spans[i].end < spans[j].end
	})
	var end int64
	for _, s := range spans {
		if s.begin != end {
			return nil, 0, fmt.Errorf("safetensors: tensor %q: data_offsets start at %d where the previous tensor ends at %d (gap or overlap)", s.name, s.begin, end)
		}
		end = s.end
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	return ts, 8 + int64(n) + end, nil
}

// safetensorsShape decodes a tensor's shape, refusing more than
// MaxSafetensorsDims dimensions before it decodes them (a shape of millions
// of ones has one element and would pass every other check).
func safetensorsShape(name string, raw json.RawMessage) ([]int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return []int64{}, nil
	}
	if bytes.Count(raw, []byte(",")) >= MaxSafetensorsDims {
		return nil, fmt.Errorf("safetensors: tensor %q: a shape of more than %d dimensions", name, MaxSafetensorsDims)
	}
	shape := []int64{}
	if err := json.Unmarshal(raw, &shape); err != nil {
		return nil, fmt.Errorf("safetensors: tensor %q: shape: %v", name, err)
	}
	return shape, nil
}

// ReadCheckpoint reads the tensor table of a local checkpoint from the
// safetensors headers, never the weights: a folder holding model.safetensors
// or model.safetensors.index.json and its shards, an index file, or one
// .safetensors file. Each file is opened once. An index may name only
// .safetensors files inside its folder (no absolute paths, "..", or links
// that leave it), and every tensor it lists must be in the shard it names.
func ReadCheckpoint(path string) ([]Tensor, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	dir, name := filepath.Dir(path), filepath.Base(path)
	if st.IsDir() {
		dir, name = path, ""
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if name == "" {
		for _, n := range []string{"model.safetensors.index.json", "model.safetensors"} {
			if hasShard(root, n) {
				name = n
				break
			}
		}
		if name == "" {
			return nil, fmt.Errorf("%s: no model.safetensors or model.safetensors.index.json", path)
		}
	}
	switch {
	case strings.HasSuffix(name, ".json"):
		return readIndex(root, name)
	case strings.HasSuffix(name, ".safetensors"):
		left := int64(MaxHeadersBytes)
		return readShard(root, name, &left)
	}
	return nil, fmt.Errorf("%s: want a folder, a .safetensors file or a safetensors index (.json)", path)
}

// readIndex reads a model.safetensors.index.json and the header of every
// shard it names, once each.
func readIndex(root *os.Root, name string) ([]Tensor, error) {
	where := filepath.Join(root.Name(), name)
	b, err := readFileIn(root, name, MaxIndexFile)
	if err != nil {
		return nil, err
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil || len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: not a safetensors index (want a non-empty \"weight_map\")", where)
	}
	shards := map[string][]string{} // shard → the tensors the index places there
	for tensor, f := range idx.WeightMap {
		if !strings.HasSuffix(f, ".safetensors") || !filepath.IsLocal(f) {
			return nil, fmt.Errorf("%s: tensor %q: shard %q must be a .safetensors file inside the checkpoint folder", where, tensor, f)
		}
		shards[f] = append(shards[f], tensor)
	}
	if len(shards) > MaxShards {
		return nil, fmt.Errorf("%s: the index names %d shards, more than the %d a checkpoint may have", where, len(shards), MaxShards)
	}
	files := make([]string, 0, len(shards))
	for f := range shards {
		files = append(files, f)
	}
	sort.Strings(files)
	var all []Tensor
	seen := map[string]string{}
	left := int64(MaxHeadersBytes)
	for _, f := range files {
		ts, err := readShard(root, f, &left)
		if err != nil {
			return nil, err
		}
		have := make(map[string]bool, len(ts))
		for _, t := range ts {
			if prev, dup := seen[t.Name]; dup {
				return nil, fmt.Errorf("%s: tensor %q is in both %s and %s", where, t.Name, prev, f)
			}
			seen[t.Name], have[t.Name] = f, true
		}
		for _, t := range shards[f] {
			if !have[t] {
				return nil, fmt.Errorf("%s: the index places tensor %q in %s, which does not have it", where, t, f)
			}
		}
		all = append(all, ts...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return all, nil
}

// readShard reads one .safetensors header and checks the file is as long as
// the header says.
func readShard(root *os.Root, name string, left *int64) ([]Tensor, error) {
	where := filepath.Join(root.Name(), name)
	f, size, err := shardFile(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ts, want, err := readSafetensors(f, left)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if size != want {
		return nil, fmt.Errorf("%s: the header describes %d bytes but the file has %d (truncated or padded)", where, want, size)
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
			ok := parts[i+1] != "" && len(parts[i+1]) <= 6
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
