package vram

import (
	"strings"
	"testing"
)

// TestLlamaCppKV holds llama.cpp's KV buffers to the lines its logs print
// for the settings they ran with (cases llamacpp_* of the reference set):
// Qwen2.5-Coder-32B with q8_0 K and V over 32768 cells split 10:6 over two
// GPUs (41 and 23 layers: "CUDA0 KV buffer size = 2788.00 MiB", "CUDA1 …
// 1564.00 MiB", "KV self size = 4352.00 MiB"), Mistral-7B at 2048 and
// 32768 cells (256 and 4096 MiB), and gpt-oss-20b's sliding-window layers
// at pad(window + ubatch) cells.
func TestLlamaCppKV(t *testing.T) {
	qwen32 := Model{Family: "qwen2", Layers: 64, Hidden: 5120, Heads: 40, KVHeads: 8, FFN: 27648, Vocab: 152064}
	mistral := Model{Family: "mistral", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 32000}
	for _, c := range []struct {
		name    string
		m       Model
		l       LlamaCpp
		devices []Bytes
		total   Bytes
		swa     int
	}{
		{"qwen2.5-coder-32b q8_0 -ts 10,6", qwen32, LlamaCpp{CtxSize: 32768, UBatch: 256, FlashAttn: true, CacheTypeK: "q8_0", CacheTypeV: "q8_0", GPULayers: 99, TensorSplit: []float64{10, 6}},
			[]Bytes{2788 * MiB, 1564 * MiB}, 4352 * MiB, 0},
		{"mistral-7b f16 2048", mistral, LlamaCpp{CtxSize: 2048}, []Bytes{256 * MiB}, 256 * MiB, 0},
		{"mistral-7b f16 32768", mistral, LlamaCpp{CtxSize: 32768, GPULayers: -1}, []Bytes{4096 * MiB}, 4096 * MiB, 0},
		// 12 global layers × 8 heads × 64 × 8192 cells × K and V × 2 B, and
		// 12 sliding ones at pad(128 + 512, 256) = 768 cells.
		{"gpt-oss-20b 8192 fa", MustPreset("gpt-oss-20b"), LlamaCpp{CtxSize: 8192, FlashAttn: true}, []Bytes{210 * MiB}, 210 * MiB, 768},
		// 10 of 32 layers offloaded: the first 22 stay on the CPU.
		{"mistral-7b -ngl 10", mistral, LlamaCpp{CtxSize: 2048, GPULayers: 10}, []Bytes{80 * MiB}, 256 * MiB, 0},
	} {
		kv, err := c.l.KVCache(c.m)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(kv.Devices) != len(c.devices) || kv.Total != c.total || kv.SWACells != c.swa {
			t.Fatalf("%s: %+v", c.name, kv)
		}
		for i := range c.devices {
			if kv.Devices[i] != c.devices[i] {
				t.Errorf("%s: device %d holds %v, want %v", c.name, i, kv.Devices[i], c.devices[i])
			}
		}
	}
	for _, bad := range []LlamaCpp{{CacheTypeK: "q3_k"}, {CtxSize: -1}, {TensorSplit: []float64{0, 0}}, {Parallel: 5000}} {
		if _, err := bad.KVCache(mistral); err == nil || !strings.Contains(err.Error(), "llama.cpp: ") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// Recurrent layers keep max(1, n_seq_max) cells of f32 state (R: n_embd_r,
// S: n_embd_s per cell); a hybrid's attention layers keep the whole padded
// n_ctx in every stream (llama_memory_hybrid at 4227c9be).
func TestLlamaCppRecurrentState(t *testing.T) {
	for _, tc := range []struct {
		preset             string
		l                  LlamaCpp
		cells, stateLayers int
		kv, state          Bytes
	}{
		// Bamba-9B, 3 attention layers of 8 KV heads × 128: 8,192 cells ×
		// 4 streams; 29 mixers of R (3 × (8192 + 2·128)) + S (128 × 8192).
		{"bamba-9b", LlamaCpp{CtxSize: 8192, Parallel: 4}, 8192, 29, 3 * 2 * 8 * 128 * 8192 * 4 * 2, 29 * 4 * 4 * (3*8448 + 128*8192)},
		// LFM2-1.2B: 10 convolutions of R (2048 × 2), no S.
		{"lfm2-1.2b", LlamaCpp{CtxSize: 4000, Parallel: 2, FlashAttn: true}, 4096, 10, 6 * 2 * 8 * 64 * 4096 * 2 * 2, 10 * 2 * 4 * 2048 * 2},
		// Jamba: 4 attention layers; 28 Mamba-1 mixers of R (3 × 8192) + S
		// (16 × 8192).
		{"jamba-v0.1", LlamaCpp{CtxSize: 8192, Parallel: 2}, 8192, 28, 4 * 2 * 8 * 128 * 8192 * 2 * 2, 28 * 2 * 4 * 8192 * (3 + 16)},
		// Mamba-Codestral: mixers only, one cell.
		{"mamba-codestral-7b", LlamaCpp{CtxSize: 4096}, 0, 64, 0, 64 * 4 * (3*(8192+2*8*128) + 128*8192)},
	} {
		kv, err := tc.l.KVCache(MustPreset(tc.preset))
		if err != nil {
			t.Fatal(tc.preset, err)
		}
		if kv.Cells != tc.cells || kv.Total != tc.kv || kv.State != tc.state || kv.StateLayers != tc.stateLayers || kv.StateDevices[0] != tc.state {
			t.Errorf("%s: cells %d, KV %d, state %d over %d layers (GPU %d); want %d, %d, %d, %d", tc.preset, kv.Cells, kv.Total, kv.State, kv.StateLayers, kv.StateDevices[0], tc.cells, tc.kv, tc.state, tc.stateLayers)
		}
	}
	if _, err := (LlamaCpp{}).KVCache(MustPreset("qwen3-next-80b-a3b")); err == nil || !strings.Contains(err.Error(), "not an architecture of llama.cpp") {
		t.Errorf("qwen3_next: %v", err)
	}
}
