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
	mistral := Model{Family: "mistral", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 32000, MaxPosition: 32768}
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
		c.l.Version = "b6173" // the logs' builds predate b10573's cache rules
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
		tc.l.Version = "b6173"
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

// TestLlamaCppReleaseKV holds the cache to each build's rules: b10573 pads
// n_ctx to 256 and rounds n_ctx / n_seq_max down per stream
// (llama-context.cpp:288-303), gives llama-server's unset -np 4 slots in
// one unified cache (server.cpp:152-156), an unset -c the trained context
// (common.h:442) and a window pad(min(kv, window·seqs + ubatch), 256)
// cells (llama-kv-cache-iswa.cpp:73); b6173 padded ceil(n_ctx / n_seq_max)
// to 32 without flash attention and left -c at 4096.
func TestLlamaCppReleaseKV(t *testing.T) {
	mistral := Model{Family: "mistral", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 32000, MaxPosition: 32768}
	perCell := Bytes(32 * 2 * 8 * 128 * 2) // layers × K,V × heads × dim × f16
	for _, c := range []struct {
		name             string
		m                Model
		l                LlamaCpp
		cells, swa, strm int
		total            Bytes
	}{
		{"b10573 -c 10000 -np 3", mistral, LlamaCpp{Version: "b10573", CtxSize: 10000, Parallel: 3}, 3584, 0, 3, perCell * 3584 * 3},
		{"b6173 -c 10000 -np 3", mistral, LlamaCpp{Version: "b6173", CtxSize: 10000, Parallel: 3}, 3360, 0, 3, perCell * 3360 * 3},
		{"b10573 -c unset: trained context, 4 unified slots", mistral, LlamaCpp{}, 32768, 0, 1, perCell * 32768},
		{"b6173 -c unset: 4096", mistral, LlamaCpp{Version: "b6173"}, 4096, 0, 1, perCell * 4096},
		// 12 global layers at 8192 cells and 12 sliding ones at
		// pad(min(8192, 128·4 + 512), 256) = 1024: 192 + 24 MiB.
		{"gpt-oss-20b b10573", MustPreset("gpt-oss-20b"), LlamaCpp{CtxSize: 8192, FlashAttn: true}, 8192, 1024, 1, 216 * MiB},
	} {
		kv, err := c.l.KVCache(c.m)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if kv.Cells != c.cells || kv.SWACells != c.swa || kv.Streams != c.strm || kv.Total != c.total {
			t.Errorf("%s: %d cells (window %d) × %d streams, %v; want %d (%d) × %d, %v", c.name, kv.Cells, kv.SWACells, kv.Streams, kv.Total, c.cells, c.swa, c.strm, c.total)
		}
	}
	if _, err := (LlamaCpp{Version: "b10573"}).KVCache(Model{Family: "mistral", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 32000}); err == nil || !strings.Contains(err.Error(), "ctx_size") {
		t.Errorf("no trained context: %v", err)
	}
	if _, err := (LlamaCpp{Version: "6123"}).KVCache(mistral); err == nil || !strings.Contains(err.Error(), "versions.llama_cpp") {
		t.Errorf("a bad build: %v", err)
	}
}

// TestLlamaCppReleaseTable walks the table: rows oldest first, each a
// build tag citing its files, the fit on from b10573; a build between
// rows takes the older row's rules with a note.
func TestLlamaCppReleaseTable(t *testing.T) {
	var prev Version
	for i, r := range llamaCppReleases {
		v, err := ParseVersion("llama_cpp", r.Version)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && !prev.Less(v) {
			t.Errorf("row %s is not newer than the one before", r.Version)
		}
		prev = v
		if !strings.Contains(r.Source, ".cpp") || !strings.Contains(r.Source, "llama.cpp ") {
			t.Errorf("row %s: source %q names no file", r.Version, r.Source)
		}
		if r.fit != (r.Version == "b10573") {
			t.Errorf("row %s: fit %v", r.Version, r.fit)
		}
	}
	for _, c := range []struct{ asked, release, note string }{
		{"", "b10573", ""},
		{"b10573", "b10573", ""},
		{"b6173", "b6173", ""},
		{"b8000", "b6173", "b8000 is not modelled; modelled with the rules of b6173"},
		{"b12000", "b10573", "newer than the newest"},
		{"b4462", "b6173", "older than every modelled release"},
	} {
		_, m, err := (LlamaCpp{Version: c.asked}).release()
		if err != nil || m.Release != c.release || !strings.Contains(m.Note, c.note) || (c.note == "") != (m.Note == "") {
			t.Errorf("%q: %+v, %v; want %s (%q)", c.asked, m, err, c.release, c.note)
		}
	}
	if got := ModelledReleases()["llama_cpp"]; len(got) != 2 || got[0] != "b6173" || got[1] != "b10573" {
		t.Errorf("ModelledReleases llama_cpp = %v", got)
	}
}

// TestLlamaCppOutputFirst: -ngl N gives the GPU the output layer and the
// last N−1 repeating layers from b7475 (i_gpu_start = n_layer + 1 − N,
// b10573 src/llama-model.cpp:1365), the last N repeating layers before
// (4227c9be src/llama-model.cpp:1947); the cache and the fit's dry run
// place the layers alike.
func TestLlamaCppOutputFirst(t *testing.T) {
	mistral := Model{Family: "mistral", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 32000, MaxPosition: 32768}
	perLayer := Bytes(2 * 8 * 128 * 2 * 4096) // K,V × heads × dim × f16 × cells
	for _, c := range []struct {
		build     string
		gpuLayers int
	}{{"b10573", 9}, {"b6173", 10}} {
		l := LlamaCpp{Version: c.build, CtxSize: 4096, Parallel: 1, GPULayers: 10, Fit: new(bool), DeviceFree: []Bytes{20 * GiB}}
		kv, err := l.KVCache(mistral)
		if err != nil {
			t.Fatal(err)
		}
		if kv.Layers[0] != c.gpuLayers || kv.Devices[0] != perLayer*Bytes(c.gpuLayers) || kv.CPU != perLayer*Bytes(32-c.gpuLayers) {
			t.Errorf("%s -ngl 10: %d layers' KV on the GPU (%v, CPU %v), want %d", c.build, kv.Layers[0], kv.Devices[0], kv.CPU, c.gpuLayers)
		}
		ft, err := l.fitter(mistral.Normalize(), nil, nil, mustLlamaCppRelease(t, l))
		if err != nil {
			t.Fatal(err)
		}
		dev := ft.devices(lcLayout{ngl: 10})
		onGPU := 0
		for _, d := range dev[:32] {
			if d == 0 {
				onGPU++
			}
		}
		if onGPU != c.gpuLayers || (dev[32] == 0) != (c.build == "b10573") {
			t.Errorf("%s -ngl 10: the dry run puts %d repeating layers on the GPU, the output layer on %d; want %d", c.build, onGPU, dev[32], c.gpuLayers)
		}
	}
}

func mustLlamaCppRelease(t *testing.T, l LlamaCpp) llamaCppRelease {
	t.Helper()
	r, _, err := l.release()
	if err != nil {
		t.Fatal(err)
	}
	return r
}
