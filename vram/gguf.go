package vram

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/vramlab/vramlab/vram/fileio"
)

// GGUF is the header of a GGUF file (llama.cpp, ollama): its metadata and
// every tensor's name, shape and storage type, which size the weights
// exactly. The format is ggml's docs/gguf.md; the type sizes are ggml's
// type_traits (ggml/src/ggml.c), the table gguf-py's GGML_QUANT_SIZES
// mirrors.
type GGUF struct {
	Version   uint32
	Alignment int64 // general.alignment (default 32)
	// Metadata holds the key-value pairs: numbers as int64, uint64 or
	// float64, booleans, strings; arrays of up to MaxGGUFArrayKept
	// elements as []any while the file has kept fewer than MaxGGUFKept
	// array elements in all, others (a tokenizer's vocabulary) as
	// GGUFArray, their length and element type only.
	Metadata map[string]any
	Tensors  []GGUFTensor
	// DataOffset is where the tensor data starts (the header, aligned).
	DataOffset int64
}

// GGUFArray stands for a long metadata array that is not kept.
type GGUFArray struct {
	Type string
	Len  uint64
}

// GGUFTensor is one tensor's entry.
type GGUFTensor struct {
	Name   string
	Dims   []int64 // ggml order: Dims[0] is the fastest-varying (a row's length)
	Type   GGMLType
	Offset uint64 // from DataOffset
	Bytes  Bytes  // stored size
}

// GGMLType is a ggml tensor type (ggml.h enum ggml_type).
type GGMLType uint32

// ggmlTypes are the storage types: elements per block and bytes per block
// (ggml.c type_traits; gguf-py constants.py GGML_QUANT_SIZES).
var ggmlTypes = map[GGMLType]struct {
	name       string
	block, per int64
}{
	0: {"F32", 1, 4}, 1: {"F16", 1, 2}, 2: {"Q4_0", 32, 18}, 3: {"Q4_1", 32, 20}, 6: {"Q5_0", 32, 22}, 7: {"Q5_1", 32, 24},
	8: {"Q8_0", 32, 34}, 9: {"Q8_1", 32, 40}, 10: {"Q2_K", 256, 84}, 11: {"Q3_K", 256, 110}, 12: {"Q4_K", 256, 144},
	13: {"Q5_K", 256, 176}, 14: {"Q6_K", 256, 210}, 15: {"Q8_K", 256, 292}, 16: {"IQ2_XXS", 256, 66}, 17: {"IQ2_XS", 256, 74},
	18: {"IQ3_XXS", 256, 98}, 19: {"IQ1_S", 256, 50}, 20: {"IQ4_NL", 32, 18}, 21: {"IQ3_S", 256, 110}, 22: {"IQ2_S", 256, 82},
	23: {"IQ4_XS", 256, 136}, 24: {"I8", 1, 1}, 25: {"I16", 1, 2}, 26: {"I32", 1, 4}, 27: {"I64", 1, 8}, 28: {"F64", 1, 8},
	29: {"IQ1_M", 256, 56}, 30: {"BF16", 1, 2}, 34: {"TQ1_0", 256, 54}, 35: {"TQ2_0", 256, 66}, 39: {"MXFP4", 32, 17},
	40: {"NVFP4", 64, 36}, 41: {"Q1_0", 128, 18},
}

func (t GGMLType) String() string {
	if tt, ok := ggmlTypes[t]; ok {
		return tt.name
	}
	return fmt.Sprintf("ggml type %d", uint32(t))
}

// GGMLTypes lists the known type names in enum order.
func GGMLTypes() []string {
	var ks []int
	for k := range ggmlTypes {
		ks = append(ks, int(k))
	}
	sort.Ints(ks)
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = ggmlTypes[GGMLType(k)].name
	}
	return out
}

// GGMLSize is the stored size of n elements of type t, or an error for an
// unknown type or a count that is not a whole number of blocks.
func GGMLSize(t GGMLType, n int64) (Bytes, error) {
	tt, ok := ggmlTypes[t]
	if !ok {
		return 0, fmt.Errorf("gguf: unknown ggml type %d", uint32(t))
	}
	if n < 0 || n%tt.block != 0 {
		return 0, fmt.Errorf("gguf: %d elements of %s: not a whole number of %d-element blocks", n, tt.name, tt.block)
	}
	if n/tt.block > math.MaxInt64/tt.per {
		return 0, fmt.Errorf("gguf: %d elements of %s overflow", n, tt.name)
	}
	return Bytes(n / tt.block * tt.per), nil
}

// Limits on a GGUF header: far above any real file (a 150k-token
// vocabulary is one array of 150k short strings), low enough that a hostile
// header cannot exhaust memory.
const (
	MaxGGUFHeaderBytes = 512 << 20
	MaxGGUFArrayKept   = 64
	// MaxGGUFKept bounds the array elements kept across the whole header,
	// nested arrays included (a real header keeps a few dozen: rope
	// sections, per-layer head counts).
	MaxGGUFKept    = 1 << 12
	maxGGUFString  = 1 << 20
	maxGGUFTensors = 1 << 20
	maxGGUFKeys    = 1 << 16
	maxGGUFArray   = 1 << 26
	maxGGUFDepth   = 4
)

// ReadGGUF reads the header of a GGUF file and checks that the tensors it
// lists fit in the file.
func ReadGGUF(path string) (*GGUF, error) {
	f, st, err := fileio.Open(path, -1)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer f.Close()
	g, err := ParseGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("gguf %s: %w", path, err)
	}
	if err := g.CheckSize(st.Size()); err != nil {
		return nil, fmt.Errorf("gguf %s: %w", path, err)
	}
	return g, nil
}

// CheckSize checks that every tensor the header lists ends within a file
// of size bytes.
func (g *GGUF) CheckSize(size int64) error {
	for _, t := range g.Tensors {
		end := g.DataOffset + int64(t.Offset) + int64(t.Bytes)
		if int64(t.Offset) < 0 || end < g.DataOffset || end > size {
			return fmt.Errorf("tensor %q (%v at offset %d) ends past the file's %d bytes (truncated?)", t.Name, t.Bytes, t.Offset, size)
		}
	}
	return nil
}

// ggufReader reads little-endian values within a byte budget.
type ggufReader struct {
	r    *bufio.Reader
	n    int64 // bytes read
	v2   bool  // version ≥ 2: 64-bit counts and lengths
	what string
	kept int // array elements kept so far (MaxGGUFKept)
}

// ggufWidths are the bytes of the fixed-width value types (gguf.md), which
// an array that is not kept skips in one read.
var ggufWidths = map[uint32]int64{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

// skip passes over n bytes of the header without keeping them.
func (g *ggufReader) skip(n int64) error {
	if n < 0 || g.n+n > MaxGGUFHeaderBytes {
		return errGGUFBudget
	}
	if _, err := g.r.Discard(int(n)); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("truncated while reading %s", g.what)
		}
		return err
	}
	g.n += n
	return nil
}

var errGGUFBudget = fmt.Errorf("header larger than %d bytes", MaxGGUFHeaderBytes)

func (g *ggufReader) read(b []byte) error {
	if g.n+int64(len(b)) > MaxGGUFHeaderBytes {
		return errGGUFBudget
	}
	if _, err := io.ReadFull(g.r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("truncated while reading %s", g.what)
		}
		return err
	}
	g.n += int64(len(b))
	return nil
}

func (g *ggufReader) u8() (uint8, error) {
	var b [1]byte
	err := g.read(b[:])
	return b[0], err
}
func (g *ggufReader) u16() (uint16, error) {
	var b [2]byte
	err := g.read(b[:])
	return binary.LittleEndian.Uint16(b[:]), err
}
func (g *ggufReader) u32() (uint32, error) {
	var b [4]byte
	err := g.read(b[:])
	return binary.LittleEndian.Uint32(b[:]), err
}
func (g *ggufReader) u64() (uint64, error) {
	var b [8]byte
	err := g.read(b[:])
	return binary.LittleEndian.Uint64(b[:]), err
}

// count reads a count or length: 32-bit in version 1, 64-bit after.
func (g *ggufReader) count() (uint64, error) {
	if g.v2 {
		return g.u64()
	}
	n, err := g.u32()
	return uint64(n), err
}

func (g *ggufReader) str(limit uint64) (string, error) {
	n, err := g.count()
	if err != nil {
		return "", err
	}
	if n > limit {
		return "", fmt.Errorf("%s: a string of %d bytes (at most %d)", g.what, n, limit)
	}
	if g.n+int64(n) > MaxGGUFHeaderBytes {
		return "", errGGUFBudget
	}
	b, err := fileio.ReadN(g.r, int64(n))
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return "", fmt.Errorf("truncated while reading %s", g.what)
		}
		return "", err
	}
	g.n += int64(n)
	return string(b), nil
}

// GGUF metadata value types (gguf.md).
var ggufValueTypes = []string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (g *ggufReader) value(typ uint32, depth int) (any, error) {
	switch typ {
	case 0:
		v, err := g.u8()
		return int64(v), err
	case 1:
		v, err := g.u8()
		return int64(int8(v)), err
	case 2:
		v, err := g.u16()
		return int64(v), err
	case 3:
		v, err := g.u16()
		return int64(int16(v)), err
	case 4:
		v, err := g.u32()
		return int64(v), err
	case 5:
		v, err := g.u32()
		return int64(int32(v)), err
	case 6:
		v, err := g.u32()
		return float64(math.Float32frombits(v)), err
	case 7:
		v, err := g.u8()
		if err == nil && v > 1 {
			return nil, fmt.Errorf("%s: a bool of %d", g.what, v)
		}
		return v == 1, err
	case 8:
		return g.str(maxGGUFString)
	case 9:
		if depth >= maxGGUFDepth {
			return nil, fmt.Errorf("%s: arrays nested more than %d deep", g.what, maxGGUFDepth)
		}
		et, err := g.u32()
		if err != nil {
			return nil, err
		}
		if int(et) >= len(ggufValueTypes) {
			return nil, fmt.Errorf("%s: unknown array element type %d", g.what, et)
		}
		n, err := g.count()
		if err != nil {
			return nil, err
		}
		if n > maxGGUFArray {
			return nil, fmt.Errorf("%s: an array of %d elements (at most %d)", g.what, n, maxGGUFArray)
		}
		return g.array(et, n, depth)
	case 10:
		return g.u64()
	case 11:
		v, err := g.u64()
		return int64(v), err
	case 12:
		v, err := g.u64()
		return math.Float64frombits(v), err
	}
	return nil, fmt.Errorf("%s: unknown value type %d", g.what, typ)
}

// array reads n elements of type et: kept while the array is short and the
// file's budget of kept elements lasts, else skipped (fixed-width elements
// in one read, strings by their lengths) and summarised as a GGUFArray.
func (g *ggufReader) array(et uint32, n uint64, depth int) (any, error) {
	if n <= MaxGGUFArrayKept && g.kept+int(n) <= MaxGGUFKept {
		g.kept += int(n)
		kept := make([]any, 0, n)
		for i := uint64(0); i < n; i++ {
			v, err := g.value(et, depth+1)
			if err != nil {
				return nil, err
			}
			kept = append(kept, v)
		}
		return kept, nil
	}
	if err := g.skipValues(et, n, depth); err != nil {
		return nil, err
	}
	return GGUFArray{Type: ggufValueTypes[et], Len: n}, nil
}

// skipValues passes over n values of type et.
func (g *ggufReader) skipValues(et uint32, n uint64, depth int) error {
	if w, ok := ggufWidths[et]; ok {
		if n > uint64(MaxGGUFHeaderBytes)/uint64(w) {
			return errGGUFBudget
		}
		return g.skip(int64(n) * w)
	}
	for i := uint64(0); i < n; i++ {
		switch et {
		case 8:
			l, err := g.count()
			if err != nil {
				return err
			}
			if l > maxGGUFString {
				return fmt.Errorf("%s: a string of %d bytes (at most %d)", g.what, l, maxGGUFString)
			}
			if err := g.skip(int64(l)); err != nil {
				return err
			}
		case 9:
			if depth+1 >= maxGGUFDepth {
				return fmt.Errorf("%s: arrays nested more than %d deep", g.what, maxGGUFDepth)
			}
			inner, err := g.u32()
			if err != nil {
				return err
			}
			if int(inner) >= len(ggufValueTypes) {
				return fmt.Errorf("%s: unknown array element type %d", g.what, inner)
			}
			m, err := g.count()
			if err != nil {
				return err
			}
			if m > maxGGUFArray {
				return fmt.Errorf("%s: an array of %d elements (at most %d)", g.what, m, maxGGUFArray)
			}
			if err := g.skipValues(inner, m, depth+1); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unknown value type %d", g.what, et)
		}
	}
	return nil
}

// ParseGGUF reads a GGUF header from r: magic, version (1–3), metadata,
// tensor infos. Anything else is an error that says what it found.
func ParseGGUF(r io.Reader) (*GGUF, error) {
	g := &ggufReader{r: bufio.NewReaderSize(r, 1<<16), what: "the magic"}
	out, nt, nk, err := g.header()
	if err != nil {
		return nil, err
	}
	if err := g.metadata(out, nk); err != nil {
		return nil, err
	}
	var total Bytes
	for i := uint64(0); i < nt; i++ {
		t, err := g.tensorInfo(i, out.Alignment)
		if err != nil {
			return nil, err
		}
		// Each tensor is under 2^53 bytes and there are at most 2^20 of
		// them: the total stays far from overflow, but no file is that big.
		if total += t.Bytes; total > 1<<50 {
			return nil, fmt.Errorf("%s: the tensors add up to more than 1 PiB", g.what)
		}
		out.Tensors = append(out.Tensors, t)
	}
	out.DataOffset = (g.n + out.Alignment - 1) / out.Alignment * out.Alignment
	return out, nil
}

// header reads the magic, the version and the tensor and metadata counts.
func (g *ggufReader) header() (out *GGUF, nt, nk uint64, err error) {
	var magic [4]byte
	if err := g.read(magic[:]); err != nil {
		return nil, 0, 0, err
	}
	if string(magic[:]) != "GGUF" {
		return nil, 0, 0, fmt.Errorf("not a GGUF file: it starts with %q, not \"GGUF\"", magic[:])
	}
	g.what = "the version"
	ver, err := g.u32()
	if err != nil {
		return nil, 0, 0, err
	}
	if ver < 1 || ver > 3 {
		return nil, 0, 0, fmt.Errorf("GGUF version %d: this reader knows 1 to 3", ver)
	}
	g.v2 = ver >= 2
	g.what = "the tensor count"
	if nt, err = g.count(); err != nil {
		return nil, 0, 0, err
	}
	g.what = "the metadata count"
	if nk, err = g.count(); err != nil {
		return nil, 0, 0, err
	}
	if nt > maxGGUFTensors || nk > maxGGUFKeys {
		return nil, 0, 0, fmt.Errorf("%d tensors and %d metadata keys: at most %d and %d", nt, nk, maxGGUFTensors, maxGGUFKeys)
	}
	return &GGUF{Version: ver, Alignment: 32, Metadata: map[string]any{}}, nt, nk, nil
}

// metadata reads nk key/value pairs into out and takes the alignment.
func (g *ggufReader) metadata(out *GGUF, nk uint64) error {
	for i := uint64(0); i < nk; i++ {
		g.what = fmt.Sprintf("metadata key %d", i)
		k, err := g.str(1 << 16)
		if err != nil {
			return err
		}
		g.what = fmt.Sprintf("metadata %q", k)
		typ, err := g.u32()
		if err != nil {
			return err
		}
		v, err := g.value(typ, 0)
		if err != nil {
			return err
		}
		out.Metadata[k] = v
	}
	if a, ok := out.Metadata["general.alignment"]; ok {
		n, ok := a.(int64)
		if !ok || n < 1 || n > 1<<20 || n&(n-1) != 0 {
			return fmt.Errorf("general.alignment %v: must be a power of two up to 1 MiB", a)
		}
		out.Alignment = n
	}
	return nil
}

// tensorInfo reads tensor i's name, shape, type and offset.
func (g *ggufReader) tensorInfo(i uint64, alignment int64) (GGUFTensor, error) {
	g.what = fmt.Sprintf("tensor %d", i)
	name, err := g.str(1 << 16)
	if err != nil {
		return GGUFTensor{}, err
	}
	g.what = fmt.Sprintf("tensor %q", name)
	nd, err := g.u32()
	if err != nil {
		return GGUFTensor{}, err
	}
	if nd < 1 || nd > 4 {
		return GGUFTensor{}, fmt.Errorf("%s: %d dimensions (ggml has 1 to 4)", g.what, nd)
	}
	t := GGUFTensor{Name: name}
	n := int64(1)
	for d := uint32(0); d < nd; d++ {
		x, err := g.count()
		if err != nil {
			return t, err
		}
		if x < 1 || x > 1<<40 || n > (1<<50)/int64(x) {
			return t, fmt.Errorf("%s: dimension %d is %d (the tensor would pass 2^50 elements)", g.what, d, x)
		}
		t.Dims = append(t.Dims, int64(x))
		n *= int64(x)
	}
	typ, err := g.u32()
	if err != nil {
		return t, err
	}
	t.Type = GGMLType(typ)
	if t.Bytes, err = GGMLSize(t.Type, n); err != nil {
		return t, fmt.Errorf("%s: %w", g.what, err)
	}
	if t.Offset, err = g.u64(); err != nil {
		return t, err
	}
	if t.Offset%uint64(alignment) != 0 {
		return t, fmt.Errorf("%s: offset %d is not a multiple of the alignment %d", g.what, t.Offset, alignment)
	}
	return t, nil
}

// Architecture is general.architecture ("llama", "qwen2", …).
func (g *GGUF) Architecture() string {
	s, _ := g.Metadata["general.architecture"].(string)
	return s
}

// Total is the stored size of every tensor.
func (g *GGUF) Total() Bytes {
	var n Bytes
	for _, t := range g.Tensors {
		n += t.Bytes
	}
	return n
}

// ByType sums the stored bytes per ggml type.
func (g *GGUF) ByType() map[string]Bytes {
	out := map[string]Bytes{}
	for _, t := range g.Tensors {
		out[t.Type.String()] += t.Bytes
	}
	return out
}
