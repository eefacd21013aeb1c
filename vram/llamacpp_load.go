package vram

import "fmt"

// LlamaCppLoad is what llama.cpp's load of m prints, as the engine models
// it: the fit (where the build runs one) and then the load with what the
// fit chose, or the settings as given. Each figure is named by the line
// that prints it (file:line at b10573):
//
//	load_tensors: offloaded N/M layers to GPU (src/llama-model.cpp:1686)
//	load_tensors: CUDA0 model buffer size = X MiB (src/llama-model.cpp:1692)
//	llama_kv_cache: CUDA0 KV buffer size = X MiB (src/llama-kv-cache.cpp:289)
//	llama_kv_cache: size = X MiB (N cells, L layers, S/T seqs) (src/llama-kv-cache.cpp:299)
//	llama_memory_recurrent: CUDA0 RS buffer size = X MiB (src/llama-memory-recurrent.cpp:115)
//	llama_context: n_seq_max, n_ctx, n_ctx_seq (src/llama-context.cpp:306-308)
type LlamaCppLoad struct {
	// Fit is the automatic fit (Status "off": none ran); its Devices and
	// Host are the load's buffers, its Projected the settings as given.
	Fit LlamaCppFit `json:"fit"`
	// NCtx, NCtxSeq and NSeqMax are llama_context's n_ctx, n_ctx_seq
	// (n_ctx_per_seq before b10573) and n_seq_max.
	NCtx    int `json:"n_ctx"`
	NCtxSeq int `json:"n_ctx_seq"`
	NSeqMax int `json:"n_seq_max"`
	// Cells and SWACells are the cache's cells a stream ("N cells";
	// "creating SWA KV cache, size = N cells"), KV its size in all.
	Cells    int   `json:"cells"`
	SWACells int   `json:"swa_cells,omitempty"`
	KV       Bytes `json:"kv"`
	// Offloaded of Offloadable layers go to the GPUs.
	Offloaded   int `json:"offloaded"`
	Offloadable int `json:"offloadable"`
}

// Load is llama.cpp's load of m on the plan's GPU g (nil where
// DeviceFree names each GPU's free memory): the fit as FitParams runs it,
// then the context, layers and buffers the load gets. Where the fit does
// not run (--fit off, a build before it), the buffers are the settings'
// as given.
func (l LlamaCpp) Load(m Model, g *GPU) (LlamaCppLoad, error) {
	fit, err := l.FitParams(m, g)
	if err != nil {
		return LlamaCppLoad{}, err
	}
	m = m.Normalize()
	rel, _, err := l.release()
	if err != nil {
		return LlamaCppLoad{}, err
	}
	set, err := l.withDefaults(m, rel)
	if err != nil {
		return LlamaCppLoad{}, err
	}
	if fit.Status == "off" {
		if fit, err = l.asGiven(m, g, rel, set.CtxSize, fit); err != nil {
			return LlamaCppLoad{}, err
		}
	}
	set.CtxSize = fit.CtxSize
	kv, err := set.cells(m, rel)
	if err != nil {
		return LlamaCppLoad{}, err
	}
	ld := LlamaCppLoad{Fit: fit, NSeqMax: set.Parallel, Cells: kv.Cells, Offloadable: m.Layers + 1}
	for il := range m.Layers {
		if kv.Cells > 0 && m.AttentionLayer(il) && m.LocalLayer(il) && m.SlidingWindow > 0 && !set.SWAFull {
			ld.SWACells = set.swaCells(m, kv, rel)
		}
	}
	for _, d := range append(fit.Devices, LlamaCppFitDevice{LlamaCppUse: fit.Host}) {
		ld.KV += d.Context - d.State
	}
	ld.Offloaded = m.Layers + 1
	if fit.GPULayers >= 0 {
		ld.Offloaded = min(fit.GPULayers, m.Layers+1)
	}
	ld.NCtx, ld.NCtxSeq = set.nCtx(rel, kv)
	return ld, nil
}

// nCtx is the n_ctx and n_ctx_seq llama_context prints: from b10573
// n_ctx padded to 256 and, with a stream a sequence, n_ctx_seq =
// pad(n_ctx / n_seq_max, 256) and n_ctx = n_ctx_seq · n_seq_max
// (llama-context.cpp:288-303); before, n_ctx as given and n_ctx_per_seq =
// n_ctx / n_seq_max (4227c9be llama-context.cpp:125-129).
func (l LlamaCpp) nCtx(rel llamaCppRelease, kv LlamaCppKV) (int, int) {
	if !rel.floorPerStream {
		return l.CtxSize, l.CtxSize / l.Parallel
	}
	n := padTo(l.CtxSize, 256)
	if l.KVUnified {
		return n, n
	}
	seq := padTo(n/l.Parallel, 256)
	return seq * l.Parallel, seq
}

// asGiven is the load with the settings as given: each device's and the
// host's buffers where the fit does not run, measured as its dry run
// would measure them.
func (l LlamaCpp) asGiven(m Model, g *GPU, rel llamaCppRelease, ctx int, out LlamaCppFit) (LlamaCppFit, error) {
	if m.Layers < 1 {
		return out, fmt.Errorf("llama.cpp: the model has no layers")
	}
	ft, err := l.fitter(m, g, nil, rel)
	if err != nil {
		return out, err
	}
	r := &lcRun{lcFitter: ft, out: &out, nctx: ctx, user: lcLayout{ngl: -1, split: l.TensorSplit}}
	if l.GPULayers > 0 {
		r.user.ngl = l.GPULayers
	}
	use, host, err := ft.measure(ctx, r.user)
	if err != nil {
		return out, err
	}
	out.GPULayers, out.Projected, out.ProjectedHost = r.user.ngl, use, host
	if err := r.finish("off", use, host, nil); err != nil {
		return out, err
	}
	out.Args = "" // llama-fit-params prints nothing: no fit ran
	return out, nil
}
