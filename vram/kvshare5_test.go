package vram

import (
	"strings"
	"testing"
)

// TestKVSharingRoles: which layer stores its keys and values for the
// shared ones and which layers read them (kv_sharing_modes,
// configuration_gemma3n.py l.206-232 and configuration_gemma4.py
// l.226-252 at 5.23.0): on the Gemma 3n E4B's language model (35 layers,
// every fifth global, the last 15 shared) and on a Gemma 4 of 12 layers
// (every sixth global, the last 4 shared).
func TestKVSharingRoles(t *testing.T) {
	twelve := strings.Replace(gemma4SmallText, `"num_hidden_layers": 6`, `"num_hidden_layers": 12`, 1)
	g4, err := FromHFConfig([]byte(`{"model_type": "gemma4_text", ` + twelve + `, "num_kv_shared_layers": 4}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name          string
		m             Model
		layer, source int
		store         bool
		lastReader    int
	}{
		{"gemma3n", MustPreset("gemma-3n-e4b-text"), 0, -1, false, -1},
		{"gemma3n", MustPreset("gemma-3n-e4b-text"), 18, -1, true, 33},  // the last local layer before the shared ones
		{"gemma3n", MustPreset("gemma-3n-e4b-text"), 19, -1, true, 34},  // the last global one
		{"gemma3n", MustPreset("gemma-3n-e4b-text"), 20, 18, false, -1}, // shared, local
		{"gemma3n", MustPreset("gemma-3n-e4b-text"), 24, 19, false, -1}, // shared, global
		{"gemma3n", MustPreset("gemma-3n-e4b-text"), 34, 19, false, -1},
		{"gemma4", g4, 5, -1, true, 11}, // the only global layer before the shared ones
		{"gemma4", g4, 6, -1, false, -1},
		{"gemma4", g4, 7, -1, true, 10}, // the last local one
		{"gemma4", g4, 8, 7, false, -1},
		{"gemma4", g4, 11, 5, false, -1},
	} {
		m := c.m.Normalize()
		last := -1
		if kvStore(m, c.layer) {
			last = kvLastReader(m, c.layer)
		}
		if s := kvSource(m, c.layer); s != c.source || kvStore(m, c.layer) != c.store || last != c.lastReader {
			t.Errorf("%s layer %d: source %d, store %v, last reader %d; want %d, %v, %d", c.name, c.layer, s, kvStore(m, c.layer), last, c.source, c.store, c.lastReader)
		}
	}
}

// TestKVSharingCheck: the rules both families' configs keep
// (kvSharingCheck): a shared layer reads an earlier layer, and every kind
// of layer has a store layer before the shared ones (transformers 5.23's
// kv_sharing_modes raises otherwise).
func TestKVSharingCheck(t *testing.T) {
	for _, c := range []struct{ name, json, want string }{
		{"gemma4: no global layer before the shared ones", `{"model_type": "gemma4_text", ` + gemma4SmallText + `, "num_kv_shared_layers": 1}`, "every kind"},
		{"gemma4: every layer shared", `{"model_type": "gemma4_text", ` + gemma4SmallText + `, "num_kv_shared_layers": 6}`, "must be in [0, layers = 6)"},
		{"gemma3n: every layer shared", `{"model_type": "gemma3n_text", "num_hidden_layers": 5, "num_kv_shared_layers": 5}`, "must be in [0, layers = 5)"},
	} {
		if _, err := FromHFConfig([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.want)
		}
	}
}
