package vram

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// inventory is a parameter list written by the PyTorch companion tool
// (examples/measure inventory; regenerate with `make truth`).
type inventory struct {
	Class        string `json:"class"`
	Transformers string `json:"transformers"`
	Parameters   []struct {
		Name  string  `json:"name"`
		Shape []int64 `json:"shape"`
	} `json:"parameters"`
	Total   int64 `json:"total_parameters"`
	Buffers []struct {
		Name  string  `json:"name"`
		Shape []int64 `json:"shape"`
		DType string  `json:"dtype"`
	} `json:"buffers"`
}

// loadInventory reads one inventory file; the name is the catalog model's.
func loadInventory(t *testing.T, f string) (string, inventory) {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var inv inventory
	if err := json.Unmarshal(b, &inv); err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	return strings.TrimSuffix(filepath.Base(f), ".json"), inv
}

// conv1D reports whether transformers stores this weight as a Conv1D,
// [in, out] rather than Linear's [out, in] (the family's recipe says so:
// GPT-2's c_attn, c_proj and c_fc, modeling_gpt2.py Conv1D). The engine
// keeps [out, in] for every matmul so LoRA and quantization read shapes one
// way; the test transposes.
func conv1D(m Model, t Tensor) bool {
	return m.recipeOf(pinned).conv1D && t.IsLinear()
}

// TestInventoryMatchesPyTorch: for every catalog model transformers builds,
// the engine's tensors are exactly PyTorch's named_parameters(): same names,
// same shapes, same total.
func TestInventoryMatchesPyTorch(t *testing.T) {
	oneGoroutineTable(t)
	files, _ := filepath.Glob(filepath.Join("testdata", "inventory", "*.json"))
	if len(files) < 30 {
		t.Fatalf("only %d inventories in testdata/inventory (run make truth)", len(files))
	}
	exact := 0
	for _, f := range files {
		name, inv := loadInventory(t, f)
		m := MustPreset(name)
		ours := map[string][]int64{}
		linear := map[string]bool{}
		for _, x := range m.Tensors() {
			ours[x.Name] = x.Shape
			linear[x.Name] = conv1D(m, x)
		}
		bad := 0
		for _, p := range inv.Parameters {
			shape, ok := ours[p.Name]
			if !ok {
				t.Errorf("%s: PyTorch has %s %v, the engine does not", name, p.Name, p.Shape)
				bad++
				continue
			}
			delete(ours, p.Name)
			want := p.Shape
			if linear[p.Name] && len(want) == 2 {
				want = []int64{want[1], want[0]}
			}
			if len(shape) != len(want) {
				t.Errorf("%s: %s shape %v, PyTorch %v", name, p.Name, shape, p.Shape)
				bad++
				continue
			}
			for i := range want {
				if shape[i] != want[i] {
					t.Errorf("%s: %s shape %v, PyTorch %v", name, p.Name, shape, p.Shape)
					bad++
					break
				}
			}
		}
		for n, s := range ours {
			t.Errorf("%s: the engine has %s %v, PyTorch does not", name, n, s)
			bad++
		}
		if got := m.ParamCount(); got != inv.Total {
			t.Errorf("%s: %d parameters, PyTorch %d", name, got, inv.Total)
			bad++
		}
		if bad == 0 {
			exact++
		}
	}
	t.Logf("%d of %d inventories match PyTorch exactly", exact, len(files))
}

// TestBuffersMatchPyTorch: the engine's module buffers are exactly PyTorch's
// named_buffers() for every catalog model: names, shapes and dtypes.
func TestBuffersMatchPyTorch(t *testing.T) {
	oneGoroutineTable(t)
	files, _ := filepath.Glob(filepath.Join("testdata", "inventory", "*.json"))
	dtypes := map[string]DType{"bool": Bool, "int64": INT64, "float32": FP32}
	for _, f := range files {
		name, inv := loadInventory(t, f)
		ours := map[string]Buffer{}
		for _, x := range MustPreset(name).Buffers() {
			ours[x.Name] = x
		}
		for _, p := range inv.Buffers {
			x, ok := ours[p.Name]
			if !ok {
				t.Errorf("%s: PyTorch has buffer %s %v, the engine does not", name, p.Name, p.Shape)
				continue
			}
			delete(ours, p.Name)
			if fmt.Sprint(x.Shape) != fmt.Sprint(p.Shape) || x.DType != dtypes[p.DType] {
				t.Errorf("%s: buffer %s %v %v, PyTorch %v %s", name, p.Name, x.Shape, x.DType, p.Shape, p.DType)
			}
		}
		for n := range ours {
			t.Errorf("%s: the engine has buffer %s, PyTorch does not", name, n)
		}
	}
}
