package vram

import (
	"fmt"
	"strconv"
	"strings"
)

// How Ollama 0.32.15 loads a GGUF model (ollama_releases.go; notes with
// every line in notes/ollama-2026.md). Ollama places no layer itself: it
// starts llama-server (llama.cpp b10488) with a few flags, and llama.cpp's
// automatic fit places the layers by a dry run of the load. In order:
//
//  1. num_ctx: the request's or Modelfile's, or OLLAMA_CONTEXT_LENGTH, else
//     a tier of the GPUs' total memory less OLLAMA_GPU_OVERHEAD each
//     (server/routes.go:2043-2057: ≥ 47 GiB 262144, ≥ 23 GiB 32768, else
//     4096); at least 4, a vision model 2048 (server/sched.go:170-177); at
//     most the trained context (llm/server.go:111-116).
//  2. num_parallel: OLLAMA_NUM_PARALLEL (1), 1 for some architectures
//     (server/sched.go:497-510).
//  3. PredictServerVRAM (llm/llama_server.go:2681-2712): the model file
//     and an f16 cache of num_ctx · num_parallel tokens. With several GPUs
//     it picks the one with the most free memory where it takes at most
//     80 %, alone (server/sched.go:972-1037), else every GPU.
//  4. num_batch, unset: 512, 1024 or 2048 by the context, lowered while
//     the prediction leaves too little (server/sched.go:807-915).
//  5. llama-server -c num_ctx·num_parallel -np num_parallel
//     --cache-type-k/-v OLLAMA_KV_CACHE_TYPE --flash-attn on|off|auto -b -ub
//     num_batch [-ngl num_gpu] (llm/llama_server.go:369-418); with a vision
//     projector LLAMA_ARG_FIT_TARGET is its size plus 1 GiB
//     (l.663-733).
//  6. llama.cpp's fit (b10488's common/fit.cpp is b10573's: llamacpp_fit.go)
//     with -c set: the context stays; the layers go back to front.
//
// The fit measures each device by a dry run; here the engine's own sizes
// stand in (llamacpp_fit.go): weights tensor by tensor, the KV cache per
// layer on its device; the compute (graph) buffers are what the plan gives
// (ComputeBuffers), since ggml's graph allocator is not modelled.

// OllamaPlacement is how Ollama loads a model: the settings it gives
// llama-server, the GPUs it runs on, and llama.cpp's fit of them.
type OllamaPlacement struct {
	Release Modelled `json:"release"`
	// NumCtx is the context per sequence the load gets; NumCtxFrom says
	// where it came from.
	NumCtx      int    `json:"num_ctx"`
	NumCtxFrom  string `json:"num_ctx_from"`
	NumParallel int    `json:"num_parallel"`
	NumBatch    int    `json:"num_batch"`
	// FlashAttention is llama-server's --flash-attn: on, off or auto.
	FlashAttention string `json:"flash_attention"`
	KVCacheType    string `json:"kv_cache_type"`
	// Predicted is Ollama's PredictServerVRAM, which picks the GPUs and
	// the batch (not what the load takes).
	Predicted Bytes `json:"predicted"`
	// GPUs are the GPUs llama-server sees (indices of the plan's, from 0);
	// the fit's CUDA0 is the first.
	GPUs []int `json:"gpus"`
	// FitTarget is the MiB the fit keeps free on each GPU.
	FitTarget int `json:"fit_target"`
	// Args are llama-server's flags that size memory, and Env what Ollama
	// sets in its environment for them.
	Args string `json:"args"`
	Env  string `json:"env,omitempty"`
	// Fit is llama.cpp's fit under those flags: each GPU's layers, weights
	// (model), KV cache (context) and compute buffer, and the host's.
	Fit LlamaCppFit `json:"fit"`
	// Layers are the model's, the output layer one of them; CPULayers those
	// left on the CPU.
	Layers    int      `json:"layers"`
	CPULayers int      `json:"cpu_layers"`
	Steps     []string `json:"steps"`
	Notes     []string `json:"notes,omitempty"`
}

// Place is how Ollama loads m, its weights at WeightType, on the plan's GPU
// g (nil when DeviceFree, and DeviceTotal or NumCtx, say what it needs).
func (o Ollama) Place(m Model, g *GPU) (OllamaPlacement, error) {
	return o.place(m, g, nil)
}

// PlaceGGUF is Place for a GGUF header: its tensors as stored, its shape
// from its metadata (ollamaModelOfGGUF).
func (o Ollama) PlaceGGUF(f *GGUF, g *GPU) (OllamaPlacement, error) {
	if f == nil {
		return OllamaPlacement{}, fmt.Errorf("ollama: no GGUF header")
	}
	m, err := ollamaModelOfGGUF(f)
	if err != nil {
		return OllamaPlacement{}, err
	}
	return o.place(m, g, f)
}

// ollamaGGUFDense are the GGUF architectures whose every layer keeps a
// full-attention cache of head_count_kv heads of key_length, which a
// header's metadata then sizes (llama.cpp's llama, qwen2 and qwen3 graphs).
var ollamaGGUFDense = map[string]bool{ggufLlama: true, ggufQwen2: true, ggufQwen3: true}

// ollamaModelOfGGUF is the shape a GGUF header gives the fit: its layers,
// attention heads and trained context, as a llama-family model (its
// tensors come from the header, not from the family's layout).
func ollamaModelOfGGUF(f *GGUF) (Model, error) {
	sh, err := ollamaShapeOf(f)
	if err != nil {
		return Model{}, err
	}
	a := sh.arch
	switch {
	case !ollamaGGUFDense[a]:
		return Model{}, fmt.Errorf("ollama: the KV cache of a GGUF header is read for architectures %s, %s and %s, not %q (sliding windows, recurrent state or latent attention are not read from metadata): plan the model from its config with an \"ollama\" section", ggufLlama, ggufQwen2, ggufQwen3, a)
	case sh.headK != sh.headV:
		return Model{}, fmt.Errorf("ollama: %s.attention.key_length %d and value_length %d differ: not modelled", a, sh.headK, sh.headV)
	}
	if v, ok := f.Metadata[a+".attention.head_count_kv"]; ok {
		if _, isInt := f.metaInt(a + ".attention.head_count_kv"); !isInt {
			return Model{}, fmt.Errorf("ollama: %s.attention.head_count_kv is %T, not one count for every layer: not modelled", a, v)
		}
	}
	if _, ok := f.Metadata[a+".attention.sliding_window"]; ok {
		return Model{}, fmt.Errorf("ollama: %s.attention.sliding_window: a sliding-window cache is not read from a GGUF header", a)
	}
	ffn, _ := f.metaInt(a + ".feed_forward_length")
	ctx, _ := f.metaInt(a + ".context_length")
	m := Model{Layers: int(sh.blocks), Hidden: int(sh.emb), Heads: int(sh.heads), KVHeads: int(sh.headsKV),
		HeadDim: int(sh.headK), FFN: int(min(max(ffn, 1), 1<<24)), Vocab: int(sh.vocab), MaxPosition: int(min(max(ctx, 0), MaxTokens))}
	asLlama(&m)
	if name, ok := f.Metadata["general.name"].(string); ok {
		m.Name = name
	}
	if err := m.Normalize().Validate(); err != nil {
		return Model{}, fmt.Errorf("ollama: the GGUF header's shape: %w", err)
	}
	return m, nil
}

// ollamaPlace is one placement's state.
type ollamaPlace struct {
	o           Ollama
	m           Model
	f           *GGUF
	out         *OllamaPlacement
	free, total []Bytes
	arch        string
	ngl         int // num_gpu; 0: unset
	gpuMetal    bool
	gpuCUDA     bool
}

func (s *ollamaPlace) step(format string, a ...any) {
	s.out.Steps = append(s.out.Steps, fmt.Sprintf(format, a...))
}

func (o Ollama) place(m Model, g *GPU, f *GGUF) (OllamaPlacement, error) {
	rel, mod, err := o.release()
	if err != nil {
		return OllamaPlacement{}, err
	}
	if rel.llamaServer == "" {
		return OllamaPlacement{}, fmt.Errorf("ollama: versions.ollama %s sizes the model up front (its estimate reads a GGUF header: plan -gguf FILE -versions ollama=%s); llama-server's placement is modelled from %s", rel.Version, rel.Version, ollamaReleases[len(ollamaReleases)-1].Version)
	}
	m = m.Normalize()
	if err := m.Validate(); err != nil {
		return OllamaPlacement{}, err
	}
	s := &ollamaPlace{o: o, m: m, f: f, out: &OllamaPlacement{Release: mod, Layers: m.Layers + 1}, arch: ollamaArchOf(m, f)}
	if err := s.check(g); err != nil {
		return OllamaPlacement{}, err
	}
	if err := s.context(); err != nil {
		return OllamaPlacement{}, err
	}
	s.attention(g)
	if err := s.predict(); err != nil {
		return OllamaPlacement{}, err
	}
	sel := s.chooseGPUs()
	s.batch(sel)
	s.fitTarget(sel)
	if err := s.fit(rel, sel); err != nil {
		return OllamaPlacement{}, err
	}
	return *s.out, nil
}

// check reads the settings and each GPU's memory, each checked.
func (s *ollamaPlace) check(g *GPU) error {
	o := s.o
	switch {
	case o.NumCtx < 0 || o.NumCtx > MaxTokens:
		return fmt.Errorf("ollama: num_ctx must be in [1, %d] (0: Ollama's default), got %d", MaxTokens, o.NumCtx)
	case o.NumParallel < 0 || o.NumParallel > 1<<10:
		return fmt.Errorf("ollama: num_parallel must be in [1, 1024] (0: 1), got %d", o.NumParallel)
	case o.NumBatch < 0 || o.NumBatch > MaxTokens:
		return fmt.Errorf("ollama: num_batch must be in [1, %d] (0: Ollama's automatic batch), got %d", MaxTokens, o.NumBatch)
	case o.NumGPU != nil && *o.NumGPU == 0:
		return fmt.Errorf("ollama: num_gpu 0 keeps every layer on the CPU (llama-server -ngl 0): no GPU placement to model")
	case o.NumGPU != nil && (*o.NumGPU < -1 || *o.NumGPU > 1<<20):
		return fmt.Errorf("ollama: num_gpu must be -1 (unset) or a count of layers, got %d", *o.NumGPU)
	case o.FitTarget < 0 || o.FitTarget > 1<<24:
		return fmt.Errorf("ollama: fit_target must be MiB in [0, %d], got %d", 1<<24, o.FitTarget)
	case o.ProjectorBytes < 0 || o.ProjectorBytes > 1<<50:
		return fmt.Errorf("ollama: projector_bytes must be in [0, 1 PiB), got %d", int64(o.ProjectorBytes))
	case o.GPUOverhead < 0 || o.GPUOverhead > 1<<50:
		return fmt.Errorf("ollama: gpu_overhead must be in [0, 1 PiB), got %d", int64(o.GPUOverhead))
	}
	if o.NumGPU != nil && *o.NumGPU > 0 {
		s.ngl = *o.NumGPU
	}
	if t := strings.ToLower(o.KVCacheType); t != "" {
		if _, ok := llamaCppTypes[t]; !ok {
			return fmt.Errorf("ollama: kv_cache_type %q: llama-server takes f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1", o.KVCacheType)
		}
	}
	s.gpuMetal = g != nil && g.Arch == archMetal
	s.gpuCUDA = g == nil || !g.CapacityOnly && !s.gpuMetal
	return s.memory(g)
}

// memory is each GPU's free memory at start and total memory.
func (s *ollamaPlace) memory(g *GPU) error {
	o := s.o
	nd := o.GPUs
	switch {
	case nd < 0 || nd > 16:
		return fmt.Errorf("ollama: gpus must be in [1, 16], got %d", nd)
	case nd == 0:
		nd = max(1, len(o.DeviceFree), len(o.DeviceTotal))
	}
	for _, l := range []struct {
		name string
		n    int
	}{{"device_free", len(o.DeviceFree)}, {"device_total", len(o.DeviceTotal)}} {
		if l.n > 0 && l.n != nd {
			return fmt.Errorf("ollama: %s names %d GPUs, gpus and the other lists %d", l.name, l.n, nd)
		}
	}
	if nd > 16 {
		return fmt.Errorf("ollama: %d GPUs, at most 16", nd)
	}
	for i := range nd {
		var free, total Bytes
		switch {
		case len(o.DeviceFree) > 0:
			free = o.DeviceFree[i]
		case g != nil:
			free = g.FreeAtStart()
		default:
			return fmt.Errorf("ollama: device_free: give each GPU's free memory, or the plan's gpu")
		}
		switch {
		case len(o.DeviceTotal) > 0:
			total = o.DeviceTotal[i]
		case g != nil:
			total = g.Total()
		case o.NumCtx == 0:
			return fmt.Errorf("ollama: device_total: the default num_ctx is chosen by the GPUs' total memory; give device_total, num_ctx or the plan's gpu")
		default:
			total = free
		}
		if free <= 0 || free > 1<<50 {
			return fmt.Errorf("ollama: device_free[%d] must be positive and under 1 PiB, got %d bytes", i, int64(free))
		}
		if total <= 0 || total > 1<<50 {
			return fmt.Errorf("ollama: device_total[%d] must be positive and under 1 PiB, got %d bytes", i, int64(total))
		}
		s.free, s.total = append(s.free, free), append(s.total, total)
	}
	if n := len(o.ComputeBuffers); n > 1 && n != nd {
		return fmt.Errorf("ollama: compute_buffers gives %d values for %d GPUs: give one, or one a GPU", n, nd)
	}
	return nil
}

// ollamaOneSequence are the GGUF architectures Ollama loads with one
// sequence whatever OLLAMA_NUM_PARALLEL says (server/sched.go:507-510).
var ollamaOneSequence = map[string]bool{"mllama": true, "qwen3vl": true, "qwen3vlmoe": true, "qwen35": true, "qwen35moe": true, "qwen3next": true,
	ggufLFM2: true, "lfm2moe": true, ggufNemotronH: true, "nemotron_h_moe": true, "nemotron_h_omni": true}

// ollamaArchOf is the model's GGUF architecture: the header's, or the one
// its family records.
func ollamaArchOf(m Model, f *GGUF) string {
	if f != nil {
		return f.Architecture()
	}
	if fam := lookupFamily(m.Family); fam != nil {
		return fam.gguf
	}
	return ""
}

// context is num_ctx and num_parallel (steps 1 and 2).
func (s *ollamaPlace) context() error {
	o, out := s.o, s.out
	n, from := o.NumCtx, "as set (the request, the Modelfile or OLLAMA_CONTEXT_LENGTH)"
	if n == 0 {
		var sum Bytes
		for i, t := range s.total {
			if o.GPUOverhead > t {
				return fmt.Errorf("ollama: gpu_overhead %v is more than GPU %d's total %v (Ollama's unsigned difference would wrap)", o.GPUOverhead, i, t)
			}
			sum += t - o.GPUOverhead
		}
		switch {
		case sum >= 47*GiB:
			n = 262144
		case sum >= 23*GiB:
			n = 32768
		default:
			n = 4096
		}
		from = fmt.Sprintf("Ollama's default for %v of GPU memory (server/routes.go:2043-2057: ≥ 47 GiB 262144, ≥ 23 GiB 32768, else 4096)", sum)
	}
	if n < 4 {
		n, from = 4, from+"; at least 4 (server/sched.go:170-172)"
	}
	if (s.m.Vision != nil || o.ProjectorBytes > 0) && n < 2048 {
		n, from = 2048, from+"; a vision model's at least 2048 (server/sched.go:174-177)"
	}
	if t := s.m.MaxPosition; t > 0 && n > t {
		n, from = t, from+fmt.Sprintf("; capped at the trained context %d (llm/server.go:111-116)", t)
	}
	out.NumCtx, out.NumCtxFrom = n, from
	s.step("num_ctx %d: %s", n, from)
	np := max(o.NumParallel, 1)
	if ollamaOneSequence[s.arch] && np != 1 {
		np = 1
		s.step("server/sched.go:507-510: num_parallel 1: %s does not take parallel requests", s.arch)
	} else {
		s.step("server/sched.go:497: num_parallel %d (OLLAMA_NUM_PARALLEL, default 1)", np)
	}
	out.NumParallel = np
	return nil
}

// attention is --flash-attn and the cache type (llm/llama_server.go:597-625,
// llm/server.go:118).
func (s *ollamaPlace) attention(g *GPU) {
	out, fa := s.out, s.o.FlashAttention
	switch {
	case fa != nil && *fa:
		out.FlashAttention = "on"
	case fa != nil:
		out.FlashAttention = "off"
	case g != nil && s.gpuCUDA && g.ComputeCapability > 0 && (g.ComputeCapability < 60 || g.ComputeCapability == 72):
		out.FlashAttention = "off" // ml/device.go:586-600
	default:
		out.FlashAttention = "auto"
	}
	out.KVCacheType = strings.ToLower(s.o.KVCacheType)
	if out.KVCacheType == "" {
		out.KVCacheType = "f16"
	}
	s.step("llm/llama_server.go:597-625: --flash-attn %s (OLLAMA_FLASH_ATTENTION, else auto where every GPU supports it: ml/device.go:571-600); cache %s (OLLAMA_KV_CACHE_TYPE, llama.cpp's f16 unset)", out.FlashAttention, out.KVCacheType)
}

// predict is PredictServerVRAM (llm/llama_server.go:2681-2712): the model
// file's size plus 2 · block_count · head_count_kv · (embedding_length /
// head_count) · ctx · 2 bytes, ctx = num_ctx · num_parallel; a model
// planned from its shape has its tensors' bytes for the file.
func (s *ollamaPlace) predict() error {
	var file Bytes
	if s.f != nil {
		file = Bytes(s.f.DataOffset)
		for _, t := range s.f.Tensors {
			file = max(file, Bytes(s.f.DataOffset)+Bytes(t.Offset)+t.Bytes)
		}
	} else {
		ts, err := lcModelTensors(s.m, s.o.WeightType)
		if err != nil {
			return fmt.Errorf("ollama: %w", err)
		}
		for _, t := range ts {
			file += t.bytes
		}
		s.out.Notes = append(s.out.Notes, fmt.Sprintf("the model file is taken as its tensors' %v (Ollama reads the file's size, a few MiB more with the GGUF header)", file))
	}
	ctx := int64(s.out.NumCtx) * int64(s.out.NumParallel)
	kv := 2 * int64(s.m.Layers) * int64(s.m.KVHeads) * int64(s.m.Hidden/s.m.Heads) * ctx * 2
	s.out.Predicted = file + Bytes(kv)
	s.step("llm/llama_server.go:2681-2712: predicted %v: the model file %v and an f16 cache of %d tokens %v", s.out.Predicted, file, ctx, Bytes(kv))
	return nil
}

// chooseGPUs is selectLlamaServerPlacement (server/sched.go:972-1031): with
// several GPUs and no OLLAMA_SCHED_SPREAD, the one with the most free
// memory of those where the prediction takes at most 80 %, alone; else
// every GPU.
func (s *ollamaPlace) chooseGPUs() []int {
	nd := len(s.free)
	all := make([]int, nd)
	for i := range all {
		all[i] = i
	}
	s.out.GPUs = all
	if nd == 1 {
		return all
	}
	if s.o.SchedSpread {
		s.step("server/sched.go:1009, 1028-1030: every GPU (OLLAMA_SCHED_SPREAD)")
		return all
	}
	best := -1
	for i, f := range s.free {
		if s.out.Predicted <= f*80/100 && (best < 0 || f > s.free[best]) {
			best = i
		}
	}
	if best < 0 {
		s.step("server/sched.go:1060-1076, 1086-1108: no GPU holds the prediction in 80 %% of its free memory: every GPU")
		return all
	}
	s.out.GPUs = []int{best}
	s.step("server/sched.go:1060-1076, 1033-1037: GPU %d alone (%v free, the most of those the prediction takes at most 80 %% of): --split-mode none --main-gpu 0", best, s.free[best])
	return s.out.GPUs
}

// batch is num_batch: as set, else applyAutomaticGenerationBatch
// (server/sched.go:807-915) for a completion model.
func (s *ollamaPlace) batch(sel []int) {
	out := s.out
	if s.o.NumBatch > 0 {
		out.NumBatch = s.o.NumBatch
		s.step("num_batch %d (set): -b %d -ub %d", out.NumBatch, out.NumBatch, out.NumBatch)
		return
	}
	ctx := out.NumCtx * out.NumParallel
	var avail Bytes
	small := false
	for _, i := range sel {
		avail += s.free[i]
		mem := s.free[i]
		if s.total[i] < mem {
			mem = s.total[i]
		}
		small = small || mem <= 8*GiB
	}
	b := 512
	why := "512 (ctx ≤ 4096)"
	switch {
	case out.FlashAttention == "off" && s.gpuCUDA && ctx > 4096 && small:
		b, why = 256, "256: flash attention off on a CUDA GPU of at most 8 GiB, ctx > 4096 (l.822-857)"
	case out.FlashAttention == "off" && s.gpuCUDA:
		b, why = 512, "512: flash attention off on CUDA (l.822-828)"
	default:
		if ctx > 32768 {
			b = 2048
		} else if ctx > 4096 {
			b = 1024
		}
		why = fmt.Sprintf("%d by ctx %d (l.859-868)", b, ctx)
		for b > 512 && !ollamaBatchFits(b, out.Predicted, avail) {
			if b > 1024 {
				b = 1024
			} else {
				b = 512
			}
			why += fmt.Sprintf(", %d while the prediction leaves too little of %v (l.870-915)", b, avail)
		}
	}
	out.NumBatch = b
	s.step("server/sched.go:807-915: num_batch %s: -b %d -ub %d", why, b, b)
}

// ollamaBatchFits is generationBatchFits (server/sched.go:870-895): the
// prediction within 80 % of what is free, 60 % for 2048 and 75 % for 1024,
// and the batch's surcharge (2 GiB, 768 MiB) within what that leaves.
func ollamaBatchFits(b int, predicted, avail Bytes) bool {
	threshold := avail * 80 / 100
	if predicted > threshold {
		return false
	}
	surcharge := Bytes(0)
	switch {
	case b >= 2048:
		surcharge = 2 * GiB
		if predicted > avail*60/100 {
			return false
		}
	case b >= 1024:
		surcharge = 768 * MiB
		if predicted > avail*75/100 {
			return false
		}
	}
	return surcharge <= threshold-predicted
}

// fitTarget is the margin the fit keeps: LLAMA_ARG_FIT_TARGET as set, or
// with an offloaded projector its size plus 1 GiB (llm/llama_server.go:
// 663-733), else llama.cpp's 1024 MiB.
func (s *ollamaPlace) fitTarget(sel []int) {
	o, out := s.o, s.out
	out.FitTarget = 1024
	if o.FitTarget > 0 {
		out.FitTarget = o.FitTarget
		out.Env = "LLAMA_ARG_FIT_TARGET=" + strconv.Itoa(o.FitTarget)
	}
	if o.ProjectorBytes == 0 {
		return
	}
	need := o.ProjectorBytes + GiB
	why := ""
	if s.ngl > 0 && s.ngl < out.Layers {
		why = "num_gpu leaves layers on the CPU"
	}
	for _, i := range sel {
		mem := s.free[i]
		if s.total[i] < mem {
			mem = s.total[i]
		}
		if mem < need {
			why = fmt.Sprintf("a GPU has less than the projector and 1 GiB (%v)", need)
		}
	}
	switch {
	case why != "":
		s.step("llm/llama_server.go:670-691: --no-mmproj-offload: %s; the projector's %v stay on the CPU", why, o.ProjectorBytes)
	case o.FitTarget > 0:
		s.step("llm/llama_server.go:710-714: the projector's %v go on a GPU; LLAMA_ARG_FIT_TARGET %d as set (no room added for it)", o.ProjectorBytes, o.FitTarget)
	default:
		out.FitTarget = int((need + MiB - 1) / MiB)
		out.Env = "LLAMA_ARG_FIT_TARGET=" + strconv.Itoa(out.FitTarget)
		s.step("llm/llama_server.go:693-733: the projector's %v go on a GPU: LLAMA_ARG_FIT_TARGET %d MiB (its size and 1 GiB) instead of llama.cpp's 1024", o.ProjectorBytes, out.FitTarget)
		s.out.Notes = append(s.out.Notes, fmt.Sprintf("the projector's %v are not in the devices' figures: the fit does not see them, its margin leaves room", o.ProjectorBytes))
	}
}

// fit runs llama.cpp's fit with the flags Ollama gives llama-server.
func (s *ollamaPlace) fit(rel ollamaRelease, sel []int) error {
	o, out := s.o, s.out
	l := LlamaCpp{Version: rel.fitRules, CtxSize: out.NumCtx * out.NumParallel, Parallel: out.NumParallel, UBatch: out.NumBatch,
		FlashAttn: out.FlashAttention == "on", CacheTypeK: out.KVCacheType, CacheTypeV: out.KVCacheType, GPULayers: s.ngl,
		FitTarget: []int{out.FitTarget}, WeightType: o.WeightType}
	for _, i := range sel {
		l.DeviceFree = append(l.DeviceFree, s.free[i])
		switch len(o.ComputeBuffers) {
		case 1:
			l.ComputeBuffers = append(l.ComputeBuffers, o.ComputeBuffers[0])
		case len(s.free):
			l.ComputeBuffers = append(l.ComputeBuffers, o.ComputeBuffers[i])
		}
	}
	args := fmt.Sprintf("-c %d -np %d", l.CtxSize, l.Parallel)
	if o.KVCacheType != "" {
		args += fmt.Sprintf(" --cache-type-k %s --cache-type-v %s", out.KVCacheType, out.KVCacheType)
	}
	args += fmt.Sprintf(" --flash-attn %s -b %d -ub %d", out.FlashAttention, out.NumBatch, out.NumBatch)
	if s.ngl > 0 {
		args += " -ngl " + strconv.Itoa(s.ngl)
	}
	if len(sel) == 1 && len(s.free) > 1 {
		args += " --split-mode none --main-gpu 0"
		out.Env = strings.TrimSpace(out.Env + " CUDA_VISIBLE_DEVICES=" + strconv.Itoa(sel[0]))
	}
	out.Args = args
	fit, err := l.fitParams(s.m, nil, s.f)
	if err != nil {
		return fmt.Errorf("ollama: %w", err)
	}
	for _, n := range fit.Notes {
		if s.f != nil && strings.HasPrefix(n, "weights:") {
			continue // the header's tensors, not weight_type
		}
		out.Notes = append(out.Notes, strings.ReplaceAll(n, "llama_cpp.compute_buffers", "ollama.compute_buffers"))
	}
	fit.Notes = nil
	fit.Release.Asked = ""
	fit.Release.Note = fmt.Sprintf("Ollama %s runs llama-server %s, whose common/fit.cpp and cache files are %s's", out.Release.Release, rel.llamaServer, rel.fitRules)
	out.Fit, out.CPULayers = fit, out.Layers
	for _, d := range fit.Devices {
		out.CPULayers -= d.Layers
	}
	s.step("llama.cpp %s (Ollama's llama-server; common/fit.cpp as at %s): %s, %d of %d layers on the GPUs", rel.llamaServer, rel.fitRules, fit.Status, out.Layers-out.CPULayers, out.Layers)
	return nil
}
