package vram

import (
	"fmt"
	"sort"
	"strings"
)

// Ollama's memory estimate for a GGUF model, from its code at release
// 0.11.10 (5994e8e8, fs/ggml/ggml.go:484-518 GraphSize and llm/memory.go
// estimateGPULayers; the last release that sized every model this way, and
// the ollama release table's oldest row, ollama_releases.go): the weights as stored
// (repeating: the blocks; non-repeating: the output layer), the KV cache
// of llama.cpp (per layer, num_ctx · num_parallel tokens of K and V heads
// at the cache type's bytes per element), and the compute graph's buffers
// for a batch of num_batch tokens, one size when every layer is on the GPU
// and a larger one when only some are. Ollama prints these as
// memory.required.kv, memory.graph.full / .partial and memory.weights.*.

// Ollama is a model load's settings: the request's or Modelfile's options
// and the server's environment. A plan's "ollama" section.
type Ollama struct {
	// Version is the release (a plan's versions.ollama, "0.32.15");
	// empty: the newest modelled release (ollama_releases.go).
	Version string `json:"-"`
	// NumCtx is num_ctx (or OLLAMA_CONTEXT_LENGTH), the context per
	// sequence; unset, 4096 at 0.11.10 and at 0.32.15 a tier of the GPUs'
	// total memory (4096, 32768 or 262144).
	NumCtx      int `json:"num_ctx,omitempty"`
	NumParallel int `json:"num_parallel,omitempty"` // OLLAMA_NUM_PARALLEL (default 1): the cache holds num_ctx × num_parallel tokens
	// NumBatch is num_batch; unset, 512 at 0.11.10 and at 0.32.15 512, 1024
	// or 2048 by the context and the memory left.
	NumBatch int `json:"num_batch,omitempty"`
	// KVCacheType is OLLAMA_KV_CACHE_TYPE: f16 (default) or a quantized
	// type (0.11.10: q8_0, q4_0; 0.32.15 passes it to llama-server: also
	// f32, bf16, q4_1, iq4_nl, q5_0, q5_1).
	KVCacheType string `json:"kv_cache_type,omitempty"`

	// The placement of 0.32.15 (Ollama.Place, ollama_place.go).
	//
	// FlashAttention is OLLAMA_FLASH_ATTENTION; unset, llama-server's
	// --flash-attn auto where the GPUs support it, else off.
	FlashAttention *bool `json:"flash_attention,omitempty"`
	// NumGPU is num_gpu, layers on the GPUs (llama-server's -ngl); unset,
	// llama.cpp's fit chooses. 0 (the CPU alone) is not modelled.
	NumGPU *int `json:"num_gpu,omitempty"`
	// SchedSpread is OLLAMA_SCHED_SPREAD: every GPU, never one alone.
	SchedSpread bool `json:"sched_spread,omitempty"`
	// GPUs is how many of the plan's GPU the server sees (default 1, or as
	// many as DeviceFree names).
	GPUs int `json:"gpus,omitempty"`
	// DeviceFree is each GPU's free memory when llama-server starts;
	// unset, the plan's GPU's CUDA total less its CUDA context.
	DeviceFree []Bytes `json:"device_free,omitempty"`
	// DeviceTotal is each GPU's total memory as Ollama discovers it,
	// which picks the default num_ctx; unset, the plan's GPU's CUDA total.
	DeviceTotal []Bytes `json:"device_total,omitempty"`
	// GPUOverhead is OLLAMA_GPU_OVERHEAD: at 0.32.15 it only lowers the
	// total memory the default num_ctx is chosen by.
	GPUOverhead Bytes `json:"gpu_overhead,omitempty"`
	// FitTarget is LLAMA_ARG_FIT_TARGET, the MiB the fit keeps free on
	// each GPU; unset, llama.cpp's 1024, or with an offloaded projector
	// its size plus 1 GiB.
	FitTarget int `json:"fit_target,omitempty"`
	// ProjectorBytes is a vision model's projector (mmproj) weights, which
	// llama-server loads beside the model (none: a text model).
	ProjectorBytes Bytes `json:"projector_bytes,omitempty"`
	// ComputeBuffers are each GPU's compute (graph) buffer, as
	// llama-server's log prints it ("CUDA0 compute buffer size"): ggml's
	// graph allocator sizes it in llama.cpp's dry run and VRAM Lab does
	// not model it; one value is every GPU's; unset, none is counted.
	ComputeBuffers []Bytes `json:"compute_buffers,omitempty"`
	// WeightType is the GGUF's ggml type of the 2-D weights (Q4_K, Q8_0,
	// …) when the model is planned from its shape; a GGUF header read
	// with PlaceGGUF sizes every tensor as stored. Unset: F16.
	WeightType string `json:"weight_type,omitempty"`
}

// OllamaMemory is what Ollama estimates for one load.
type OllamaMemory struct {
	Architecture        string `json:"architecture"`
	Layers              int    `json:"layers"` // blocks, plus the output layer in Ollama's count
	KV                  Bytes  `json:"kv"`     // memory.required.kv
	GraphFull           Bytes  `json:"graph_full"`
	GraphPartial        Bytes  `json:"graph_partial"`
	WeightsTotal        Bytes  `json:"weights_total"`
	WeightsRepeating    Bytes  `json:"weights_repeating"`
	WeightsNonRepeating Bytes  `json:"weights_nonrepeating"`
	// Full is every layer on one GPU: weights, KV cache and the full
	// graph (Ollama adds its own small overheads on top).
	Full Bytes `json:"full"`
	// PerLayer is each block's weights; KVPerLayer one block's cache.
	PerLayer   []Bytes `json:"per_layer"`
	KVPerLayer Bytes   `json:"kv_per_layer"`
}

// Offload is how many of the model's layers Ollama puts on a GPU with free
// bytes (llm/memory.go EstimateGPULayers, without its fixed overheads):
// the partial graph is reserved first, then blocks go on in order while
// their weights and cache fit; when every block fits and the output layer
// and the full graph do too, the output layer goes on as well (Ollama
// counts it as one more layer). It returns the layers offloaded, out of
// Layers, and the bytes they take on the GPU.
func (m OllamaMemory) Offload(free Bytes) (int, Bytes) {
	if free <= m.GraphPartial {
		return 0, 0
	}
	used := m.GraphPartial
	n := 0
	for _, w := range m.PerLayer {
		if used+w+m.KVPerLayer > free {
			break
		}
		used += w + m.KVPerLayer
		n++
	}
	if n == len(m.PerLayer) {
		all := used - m.GraphPartial + m.GraphFull + m.WeightsNonRepeating
		if all <= free {
			return n + 1, all
		}
	}
	if n == 0 {
		return 0, 0
	}
	return n, used
}

// ollamaGraphs are Ollama's GraphSize formulas per GGUF architecture:
// the graph's bytes with every layer on the GPU and with only some, for a
// batch of b tokens over a cache of ctx tokens.
var ollamaGraphs = map[string]func(b, emb, ctx, heads, headsKV, vocab int64) (full, partial int64){
	ggufLlama: ollamaLlamaGraph,
}

// ollamaLlamaGraph is Ollama's compute-graph estimate for the llama
// architecture (fs/ggml/ggml.go GraphSize, case "llama").
func ollamaLlamaGraph(b, emb, ctx, heads, headsKV, vocab int64) (full, partial int64) {
	full = max(4*b*(1+4*emb+ctx*(1+heads)), 4*b*(emb+vocab))
	partial = 4*b*emb + max(
		4*b*(1+emb+max(ctx, emb))+emb*emb*9/16+4*ctx*(b*heads+emb/heads*headsKV),
		4*b*(emb+vocab)+emb*vocab*105/128,
	)
	return full, partial
}

func ollamaArchs() string {
	var out []string
	for k := range ollamaGraphs {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// kvBytesPerElement is ollama's kvCacheBytesPerElement (0.11.10
// fs/ggml/ggml.go:791-800): f16 2 bytes, q8_0 1 ("1/2 of fp16") and q4_0
// 0.5 ("1/4 of fp16"), without the blocks' scales that llama.cpp's q8_0 (34
// bytes for 32) and q4_0 (18 for 32) store.
func kvBytesPerElement(t string) (float64, error) {
	switch t {
	case "", "f16":
		return 2, nil
	case "q8_0":
		return 1, nil
	case "q4_0":
		return 0.5, nil
	}
	return 0, fmt.Errorf("ollama: kv_cache_type %q: want f16, q8_0 or q4_0", t)
}

// metaInt reads an integer metadata value.
func (g *GGUF) metaInt(key string) (int64, bool) {
	switch v := g.Metadata[key].(type) {
	case int64:
		return v, true
	case uint64:
		if v < 1<<62 {
			return int64(v), true
		}
	}
	return 0, false
}

// Estimate sizes a load of g as Ollama does. The graph's size is Ollama's
// formula for the GGUF architecture, registered by the family file that
// matches it (ollamaGraphs); an architecture without one gets its KV cache
// and weights and an error saying the graph is not modelled.
func (o Ollama) Estimate(g *GGUF) (OllamaMemory, error) {
	if o.NumCtx == 0 {
		o.NumCtx = 4096
	}
	if o.NumParallel == 0 {
		o.NumParallel = 1
	}
	if o.NumBatch == 0 {
		o.NumBatch = 512
	}
	if o.NumCtx < 1 || o.NumCtx > MaxTokens || o.NumParallel < 1 || o.NumParallel > 1<<10 || o.NumBatch < 1 || o.NumBatch > MaxTokens {
		return OllamaMemory{}, fmt.Errorf("ollama: num_ctx %d, num_parallel %d, num_batch %d: want num_ctx and num_batch in [1, %d], num_parallel in [1, 1024]", o.NumCtx, o.NumParallel, o.NumBatch, MaxTokens)
	}
	bpe, err := kvBytesPerElement(o.KVCacheType)
	if err != nil {
		return OllamaMemory{}, err
	}
	sh, err := ollamaShapeOf(g)
	if err != nil {
		return OllamaMemory{}, err
	}
	arch, blocks, emb, heads, headsKV, headK, headV, vocab := sh.arch, sh.blocks, sh.emb, sh.heads, sh.headsKV, sh.headK, sh.headV, sh.vocab
	m := OllamaMemory{Architecture: arch, Layers: int(blocks) + 1}
	ctx := int64(o.NumCtx) * int64(o.NumParallel)
	// KV: per layer ctx · (K + V head widths) · KV heads at bpe (GraphSize).
	kv := float64(ctx) * float64(headK+headV) * float64(headsKV) * bpe * float64(blocks)
	if kv > float64(maxPlanBytes) {
		return OllamaMemory{}, fmt.Errorf("ollama: a KV cache of %.3g bytes: past any GPU", kv)
	}
	m.KV = Bytes(int64(float64(ctx*(headK+headV)*headsKV)*bpe) * blocks)
	m.PerLayer = make([]Bytes, blocks)
	m.KVPerLayer = Bytes(float64(ctx*(headK+headV)*headsKV) * bpe)
	m.addWeights(g, blocks)
	graph, ok := ollamaGraphs[arch]
	if !ok {
		return m, fmt.Errorf("ollama: the compute graph's size is not modelled for architecture %q (KV %v and weights %v are); it is for %s", arch, m.KV, m.WeightsTotal, ollamaArchs())
	}
	b := int64(o.NumBatch)
	// Sizes are bounded above (ctx ≤ 2^36, widths ≤ 2^20, batch ≤ 2^26),
	// but their products may not be: check them in floating point first.
	if f := 4*float64(b)*(1+4*float64(emb)+float64(ctx)*(1+float64(heads))+float64(vocab)+float64(emb)*float64(vocab)) +
		4*float64(ctx)*float64(emb/heads)*float64(headsKV) + float64(emb)*float64(emb); f > float64(maxPlanBytes) {
		return OllamaMemory{}, fmt.Errorf("ollama: a compute graph of %.3g bytes: past any GPU", f)
	}
	full, partial := graph(b, emb, ctx, heads, headsKV, vocab)
	m.GraphFull, m.GraphPartial = Bytes(full), Bytes(partial)
	m.Full = m.WeightsTotal + m.KV + m.GraphFull
	return m, nil
}

// ollamaShape is what Ollama's estimate reads from a GGUF's metadata.
type ollamaShape struct {
	arch                                             string
	blocks, emb, heads, headsKV, headK, headV, vocab int64
}

// ollamaShapeOf reads the architecture's sizes as llm/memory.go does, each
// checked.
func ollamaShapeOf(g *GGUF) (ollamaShape, error) {
	arch := g.Architecture()
	if arch == "" {
		return ollamaShape{}, fmt.Errorf("ollama: the GGUF has no general.architecture")
	}
	need := func(key string) (int64, error) {
		v, ok := g.metaInt(arch + "." + key)
		if !ok || v < 1 || v > 1<<20 {
			return 0, fmt.Errorf("ollama: %s.%s is missing or not an integer in [1, 2^20]", arch, key)
		}
		return v, nil
	}
	blocks, err := need("block_count")
	if err != nil {
		return ollamaShape{}, err
	}
	emb, err := need("embedding_length")
	if err != nil {
		return ollamaShape{}, err
	}
	heads, err := need("attention.head_count")
	if err != nil {
		return ollamaShape{}, err
	}
	headsKV, ok := g.metaInt(arch + ".attention.head_count_kv")
	if !ok {
		headsKV = heads
	}
	headK, ok := g.metaInt(arch + ".attention.key_length")
	if !ok {
		headK = emb / heads
	}
	headV, ok := g.metaInt(arch + ".attention.value_length")
	if !ok {
		headV = emb / heads
	}
	var vocab int64
	switch t := g.Metadata["tokenizer.ggml.tokens"].(type) {
	case GGUFArray:
		vocab = int64(t.Len)
	case []any:
		vocab = int64(len(t))
	default:
		return ollamaShape{}, fmt.Errorf("ollama: the GGUF has no tokenizer.ggml.tokens array (the vocabulary size)")
	}
	for _, v := range []int64{headsKV, headK, headV} {
		if v < 1 || v > 1<<20 {
			return ollamaShape{}, fmt.Errorf("ollama: %s attention head counts and widths must be in [1, 2^20]", arch)
		}
	}
	if vocab < 1 {
		return ollamaShape{}, fmt.Errorf("ollama: an empty vocabulary")
	}
	return ollamaShape{arch, blocks, emb, heads, headsKV, headK, headV, vocab}, nil
}

// addWeights adds the GGUF's tensors: all, the repeating blocks' (and each
// block's), and the output layer's (the token embedding when tied,
// llm/memory.go's fallback).
func (m *OllamaMemory) addWeights(g *GGUF, blocks int64) {
	for _, t := range g.Tensors {
		m.WeightsTotal += t.Bytes
		switch {
		case strings.HasPrefix(t.Name, "blk."):
			m.WeightsRepeating += t.Bytes
			var i int
			if _, err := fmt.Sscanf(t.Name, "blk.%d.", &i); err == nil && i >= 0 && int64(i) < blocks {
				m.PerLayer[i] += t.Bytes
			}
		case t.Name == "output.weight":
			m.WeightsNonRepeating += t.Bytes
		}
	}
	if m.WeightsNonRepeating == 0 {
		// Tied output: the token embedding serves as the output layer
		// (llm/memory.go falls back to token_embd).
		for _, t := range g.Tensors {
			if t.Name == "token_embd.weight" {
				m.WeightsNonRepeating = t.Bytes
			}
		}
	}
}
