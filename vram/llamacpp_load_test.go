package vram

import "testing"

// TestLlamaCppLoad: the load after the fit (b10573) and with the settings
// as given (b6173, --fit off): llama_context's n_ctx, n_ctx_seq and
// n_seq_max as each build prints them (b10573 llama-context.cpp:288-308;
// 4227c9be l.125-129), the layers offloaded, the cache's cells and each
// device's buffers, KV apart from recurrent state. Sizes as in
// TestFitLlamaCpp: Mistral-7B at F16, a block 416 MiB + 32 KiB, the
// embedding 250 MiB, the output 250 MiB + 16 KiB, KV 4 KiB a cell a layer.
func TestLlamaCppLoad(t *testing.T) {
	mistral := Model{Family: "mistral", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 32000, MaxPosition: 32768}
	block := 416*MiB + 32*KiB
	for _, c := range []struct {
		name                           string
		m                              Model
		l                              LlamaCpp
		status                         string
		nctx, seq, nseq, cells, layers int
		kv, model, hostModel           Bytes
	}{
		// The fit shrinks -c unset to 14336 (TestFitLlamaCpp); 4 unified
		// slots keep one stream of n_ctx.
		{"b10573 fitted", mistral, LlamaCpp{DeviceFree: []Bytes{16 * GiB}}, "fitted",
			14336, 14336, 4, 14336, 33, 14336 * 32 * 4 * KiB, 32*block + 250*MiB + 16*KiB, 250 * MiB},
		// -ngl 10 before b7475: the last 10 blocks on the GPU, the output
		// layer on the CPU; -c unset is 4096, one sequence.
		{"b6173 -ngl 10", mistral, LlamaCpp{Version: "b6173", GPULayers: 10, DeviceFree: []Bytes{16 * GiB}}, "off",
			4096, 4096, 1, 4096, 10, 4096 * 32 * 4 * KiB, 10 * block, 22*block + 500*MiB + 16*KiB},
		// -np 3 -c 10000, a stream each: n_ctx 10240, over 3 rounded
		// down 3413, padded 3584; n_ctx 3 · 3584.
		{"b10573 --fit off -np 3", mistral, LlamaCpp{CtxSize: 10000, Parallel: 3, Fit: new(bool), DeviceFree: []Bytes{40 * GiB}}, "off",
			10752, 3584, 3, 3584, 33, 3 * 3584 * 32 * 4 * KiB, 32*block + 250*MiB + 16*KiB, 250 * MiB},
	} {
		ld, err := c.l.Load(c.m, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		d := ld.Fit.Devices[0]
		if ld.Fit.Status != c.status || ld.NCtx != c.nctx || ld.NCtxSeq != c.seq || ld.NSeqMax != c.nseq || ld.Cells != c.cells || ld.Offloaded != c.layers || ld.Offloadable != 33 {
			t.Errorf("%s: %s, n_ctx %d, seq %d, n_seq_max %d, cells %d, offloaded %d/%d; want %s, %d, %d, %d, %d, %d/33",
				c.name, ld.Fit.Status, ld.NCtx, ld.NCtxSeq, ld.NSeqMax, ld.Cells, ld.Offloaded, ld.Offloadable, c.status, c.nctx, c.seq, c.nseq, c.cells, c.layers)
		}
		gpuKV := c.kv * Bytes(min(c.layers, 32)) / 32 // the KV of the repeating layers on the GPU
		if ld.KV != c.kv || d.Model != c.model || d.Context != gpuKV || d.State != 0 || ld.Fit.Host.Model != c.hostModel || len(ld.Fit.Projected) != 1 {
			t.Errorf("%s: KV %v, CUDA0 model %v context %v state %v, host model %v, projected %v; want %v, %v, %v, 0, %v",
				c.name, ld.KV, d.Model, d.Context, d.State, ld.Fit.Host.Model, ld.Fit.Projected, c.kv, c.model, gpuKV, c.hostModel)
		}
	}
	// A hybrid's state lies with its layer, apart from the KV: Bamba-9B at
	// b6173 (TestLlamaCppRecurrentState's sizes).
	ld, err := LlamaCpp{Version: "b6173", CtxSize: 8192, Parallel: 4, DeviceFree: []Bytes{80 * GiB}}.Load(MustPreset("bamba-9b"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := ld.Fit.Devices[0]; d.State != 29*4*4*(3*8448+128*8192) || d.Context-d.State != 3*2*8*128*8192*4*2 || ld.KV != d.Context-d.State {
		t.Errorf("bamba-9b: context %v, state %v, KV %v", d.Context, d.State, ld.KV)
	}
	if _, err := (LlamaCpp{Version: "b6173"}).Load(mistral, nil); err == nil {
		t.Error("no GPU and no device_free: want the fitter's refusal")
	}
}
