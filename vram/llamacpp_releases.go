package vram

// llama.cpp's releases as data (versions.go): what each modelled build does
// that the KV cache and the automatic fit read, with the build's files and
// lines. A build is named by its tag ("b10573"); a row's Version is the
// first tag that holds the commit its rules were read at.

// llamaCppRelease is one modelled llama.cpp build.
type llamaCppRelease struct {
	releaseRow
	// pad256: n_ctx is padded to 256 whatever the attention, and a
	// sliding-window layer keeps pad(min(kv_size, window·seqs + ubatch),
	// 256) cells; else (4227c9be) the pad is 256 with flash attention and
	// 32 without, and the window is padded before the min.
	pad256 bool
	// floorPerStream: a stream's cells are pad(n_ctx / n_seq_max) with the
	// division rounded down, hybrids' attention layers too; else
	// pad(ceil(n_ctx / n_seq_max)), and a hybrid keeps the whole n_ctx in
	// each stream.
	floorPerStream bool
	// trainCtx: -c unset (0) is the model's trained context
	// (n_ctx_train); else 4096.
	trainCtx bool
	// autoParallel: llama-server's -np unset is 4 slots in one unified
	// cache; else 1.
	autoParallel bool
	// fit: --fit exists and is on by default (common/fit.cpp).
	fit bool
	// outputFirst: -ngl N offloads the output layer and the last N−1
	// repeating layers (i_gpu_start = n_layer + 1 − N,
	// src/llama-model.cpp:1365; from 57c1e0564, b7475); else the last N
	// repeating layers, the output layer only when N > n_layer
	// (i_gpu_start = n_layer − N, 4227c9be src/llama-model.cpp:1947).
	outputFirst bool
}

// llamaCppReleases are the modelled builds, oldest first.
var llamaCppReleases = []llamaCppRelease{
	{
		releaseRow: releaseRow{Version: "b6173", Source: "llama.cpp 4227c9be (b6173~3, vendored by llama-cpp-python 0.3.16; the three commits to b6173 are CI and tests): " +
			"src/llama-kv-cache-unified.cpp get_padding (256 with flash attention, else 32); src/llama-model.cpp create_memory (n_ctx_per_stream = pad(ceil(n_ctx/n_seq_max)); hybrids the whole n_ctx); " +
			"src/llama-kv-cache-unified-iswa.cpp (window cells min(kv_size, pad(n_swa·seqs + n_ubatch))); common/common.h (n_ctx 4096, n_parallel 1); no --fit"},
	},
	{
		releaseRow: releaseRow{Version: "b10573", Source: "llama.cpp b10573 (d775b8967a46, 2026-08-22): " +
			"common/fit.cpp:178-789 (common_params_fit_impl: step 1 l.194-288, context l.290-372, give-ups l.373-400, layers back to front l.402-645, MoE front to back l.647-788), 29-153 (the dry run); " +
			"common/common.h:442 (n_ctx 0: the trained context), 465-473 (n_gpu_layers -1, fit on, fit-ctx 4096, margin 1024 MiB a device); common/arg.cpp:2842-2900 (-fit, -fitt, -fitc, -fitp), 1401 and tools/server/server.cpp:152-156 (-np unset: 4 slots, unified KV); " +
			"common/common.cpp:1294-1302 (the fit runs at every load, its status ignored); tools/fit-params/fit-params.cpp:33-68 (what llama-fit-params prints); " +
			"src/llama-context.cpp:131, 288-303 (n_ctx padded to 256, per stream pad(n_ctx/n_seq)); src/llama-kv-cache-iswa.cpp:73 (window cells); src/llama-model.cpp:1333-1383 (split points, layer devices, input layer on the CPU; i_gpu_start = n_layer + 1 - ngl, l.1365), 1756-1758 (-1: every layer)"},
		pad256: true, floorPerStream: true, trainCtx: true, autoParallel: true, fit: true, outputFirst: true,
	},
}

// release is the build l runs (its Version; empty: the newest row).
func (l LlamaCpp) release() (llamaCppRelease, Modelled, error) {
	return resolveRelease("llama_cpp", l.Version, llamaCppReleases)
}
