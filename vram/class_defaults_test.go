package vram

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"testing"
)

// TestConfigClassDefaultsAll: a config.json that names only its
// model_type stands for the config class's defaults, every key left out
// taking the class's value; the engine reads it as transformers builds it.
// testdata/class_defaults.json holds each family's parameter count as
// transformers builds the class's defaults on the meta device
// (examples/measure defaults; regenerate with make truth). A type
// transformers builds no model of alone (a vision tower's config) is
// listed with transformers' reason and skipped.
func TestConfigClassDefaultsAll(t *testing.T) {
	b, err := os.ReadFile("testdata/class_defaults.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Transformers string         `json:"transformers"`
		Parameters   map[string]any `json:"parameters"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	types := make([]string, 0, len(d.Parameters))
	for mt := range d.Parameters {
		types = append(types, mt)
	}
	sort.Strings(types)
	checked := 0
	for _, mt := range types {
		n, ok := d.Parameters[mt].(float64)
		if !ok {
			continue // transformers builds no model of the class alone
		}
		checked++
		m, err := FromHFConfig([]byte(fmt.Sprintf(`{"model_type": %q}`, mt)))
		if err != nil {
			t.Errorf("%s: the class's defaults are refused (%v); transformers %s builds %d parameters", mt, err, d.Transformers, int64(n))
			continue
		}
		if got := m.ParamCount(); got != int64(n) {
			t.Errorf("%s: the class's defaults make %d parameters, transformers %s builds %d", mt, got, d.Transformers, int64(n))
		}
	}
	if checked < len(Families())/2 {
		t.Errorf("only %d of %d families checked (make truth)", checked, len(Families()))
	}
}
