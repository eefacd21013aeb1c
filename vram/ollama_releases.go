package vram

// Ollama's releases as data (versions.go): how each modelled release
// places a GGUF model's layers, with the release's files and lines. A
// release is named as Ollama tags it ("0.32.15", "v0.32.15").
//
// 0.11.10 sizes every model up front (llm/memory.go estimateGPULayers over
// fs/ggml/ggml.go GraphSize): Ollama.Estimate and OllamaMemory.Offload.
// 0.11.11 moved models on the Ollama engine to layouts sized by real
// allocations (eb10390de) and 0.12.11 the llama engine's too (f560bd077,
// which deleted llm/memory.go); those releases are not modelled. From
// 0.30.0 (9db4bdbad, #16031) every GGUF model runs upstream llama-server
// and llama.cpp's automatic fit places the layers: Ollama.Place.

// ollamaRelease is one modelled Ollama release.
type ollamaRelease struct {
	releaseRow
	// llamaServer is the llama.cpp build the release runs as llama-server
	// (LLAMA_CPP_VERSION), empty for a release that estimates up front;
	// fitRules the modelled llama.cpp build whose fit and cache rules it
	// has (llamacpp_releases.go).
	llamaServer, fitRules string
}

// ollamaReleases are the modelled releases, oldest first.
var ollamaReleases = []ollamaRelease{
	{releaseRow: releaseRow{Version: "0.11.10", Source: "ollama v0.11.10 (5994e8e8fdac, 2025-09-04; the last release that sized every model up front): " +
		"fs/ggml/ggml.go:484-518 (GraphSize: KV per layer, the llama graphs), 791-800 (kvCacheBytesPerElement: f16 2, q8_0 1, q4_0 0.5); " +
		"llm/memory.go:144-330 (estimateGPULayers); envconfig/config.go:185 (OLLAMA_CONTEXT_LENGTH 4096)"}},
	{releaseRow: releaseRow{Version: "0.32.15", Source: "ollama v0.32.15 (b7871fc0d1d8, 2026-08-19; v0.33.0-rc2 has the same rules): " +
		"server/routes.go:2043-2057 (default num_ctx by VRAM tier), server/sched.go:170-177 (num_ctx ≥ 4, vision ≥ 2048), 497-510 (num_parallel), " +
		"535-541, 972-1037 (one GPU where the prediction fits 80 %), 793-795, 807-915 (automatic num_batch); llm/server.go:111-119 (num_ctx ≤ trained, OLLAMA_KV_CACHE_TYPE); " +
		"llm/llama_server.go:369-418 (llama-server's flags), 597-625 (flash attention), 663-733 (mmproj and LLAMA_ARG_FIT_TARGET), 2681-2712 (PredictServerVRAM); " +
		"LLAMA_CPP_VERSION b10488, whose common/fit.cpp and cache files equal b10573's (the fit: llamacpp_fit.go)"},
		llamaServer: "b10488", fitRules: "b10573"},
}

// release is the release o runs (its Version; empty: the newest row).
func (o Ollama) release() (ollamaRelease, Modelled, error) {
	return resolveRelease("ollama", o.Version, ollamaReleases)
}

// Release is the Ollama release o's Version resolves to, as an answer
// names it.
func (o Ollama) Release() (Modelled, error) {
	_, m, err := o.release()
	return m, err
}

// UpFront reports whether o's release sizes the model up front
// (Ollama.Estimate) rather than through llama-server's fit (Ollama.Place).
func (o Ollama) UpFront() (bool, error) {
	r, _, err := o.release()
	return r.llamaServer == "", err
}
