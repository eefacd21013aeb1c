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

// LlamaCpp is a llama.cpp context's settings, named as llama-server's flags.
type LlamaCpp struct {
	CtxSize int `json:"ctx_size,omitempty"` // -c (default 4096)
	// Parallel is -np: sequences with a stream of their own (default 1).
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

func (l LlamaCpp) withDefaults() LlamaCpp {
	if l.CtxSize == 0 {
		l.CtxSize = 4096
	}
	if l.Parallel == 0 {
		l.Parallel = 1
	}
	if l.UBatch == 0 {
		l.UBatch = 512
	}
	return l
}

func (l LlamaCpp) check() error {
	switch {
	case l.CtxSize < 1 || l.CtxSize > maxTokens:
		return fmt.Errorf("llama.cpp: ctx_size must be in [1, %d], got %d", maxTokens, l.CtxSize)
	case l.Parallel < 1 || l.Parallel > 1<<10:
		return fmt.Errorf("llama.cpp: parallel must be in [1, 1024], got %d", l.Parallel)
	case l.UBatch < 1 || l.UBatch > maxTokens:
		return fmt.Errorf("llama.cpp: ubatch_size must be in [1, %d], got %d", maxTokens, l.UBatch)
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

// KVCache lays out m's cache as llama.cpp allocates it.
func (l LlamaCpp) KVCache(m Model) (LlamaCppKV, error) {
	m = m.Normalize()
	if err := m.Validate(); err != nil {
		return LlamaCppKV{}, err
	}
	l = l.withDefaults()
	if err := l.check(); err != nil {
		return LlamaCppKV{}, err
	}
	if m.Encoder() || m.EncoderDecoder() || m.KVLoRARank > 0 || m.recurrent() {
		return LlamaCppKV{}, fmt.Errorf("llama.cpp: the KV cache model covers decoder-only models with K and V heads, not %q", m.Family)
	}
	pad := 32
	if l.FlashAttn {
		pad = 256
	}
	kv := LlamaCppKV{Streams: l.Parallel}
	if l.KVUnified {
		kv.Streams = 1
	}
	kv.Cells = padTo(ceilDiv(l.CtxSize, kv.Streams), pad)
	if l.KVUnified {
		kv.Cells = padTo(l.CtxSize, pad)
	}
	swaSeqs := 1
	if l.KVUnified {
		swaSeqs = l.Parallel
	}
	split := l.splitPoints()
	kv.Devices, kv.Layers = make([]Bytes, len(split)), make([]int, len(split))
	onGPU := m.Layers + 1
	if l.GPULayers > 0 {
		onGPU = min(l.GPULayers, m.Layers+1)
	}
	start := max(m.Layers-onGPU, 0)
	width := int64(m.KVHeads) * int64(m.HeadDim)
	for il := 0; il < m.Layers; il++ {
		cells := kv.Cells
		if m.LocalLayer(il) && m.SlidingWindow > 0 && !l.SWAFull {
			cells = min(cells, padTo(m.SlidingWindow*swaSeqs+l.UBatch, pad))
			kv.SWACells = cells
		}
		n := width * int64(cells) * int64(kv.Streams)
		k, err := llamaCppRow("cache_type_k", l.CacheTypeK, n)
		if err != nil {
			return LlamaCppKV{}, err
		}
		v, err := llamaCppRow("cache_type_v", l.CacheTypeV, n)
		if err != nil {
			return LlamaCppKV{}, err
		}
		kv.Total += k + v
		if il < start {
			kv.CPU += k + v
			continue
		}
		d := len(split) - 1
		for j, s := range split {
			if float32(il-start)/float32(onGPU) < s {
				d = j
				break
			}
		}
		kv.Devices[d] += k + v
		kv.Layers[d]++
	}
	return kv, nil
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
