package vram

import (
	"fmt"
	"strings"
)

// llama.cpp's KV cache, from its code (llama.cpp 4227c9be, vendored by
// llama-cpp-python 0.3.16): the context of n_ctx cells is padded to 256
// with flash attention, else 32 (llama_kv_cache_unified::get_padding), per
// stream when each of n_seq_max sequences has its own
// (llama_model::create_memory: n_ctx_per_stream = pad(ceil(n_ctx /
// n_seq_max))). Each layer holds K and V tensors of n_embd_k_gqa ·
// kv_size · n_stream elements at the cache type's row size
// (llama-kv-cache-unified.cpp: ggml_new_tensor_3d(type_k, n_embd_k_gqa,
// kv_size, n_stream)), on the device its layer was assigned
// (llama_model::load_tensors: layer il goes to the first device whose
// cumulative tensor split exceeds il / min(n_gpu_layers, n_layer + 1)).
// A sliding-window layer keeps min(kv_size, pad(n_swa + n_ubatch)) cells
// unless swa_full (llama-kv-cache-unified-iswa.cpp).
//
// Recurrent layers (Mamba-2, LFM2's short convolutions) keep their state in
// llama_memory_recurrent: max(1, n_seq_max) cells, each layer an R tensor of
// n_embd_r and an S tensor of n_embd_s f32 elements per cell
// (llama-memory-recurrent.cpp l.87-88; llama-hparams.cpp n_embd_r: (d_conv
// − 1) · (d_inner + 2 · n_group · d_state), LFM2's n_embd · (L_cache − 1);
// n_embd_s: d_state · d_inner). A hybrid (llm_arch_is_hybrid: Jamba,
// Falcon-H1, Granite-hybrid/Bamba, LFM2) pairs it with a KV cache of its
// attention layers (llama_memory_hybrid), whose kv_size is the whole
// padded n_ctx in each of the streams: llama_model::create_memory does not
// divide it by n_seq_max for hybrids as it does for the others.

// The rules above are build b6173's (4227c9be); build b10573 changed them
// (llamacpp_releases.go): -c unset is the trained context, llama-server's
// -np unset is 4 slots in one unified cache, n_ctx is padded to 256
// whatever the attention and each stream keeps pad(n_ctx / n_seq_max),
// rounded down, hybrids too (llama-context.cpp:288-303), and a
// sliding-window layer keeps pad(min(kv_size, window·seqs + ubatch), 256)
// cells (llama-kv-cache-iswa.cpp:73).

// LlamaCpp is a llama.cpp context's settings, named as llama-server's flags.
type LlamaCpp struct {
	// Version is the build (a plan's versions.llama_cpp, "b10573");
	// empty: the newest modelled build.
	Version string `json:"-"`
	// CtxSize is -c; unset, 4096 before b10573 and the model's trained
	// context (max_position) from it, which the fit may then reduce.
	CtxSize int `json:"ctx_size,omitempty"`
	// Parallel is -np: sequences with a stream of their own; unset, 1
	// before b10573 and from it llama-server's 4 slots in one unified
	// cache.
	Parallel  int  `json:"parallel,omitempty"`
	UBatch    int  `json:"ubatch_size,omitempty"` // -ub (default 512)
	FlashAttn bool `json:"flash_attn,omitempty"`
	// CacheTypeK and CacheTypeV are --cache-type-k/-v: f32, f16
	// (default), bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1.
	CacheTypeK string `json:"cache_type_k,omitempty"`
	CacheTypeV string `json:"cache_type_v,omitempty"`
	// GPULayers is -ngl: how many of the last layers are offloaded; zero
	// or negative means all of them (the question here is the GPUs'
	// memory; llama.cpp's own default before 2026 keeps them on the CPU).
	GPULayers int `json:"n_gpu_layers,omitempty"`
	// TensorSplit is -ts: each GPU's share of the layers (default: one GPU).
	TensorSplit []float64 `json:"tensor_split,omitempty"`
	KVUnified   bool      `json:"kv_unified,omitempty"` // one stream for all sequences
	SWAFull     bool      `json:"swa_full,omitempty"`   // sliding-window layers keep the whole context

	// The automatic fit (llamacpp_fit.go), from build b10573.
	//
	// Fit is --fit on|off; unset, the build's default (on from b7416).
	Fit *bool `json:"fit,omitempty"`
	// FitTarget is --fit-target: the MiB each device keeps free, one
	// value for every device (default 1024).
	FitTarget []int `json:"fit_target,omitempty"`
	// FitCtx is --fit-ctx: the least context the fit sets (default 4096).
	FitCtx int `json:"fit_ctx,omitempty"`
	// GPUs is how many of the plan's GPU llama.cpp sees (default 1, or
	// as many as DeviceFree names).
	GPUs int `json:"gpus,omitempty"`
	// DeviceFree is each GPU's free memory when llama.cpp starts
	// (ggml_backend_dev_memory); unset, the plan's GPU's CUDA total less
	// its CUDA context.
	DeviceFree []Bytes `json:"device_free,omitempty"`
	// ComputeBuffers are each GPU's compute buffer, as llama.cpp's log
	// prints it ("CUDA0 compute buffer size") or llama-fit-params
	// --fit-print on: ggml's graph allocator sizes it and VRAM Lab does
	// not model it; one value is every GPU's; unset, none is counted.
	ComputeBuffers []Bytes `json:"compute_buffers,omitempty"`
	// WeightType is the GGUF's ggml type of the 2-D weights (F16, BF16,
	// Q8_0, Q4_K, MXFP4, …); 1-D tensors and routers are F32. Unset: F16.
	// A GGUF header read with FitGGUF sizes every tensor as stored.
	WeightType string `json:"weight_type,omitempty"`
}

// LlamaCppKV is where a llama.cpp context's KV cache lies.
type LlamaCppKV struct {
	Cells    int     `json:"cells"`     // per stream, padded: "kv_size"
	SWACells int     `json:"swa_cells"` // per stream, for sliding-window layers (0: none)
	Streams  int     `json:"streams"`
	Devices  []Bytes `json:"devices"` // "CUDAi KV buffer size", in device order
	Layers   []int   `json:"layers"`  // layers per device
	CPU      Bytes   `json:"cpu"`     // layers left on the CPU
	Total    Bytes   `json:"total"`   // "KV self size"
	// StateCells is the recurrent memory's cells (max(1, n_seq_max)) and
	// StateLayers its layers; State is its "RS buffer size" in all,
	// StateDevices and StateCPU where it lies (with the layer, as the KV).
	StateCells   int     `json:"state_cells,omitempty"`
	StateLayers  int     `json:"state_layers,omitempty"`
	State        Bytes   `json:"state,omitempty"`
	StateDevices []Bytes `json:"state_devices,omitempty"`
	StateCPU     Bytes   `json:"state_cpu,omitempty"`
	// Release is the build whose rules sized it (KVCache's).
	Release Modelled `json:"release"`
}

// llamaCppTypes are ggml's row sizes for the cache types llama-server
// accepts (ggml.c type_traits: bytes per block over elements per block).
var llamaCppTypes = map[string][2]int{
	"f32": {4, 1}, "f16": {2, 1}, "bf16": {2, 1}, "q8_0": {34, 32}, "q4_0": {18, 32},
	"q4_1": {20, 32}, "iq4_nl": {18, 32}, "q5_0": {22, 32}, "q5_1": {24, 32},
}

func llamaCppRow(field, t string, n int64) (Bytes, error) {
	if t == "" {
		t = "f16"
	}
	s, ok := llamaCppTypes[strings.ToLower(t)]
	if !ok {
		return 0, fmt.Errorf("llama.cpp: %s %q: want one of f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1", field, t)
	}
	if s[1] > 1 && n%int64(s[1]) != 0 {
		return 0, fmt.Errorf("llama.cpp: %s %q needs rows of a multiple of %d elements, the model's are %d", field, t, s[1], n)
	}
	return Bytes(n / int64(s[1]) * int64(s[0])), nil
}

// withDefaults fills what the plan leaves unset as build rel does.
func (l LlamaCpp) withDefaults(m Model, rel llamaCppRelease) (LlamaCpp, error) {
	switch {
	case l.CtxSize != 0:
	case !rel.trainCtx:
		l.CtxSize = 4096
	case m.MaxPosition > 0:
		l.CtxSize = m.MaxPosition // common.h:442, llama-context.cpp:131
	default:
		return l, fmt.Errorf("llama.cpp: ctx_size unset is the model's trained context at %s, which the model does not give (max_position): set ctx_size", rel.Version)
	}
	if l.Parallel == 0 {
		l.Parallel = 1
		if rel.autoParallel {
			l.Parallel, l.KVUnified = 4, true // tools/server/server.cpp:152-156
		}
	}
	if l.UBatch == 0 {
		l.UBatch = 512
	}
	return l, nil
}

func (l LlamaCpp) check() error {
	switch {
	case l.CtxSize < 1 || l.CtxSize > MaxTokens:
		return fmt.Errorf("llama.cpp: ctx_size must be in [1, %d], got %d", MaxTokens, l.CtxSize)
	case l.Parallel < 1 || l.Parallel > 1<<10:
		return fmt.Errorf("llama.cpp: parallel must be in [1, 1024], got %d", l.Parallel)
	case l.UBatch < 1 || l.UBatch > MaxTokens:
		return fmt.Errorf("llama.cpp: ubatch_size must be in [1, %d], got %d", MaxTokens, l.UBatch)
	case len(l.TensorSplit) > 64:
		return fmt.Errorf("llama.cpp: tensor_split names %d devices, at most 64", len(l.TensorSplit))
	}
	var sum float64
	for _, s := range l.TensorSplit {
		if !(s >= 0 && s <= 1e6) {
			return fmt.Errorf("llama.cpp: tensor_split shares must be in [0, 1e6], got %v", s)
		}
		sum += s
	}
	if len(l.TensorSplit) > 0 && sum == 0 {
		return fmt.Errorf("llama.cpp: tensor_split is all zero (llama.cpp then splits by free memory: name the shares)")
	}
	return nil
}

// KVCache lays out m's cache (and a recurrent model's state) as llama.cpp
// allocates it.
func (l LlamaCpp) KVCache(m Model) (LlamaCppKV, error) {
	m = m.Normalize()
	if err := m.Validate(); err != nil {
		return LlamaCppKV{}, err
	}
	rel, modelled, err := l.release()
	if err != nil {
		return LlamaCppKV{}, err
	}
	if l, err = l.withDefaults(m, rel); err != nil {
		return LlamaCppKV{}, err
	}
	kv, err := l.kvCache(m, rel)
	kv.Release = modelled
	return kv, err
}

// kvCache lays out the cache of l, its defaults filled, as build rel does.
func (l LlamaCpp) kvCache(m Model, rel llamaCppRelease) (LlamaCppKV, error) {
	if err := l.check(); err != nil {
		return LlamaCppKV{}, err
	}
	if m.Encoder() || m.EncoderDecoder() || m.KVLoRARank > 0 {
		return LlamaCppKV{}, fmt.Errorf("llama.cpp: the KV cache model covers decoder-only models with K and V heads, not %q", m.Family)
	}
	if err := compressedCacheRefused(m, "llama.cpp"); err != nil {
		return LlamaCppKV{}, err
	}
	if m.DeltaNet != nil {
		return LlamaCppKV{}, fmt.Errorf("llama.cpp: %q (Gated DeltaNet layers): its state is not modelled (and it is not an architecture of llama.cpp 4227c9be, b6173)", m.Family)
	}
	if m.KDA != nil || m.Lightning != nil {
		return LlamaCppKV{}, fmt.Errorf("llama.cpp: %q keeps %s state, which the KV cache model does not cover; not modelled", m.Family, stateKind(m))
	}
	if err := m.blockSparseCache("llama.cpp"); err != nil {
		return LlamaCppKV{}, err
	}
	kv, err := l.cells(m, rel)
	if err != nil {
		return LlamaCppKV{}, err
	}
	split := l.splitPoints()
	kv.Devices, kv.Layers, kv.StateDevices = make([]Bytes, len(split)), make([]int, len(split)), make([]Bytes, len(split))
	onGPU := m.Layers + 1
	if l.GPULayers > 0 {
		onGPU = min(l.GPULayers, m.Layers+1)
	}
	start := max(m.Layers-onGPU, 0)
	if rel.outputFirst {
		start = m.Layers + 1 - onGPU
	}
	for il := 0; il < m.Layers; il++ {
		b, err := l.layerKV(m, kv, rel, il)
		if err != nil {
			return LlamaCppKV{}, err
		}
		st := Bytes(0)
		if m.RecurrentLayer(il) {
			st = llamaCppState(m) * Bytes(kv.StateCells)
			kv.StateLayers++
		}
		kv.Total, kv.State = kv.Total+b, kv.State+st
		if b > 0 && m.LocalLayer(il) && m.SlidingWindow > 0 && !l.SWAFull {
			kv.SWACells = l.swaCells(m, kv, rel)
		}
		if il < start {
			kv.CPU, kv.StateCPU = kv.CPU+b, kv.StateCPU+st
			continue
		}
		d := len(split) - 1
		for j, s := range split {
			if float32(il-start)/float32(onGPU) < s {
				d = j
				break
			}
		}
		kv.Devices[d] += b
		kv.StateDevices[d] += st
		if b > 0 {
			kv.Layers[d]++
		}
	}
	return kv, nil
}

// cells sizes the streams: n_ctx over the streams, each padded, for a
// transformer; the whole padded n_ctx in every stream for a hybrid's
// attention layers (b6173; from b10573 a hybrid's streams are a
// transformer's); none for a model of recurrent layers only, whose state
// has max(1, n_seq_max) cells.
func (l LlamaCpp) cells(m Model, rel llamaCppRelease) (LlamaCppKV, error) {
	pad := l.pad(rel)
	kv := LlamaCppKV{Streams: l.Parallel}
	if l.KVUnified {
		kv.Streams = 1
	}
	switch {
	case m.recurrent() && m.attentionLayers(0, m.Layers) == 0:
		kv.Streams = 0
	case l.KVUnified:
		kv.Cells = padTo(l.CtxSize, pad)
	case rel.floorPerStream:
		// llama-context.cpp:288-299: n_ctx padded, then over the
		// streams rounded down, padded again.
		kv.Cells = padTo(padTo(l.CtxSize, pad)/kv.Streams, pad)
		if kv.Cells == 0 {
			return kv, fmt.Errorf("llama.cpp: ctx_size %d over %d streams leaves none a cell (n_ctx_seq == 0)", l.CtxSize, kv.Streams)
		}
	case m.recurrent():
		kv.Cells = padTo(l.CtxSize, pad)
	default:
		kv.Cells = padTo(ceilDiv(l.CtxSize, kv.Streams), pad)
	}
	if m.recurrent() {
		kv.StateCells = l.Parallel
	}
	return kv, nil
}

// pad is the cache's cell padding under build rel.
func (l LlamaCpp) pad(rel llamaCppRelease) int {
	if l.FlashAttn || rel.pad256 {
		return 256
	}
	return 32
}

// layerKV is layer il's K and V in all streams (0 for a recurrent layer).
func (l LlamaCpp) layerKV(m Model, kv LlamaCppKV, rel llamaCppRelease, il int) (Bytes, error) {
	if !m.AttentionLayer(il) {
		return 0, nil
	}
	cells := kv.Cells
	if m.LocalLayer(il) && m.SlidingWindow > 0 && !l.SWAFull {
		cells = l.swaCells(m, kv, rel)
	}
	n := int64(m.KVHeads) * int64(m.HeadDim) * int64(cells) * int64(kv.Streams)
	k, err := llamaCppRow("cache_type_k", l.CacheTypeK, n)
	if err != nil {
		return 0, err
	}
	v, err := llamaCppRow("cache_type_v", l.CacheTypeV, n)
	return k + v, err
}

// swaCells is a sliding-window layer's cells: its window for each
// sequence of the stream and a micro-batch, padded, at most kv_size.
func (l LlamaCpp) swaCells(m Model, kv LlamaCppKV, rel llamaCppRelease) int {
	swaSeqs := 1
	if l.KVUnified {
		swaSeqs = l.Parallel
	}
	if rel.pad256 {
		return padTo(min(kv.Cells, m.SlidingWindow*swaSeqs+l.UBatch), 256) // llama-kv-cache-iswa.cpp:73
	}
	return min(kv.Cells, padTo(m.SlidingWindow*swaSeqs+l.UBatch, l.pad(rel)))
}

// llamaCppState is one recurrent layer's state for one cell: n_embd_r +
// n_embd_s f32 elements.
func llamaCppState(m Model) Bytes {
	if c := m.ShortConv; c != nil {
		return FP32.Size(int64(m.Hidden) * int64(c.Kernel-1))
	}
	if s := m.Mamba; s != nil {
		// Mamba-1 (Jamba): no groups, so R is (d_conv − 1) · d_inner.
		return FP32.Size(int64(s.Inner) * int64(s.ConvKernel-1+s.State))
	}
	s := m.SSM.Normalize()
	r := int64(s.ConvKernel-1) * (s.inner() + 2*int64(s.Groups)*int64(s.State))
	return FP32.Size(r + int64(s.State)*s.inner())
}

// splitPoints are the cumulative, normalized tensor split shares, in
// float as llama.cpp computes them.
func (l LlamaCpp) splitPoints() []float32 {
	if len(l.TensorSplit) == 0 {
		return []float32{1}
	}
	out := make([]float32, len(l.TensorSplit))
	var acc float32
	for i, s := range l.TensorSplit {
		acc += float32(s)
		out[i] = acc
	}
	for i := range out {
		out[i] /= acc
	}
	return out
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func padTo(n, p int) int { return ceilDiv(n, p) * p }
